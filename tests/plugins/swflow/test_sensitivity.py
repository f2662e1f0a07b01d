"""Per-record bounds of the projection release: exact operator norm, Bernstein and CLT w."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpledger.core.errors import InvalidParameterError
from dpledger.plugins.swflow.sensitivity import (
    bernstein_w,
    classical_gaussian_sigma,
    clt_w,
    gaussian_exact_delta,
    operator_norm_bound,
    record_bound,
    sample_projections,
)


def test_projections_are_unit_rows() -> None:
    theta = sample_projections(np.random.default_rng(0), 70, 8)
    assert theta.shape == (70, 8)
    np.testing.assert_allclose(np.linalg.norm(theta, axis=1), 1.0, rtol=1e-12)


def test_operator_norm_bounds_every_unit_vector_and_is_attained() -> None:
    rng = np.random.default_rng(1)
    theta = sample_projections(rng, 70, 8)
    bound = operator_norm_bound(theta)
    u = rng.standard_normal((5000, 8))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    assert np.max(np.linalg.norm(u @ theta.T, axis=1)) <= bound
    top = np.linalg.svd(theta)[2][0]  # the maximiser
    assert np.linalg.norm(theta @ top) == pytest.approx(bound, rel=1e-8)
    # ||Theta||_F^2 / d = k / d <= sigma_max^2 <= ||Theta||_F^2 = k
    assert 70 / 8 <= bound**2 <= 70 * (1 + 1e-8)


def test_clt_w_reproduces_the_reference_code_sensitivities() -> None:
    # sensitivity 2 sqrt(w), quantile at delta/2: the reference implementation's MNIST
    # (N_theta = 70 and 31) and CelebA (d = 48, N_theta = 300) values
    assert 2 * math.sqrt(clt_w(70, 8, 1e-5 / 2)) == pytest.approx(7.541, abs=1e-3)
    assert 2 * math.sqrt(clt_w(31, 8, 1e-5 / 2)) == pytest.approx(5.482, abs=1e-3)
    assert 2 * math.sqrt(clt_w(300, 48, 1e-6 / 2)) == pytest.approx(5.889, abs=1e-3)


def test_bernstein_w_is_the_exact_root_below_the_papers_small_k_form() -> None:
    k, d, p = 25, 8, 1e-5
    log_term = math.log(1 / p)
    paper_small_k = k / d + 2 / 3 * log_term + 2 / d * math.sqrt(k * (d - 1) / (d + 2) * log_term)
    w = bernstein_w(k, d, p)
    assert w < paper_small_k
    assert 2 * math.sqrt(paper_small_k) == pytest.approx(7.576, abs=1e-3)  # as coded for k <= 30
    # the root t solves t^2 = 2 L (k v + t / 3)
    v = 2 * (d - 1) / (d * d * (d + 2))
    t = w / (1 + 1e-9) - k / d
    assert t * t == pytest.approx(2 * log_term * (k * v + t / 3), rel=1e-9)


def test_bernstein_w_holds_in_monte_carlo() -> None:
    # P(sum_j <theta_j, u>^2 > w) <= p: at p = 0.01 the empirical exceedance must be below 1 %
    rng = np.random.default_rng(2)
    k, d, p = 40, 6, 0.01
    u = np.zeros(d)
    u[0] = 1.0
    g = rng.standard_normal((20000, k, d))
    s = np.sum((g[..., 0] ** 2) / np.sum(g**2, axis=2), axis=1)
    assert np.mean(s > bernstein_w(k, d, p)) < p
    # whereas the CLT w is only an approximation: its tail is visibly heavier than nominal
    # at small k (skewed chi-square-like sums)
    assert np.mean(s > clt_w(k, d, p)) > np.mean(s > bernstein_w(k, d, p))


def test_bernstein_w_is_capped_by_the_trivial_bound() -> None:
    assert bernstein_w(3, 2, 1e-12) <= 3 * (1 + 1e-8)


def test_record_bound_options_and_errors() -> None:
    theta = sample_projections(np.random.default_rng(3), 20, 4)
    assert record_bound(theta, "operator_norm", 1e-9) == operator_norm_bound(theta)
    assert record_bound(theta, "probabilistic", 1e-9) == pytest.approx(
        math.sqrt(bernstein_w(20, 4, 1e-9))
    )
    with pytest.raises(InvalidParameterError, match="sensitivity_bound"):
        record_bound(theta, "l1", 1e-9)
    with pytest.raises(InvalidParameterError, match="failure_probability"):
        bernstein_w(20, 4, 0.0)


def test_classical_gaussian_calibration_fails_at_large_epsilon() -> None:
    # at eps = 10, delta = 5e-6 the classical sigma has exact delta 1.07e-5 > delta
    sigma = classical_gaussian_sigma(10.0, 5e-6)
    assert gaussian_exact_delta(10.0, sigma) == pytest.approx(1.07e-5, rel=0.02)
    # at eps = 5, delta = 5e-6 it is conservative (6.3e-7)
    assert gaussian_exact_delta(5.0, classical_gaussian_sigma(5.0, 5e-6)) == pytest.approx(
        6.3e-7, rel=0.05
    )
