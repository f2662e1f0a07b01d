"""The optimal adaptive composition of ``k`` exponential-mechanism (``eps0``-bounded-range)
releases, bracketed on a lattice.

Every ``eps0``-bounded-range pair is dominated, for the hockey-stick functionals that compose,
by a generalised randomized response ``GRR(t)``, ``0 <= t <= eps0`` (losses ``t`` and
``t - eps0``), and each ``GRR(t)`` is a two-candidate exponential mechanism. So the worst
adaptive composition (each release chosen from the outputs so far; Dong, Durfee & Rogers 2020
formulate its optimum in their Section 6) has the curve ``F_k`` of the dynamic programme::

    F_0(x) = (1 - e^x)_+,   F_m(x) = sup_t  p(t) F_{m-1}(x - t) + (1 - p(t)) F_{m-1}(x - t + eps0)

with ``p(t) = (1 - e^{t - eps0}) / (1 - e^{-eps0})`` the P-mass of the high outcome; ``F_m(x)``
is delta at ``x`` with ``m`` releases to go. It is evaluated on the lattice ``x_i = i eps0 / N``
(``i >= 0``; ``F(-y) = 1 - e^{-y} + e^{-y} F(y)``, as the class is closed under swapping the
datasets) twice:

* *lower* ``L``: ``t`` on the lattice only (each value is then that of an adaptive strategy);
* *upper* ``U``: every ``t``. Between lattice points ``F`` lies under its chord in ``e^x`` (it is
  convex in ``e^x``), so on ``t`` in ``[j h, (j+1) h]`` the step's value is at most
  ``c0 + c1 z + c2 / z`` (``z = e^t``), whose excess over its end points is at most
  ``tanh(h / 4) (alpha (U[i-j-1] - U[i-j])_+ + (alpha - 1) (U[i-j+N] - U[i-j-1+N])_+)``,
  ``alpha = 1 / (1 - e^{-eps0})``: a second-order term.

Above the lattice's top ``x_T`` the upper values are ``U[T]`` (``F`` is non-increasing) and the
lower ones 0; ``x_T`` is where the Rényi bound of the composition is far below the queried delta.
Every mass is rounded the safe way and every step's arithmetic is charged.

Releases at several epsilons within a factor :data:`MAX_SPREAD` are bracketed by the
programme at the smallest (lower: every release admits each mechanism of that class) and at the
largest (upper: every release is bounded range at it), whatever their order. The proof is
``proofs_checks/br_adaptive/proof.md``.
"""

from __future__ import annotations

import math

import numpy as np

# U (unit roundoff) and TINY (the smallest subnormal double, charged to every value that
# may have been rounded below it)
from dpledger.accountant.conversions import TINY, U, rdp_to_delta, rdp_to_epsilon
from dpledger.accountant.rdp_orders import bounded_range_rdp, default_orders

__all__ = [
    "MAX_EPS0",
    "MAX_SPREAD",
    "Bracket",
    "adaptive_br_curves",
    "adaptive_br_delta",
    "adaptive_br_epsilon",
    "lattice_points",
    "spread_br_delta",
    "spread_br_epsilon",
]

#: lattice points per eps0: at least, at most, and the work budget (k * N * points) between
MIN_POINTS, MAX_POINTS = 8, 512
WORK = 6e7
#: the lattice's top is where the Rényi bound of the composition is this factor below delta
TOP_FACTOR = 1e-4
#: releases above this epsilon are left to the other bounds (e^eps0 nears the double range)
MAX_EPS0 = 40.0
#: releases at several epsilons are bracketed when the largest is at most this factor above
#: the smallest (beyond it the upper at the largest is above the Rényi bound)
MAX_SPREAD = 1.05

#: (lower, upper) of a bound
Bracket = tuple[float, float]


def lattice_points(eps0: float, count: int, x_top: float) -> int | None:
    """N, the lattice points per eps0, from the work budget (None: over budget)."""
    span = max(x_top / eps0, 1.0) * count
    n = int(math.sqrt(WORK / span))
    if n < MIN_POINTS:
        return None
    return min(n, MAX_POINTS)


