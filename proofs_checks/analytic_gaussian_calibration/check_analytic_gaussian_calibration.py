"""Numeric checks of analytic Gaussian calibration."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from dpledger.accountant.calibrate import calibrate_noise_multiplier
from dpledger.core.events import GaussianEvent


def gauss_delta(eps: float, mu: float) -> float:
    return float(norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2))


def analytic_sigma(eps: float, delta: float) -> float:
    lo, hi = 1e-6, 100.0  # mu bracket: delta(lo) <= target < delta(hi)
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if gauss_delta(eps, mid) <= delta else (lo, mid)
    return 1 / lo


def classic_sigma(eps: float, delta: float) -> float:
    return math.sqrt(2 * math.log(1.25 / delta)) / eps


def test_delta_is_increasing_in_mu_with_derivative_phi() -> None:
    eps = 1.3
    mus = np.linspace(0.1, 5, 200)
    vals = np.array([gauss_delta(eps, m) for m in mus])
    assert np.all(np.diff(vals) > 0)
    h = 1e-6
    for m in (0.5, 1.0, 3.0):
        slope = (gauss_delta(eps, m + h) - gauss_delta(eps, m - h)) / (2 * h)
        assert slope == pytest.approx(norm.pdf(-eps / m + m / 2), rel=1e-5)


def test_analytic_vs_classic_at_eps1() -> None:
    assert analytic_sigma(1.0, 1e-5) == pytest.approx(3.7306, abs=1e-4)
    assert classic_sigma(1.0, 1e-5) == pytest.approx(4.8448, abs=1e-4)


def test_classic_calibration_fails_for_large_epsilon() -> None:
    for eps in (0.1, 0.5, 0.9):
        assert gauss_delta(eps, 1 / classic_sigma(eps, 1e-5)) <= 1e-5
    assert gauss_delta(10.0, 1 / classic_sigma(10.0, 1e-5)) == pytest.approx(2.27e-5, abs=1e-7)


@pytest.mark.parametrize(("eps", "delta"), [(1.0, 1e-5), (0.3, 1e-6), (4.0, 1e-3)])
def test_dpledger_calibration_meets_target_and_is_near_optimal(eps: float, delta: float) -> None:
    res = calibrate_noise_multiplier(
        GaussianEvent, None, eps, delta, bracket=(0.1, 100.0), rtol=1e-6, backends=["closed_form"]
    )
    optimum = analytic_sigma(eps, delta)
    assert res.epsilon <= eps
    assert gauss_delta(eps, 1 / res.noise_multiplier) <= delta
    assert optimum <= res.noise_multiplier <= optimum * (1 + 1e-5)
