"""Poisson-subsampled Gaussian compositions conditioned on the number of hits.

``T`` steps of the Poisson-subsampled Gaussian (rate ``q``, noise multiplier ``sigma``) under
add/remove. In the remove direction each step's law is the mixture ``(1 - q) N(0, s^2) + q N(1,
s^2)`` against ``N(0, s^2)``; its privacy loss at an output with Gaussian log-ratio ``Z`` is
``l(Z) = log(1 - q + q e^Z)``, where ``Z ~ N(eta^2/2, eta^2)`` on a step that sampled the record
(a *hit*, ``eta = 1/sigma``) and ``Z ~ N(-eta^2/2, eta^2)`` otherwise. Given ``k`` hits (``k ~
Binomial(T, q)``) the loss lies between shifted sums of Gaussians:

- below: ``l(Z) >= log q + Z`` on hits and ``l(Z) >= log(1 - q)`` off them, so the loss is at
  least ``m_k^- + N(k eta^2/2, k eta^2)``, ``m_k^- = k log q + (T - k) log(1 - q)``;
- above: outside an event of probability ``k p_1 + (T - k) p_0`` (hits with ``Z < z_1``, misses
  with ``Z > z_0``) the loss is at most ``m_k^+ + N(k eta^2/2, k eta^2)``, ``m_k^+ = k log(q +
  (1 - q) e^{-z_1}) + (T - k) log(1 - q + q e^{z_0})``.

``delta(eps) = E[(1 - e^{eps - L})_+]`` is non-decreasing in the loss ``L``, and the Gaussian
sum's term is the Gaussian mechanism's profile at ``eps - m_k`` with ``mu = eta sqrt(k)``, so

    sum_k w_k delta_G(eps - m_k^-; eta sqrt k) <= delta(eps)
        <= sum_{k <= K} w_k delta_G(eps - m_k^+; eta sqrt k) + T q p_1 + T p_0 + P(K > K).

When the hits are heavy (``eta^2`` large against ``|log q|`` and the tail levels) the two
shifts differ by a negligible amount and the bracket is tight at any delta, with no loss grid:
no ``e^eps`` is formed, the Gaussian profile is evaluated in ``t = eps'/mu - mu/2`` with the
scaled complementary error function. The add direction's loss is at most ``-log(1 - q)`` per
step, so its epsilon is at most ``-T log(1 - q)``. See proofs_checks/pld_hit_count.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
from numpy.typing import NDArray
from scipy import special

from dpledger.accountant.pld_discrete import SUBNORMAL_SLACK
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import Event, GaussianEvent, PoissonSampledEvent, flatten

__all__ = [
    "CHARGE_SHARE",
    "MAX_HITS",
    "SUBNORMAL_SLACK",
    "HitCount",
    "hit_count",
]

Array = NDArray[np.float64]

#: unit roundoff of IEEE double
U = 2.0**-53
#: the charged tail events' probability, relative to the delta of interest
CHARGE_SHARE = 1e-4
#: most hit counts summed (beyond, the expected number of hits is too large for this route)
MAX_HITS = 4000
#: relative error charged to each special-function value, per unit of (1 + t^2)
SPECIAL_REL = 1e-12
#: relative slack on the shifts m_k and on t (covers their rounding many times over)
SHIFT_REL = 1e-12
#: the Gaussian term is 0 to double precision beyond this t
T_MAX = 40.0
#: t^2 beyond this reads as this in the special functions' slack (still far above 1 / SPECIAL_REL)
_MAX_SQUARE = 1e300
_SQRT2 = math.sqrt(2.0)


def hit_count(ledger: Iterable[tuple[Event, int]], adjacency: Adjacency) -> HitCount | None:
    """The hit-count bounds of a ledger made of one Poisson-subsampled Gaussian (``0 < q < 1``)
    composed ``T`` times under add/remove; None for any other ledger."""
    if adjacency.relation != "add_remove":
        return None
    event: Event | None = None
    steps = 0
    for released, count in ledger:
        for leaf, k in flatten(released):
            if event is None:
                event = leaf
            elif leaf is not event and leaf != event:
                return None  # a second distinct leaf
            steps += k * count
    if event is None:
        return None
    if not isinstance(event, PoissonSampledEvent) or not isinstance(event.event, GaussianEvent):
        return None
    q = event.sampling_probability
    if not 0.0 < q < 1.0 or steps < 1:
        return None
    log_miss = steps * math.log1p(-q)
    if log_miss < -600.0 or steps * q > MAX_HITS / 4:
        return None  # many hits: the sum over hit counts is long and never tight
    return HitCount(q, 1.0 / event.event.noise_multiplier, steps)


def _weights(q: float, steps: int, top: int) -> tuple[Array, Array]:
    """(upper, lower) Binomial(steps, q) weights of 0..top hits, with their rounding charged.

    w_0 = (1 - q)^T, w_{k+1} = w_k (T - k)/(k + 1) q/(1 - q); the logarithm's rounding is at most
    2u |T log(1 - q)| + u, and each step of the recurrence adds at most 6u."""
    k = np.arange(top + 1, dtype=np.float64)
    ratio = (steps - k[:-1]) / (k[:-1] + 1.0) * (q / (1.0 - q))
    w = np.empty(top + 1)
    w[0] = math.exp(steps * math.log1p(-q))
    w[1:] = w[0] * np.cumprod(ratio)
    rel = 4 * U * (1.0 + abs(steps * math.log1p(-q))) + 8 * U * (k + 1.0) * (1 + k.size * U)
    return w * (1 + rel), w * (1 - rel)


def _binomial_tail(q: float, steps: int, top: int) -> float:
    """An upper bound on P(K > top): C(T, top+1) q^{top+1} <= (Tq)^{top+1}/(top+1)!, rounded up."""
    n = top + 1
    if n > steps:
        return 0.0
    log_bound = n * math.log(steps * q) - math.lgamma(n + 1.0)
    return math.exp(min(log_bound + 1e-9 * (1.0 + abs(log_bound)), 0.0))


def _top_hits(q: float, steps: int, budget: float) -> int | None:
    """Fewest hit counts with P(K > top) <= budget; None beyond MAX_HITS."""
    top = max(1, math.ceil(steps * q))
    while _binomial_tail(q, steps, top) > budget:
        top += max(1, top // 8)
        if top > MAX_HITS:
            return None
    return min(top, steps)


def _gauss_terms(t: Array, mu: Array) -> tuple[Array, Array, Array]:
    """(first, second, relative slack) of the Gaussian profile at ``t = eps/mu - mu/2``."""
    first = 0.5 * special.erfc(t / _SQRT2)
    with np.errstate(under="ignore", over="ignore"):
        second = 0.5 * np.exp(-0.5 * t * t) * special.erfcx((mu + t) / _SQRT2)
        # capped: an infinite slack times a zero term would read NaN, not "no information"
        slack = SPECIAL_REL * (1.0 + np.minimum(t * t, _MAX_SQUARE))
    return first, second, slack


class HitCount:
    """The bounds of one Poisson-subsampled Gaussian composed ``steps`` times, conditioned on
    the number of hits (module docstring)."""

    def __init__(self, q: float, eta: float, steps: int) -> None:
        if not (0.0 < q < 1.0 and eta > 0.0 and steps >= 1) or steps * math.log1p(-q) < -600.0:
            raise ValueError("need 0 < q < 1, eta > 0, steps >= 1 and (1 - q)^steps >= e^-600")
        self.q = q
        self.eta = eta
        self.steps = steps
        #: the add direction's epsilon is at most this (its loss is at most -log(1 - q) a step)
        self.add_cap = math.nextafter(-steps * math.log1p(-q) * (1 + 4 * U), math.inf)

    @property
    def useful(self) -> bool:
        """Whether a hit's loss ``log q + Z`` is mostly above zero (``eta^2/2 >= |log q| + 5``):
        otherwise the lower bound is far below the grid's and the upper far above it."""
        return 0.5 * self.eta * self.eta >= -math.log(self.q) + 5.0

    # -- the remove direction's delta at one epsilon --------------------------------------
    def _lower_shifts(self, k: Array) -> Array:
        """m_k^-, rounded down."""
        m = k * math.log(self.q) + (self.steps - k) * math.log1p(-self.q)
        return m - SHIFT_REL * (
            np.abs(k * math.log(self.q)) + abs(self.steps * math.log1p(-self.q))
        )

    def _upper_shifts(self, k: Array, level: float) -> tuple[Array, float]:
        """(m_k^+ rounded up, probability charged for the cut levels z_0, z_1) for cuts at
        ``level`` standard deviations from each law's mean."""
        q, eta, steps = self.q, self.eta, self.steps
        half = 0.5 * eta * eta
        z1 = half - level * eta
        z0 = -half + level * eta
        a1 = math.log(q + (1 - q) * math.exp(-z1)) if z1 > -700 else -z1 + math.log1p(-q)
        b0 = math.log1p(q * math.expm1(z0)) if z0 < 700 else z0 + math.log(q)
        if z0 >= 700:
            b0 = z0 + math.log(q + (1 - q) * math.exp(-z0))
        m = k * a1 + (steps - k) * b0
        m = m + SHIFT_REL * (np.abs(k * a1) + np.abs((steps - k) * b0) + 1e-300)
        tail = 0.5 * math.erfc(level / _SQRT2) * (1 + 1e-12)
        charge = (steps * q * tail + steps * tail) * (1 + 8 * U)
        return m, charge

    def _gauss(self, eps: float, k: Array, m: Array, upper: bool) -> Array:
        """Each k's Gaussian profile at ``eps - m_k`` with mu = eta sqrt(k) (k >= 1), read at
        t moved to the safe side of its rounding, with the special functions' slack."""
        mu = self.eta * np.sqrt(k)
        shifted = eps - m
        t = shifted / mu - 0.5 * mu
        err = SHIFT_REL * (1.0 + (abs(eps) + np.abs(m)) / mu + mu)
        t = t - err if upper else t + err
        # below eps' = 0 (t < -mu/2) the curve is read as 1 (upper) or 1 - e^{eps'} (lower)
        inside = t > -0.5 * mu
        first, second, rel = _gauss_terms(np.where(inside, t, 0.0), mu)
        if upper:
            values = np.clip(first * (1 + rel) - second * (1 - rel), 0.0, 1.0)
            return np.where(t >= T_MAX, 0.0, np.where(inside, values, 1.0))
        values = np.maximum(first * (1 - rel) - second * (1 + rel), 0.0)
        below = np.maximum(-np.expm1(np.minimum(shifted, 0.0)) * (1 - 4 * U), 0.0)
        return np.where(t >= T_MAX, 0.0, np.where(inside, values, below))

    def remove_delta(self, eps: float, budget: float) -> tuple[float, float] | None:
        """(upper, lower) delta of the remove direction at ``eps``; tail events of probability
        about ``budget`` are charged to the upper. None when too many hits must be summed."""
        top = _top_hits(self.q, self.steps, 0.5 * budget)
        if top is None:
            return None
        level = -float(special.ndtri(min(0.25, 0.5 * budget / (self.steps * (1 + self.q)))))
        k = np.arange(1, top + 1, dtype=np.float64)
        w_up, w_low = _weights(self.q, self.steps, top)
        m_up, charge = self._upper_shifts(np.concatenate(([0.0], k)), level)
        upper_terms = w_up[1:] * self._gauss(eps, k, m_up[1:], upper=True)
        zero_hits = w_up[0] if eps < m_up[0] else 0.0  # (1 - e^{eps - m_0})_+ <= 1
        tail = _binomial_tail(self.q, self.steps, top)
        n = top + 4
        # below the smallest normal double, products and sums round by up to half of 2^-1074
        # each, which the relative allowances do not cover: SUBNORMAL_SLACK per term
        slack = n * SUBNORMAL_SLACK
        upper = (math.fsum(upper_terms.tolist()) + zero_hits + charge + tail) * (1 + n * U)
        upper += slack
        lower_terms = w_low[1:] * self._gauss(eps, k, self._lower_shifts(k), upper=False)
        lower = math.fsum(lower_terms.tolist()) * (1 - n * U) - slack
        return min(upper, 1.0), max(min(lower, upper), 0.0)

    # -- queries --------------------------------------------------------------------------
    def delta(self, eps: float) -> tuple[float, float] | None:
        """(upper, lower) delta at ``eps`` of the composition (both directions), or None when
        the add direction is not bounded here (``eps`` below its cap) or too many hits."""
        if eps < self.add_cap:
            return None
        first = self.remove_delta(eps, 1e-300)
        if first is None:
            return None
        budget = max(CHARGE_SHARE * first[1], 1e-300)
        found = self.remove_delta(eps, budget)
        if found is None:
            return None
        return min(found[0], first[0]), max(found[1], first[1])

    def epsilon(self, delta: float) -> tuple[float, float] | None:
        """(upper, lower) epsilon at ``delta``: the upper is the first float where the upper
        delta is at most ``delta`` (and at least the add direction's cap), the lower the last
        float where the lower delta is still at least ``delta``. None when too many hits."""
        budget = CHARGE_SHARE * delta
        probe = self.remove_delta(0.0, budget)
        if probe is None:
            return None
        hi = self._reach(delta, budget)
        if hi is None:
            return None
        upper = _first_true(lambda e: self._up(e, budget) <= delta, 0.0, hi)
        if self._low(0.0, budget) < delta:
            lower = 0.0
        else:
            lower = _first_true(lambda e: self._low(e, budget) < delta, 0.0, hi)
            lower = math.nextafter(lower, 0.0)
            if self._low(lower, budget) < delta:
                lower = 0.0
        return max(upper, self.add_cap), min(lower, upper)

    def _up(self, eps: float, budget: float) -> float:
        found = self.remove_delta(eps, budget)
        return 1.0 if found is None else found[0]

    def _low(self, eps: float, budget: float) -> float:
        found = self.remove_delta(eps, budget)
        return 0.0 if found is None else found[1]

    def _reach(self, delta: float, budget: float) -> float | None:
        """An epsilon where the upper delta is at most ``delta`` (doubling from 1)."""
        eps = 1.0
        while self._up(eps, budget) > delta:
            eps *= 2.0
            if eps > 1e12:
                return None
        return eps


def _first_true(test: object, lo: float, hi: float) -> float:
    """The smallest float in [lo, hi] where the monotone test holds (it holds at ``hi``), by
    bisection to adjacent floats."""
    assert callable(test)
    while True:
        mid = lo + (hi - lo) / 2
        if mid <= lo or mid >= hi:
            return hi
        if test(mid):
            hi = mid
        else:
            lo = mid
