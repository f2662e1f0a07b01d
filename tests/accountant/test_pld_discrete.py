"""The connect-the-dots discretisation near the subnormal range: every stored pair's curve
stays above the exact curve where the exact values are a few units of 2^-1074."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from dpledger.accountant.pld_discrete import SUBNORMAL_SLACK, discretise
from dpledger.accountant.profiles_noise import gaussian_profile
from dpledger.accountant.profiles_sampled import poisson_remove

MU, Q = 8.0, 0.5


def _exact(eps: float, q: float = Q) -> mpmath.mpf:
    """Poisson-sampled Gaussian (remove direction) at ``eps``, to 60 digits."""
    with mpmath.workdps(60):
        e = mpmath.mpf(eps)
        inner = mpmath.log(1 + (mpmath.exp(e) - 1) / q)
        mu = mpmath.mpf(MU)
        gauss = mpmath.ncdf(-inner / mu + mu / 2) - mpmath.exp(inner) * mpmath.ncdf(
            -inner / mu - mu / 2
        )
        return q * gauss


def _stored_curve(
    masses: np.ndarray, losses: np.ndarray, inf_mass: float, eps: float
) -> mpmath.mpf:
    """The hockey-stick curve of the stored pair at ``eps``, to 60 digits."""
    with mpmath.workdps(60):
        total = mpmath.mpf(inf_mass)
        for p, loss in zip(masses, losses, strict=True):
            if loss > eps and p > 0:
                total += mpmath.mpf(float(p)) * (1 - mpmath.exp(mpmath.mpf(eps) - float(loss)))
        return total


def test_subnormal_curve_values_are_raised() -> None:
    # a span of 42 standard deviations reaches losses whose curve values are subnormal
    profile = poisson_remove(gaussian_profile(MU, 42.0), Q)
    raw = profile(np.array([336.6834170854271]))[0]
    assert 0.0 < raw < 2.2250738585072014e-308  # the band where relative margins round away
    pld = discretise(profile, 0.01)
    losses = pld.losses
    # grid points where the plain reading falls below the exact value (measured: 2.4012874376e-314
    # against 2.40128743768e-314 at 333.86)
    band = [e for e in losses if 333.8 < e < 334.0]
    assert any(profile(np.array([e]))[0] < _exact(float(e)) for e in band)
    for e in band:
        exact = _exact(float(e))
        stored = _stored_curve(pld.masses, losses, pld.inf_mass, float(e))
        assert stored >= exact, (e, stored, exact)


@pytest.mark.parametrize("q", [1e-10, 1e-12, 1e-13])
def test_mass_at_infinity_covers_a_subnormal_top(q: float) -> None:
    # at the widest span the top value of a tiny-q curve is subnormal
    profile = poisson_remove(gaussian_profile(MU, 37.1), q)
    pld = discretise(profile, 0.05)
    exact = _exact(float(pld.losses[-1]), q)
    assert 0 < exact < 2.2250738585072014e-308
    assert pld.inf_mass >= exact


def test_normal_values_do_not_move() -> None:
    assert 1e-300 + SUBNORMAL_SLACK == 1e-300
    profile = poisson_remove(gaussian_profile(MU), Q)
    pld = discretise(profile, 0.05)
    assert pld.inf_mass == float(min(1.0, profile(np.array([pld.losses[-1]]))[0] * (1 + 1e-9)))
