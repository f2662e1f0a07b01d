"""The code objects of the Gaussian profile against the closed form at 40 digits."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from dpledger.accountant.conversions import gaussian_delta_bracket
from dpledger.accountant.profiles import gaussian_delta, gaussian_profile

mp.mp.dps = 40

MUS = (0.05, 0.5, 1.0, 3.0, 10.0)
EPSILONS = (-3.0, -0.5, 0.0, 0.3, 1.0, 2.5, 8.0, 30.0)


def exact(eps: float, mu: float) -> mp.mpf:
    e, m = mp.mpf(eps), mp.mpf(mu)
    return mp.ncdf(-e / m + m / 2) - mp.e**e * mp.ncdf(-e / m - m / 2)


@pytest.mark.parametrize("mu", MUS)
@pytest.mark.parametrize("eps", EPSILONS)
def test_bracket_contains_the_exact_value_and_is_tight(eps: float, mu: float) -> None:
    lo, hi = gaussian_delta_bracket(eps, mu)
    truth = exact(eps, mu)
    assert lo <= truth <= hi
    if truth > 1e-300:
        assert hi <= truth * (1 + 1e-9)
        assert lo >= truth * (1 - 1e-9)


def test_bracket_resolves_deep_tails_without_underflow_to_zero() -> None:
    lo, hi = gaussian_delta_bracket(60.0, 1.0)  # exact ~ 1e-780: below the smallest double
    assert exact(60.0, 1.0) < mp.mpf("1e-700")
    assert lo == 0.0 and hi > 0.0  # an upper bound must never round to 0


def test_bracket_limits() -> None:
    assert gaussian_delta_bracket(1.0, 0.0) == (0.0, 0.0)  # no contribution: no privacy loss
    lo, hi = gaussian_delta_bracket(-1.0, 0.0)
    assert lo == hi == pytest.approx(-math.expm1(-1.0))  # delta(eps) = 1 - e^eps for eps < 0
    assert gaussian_delta_bracket(3.0, math.inf) == (1.0, 1.0)


@pytest.mark.parametrize("mu", MUS)
def test_profile_is_an_upper_bound_within_relative_margin(mu: float) -> None:
    eps = np.array(EPSILONS)
    raw = gaussian_delta(mu)(eps)
    curve = gaussian_profile(mu)(eps)
    for e, r, c in zip(EPSILONS, raw, curve, strict=True):
        truth = exact(e, mu)
        if truth < 1e-300:  # below the normal double range: may underflow, error < 1e-300
            assert c <= 1e-300
            continue
        assert c >= truth
        if truth > 1e-290:
            assert float(r) == pytest.approx(float(truth), rel=1e-11)
            assert c <= truth * (1 + 2e-10)


def test_profile_is_symmetric_in_the_two_orders() -> None:
    p = gaussian_profile(1.3)
    assert p.dual is p.delta  # N(0,1) vs N(mu,1) and its reverse have the same curve
