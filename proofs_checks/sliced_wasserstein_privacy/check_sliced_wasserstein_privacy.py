"""Theorem 3 of the sliced-Wasserstein flow paper against exact profiles and the accountant."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from dpledger.accountant import select
from dpledger.accountant.base import EpsilonBound
from dpledger.core.events import GaussianEvent


def w_paper(n: int, d: int, delta: float) -> float:
    w: float = n / d + norm.isf(delta) / d * math.sqrt(2 * n * (d - 1) / (d + 2))
    return w


def gauss_delta(eps: float, mu: float) -> float:
    return float(norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2))


def classical_multiplier(eps: float, delta: float) -> float:
    return math.sqrt(2 * math.log(1.25 / delta)) / eps


def test_printed_epsilon_uses_w_instead_of_its_square_root() -> None:
    for n, d, delta in [(70, 8, 1e-5), (31, 8, 1e-5), (300, 48, 1e-6)]:
        w = w_paper(n, d, delta)
        c, sigma = math.sqrt(2 * math.log(1.25 / delta)), 5.0
        printed, needed = c * w / sigma, c * math.sqrt(w) / sigma
        assert w > 1 and printed == pytest.approx(needed * math.sqrt(w))


def test_classical_constant_fails_at_epsilon_10() -> None:
    """DPSWflow one-shot: eps = 10, delta split in two halves of 5e-6."""
    s = classical_multiplier(10.0, 5e-6)  # std / sensitivity
    assert gauss_delta(10.0, 1 / s) == pytest.approx(1.07e-5, rel=0.01)
    assert gauss_delta(10.0, 1 / s) > 5e-6
    bound = select.account(GaussianEvent(s), delta=5e-6).bound
    assert isinstance(bound, EpsilonBound)
    assert bound.epsilon_lower > 10.0
    s5 = classical_multiplier(5.0, 5e-6)  # at eps = 5 it happens to be conservative
    assert gauss_delta(5.0, 1 / s5) == pytest.approx(6.3e-7, rel=0.02)


def test_failure_probability_over_many_steps_dwarfs_delta() -> None:
    steps, per_step = 4200, 5e-6  # 35 epochs of 120 batches; Lemma 1 at delta/2 each step
    assert -math.expm1(steps * math.log1p(-per_step)) == pytest.approx(0.0208, abs=1e-4)


@pytest.mark.parametrize(("h", "lam"), [(1.0, 0.001), (0.1, 1.0), (3.0, 0.5), (0.01, 0.01)])
def test_lemma2_total_variation_factor(h: float, lam: float) -> None:
    s = math.sqrt(2 * lam * h)
    tv = 2 * norm.cdf(2 * h / (2 * s)) - 1  # worst mean distance 2h
    gamma = math.sqrt(h / (2 * lam))
    assert tv <= min(1.0, gamma) + 1e-15
    # and by sampling the two kernels: the optimal half-space event attains the TV
    rng = np.random.default_rng(0)
    a, b = rng.normal(0.0, s, 400_000), rng.normal(2 * h, s, 400_000)
    assert float((a < h).mean() - (b < h).mean()) == pytest.approx(tv, abs=0.005)
