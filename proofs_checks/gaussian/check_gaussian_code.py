"""The code objects of the Gaussian profile against the closed form at 40 digits."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from dpledger.accountant.conversions import gaussian_delta_bracket
from dpledger.accountant.profiles import (
    GAUSS_SPAN,
    Profile,
    gauss_span,
    gaussian_delta,
    gaussian_profile,
    poisson_add,
    poisson_remove,
    replace_one_profiles,
)

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


@pytest.mark.parametrize("level", [1e-16, 1e-20, 1e-24, 1e-30, 1e-50, 1e-100, 1e-200, 1e-300])
def test_gauss_span_tail_is_below_half_the_level(level: float) -> None:
    z = gauss_span(level)
    assert z >= GAUSS_SPAN
    with mp.workdps(60):
        half = mp.mpf(level) / 2
        assert mp.ncdf(-mp.mpf(z)) <= half
        if z > GAUSS_SPAN:  # a span 1e-3 narrower would not do
            assert mp.ncdf(-mp.mpf(z) + mp.mpf("1e-3")) > half
        else:
            assert mp.ncdf(-GAUSS_SPAN) <= half


def _widenable_curves() -> list[Profile]:
    g = gaussian_profile(1.7)
    curves = [gaussian_profile(mu) for mu in (0.05, 1.0, 4.0)]
    for q in (1e-4, 0.3):
        for side in (1.0, -1.0):
            curves += [poisson_remove(g, q, side), poisson_add(g, q, side)]
    for a in (0.1, 2.0):
        pair = replace_one_profiles(a, 0.05)
        curves += [pair.remove, pair.lower_remove]
    return curves


def _top(p: Profile) -> float:
    return float(p(np.array([min(p.loss_hi, p.accurate_hi)]))[0])


@pytest.mark.parametrize("level", [1e-30, 1e-60, 1e-250])
def test_widened_curves_are_the_same_curves_charging_at_most_the_level(level: float) -> None:
    for p in _widenable_curves():
        wide = p.reaching(level)
        if _top(p) <= level:
            assert wide is p
            continue
        assert wide.loss_hi > p.loss_hi and wide.loss_lo <= p.loss_lo, p.name
        assert _top(wide) <= level, p.name
        eps = np.linspace(max(p.loss_lo, -60.0), p.loss_hi, 301)
        assert np.array_equal(wide(eps), p(eps)), p.name
        assert wide.reaching(level) is wide, p.name


def test_widened_gaussian_top_is_the_tail_at_60_digits() -> None:
    for mu, level in ((0.3, 1e-40), (2.0, 1e-35), (9.0, 1e-100)):
        wide = gaussian_profile(mu).reaching(level)
        z = (wide.loss_hi - mu * mu / 2) / mu
        with mp.workdps(60):
            exact = mp.ncdf(-mp.mpf(z)) - mp.exp(mp.mpf(wide.loss_hi)) * mp.ncdf(-mp.mpf(z) - mu)
            assert exact <= mp.ncdf(-mp.mpf(z)) <= mp.mpf(level) / 2
            assert _top(wide) >= exact  # the curve stays an upper bound at the new top
