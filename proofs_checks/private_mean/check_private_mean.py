"""Numeric checks of the private-mean warm start (Proposition 4.1)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import log_ndtr, ndtr

from dpledger.accountant import select
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import GaussianEvent


def gauss_delta(eps: np.ndarray, mu: np.ndarray) -> np.ndarray:
    out: np.ndarray = ndtr(-eps / mu + mu / 2) - np.exp(eps + log_ndtr(-eps / mu - mu / 2))
    return out


def mu_of(eps: np.ndarray, delta: np.ndarray) -> np.ndarray:
    out: np.ndarray = eps / np.sqrt(2 * np.log(1 / delta))
    return out


def test_sensitivity_of_the_mean_is_2r_over_n() -> None:
    rng = np.random.default_rng(0)
    n, r, d = 50, 3.0, 4
    pts = rng.normal(size=(2000, n, d))
    pts *= r * rng.random((2000, n, 1)) ** (1 / d) / np.linalg.norm(pts, axis=2, keepdims=True)
    repl = rng.normal(size=(2000, d))
    repl *= r / np.linalg.norm(repl, axis=1, keepdims=True)
    moved = pts.copy()
    moved[:, 0] = repl
    shift = np.linalg.norm(moved.mean(axis=1) - pts.mean(axis=1), axis=1)
    assert shift.max() <= 2 * r / n + 1e-12
    antipodal = np.zeros((n, d))
    antipodal[0, 0] = r
    other = antipodal.copy()
    other[0, 0] = -r
    assert np.linalg.norm(antipodal.mean(0) - other.mean(0)) == pytest.approx(2 * r / n)


def test_proposition_holds_for_delta_up_to_098() -> None:
    eps, delta = np.meshgrid(np.linspace(1e-3, 0.999, 400), np.geomspace(1e-15, 0.98, 400))
    ratio = gauss_delta(eps, mu_of(eps, delta)) / delta
    assert ratio.max() <= 1.0
    practical = delta <= 0.9
    assert ratio[practical].max() <= 0.64


def test_proposition_fails_near_delta_one() -> None:
    eps, delta = 0.99, 0.99
    mu = float(mu_of(np.array(eps), np.array(delta)))
    assert mu == pytest.approx(6.98, abs=0.01)
    assert float(gauss_delta(np.array(eps), np.array(mu))) == pytest.approx(0.9992, abs=1e-4)


@pytest.mark.parametrize(("eps", "delta"), [(1.0 / 3, 0.01 / 3), (0.5, 1e-5), (0.9, 1e-8)])
def test_accountant_certifies_the_calibrated_release(eps: float, delta: float) -> None:
    s = 2 * math.sqrt(2 * math.log(1 / delta)) / eps  # sigma / (R/N)
    bound = select.account(GaussianEvent(s), Adjacency(relation="replace_one"), delta=delta).bound
    assert bound.epsilon <= eps
