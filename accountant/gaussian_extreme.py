"""The exact Gaussian profile at any noise level, for compositions too large for the ε grid.

A composition of Gaussian releases is μ-GDP with μ² the sum of the squared ratios (Dong, Roth,
Su 2022, Corollary 2); its exact profile (Balle and Wang 2018, Theorem 8) is
``δ(ε) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ)``. Written in ``t = ε/μ − μ/2`` with the scaled
complementary error function ``erfcx(x) = e^{x²} erfc(x)``, the second term is
``½ e^{−t²/2} erfcx((μ + t)/√2)``: no ``e^ε`` is formed, so the curve is evaluated to a few units
in the last place whatever μ (10¹⁵ steps of σ = 1 included), where the ε-domain evaluation
overflows. ε is then ``μ (μ/2 + t)``.

Every evaluation is widened by a relative slack that covers the special functions' error and the
rounding of ``t`` (the curve's relative slope in ``t`` is about ``t``), and the root is searched
over floats by bisection, so the upper ε has its evaluated upper curve at or below δ and the lower
ε has its evaluated lower curve at or above δ.
"""

from __future__ import annotations

import math
import sys

from scipy import special

from dpledger.accountant.conversions import U

__all__ = ["gaussian_delta_extreme", "gaussian_epsilon_extreme"]

#: relative error charged to each special-function value, per unit of (1 + t²)
SPECIAL_REL = 1e-12
#: t beyond which the first term is below the smallest double (δ = 0 to machine precision)
T_MAX = 40.0
_SQRT2 = math.sqrt(2.0)
#: the smallest positive double: an upper bound of a positive δ below it
_SMALLEST = math.ulp(0.0)


def _terms(t: float, mu: float) -> tuple[float, float, float]:
    """(first term, second term, relative slack) of δ at ``t``."""
    first = 0.5 * float(special.erfc(t / _SQRT2))
    second = 0.5 * math.exp(-0.5 * t * t) * float(special.erfcx((mu + t) / _SQRT2))
    return first, second, SPECIAL_REL * (1.0 + t * t)


def _delta_upper(t: float, mu: float) -> float:
    """An upper bound of δ at ``t``: 1 below -T_MAX (the slack, which grows with t², is not
    charged there), the smallest positive double above T_MAX (δ is positive, below it)."""
    if not t >= -T_MAX:
        return 1.0
    if t > T_MAX:
        return _SMALLEST
    first, second, rel = _terms(t, mu)
    value = first * (1 + rel) - second * (1 - rel)
    if math.isnan(value):  # e.g. an underflowed e^{-t^2/2} times an overflowed erfcx
        return 1.0
    return min(1.0, max(_SMALLEST, value))


def _delta_lower(t: float, mu: float) -> float:
    """A lower bound of δ at ``t``: δ is non-increasing in ``t`` at a fixed μ, so below -T_MAX
    its value at -T_MAX; 0 above T_MAX."""
    if t > T_MAX:
        return 0.0
    first, second, rel = _terms(max(t, -T_MAX), mu)
    value = first * (1 - rel) - second * (1 + rel)
    return 0.0 if math.isnan(value) else max(0.0, value)


def _t_min(mu: float) -> float:
    """Where the search for t starts: ε = 0, or t = -T_MAX (δ is 1 to machine precision
    below it, and the slack, which grows with t², stays small on [-T_MAX, T_MAX])."""
    return max(-0.5 * mu, -T_MAX)


def _first_at_or_below(curve_ok: object, lo: float, hi: float) -> float:
    """The smallest float in [lo, hi] where the non-increasing test ``curve_ok`` holds
    (``curve_ok(hi)`` must hold), by bisection to adjacent floats."""
    assert callable(curve_ok)
    while math.nextafter(lo, hi) < hi:
        mid = lo + (hi - lo) / 2
        if mid <= lo or mid >= hi:
            break
        if curve_ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def gaussian_epsilon_extreme(mu_lo: float, mu_hi: float, delta: float) -> tuple[float, float]:
    """(ε upper, ε lower) at ``delta`` of μ-GDP with μ known to lie in [mu_lo, mu_hi]."""
    if not 0.0 < delta < 1.0 or not 0.0 < mu_lo <= mu_hi:
        raise ValueError("need 0 < delta < 1 and 0 < mu_lo <= mu_hi")
    t_hi = _first_at_or_below(lambda t: _delta_upper(t, mu_hi) <= delta, _t_min(mu_hi), T_MAX)
    upper = mu_hi * (0.5 * mu_hi + t_hi) * (1 + 4 * U)
    # the largest t whose lower curve still reaches delta
    t_lo = _first_at_or_below(lambda t: _delta_lower(t, mu_lo) < delta, _t_min(mu_lo), T_MAX)
    t_lo = math.nextafter(t_lo, -math.inf)
    lower = (
        mu_lo * (0.5 * mu_lo + t_lo) * (1 - 4 * U) if _delta_lower(t_lo, mu_lo) >= delta else 0.0
    )
    upper = max(upper, 0.0)
    lower = min(max(lower, 0.0), sys.float_info.max, upper)
    return upper, lower


def gaussian_delta_extreme(mu_lo: float, mu_hi: float, epsilon: float) -> tuple[float, float]:
    """(δ upper, δ lower) at ``epsilon`` of μ-GDP with μ known to lie in [mu_lo, mu_hi]."""
    if not 0.0 < mu_lo <= mu_hi:
        raise ValueError("need 0 < mu_lo <= mu_hi")

    def t_of(mu: float) -> tuple[float, float]:  # t rounded down, t rounded up
        t = epsilon / mu - 0.5 * mu
        err = 4 * U * (abs(epsilon) / mu + 0.5 * mu)
        return t - err, t + err

    t_down, _ = t_of(mu_hi)
    _, t_up = t_of(mu_lo)
    return _delta_upper(t_down, mu_hi), min(_delta_lower(t_up, mu_lo), _delta_upper(t_down, mu_hi))
