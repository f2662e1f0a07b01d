"""Lemma 1 by Monte Carlo: the normal-quantile bound fails more often than delta."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from scipy.stats import norm

from dpledger.audit.stats import cp_lower, cp_upper

ALPHA = 1e-6  # confidence of every Monte Carlo statement: 1 - 1e-6


def w_paper(n: int, d: int, delta: float) -> float:
    """Eq. (23): N/d + z_{1-delta}/d sqrt(2N(d-1)/(d+2))."""
    w: float = n / d + norm.isf(delta) / d * math.sqrt(2 * n * (d - 1) / (d + 2))
    return w


def w_bernstein(n: int, d: int, delta: float) -> float:
    lg = math.log(1 / delta)
    return n / d + 2 / 3 * lg + 2 / d * math.sqrt(n * (d - 1) / (d + 2) * lg)


@functools.cache
def projected_energy(n: int, d: int, reps: int = 200_000, seed: int = 0) -> np.ndarray:
    """Samples of sum_j <theta_j, e_1>^2 with theta_j uniform on the sphere (Beta(1/2,(d-1)/2))."""
    rng = np.random.default_rng(seed)
    s = np.zeros(reps)
    for _ in range(n):
        s += rng.beta(0.5, (d - 1) / 2, reps)
    return s


def test_moments_match_the_lemma() -> None:
    n, d = 31, 8
    s = projected_energy(n, d)
    assert s.mean() == pytest.approx(n / d, rel=5e-3)
    assert s.var() == pytest.approx(2 * n * (d - 1) / (d**2 * (d + 2)), rel=2e-2)


@pytest.mark.parametrize(("n", "d"), [(31, 8), (70, 8)])
@pytest.mark.parametrize("delta", [1e-2, 1e-3])
def test_lemma_bound_fails_more_often_than_delta(n: int, d: int, delta: float) -> None:
    s = projected_energy(n, d)
    hits = int((s > w_paper(n, d, delta)).sum())
    assert float(cp_lower(hits, s.size, ALPHA)) > delta  # certified: P(S > w) > delta


@pytest.mark.parametrize(("n", "d"), [(25, 8), (31, 8), (70, 8)])
def test_bernstein_form_holds(n: int, d: int) -> None:
    delta = 1e-3
    s = projected_energy(n, d)
    hits = int((s > w_bernstein(n, d, delta)).sum())
    assert float(cp_upper(hits, s.size, ALPHA)) < delta
    assert w_bernstein(n, d, delta) > w_paper(n, d, delta)


def test_operator_norm_bounds_every_direction() -> None:
    rng = np.random.default_rng(3)
    d, n = 8, 70
    theta = rng.normal(size=(d, n))
    theta /= np.linalg.norm(theta, axis=0)
    u = rng.normal(size=(d, 5000))
    u /= np.linalg.norm(u, axis=0)
    energy = (np.asarray(theta.T @ u) ** 2).sum(axis=0)
    top = float(np.linalg.norm(theta, 2)) ** 2
    assert energy.max() <= top * (1 + 1e-12)
    v = np.linalg.svd(theta)[0][:, 0]  # the worst direction attains it
    assert float(((theta.T @ v) ** 2).sum()) == pytest.approx(top, rel=1e-12)
