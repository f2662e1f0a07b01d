"""Clopper–Pearson bounds, epsilon lower bounds, ceilings and sample sizes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from dpledger.audit import stats
from dpledger.core.errors import InvalidParameterError


@pytest.mark.parametrize("n", [10, 100, 1000])
def test_cp_upper_is_the_exact_binomial_quantile(n: int) -> None:
    k = np.arange(n)  # k = n gives the trivial bound 1
    p_ub = stats.cp_upper(k, n, 0.05)
    np.testing.assert_allclose(sps.binom.cdf(k, n, p_ub), 0.05, rtol=1e-8)
    assert stats.cp_upper(n, n, 0.05) == 1.0
    k1 = np.arange(1, n + 1)
    np.testing.assert_allclose(
        sps.binom.sf(k1 - 1, n, stats.cp_lower(k1, n, 0.05)), 0.05, rtol=1e-8
    )
    assert stats.cp_lower(0, n, 0.05) == 0.0


@pytest.mark.parametrize("n", [10, 100, 1000])
def test_cp_upper_coverage_never_exceeds_alpha(n: int) -> None:
    """Exact miss probability P[p_ub(K) < p] over a fine grid of p: <= alpha, and sup ~ alpha."""
    alpha = 0.05
    k = np.arange(n + 1)
    p_ub = stats.cp_upper(k, n, alpha)
    grid = np.concatenate([np.linspace(1e-4, 1 - 1e-4, 4001), p_ub[:-1] * (1 + 1e-9)])
    pmf = sps.binom.pmf(k[None, :], n, grid[:, None])
    miss = (pmf * (p_ub[None, :] < grid[:, None])).sum(axis=1)
    assert miss.max() <= alpha + 1e-9
    assert miss.max() >= 0.95 * alpha  # CP is exact at its own quantiles: not overly conservative


def test_cp_quantile_monte_carlo() -> None:
    """jax_privacy's check: P[Bin(n, p_ub(k)) <= k] ~ alpha with 1e6 trials, rtol 5%."""
    rng = np.random.default_rng(0)
    for n, k in ((10, 3), (100, 17), (1000, 240)):
        p_ub = float(stats.cp_upper(k, n, 0.05))
        frac = np.mean(rng.binomial(n, p_ub, size=1_000_000) <= k)
        assert frac == pytest.approx(0.05, rel=0.05)


@pytest.mark.parametrize(
    ("n", "expected"), [(100, 3.28), (500, 4.91), (1000, 5.60), (5000, 7.21), (100_000, 10.21)]
)
def test_ceiling_matches_verify_table(n: int, expected: float) -> None:
    assert stats.ceiling(n, n, 0.0, 0.05) == pytest.approx(expected, abs=0.006)
    assert stats.ceiling(n, n, 0.0, 0.05) == pytest.approx(math.log(n / math.log(40)), abs=0.02)


@pytest.mark.parametrize(("n", "expected"), [(10**4, 0.939), (10**5, 0.981), (10**6, 0.994)])
def test_laplace_optimal_event_resolution_table(n: int, expected: float) -> None:
    """Laplace eps=1, S={x >= 1}: p_a = 1/2, p_b = e^-1/2 at expected counts (CP, 95%)."""
    lb = stats.epsilon_lower_bound(n // 2, n, round(n * math.exp(-1) / 2), n, 0.0, 0.05)
    assert lb == pytest.approx(expected, abs=0.0015)
    assert lb < 1.0


def test_epsilon_lower_bound_uses_delta_and_is_zero_when_uninformative() -> None:
    lb0 = stats.epsilon_lower_bound(5000, 10000, 1000, 10000, 0.0, 0.05)
    lb1 = stats.epsilon_lower_bound(5000, 10000, 1000, 10000, 0.1, 0.05)
    p_a = float(stats.cp_lower(5000, 10000, 0.025))
    p_b = float(stats.cp_upper(1000, 10000, 0.025))
    assert lb0 == pytest.approx(math.log(p_a / p_b), rel=1e-12)
    assert lb1 == pytest.approx(math.log((p_a - 0.1) / p_b), rel=1e-12)
    assert stats.epsilon_lower_bound(100, 10000, 100, 10000, 0.0, 0.05) == 0.0
    assert stats.epsilon_lower_bound(10, 10000, 0, 10000, 0.01, 0.05) == 0.0


def test_required_samples_matches_verify() -> None:
    """Laplace eps=1 needs ~2.1e3 samples per side for r=0.1 and ~2.1e5 for r=0.01."""
    p_a, p_b = 0.5, math.exp(-1) / 2
    assert stats.required_samples(p_a, p_b, 0.0, 0.1, 0.05) == pytest.approx(2.1e3, rel=0.01)
    assert stats.required_samples(p_a, p_b, 0.0, 0.01, 0.05) == pytest.approx(2.1e5, rel=0.01)


@pytest.mark.parametrize(
    "call",
    [
        lambda: stats.cp_upper(3, 10, 0.0),
        lambda: stats.cp_upper(11, 10, 0.05),
        lambda: stats.epsilon_lower_bound(1, 10, 1, 10, 1.0, 0.05),
        lambda: stats.required_samples(0.5, 0.0, 0.0, 0.1, 0.05),
    ],
)
def test_bad_input_raises(call: object) -> None:
    with pytest.raises(InvalidParameterError):
        call()  # type: ignore[operator]
