"""Lower bounds by exact conditioning on pure releases, against 30-digit sums of closed-form
curves (binary randomized response composed with a Gaussian)."""

from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest

from dpledger.accountant import exact_lower
from dpledger.accountant.base import EpsilonBound
from dpledger.accountant.exact_lower import (
    pure_plus_one_delta_lower,
    pure_plus_one_epsilon_lower,
    raise_lower,
)
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import BackendInconsistencyError
from dpledger.core.events import ComposedEvent, GaussianEvent, PureDPEvent, SelfComposedEvent

mp.mp.dps = 30


def _gaussian(x: mp.mpf, mu: mp.mpf) -> mp.mpf:
    """Balle & Wang's curve of N(mu, 1) against N(0, 1)."""
    return mp.ncdf(-x / mu + mu / 2) - mp.e**x * mp.ncdf(-x / mu - mu / 2)


def _composed(eps: float, k: int, e0: float, mu: float) -> mp.mpf:
    """k randomized responses at e0 and one Gaussian, composed: by enumeration of the number
    of down steps j (losses (k - 2j) e0)."""
    e0m, mum, x = mp.mpf(e0), mp.mpf(mu), mp.mpf(eps)
    up = mp.e**e0m / (1 + mp.e**e0m)
    return mp.fsum(
        mp.binomial(k, j) * up ** (k - j) * (1 - up) ** j * _gaussian(x - (k - 2 * j) * e0m, mum)
        for j in range(k + 1)
    )


CASES = [(10, 0.01, 0.2, 1e-6), (17, 0.1, 1.0, 1e-7), (40, 0.05, 0.5, 1e-9), (1, 1.0, 2.0, 1e-3)]


def _event(k: int, e0: float, mu: float) -> ComposedEvent:
    return ComposedEvent((SelfComposedEvent(PureDPEvent(e0), k), GaussianEvent(1.0 / mu)))


@pytest.mark.parametrize(("k", "e0", "mu", "delta"), CASES)
def test_epsilon_lower_is_certified_and_tight(k: int, e0: float, mu: float, delta: float) -> None:
    low = pure_plus_one_epsilon_lower(_event(k, e0, mu), Adjacency(), delta, 50.0)
    assert _composed(low, k, e0, mu) > delta
    assert _composed(low * (1 + 1e-8) + 1e-12, k, e0, mu) < delta


@pytest.mark.parametrize(("k", "e0", "mu", "delta"), CASES)
def test_delta_lower_is_certified_and_tight(k: int, e0: float, mu: float, delta: float) -> None:
    for eps in (0.0, 0.1, 0.5, 2.0):
        low = pure_plus_one_delta_lower(_event(k, e0, mu), Adjacency(), eps)
        truth = _composed(eps, k, e0, mu)
        assert low <= truth
        assert low >= truth * (1 - 1e-8) - mp.mpf(1e-300)


@pytest.mark.parametrize(("v", "k"), [(0.01, 10), (1.0, 50), (3.0, 7), (1e-4, 1000)])
def test_binomial_masses_are_rounded_down(v: float, k: int) -> None:
    losses, masses = exact_lower._binomial(v, k)
    up = mp.e ** mp.mpf(v) / (1 + mp.e ** mp.mpf(v))
    for j in (0, k // 3, k // 2, k):
        exact = mp.binomial(k, j) * up ** (k - j) * (1 - up) ** j
        assert masses[j] <= exact and masses[j] >= exact * (1 - 1e-9)
        assert losses[j] == (k - 2 * j) * v
    assert float(np.sum(masses)) <= 1.0


def test_raise_lower_refuses_an_upper_bound_below_the_truth() -> None:
    k, e0, mu, delta = 17, 0.1, 1.0, 1e-7
    low = pure_plus_one_epsilon_lower(_event(k, e0, mu), Adjacency(), delta, 50.0)
    ok = raise_lower(EpsilonBound(low * 1.01, 0.0, delta, "pld"), _event(k, e0, mu), Adjacency())
    assert isinstance(ok, EpsilonBound) and ok.epsilon_lower == low
    with pytest.raises(BackendInconsistencyError):
        raise_lower(EpsilonBound(low * 0.99, 0.0, delta, "pld"), _event(k, e0, mu), Adjacency())
