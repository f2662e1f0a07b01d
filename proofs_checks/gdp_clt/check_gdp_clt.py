"""The GDP central-limit formula under-states epsilon in the noisy-particle-GD regime."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize, signal
from scipy.stats import norm

from dpledger.accountant import select
from dpledger.accountant.base import EpsilonBound
from dpledger.core.events import GaussianEvent, PoissonSampledEvent, SelfComposedEvent

Q, TAU, K, DELTA = 5 / 674, 1.0, 20, 1e-4


def gdp_epsilon(mu: float, delta: float) -> float:
    f = lambda e: norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2) - delta  # noqa: E731
    return float(optimize.brentq(f, 0.0, 100.0, xtol=1e-12))


def clt_epsilon(q: float, tau: float, k: int, delta: float) -> float:
    return gdp_epsilon(q * math.sqrt(k * math.expm1(1 / tau**2)), delta)


def lower_pld(q: float, s: float, h: float) -> tuple[float, np.ndarray]:
    """Remove-direction PLD of one step, losses rounded DOWN to multiples of h (start, masses)."""
    l_min = math.floor(math.log1p(-q) / h) * h
    x_hi = 1 + 9 * s  # beyond this the P-mass is < 1e-18 and is dropped (lowers delta)
    l_max = math.log1p(q * math.expm1((2 * x_hi - 1) / (2 * s * s)))
    grid = l_min + h * np.arange(math.ceil((l_max - l_min) / h) + 2)
    arg = (np.exp(grid) - (1 - q)) / q
    x = np.full_like(grid, -np.inf)  # L >= ln(1 - q): no mass at or below that
    pos = arg > 0
    x[pos] = s * s * np.log(arg[pos]) + 0.5  # L(x) = grid value
    cdf = (1 - q) * norm.cdf(x / s) + q * norm.cdf((x - 1) / s)
    masses = np.diff(cdf)  # mass of L in (l_i, l_{i+1}] -> placed at l_i (rounded down)
    return l_min, np.maximum(masses, 0.0)


def compose(start: float, masses: np.ndarray, k: int) -> tuple[float, np.ndarray]:
    out_start, out = 0.0, np.array([1.0])
    base_start, base = start, masses
    while k:
        if k & 1:
            out, out_start = signal.fftconvolve(out, base), out_start + base_start
        k >>= 1
        if k:
            base, base_start = signal.fftconvolve(base, base), 2 * base_start
        out, base = np.maximum(out, 0.0), np.maximum(base, 0.0)
    return out_start, out


def certified_lower_epsilon(q: float, s: float, k: int, delta: float, h: float = 2e-4) -> float:
    start, masses = compose(*lower_pld(q, s, h), k)
    losses = start + h * np.arange(len(masses))

    def delta_low(eps: float) -> float:
        sel = losses > eps
        return float(np.sum(masses[sel] * -np.expm1(eps - losses[sel]))) - 1e-12

    lo, hi = 0.0, 1.0
    assert delta_low(lo) > delta
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if delta_low(mid) > delta else (lo, mid)
    return lo


def test_clt_value_of_the_lemma() -> None:
    assert clt_epsilon(Q, TAU, K, DELTA) == pytest.approx(0.1075, abs=5e-4)


def test_clt_understates_a_certified_lower_bound() -> None:
    clt = clt_epsilon(Q, TAU, K, DELTA)
    lower = certified_lower_epsilon(Q, TAU, K, DELTA)
    assert lower == pytest.approx(0.197, abs=0.005)
    assert clt < 0.6 * lower  # under-stated by more than 40%


def test_accountant_agrees_that_clt_is_below_the_truth() -> None:
    ev = SelfComposedEvent(PoissonSampledEvent(Q, GaussianEvent(TAU)), K)
    bound = select.account(ev, delta=DELTA).bound
    assert isinstance(bound, EpsilonBound)
    lower = certified_lower_epsilon(Q, TAU, K, DELTA)
    assert bound.epsilon >= lower - 1e-9  # the certified upper bound is above our lower bound
    assert bound.epsilon == pytest.approx(0.198, abs=0.003)
    assert clt_epsilon(Q, TAU, K, DELTA) < bound.epsilon_lower
