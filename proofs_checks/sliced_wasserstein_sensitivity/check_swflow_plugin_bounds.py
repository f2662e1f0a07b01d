"""The sliced-Wasserstein plugin's sensitivity bounds against Lemma 1 (read-only calls)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from dpledger.audit.stats import cp_upper
from dpledger.plugins.swflow.sensitivity import (
    bernstein_w,
    clt_w,
    operator_norm_bound,
    sample_projections,
)


def test_clt_w_is_the_papers_formula() -> None:
    for n, d, p in [(31, 8, 1e-5), (70, 8, 1e-3), (300, 48, 1e-6)]:
        paper = n / d + norm.isf(p) / d * math.sqrt(2 * n * (d - 1) / (d + 2))
        assert clt_w(n, d, p) == pytest.approx(paper, rel=1e-12)


@pytest.mark.parametrize(("n", "d"), [(25, 8), (70, 8)])
def test_bernstein_w_holds_by_monte_carlo(n: int, d: int) -> None:
    p = 1e-3
    rng = np.random.default_rng(5)
    s = rng.beta(0.5, (d - 1) / 2, (100_000, n)).sum(axis=1)  # sum_j <theta_j, u>^2
    hits = int((s > bernstein_w(n, d, p)).sum())
    assert float(cp_upper(hits, s.size, 1e-6)) < p
    assert bernstein_w(n, d, p) > clt_w(n, d, p)  # the sound bound is the larger one
    assert bernstein_w(n, d, p) <= n * (1 + 1e-9)  # and never above the trivial bound


def test_operator_norm_bound_covers_every_record() -> None:
    rng = np.random.default_rng(6)
    theta = sample_projections(rng, 70, 8)  # rows of unit norm
    assert np.allclose(np.linalg.norm(theta, axis=1), 1.0)
    u = rng.normal(size=(8, 20_000))
    u /= np.linalg.norm(u, axis=0)
    bound = operator_norm_bound(theta)
    assert np.linalg.norm(theta @ u, axis=0).max() <= bound
    top = np.linalg.svd(theta)[2][0]  # the worst record attains it up to the rounding margin
    assert float(np.linalg.norm(theta @ top)) == pytest.approx(bound, rel=1e-8)