def _masses(eps0: float, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(p down, p up, 1 - p down, 1 - p up) at ``t_j = j eps0 / n``, j = 0..n."""
    j = np.arange(n + 1, dtype=np.float64)
    t = j * eps0 / n
    rest = (n - j) * eps0 / n
    p = -np.expm1(-rest) / -math.expm1(-eps0)
    r = np.expm1(t) / math.expm1(eps0)
    err = 16 * U * (2.0 + eps0)
    p_up, r_up = np.minimum(p * (1 + err), 1.0), np.minimum(r * (1 + err), 1.0)
    return p * (1 - err), p_up, r * (1 - err), r_up


def _mirror(values: np.ndarray, eps0: float, n: int, up: bool) -> np.ndarray:
    """Bounds at the indices -(n+1)..-1 from those at 1..n+1: F(-y) = 1 - e^{-y} + e^{-y} F(y)."""
    i = np.arange(n + 1, 0, -1, dtype=np.float64)
    y = i * eps0 / n
    a, b = -np.expm1(-y), np.exp(-y)
    err_a, err_b = 8 * U, 8 * U * (1.0 + y)
    own = values[n + 1 : 0 : -1]
    if up:
        high: np.ndarray = np.minimum((a * (1 + err_a) + b * (1 + err_b) * own) * (1 + 4 * U), 1.0)
        return high
    low: np.ndarray = np.maximum((a * (1 - err_a) + b * (1 - err_b) * own) * (1 - 4 * U), 0.0)
    return low


def _extended(values: np.ndarray, neg: np.ndarray, above: float, n: int) -> np.ndarray:
    """The values at the indices -(n+1)..T+n+1: ``ext[k + n + 1]`` is the value at index k."""
    return np.concatenate([neg, values, np.full(n + 1, above)])


def _step_lower(low: np.ndarray, eps0: float, n: int, p: np.ndarray, r: np.ndarray) -> np.ndarray:
    """One release of the lower programme: the best lattice t, rounded down."""
    ext = _extended(low, _mirror(low, eps0, n, up=False), 0.0, n)
    size = low.size
    best = np.zeros(size)  # every candidate is nonnegative
    cand, part = np.empty(size), np.empty(size)
    for j in range(n + 1):  # t = j h: the values at i - j and i - j + n
        np.multiply(p[j], ext[n + 1 - j : n + 1 - j + size], out=cand)
        np.multiply(r[j], ext[2 * n + 1 - j : 2 * n + 1 - j + size], out=part)
        np.add(cand, part, out=cand)
        np.maximum(best, cand, out=best)
    result: np.ndarray = np.maximum(best * (1 - 4 * U) - 4 * TINY, 0.0)
    return result


def _step_upper(
    up: np.ndarray, eps0: float, n: int, p: np.ndarray, r: np.ndarray, coef: tuple[float, float]
) -> np.ndarray:
    """One release of the upper programme: every t, each lattice cell's excess charged."""
    alpha, kappa = coef
    ext = _extended(up, _mirror(up, eps0, n, up=True), float(up[-1]), n)
    size = up.size
    # rise[k] = alpha (ext[k] - ext[k+1])_+ and fall[k] = (alpha - 1) (ext[k+1] - ext[k])_+
    diff = ext[:-1] - ext[1:]
    rise = np.maximum(diff, 0.0) * alpha
    fall = np.maximum(-diff, 0.0) * (alpha - 1.0)
    best = np.zeros(size)  # every candidate is nonnegative
    g_here = p[0] * ext[n + 1 : n + 1 + size] + r[0] * ext[2 * n + 1 : 2 * n + 1 + size]
    g_next, part = np.empty(size), np.empty(size)
    for j in range(n):  # the cell t in [j h, (j+1) h]
        np.multiply(p[j + 1], ext[n - j : n - j + size], out=g_next)
        np.multiply(r[j + 1], ext[2 * n - j : 2 * n - j + size], out=part)
        np.add(g_next, part, out=g_next)  # g_{j+1}
        # the excess: kappa (alpha (U[i-j-1] - U[i-j])_+ + (alpha-1) (U[i-j+n] - U[i-j-1+n])_+)
        np.add(rise[n - j : n - j + size], fall[2 * n - j : 2 * n - j + size], out=part)
        np.multiply(part, kappa, out=part)
        np.add(np.maximum(g_here, g_next), part, out=part)
        np.maximum(best, part, out=best)
        g_here, g_next = g_next, g_here
    result: np.ndarray = np.minimum(best * (1 + 16 * U) + 8 * TINY, 1.0)
    return result


def adaptive_br_curves(
    eps0: float, count: int, x_top: float, n: int, *, lower: bool = True, upper: bool = True
) -> tuple[np.ndarray, np.ndarray, float]:
    """(lower, upper, h): bounds of ``F_count`` at ``x_i = i h``, ``h = eps0 / n``, i = 0..T
    (``x_T >= x_top``). A side not asked for is its trivial bound (0 below, 1 above)."""
    top = max(math.ceil(x_top * n / eps0) + 2, n + 2)
    p_lo, p_hi, r_lo, r_hi = _masses(eps0, n)
    alpha = 1.0 / -math.expm1(-eps0) * (1 + 8 * U)
    kappa = math.tanh(eps0 / n / 4.0) * (1 + 16 * U)
    low = np.zeros(top + 1)
    up = np.zeros(top + 1) if upper else np.ones(top + 1)
    for _ in range(count):
        if lower:
            low = _step_lower(low, eps0, n, p_lo, r_lo)
        if upper:
            up = _step_upper(up, eps0, n, p_hi, r_hi, (alpha, kappa))
    return low, up, eps0 / n


def _rdp_top(eps0: float, count: int, delta: float) -> float:
    """Where the Rényi bound of ``count`` releases reaches ``delta`` (at most count * eps0)."""
    orders = default_orders()
    curve = bounded_range_rdp(orders, eps0) * count * (1 + 4 * U)
    return min(rdp_to_epsilon(orders, curve, delta)[0], count * eps0)


def adaptive_br_epsilon(
    delta: float, eps0: float, count: int, *, lower: bool = True, upper: bool = True
) -> Bracket | None:
    """(lower, upper) of epsilon(delta) of ``count`` adaptively chosen ``eps0``-bounded-range
    releases (None: outside the supported range or the work budget). A side not asked for is
    not computed: 0 (lower) or infinity (upper)."""
    if not (count >= 2 and 0.0 < eps0 <= MAX_EPS0 and 0.0 < delta < 1.0):
        return None
    x_top = _rdp_top(eps0, count, max(delta * TOP_FACTOR, min(delta, 1e-300)))
    n = lattice_points(eps0, count, x_top) if math.isfinite(x_top) else None
    if n is None:
        return None
    low, up, h = adaptive_br_curves(eps0, count, x_top, n, lower=lower, upper=upper)
    return (
        _epsilon_lower(low, up, h, delta) if lower else 0.0,
        # every loss is at most eps0, so F is 0 from count * eps0 on (basic composition)
        min(_epsilon_upper(up, h, delta), count * eps0 * (1 + 4 * U)) if upper else math.inf,
    )


def adaptive_br_delta(
    eps: float, eps0: float, count: int, *, lower: bool = True, upper: bool = True
) -> Bracket | None:
    """(lower, upper) of delta(eps) of ``count`` adaptively chosen ``eps0``-bounded-range
    releases, ``eps >= 0`` (None: outside the supported range or the work budget). A side not
    asked for is not computed: 0 (lower) or 1 (upper)."""
    if not (count >= 2 and 0.0 < eps0 <= MAX_EPS0 and 0.0 <= eps < count * eps0):
        return None
    orders = default_orders()
    rdp_delta = rdp_to_delta(orders, bounded_range_rdp(orders, eps0) * count * (1 + 4 * U), eps)[0]
    if not rdp_delta > 1e-300:
        return None
    x_top = max(_rdp_top(eps0, count, max(rdp_delta * TOP_FACTOR, 1e-300)), eps)
    n = lattice_points(eps0, count, x_top)
    if n is None:
        return None
    low, up, h = adaptive_br_curves(eps0, count, x_top, n, lower=lower, upper=upper)
    return (
        _delta_lower(low, up, h, eps) if lower else 0.0,
        _delta_upper(up, h, eps) if upper else 1.0,
    )


def spread_br_epsilon(delta: float, eps_lo: float, eps_hi: float, count: int) -> Bracket | None:
    """(lower, upper) of epsilon(delta) of ``count`` adaptively chosen releases, each bounded
    range at an epsilon in ``[eps_lo, eps_hi]``, in any order (chosen adaptively too): the
    programme's lower at ``eps_lo`` and its upper at ``eps_hi`` (None: a spread above
    MAX_SPREAD, or no upper)."""
    if eps_lo == eps_hi:
        return adaptive_br_epsilon(delta, eps_hi, count)
    if not 0.0 < eps_lo < eps_hi <= eps_lo * MAX_SPREAD:
        return None
    high = adaptive_br_epsilon(delta, eps_hi, count, lower=False)
    if high is None:
        return None
    low = adaptive_br_epsilon(delta, eps_lo, count, upper=False)
    return (0.0 if low is None else low[0]), high[1]


def spread_br_delta(eps: float, eps_lo: float, eps_hi: float, count: int) -> Bracket | None:
    """(lower, upper) of delta(eps) of ``count`` adaptively chosen releases, each bounded range
    at an epsilon in ``[eps_lo, eps_hi]``, in any order: as :func:`spread_br_epsilon`."""
    if eps_lo == eps_hi:
        return adaptive_br_delta(eps, eps_hi, count)
    if not 0.0 < eps_lo < eps_hi <= eps_lo * MAX_SPREAD:
        return None
    high = adaptive_br_delta(eps, eps_hi, count, lower=False)
    if high is None:
        return None
    low = adaptive_br_delta(eps, eps_lo, count, upper=False)
    return (0.0 if low is None else low[0]), high[1]


def _epsilon_upper(up: np.ndarray, h: float, delta: float) -> float:
    """The point where the chord (in e^x) of the upper values falls to ``delta``, rounded up:
    F is convex in e^x and non-increasing, so F is at most delta from there on."""
    below = np.flatnonzero(up <= delta)
    if below.size == 0:
        return math.inf
    a = int(below[0])
    if a == 0:
        return 0.0
    ua, ub = float(up[a - 1]), float(up[a])
    w = min(1.0, (ua - delta) / (ua - ub) * (1 + 4 * U))
    x0 = (a - 1) * h
    eps = x0 + math.log1p(w * math.expm1(h) * (1 + 4 * U)) * (1 + 4 * U)
    return min(eps * (1 + 4 * U) + 4 * U * h, a * h * (1 + 4 * U))


def _epsilon_lower(low: np.ndarray, up: np.ndarray, h: float, delta: float) -> float:
    """The last lattice point whose lower value exceeds ``delta``, moved right along the
    secant (in e^x) through the point before it, which lies under the convex F; rounded down."""
    above = np.flatnonzero(low > delta)
    if above.size == 0:
        return 0.0
    b = int(above[-1])
    x_b = b * h * (1 - 4 * U)
    if b == 0 or b + 1 >= low.size:
        return max(x_b, 0.0)
    drop = float(up[b - 1]) - float(low[b])  # F(x_{b-1}) - F(x_b), bounded above
    if drop <= 0.0:
        return x_b
    ratio = (float(low[b]) - delta) * (1 - 4 * U) / (drop * (1 + 4 * U)) * -math.expm1(-h)
    step = math.log1p(ratio * (1 - 4 * U)) * (1 - 4 * U)
    return max(x_b + min(step, h) * (1 - 4 * U), 0.0)


def _delta_upper(up: np.ndarray, h: float, eps: float) -> float:
    """The chord (in e^x) of the upper values at ``eps``, rounded up (F is convex in e^x)."""
    a = min(int(eps / h), up.size - 2)
    while a > 0 and a * h * (1 + 4 * U) > eps:
        a -= 1
    ua, ub = float(up[a]), float(up[a + 1])
    # the lattice position a * eps0 / N lies within a * h * (1 +- 4u), whatever a is
    near, far = a * h * (1 + 4 * U), a * h * (1 - 4 * U)
    low = math.expm1(max(eps - near, 0.0)) / math.expm1(h * (1 + 4 * U))
    high = math.expm1(max(eps - far, 0.0)) / math.expm1(h * (1 - 4 * U))
    ends = (max(0.0, low * (1 - 16 * U) - 8 * U), min(1.0, high * (1 + 16 * U) + 8 * U))
    value = max(ua + f * (ub - ua) for f in ends)
    return min(1.0, (value + 4 * U * max(ua, ub)) * (1 + 4 * U) + TINY)


def _delta_lower(low: np.ndarray, up: np.ndarray, h: float, eps: float) -> float:
    """A lower bound of F(eps) from the next lattice point b: the secant (in e^x) through
    x_b and x_{b+1}, extended left to eps, lies under the convex F; rounded down."""
    b = math.ceil(eps / h)
    while b * h * (1 - 4 * U) < eps:
        b += 1
    if b + 1 >= low.size:
        return 0.0
    lb = float(low[b])
    rise = lb - float(up[b + 1])  # at most F(x_b) - F(x_{b+1})
    if rise <= 0.0:
        return lb
    gap = max(b * h * (1 - 4 * U) - eps, 0.0)  # at most x_b - eps
    ratio = -math.expm1(-gap) / math.expm1(h * (1 + 4 * U)) * (1 - 8 * U)
    return max(0.0, (lb + rise * (1 - 2 * U) * ratio) * (1 - 8 * U) - TINY)
