"""Exact privacy profiles with safe-side rounding, and the root finder that inverts them.

Every profile returns a bracket ``(lower, upper)`` of the true ``delta(epsilon)``: ``upper``
is rounded up and ``lower`` down, with error terms derived from the floating-point
operations involved (u = unit roundoff) plus a small relative slack. :func:`solve_epsilon`
turns such a bracket into a bracket of ``epsilon(delta)`` whose upper end is a value at which
the upper profile was *evaluated* to be at most ``delta`` (so it is safe whatever the
monotonicity of the floating-point profile).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import numpy as np
from scipy import special

#: unit roundoff of IEEE double
U = 2.0**-53
#: relative error allowed for one evaluation of ndtr at a computed argument (generous: the
#: function's own error is a few ulps, the argument's rounding error moves it by at most
#: (|z| + 1) |dz| relative, |dz| <= 8u (|z| + mu + |log x| / mu), all below 1e-12 in range)
NDTR_REL = 1e-12
#: relative slack added to every delta upper bound (and removed from lower bounds)
REL_SLACK = 1e-12
#: smallest positive double: an upper bound that underflows is reported as this
TINY = 5e-324

Profile = Callable[[float], float]


def _exp_up(log_value: float) -> float:
    """exp() of a log-space upper bound that never underflows a positive value to 0."""
    if log_value == -math.inf:
        return 0.0
    v = math.exp(min(log_value, 709.0))
    return v if v > 0.0 else TINY


# -- Gaussian (Balle & Wang 2018, Thm 8) ------------------------------------------------------
def _gaussian_parts(eps: float, mu: float) -> tuple[float, float, float, float]:
    """log Phi(a), log r, and the relative errors of Phi(a) and r, where delta = Phi(a)(1 - r)."""
    a = -eps / mu + mu / 2.0
    b = -eps / mu - mu / 2.0
    la = float(special.log_ndtr(a))
    lb = float(special.log_ndtr(b))
    log_r = eps + lb - la
    # error of a and b (two roundings of |eps/mu| + mu/2), pushed through d log Phi / dx <= |x|+1
    arg_err = 4 * U * (abs(eps) / mu + mu)
    rho_a = 16 * U * (1 + abs(la)) + 1e-14 + (1 + abs(a)) * arg_err
    rho_r = 16 * U * (1 + abs(eps) + abs(la) + abs(lb)) + 2e-14 + (2 + abs(a) + abs(b)) * arg_err
    return la, log_r, math.expm1(rho_a), math.expm1(rho_r)


def gaussian_delta_bracket(eps: float, mu: float) -> tuple[float, float]:
    """Bracket of the exact delta(eps) of a Gaussian pair with GDP parameter ``mu`` > 0.

    delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2), computed as
    Phi(a) (1 - r) in log space so that deltas far below 1e-300 are still resolved.
    """
    if mu <= 0.0:
        return (max(0.0, -math.expm1(eps)),) * 2
    if math.isinf(mu):
        return 1.0, 1.0
    la, log_r, ea, er = _gaussian_parts(eps, mu)
    if not (math.isfinite(ea) and math.isfinite(er)):
        # the rounding errors of eps / mu are unbounded (mu near 0 at large |eps|): only the
        # bracket every pair satisfies is certain, [max(0, 1 - e^eps), 1]
        return max(0.0, -math.expm1(eps)) * (1 - REL_SLACK), 1.0
    r = math.exp(min(log_r, 700.0))
    one_minus_r = -math.expm1(log_r) if log_r < 700.0 else -math.inf
    hi_factor = one_minus_r + r * er
    lo_factor = one_minus_r - r * er
    if math.isnan(hi_factor) or math.isnan(lo_factor):
        return max(0.0, -math.expm1(eps)) * (1 - REL_SLACK), 1.0
    hi = 0.0
    if hi_factor > 0:
        hi = _exp_up(la + math.log1p(ea) + math.log(hi_factor) + math.log1p(REL_SLACK))
    lo = 0.0
    if lo_factor > 0 and ea < 1:
        lo = math.exp(la + math.log1p(-ea) + math.log(lo_factor) + math.log1p(-REL_SLACK))
    return max(0.0, lo), min(1.0, hi)


# -- Laplace (V02) ---------------------------------------------------------------------------
def _laplace_delta(eps: float, eps0: float) -> float:
    if eps >= eps0:
        return 0.0
    if eps > -eps0:
        return -math.expm1((eps - eps0) / 2.0)
    return -math.expm1(eps)


def laplace_delta_bracket(eps: float, eps0: float) -> tuple[float, float]:
    """Bracket of delta(eps) of one Laplace mechanism with eps0 = sensitivity / scale.

    The profile is decreasing in eps and increasing in eps0, so the inputs are perturbed by
    their rounding error in the safe direction before evaluating.
    """
    d = 8 * U * (abs(eps) + eps0) + TINY
    hi = _laplace_delta(eps - d, eps0 + d) * (1 + REL_SLACK)
    lo = _laplace_delta(eps + d, eps0 - d) * (1 - REL_SLACK)
    return max(0.0, lo), min(1.0, hi)


# -- k-fold pure DP (Kairouz, Oh & Viswanath 2015) ------------------------------------------
def kov_delta_bracket(eps: float, eps0: float, k: int) -> tuple[float, float]:
    """Bracket of the optimal delta(eps) of k-fold composition of eps0-DP mechanisms.

    delta(eps) = sum_l C(k,l) max(0, e^{(k-l) eps0} - e^{eps + l eps0}) / (1 + e^{eps0})^k,
    the hockey-stick divergence of k independent binary randomized responses (the dominating
    pair of eps0-DP). Terms are summed in log space with :func:`math.fsum`
    (:class:`KOVProfile`, which a caller evaluating many epsilons keeps).
    """
    return KOVProfile(eps0, k).bracket(eps)


class KOVProfile:
    """:func:`kov_delta_bracket` at one ``(eps0, k)``: the parts that do not depend on eps
    (binomial coefficients, masses, magnitudes) are computed once, each as the same array
    expression, so ``bracket(eps)`` returns the same floats as a fresh evaluation."""

    __slots__ = ("_k_eps0", "_log_a", "_log_comb", "_mag", "_shift", "eps0", "k")

    def __init__(self, eps0: float, k: int) -> None:
        self.eps0, self.k = eps0, k
        if k == 0 or eps0 == 0.0:
            return
        ls = np.arange(k + 1, dtype=float)
        self._shift = (k - 2 * ls) * eps0  # x_l = eps - shift_l
        self._k_eps0 = k * eps0
        log_norm = k * float(np.logaddexp(0.0, eps0))
        self._log_comb = (
            special.gammaln(k + 1) - special.gammaln(ls + 1) - special.gammaln(k - ls + 1)
        )
        self._log_a = self._log_comb + (k - ls) * eps0 - log_norm  # log P-mass of class l
        self._mag = np.abs(self._log_comb) + (k - ls) * eps0 + log_norm + 1.0

    def upper(self, eps: float) -> float:
        return self.bracket(eps)[1]

    def lower(self, eps: float) -> float:
        return self.bracket(eps)[0]

    def bracket(self, eps: float) -> tuple[float, float]:
        """(lower, upper) bracket of delta(eps), rounded to the safe sides (see
        :func:`kov_delta_bracket`)."""
        if self.k == 0 or self.eps0 == 0.0:
            exact = max(0.0, -math.expm1(eps))
            return exact * (1 - REL_SLACK), min(1.0, exact * (1 + REL_SLACK) + 4 * U)
        x = eps - self._shift  # log of e^{eps + l eps0} / e^{(k-l) eps0}
        dx = 8 * U * (abs(eps) + self._k_eps0) + TINY  # absolute error of x
        log_a = self._log_a
        near = x < dx
        mass_near = float(np.exp(log_a[near]).sum()) if near.any() else 0.0
        inside = x < 0
        if not inside.any():
            hi_sum, lo_sum = 0.0, 0.0
        else:
            log_t = log_a[inside] + np.log(-np.expm1(x[inside]))
            rho = float(np.expm1(32 * U * self._mag[inside].max()))
            m = float(log_t.max())
            s = fsum_nonnegative(np.exp(log_t - m))
            hi_sum = math.exp(m) * s * (1 + rho)
            strict = x[inside] < -dx
            lo_sum = (
                math.exp(m) * fsum_nonnegative(np.exp(log_t[strict] - m)) * (1 - rho)
                if strict.any()
                else 0.0
            )
        slack = dx * mass_near * (1 + 1e-9)
        hi = hi_sum * (1 + REL_SLACK) + slack
        if hi == 0.0 and near.any():
            hi = TINY  # a positive delta below the double range (the terms underflowed)
        lo = (lo_sum - slack) * (1 - REL_SLACK)
        return max(0.0, lo), min(1.0, hi)


#: terms below this fraction of the largest are summed apart by :func:`fsum_nonnegative`
_HEAD = 2.0**-110


def fsum_nonnegative(values: np.ndarray) -> float:
    """``math.fsum(values.tolist())`` of non-negative finite values, the same float, faster.

    fsum is correctly rounded, hence monotone in the exact sum. The terms below
    ``tau = _HEAD * max`` (n_small of them, often far below the float range's middle, where
    fsum is slow) sum exactly to some R in [0, n_small tau]; if fsum of the other terms equals
    fsum of them plus ``n_small tau`` rounded up, the correctly rounded total lies between the
    two and equals both. Otherwise (a total within 2^-80 relative of a rounding boundary),
    and for arrays that are short or have a negative or non-finite entry, fsum of all terms.
    """
    if values.size <= 64:
        return math.fsum(values.tolist())
    top = float(values.max())
    if not (0.0 < top < math.inf) or float(values.min()) < 0.0:
        return math.fsum(values.tolist())
    tau = top * _HEAD
    head = values[values >= tau].tolist()
    rest = values.size - len(head)
    if rest == 0:
        return math.fsum(head)
    total = math.fsum(head)
    head.append(math.nextafter(rest * tau, math.inf))  # >= the exact sum of the rest
    if math.fsum(head) == total:
        return total
    return math.fsum(values.tolist())


def randomized_response_delta_lower(eps: float, eps0: float, num_buckets: int) -> float:
    """Lower bound of delta(eps) of one k-ary randomized response with parameter eps0."""
    t = eps + 8 * U * (abs(eps) + eps0) + TINY
    z = math.exp(eps0) + num_buckets - 1
    total = (
        max(0.0, math.exp(t) * math.expm1(eps0 - t))  # e^eps0 - e^t, without cancellation
        + max(0.0, -math.expm1(t + eps0))
        + (num_buckets - 2) * max(0.0, -math.expm1(t))
    )
    return max(0.0, total / z * (1 - 1e-10))


# -- inverting a profile -----------------------------------------------------------------------
def _bisect(pred: Callable[[float], bool], a: float, b: float) -> tuple[float, float]:
    """Shrink [a, b] with pred(a) False and pred(b) True until it is tight."""
    for _ in range(200):
        if b - a <= 1e-13 * max(1.0, b):
            break
        m = 0.5 * (a + b)
        if pred(m):
            b = m
        else:
            a = m
    return a, b


def smallest_eps_with(pred: Callable[[float], bool], *, start: float = 1.0) -> float:
    """Smallest eps >= 0 (to 1e-13 relative) with pred(eps) True, pred monotone; inf if none.

    The returned value is one at which ``pred`` was evaluated True (or 0 when pred(0) holds).
    """
    if pred(0.0):
        return 0.0
    b = start
    while not pred(b):
        b *= 2.0
        if b > 1e12:
            return math.inf
    _, hi = _bisect(pred, 0.0 if b == start else b / 2.0, b)
    return hi


def solve_epsilon(upper: Profile, lower: Profile | None, delta: float) -> tuple[float, float]:
    """(eps_upper, eps_lower) from delta profile brackets at target ``delta``.

    eps_upper satisfies upper(eps_upper) <= delta (evaluated); eps_lower satisfies
    lower(eps_lower) >= delta, so the true epsilon(delta) lies between them.
    """
    eps_hi = smallest_eps_with(lambda e: upper(e) <= delta)
    if lower is None or lower(0.0) < delta:
        return eps_hi, 0.0
    if math.isinf(eps_hi):
        b = 1.0
        while lower(b) >= delta and b < 1e12:
            b *= 2.0
        if b >= 1e12:
            return math.inf, math.inf
        # lower(b / 2) >= delta is known only if b was doubled at least once
        a, _ = _bisect(lambda e: lower(e) < delta, b / 2.0 if b > 1.0 else 0.0, b)
        return eps_hi, a
    b = max(eps_hi, TINY)
    while lower(b) >= delta:  # cannot happen for a consistent bracket, kept for safety
        b *= 2.0
    a, _ = _bisect(lambda e: lower(e) < delta, 0.0, b)
    return eps_hi, min(a, eps_hi)


# -- RDP to (eps, delta) (Canonne, Kamath & Steinke 2020, Prop. 12; Asoodeh et al. 2021) ------
def rdp_to_epsilon(orders: np.ndarray, rdp: np.ndarray, delta: float) -> tuple[float, float | None]:
    """(epsilon upper bound, optimal order) from RDP values; non-finite orders are skipped.

    eps = rdp + log1p(-1/a) - (log(delta) + log(a)) / (a - 1), minimised over orders a;
    also eps = 0 whenever delta >= sqrt(1 - exp(-rdp)) (total variation via Bretagnolle-Huber,
    since D_1 <= D_a). Each value is rounded up by its floating-point error.
    """
    best, best_order = math.inf, None
    log_delta = math.log(delta)
    for a, r in zip(orders.tolist(), rdp.tolist(), strict=True):
        if not math.isfinite(r) or a <= 1.0:
            continue
        r = max(r, 0.0)
        if r == 0.0 or delta * delta + math.expm1(-r) > 8 * U:
            return 0.0, a
        t1 = math.log1p(-1.0 / a)
        t2 = (log_delta + math.log(a)) / (a - 1.0)
        eps = r + t1 - t2
        eps += 16 * U * (abs(r) + abs(t1) + abs(t2) + 1.0)
        eps = max(eps, 0.0)
        if eps < best:
            best, best_order = eps, a
    return best, best_order


def rdp_to_delta(orders: np.ndarray, rdp: np.ndarray, epsilon: float) -> tuple[float, float | None]:
    """(delta upper bound, optimal order) from RDP values at ``epsilon`` (same conversion)."""
    best, best_order = 1.0, None
    for a, r in zip(orders.tolist(), rdp.tolist(), strict=True):
        if not math.isfinite(r) or a <= 1.0:
            continue
        r = max(r, 0.0)
        log_d = 0.5 * math.log(-math.expm1(-r)) if r > 0 else -math.inf
        t = (a - 1.0) * (r - epsilon + math.log1p(-1.0 / a)) - math.log(a)
        t += 16 * U * (a * (abs(r) + abs(epsilon) + 1.0) + math.log(a))
        log_d = min(log_d + 4 * U, t)
        d = _exp_up(log_d) * (1 + REL_SLACK) if log_d > -math.inf else 0.0
        if d < best:
            best, best_order = d, a
    return min(best, 1.0), best_order


def merged_gaussian_multiplier(parts: Iterable[tuple[float, int]]) -> float:
    """Noise multiplier of the single Gaussian that ``count`` releases of each multiplier compose
    into exactly (1/s^2 = sum k_i / s_i^2), rounded down (more privacy loss) to absorb float
    error."""
    precision = math.fsum(k / s**2 for s, k in parts)
    return math.nextafter(1.0 / math.sqrt(precision) * (1 - 1e-12), 0.0)
