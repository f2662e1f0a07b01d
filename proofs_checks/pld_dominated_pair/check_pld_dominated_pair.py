"""Numeric checks of the dominated discrete pair: below the exact curve, second order in h."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpledger.accountant.conversions import gaussian_delta_bracket
from dpledger.accountant.pld_engine import compose, discretise_lower, epsilon_for
from dpledger.accountant.profiles import (
    Profile,
    approx_dp_profile,
    gaussian_profile,
    laplace_delta,
    poisson_add,
    poisson_remove,
    randomized_response_profile,
)

EPS = np.linspace(-3.0, 6.0, 181)


def _curve(pair_masses: np.ndarray, losses: np.ndarray, eps: np.ndarray) -> np.ndarray:
    gaps = -np.expm1(eps[:, None] - losses[None, :])
    return np.asarray((pair_masses[None, :] * np.maximum(gaps, 0.0)).sum(axis=1))


def _laplace(eps0: float) -> Profile:
    curve = laplace_delta(eps0)
    return Profile(curve, -eps0, eps0, True, "laplace", curve)


PROFILES = {
    "gaussian(0.3)": gaussian_profile(0.3),
    "gaussian(2)": gaussian_profile(2.0),
    "laplace(1)": _laplace(1.0),
    "rr(1, 4)": randomized_response_profile(1.0, 4),
    "approx_dp(1, 1e-5)": approx_dp_profile(1.0, 1e-5),
    "poisson_remove(0.05)": poisson_remove(gaussian_profile(1.0), 0.05),
    "poisson_add(0.05)": poisson_add(gaussian_profile(1.0), 0.05),
}


@pytest.mark.parametrize("name", sorted(PROFILES))
@pytest.mark.parametrize("h", [0.05, 0.004])
def test_pair_is_below_the_exact_curve_and_a_subprobability(name: str, h: float) -> None:
    profile = PROFILES[name]
    pair = discretise_lower(profile, h)
    assert pair is not None
    # a curve that names its mass at +infinity (approximate DP) keeps it there
    assert pair.dominated and pair.inf_mass == getattr(profile, "inf_lower", 0.0)
    assert math.fsum(pair.masses) + pair.inf_mass <= 1.0
    assert math.fsum(pair.masses * np.exp(-pair.losses)) <= 1.0
    got = pair.inf_mass + _curve(pair.masses, pair.losses, EPS)
    assert np.all(got <= profile(EPS) / (1 + 1e-10))


def test_error_is_second_order_in_the_spacing() -> None:
    # at a point of every grid (0.52 = 13 * 0.04): at a segment's midpoint the mid rule's
    # chords touch the tangent there, which would hide the order
    profile = gaussian_profile(1.0)
    eps = np.array([0.52])
    exact = float(profile(eps)[0])
    gaps = []
    for h in (0.04, 0.02, 0.01):
        pair = discretise_lower(profile, h)
        assert pair is not None
        gaps.append(exact - float(_curve(pair.masses, pair.losses, eps)[0]))
    # halving h divides the gap by about 4 (second order), never by less than 3
    assert gaps[0] / gaps[1] > 3.0 and gaps[1] / gaps[2] > 3.0
    # about a quarter of the left and right rules' alone (1.66e-4 relative at h = 0.01)
    assert gaps[2] / exact < 6e-5


def test_a_grid_coarser_than_the_curvature_is_declined() -> None:
    """Poisson sampling at q = 0.01: on a grid of spacing 0.1 the curve's bend at log(1 - q)
    is not resolved and no useful pair can be certified (the accountant then uses the shifted
    chord); at spacing 0.005 the pair holds most of the curve."""
    profile = poisson_remove(gaussian_profile(1.0), 0.01)
    assert discretise_lower(profile, 0.1) is None
    pair = discretise_lower(profile, 0.005)
    assert pair is not None
    zero = np.array([0.0])
    got = float(_curve(pair.masses, pair.losses, zero)[0])
    exact = float(profile(zero)[0])
    assert 0.85 * exact <= got <= exact


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_completed_pair_holds_almost_all_the_mass(name: str) -> None:
    """The completing atoms at losses 0 and +-h are part of the pair: both laws sum to one up
    to rounding (a pair that drops them loses the scale's shortfall, ~1e-15 / h, every step)."""
    pair = discretise_lower(PROFILES[name], 0.004)
    assert pair is not None
    total = math.fsum([*pair.masses, pair.inf_mass])
    assert 1.0 - 1e-12 <= total <= 1.0
    assert math.fsum(pair.masses * np.exp(-pair.losses)) <= 1.0


def test_ten_million_composed_steps_stay_below_the_exact_gaussian_and_near_it() -> None:
    """10^7 Gaussian steps (mu = 1e-4) composed from dominated pairs at h = 5e-6: the lower
    bound is below the exact epsilon of the Gaussian with mu = 1e-4 sqrt(10^7), and within
    0.35 % of it (without the completing atoms each step lost ~2e-9 of its mass: 0.43 %)."""
    mu, steps, h, delta = 1e-4, 10**7, 5e-6, 1e-5
    pair = discretise_lower(gaussian_profile(mu), h)
    assert pair is not None
    total_mu = mu * math.sqrt(steps)
    mean = steps * mu * mu / 2
    composed = compose([(pair, steps)], (mean - 9 * total_mu, mean + 9 * total_mu), 0.0)
    lower = epsilon_for(composed, delta, upper=False)
    low, high = 0.0, 10.0  # the exact epsilon, bracketed from below by its certified delta
    for _ in range(60):
        mid = (low + high) / 2
        if gaussian_delta_bracket(mid, total_mu)[1] > delta:
            low = mid
        else:
            high = mid
    assert lower <= low
    assert lower >= low * (1 - 0.0035)
