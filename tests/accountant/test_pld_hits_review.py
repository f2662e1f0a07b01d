"""The hit-count route's lower bounds at subnormal delta, against the exact curve of one
Poisson-subsampled Gaussian step (closed form at 50 digits).

Below the smallest normal double (about 2.2e-308) a product or a sum rounds with an absolute
error of up to half of 2^-1074, which the route's relative allowances (``1 - n u``, the
special functions' ``1e-12 (1 + t^2)``) do not cover: the lower delta can be rounded up past
the true curve, and the epsilon bisection then stops on a float where the certified lower
delta reaches ``delta`` but the true curve does not. ``check_delta_query`` accepts any delta in
``(0, 1)``, so these numbers are printed as certified.
"""

from __future__ import annotations

import mpmath

from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.pld_hits import HitCount
from dpledger.core.events import GaussianEvent, PoissonSampledEvent

Q = 1e-290
SIGMA = 0.02


def _exact_remove_delta(eps: float, q: float, sigma: float) -> mpmath.mpf:
    """delta(eps) of (1 - q) N(0, s^2) + q N(1, s^2) against N(0, s^2) (the remove direction,
    which dominates for eps >= -log(1 - q)): q (Phi(eta/2 - z/eta) - e^z Phi(-eta/2 - z/eta))
    at the Gaussian log-ratio z where the mixture's loss equals eps."""
    with mpmath.workdps(50):
        q_, eta, e = mpmath.mpf(q), 1 / mpmath.mpf(sigma), mpmath.mpf(eps)
        x = mpmath.exp(e)
        if x <= 1 - q_:
            return 1 - x
        z = mpmath.log((x - (1 - q_)) / q_)
        hit = mpmath.ncdf(eta / 2 - z / eta)
        miss = mpmath.ncdf(-eta / 2 - z / eta)
        return q_ * (hit - mpmath.exp(z) * miss)


def test_route_epsilon_lower_is_a_lower_bound_at_subnormal_delta() -> None:
    hits = HitCount(Q, 1.0 / SIGMA, 1)
    for delta in (1e-315, 1e-318):
        found = hits.epsilon(delta)
        assert found is not None
        _upper, lower = found
        # the true curve must still be at or above delta at a certified lower epsilon
        assert _exact_remove_delta(lower, Q, SIGMA) >= delta, (delta, lower)


def test_route_delta_lower_is_a_lower_bound_at_subnormal_delta() -> None:
    hits = HitCount(Q, 1.0 / SIGMA, 1)
    eps = 1102.364681423263  # where the exact curve is 9.99999997e-316
    found = hits.delta(eps)
    assert found is not None
    assert found[1] <= _exact_remove_delta(eps, Q, SIGMA)


def test_accountant_delta_lower_is_a_lower_bound_at_subnormal_delta() -> None:
    acc = PLDAccountant()
    acc.compose(PoissonSampledEvent(Q, GaussianEvent(SIGMA)))
    eps = 1102.364681423263
    bound = acc.get_delta(eps)
    exact = _exact_remove_delta(eps, Q, SIGMA)
    assert bound.delta_lower <= exact <= bound.delta


def test_accountant_epsilon_bracket_holds_at_subnormal_delta() -> None:
    """The single step's exact-profile bracket (which the route's bracket is intersected with)
    has the same rounding: its upper at 1e-315 is a float where the exact curve is still above
    1e-315 (by about 1e-9 relative)."""
    acc = PLDAccountant()
    acc.compose(PoissonSampledEvent(Q, GaussianEvent(SIGMA)))
    for delta in (1e-315, 1e-318):
        bound = acc.get_epsilon(delta)
        assert _exact_remove_delta(bound.epsilon, Q, SIGMA) <= delta, (delta, bound)
        assert _exact_remove_delta(bound.epsilon_lower, Q, SIGMA) >= delta, (delta, bound)
