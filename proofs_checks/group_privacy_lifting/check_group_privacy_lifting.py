"""Numeric checks of sensitivity factors, user-level lifting and group privacy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from dpledger.accountant import select
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import GaussianEvent
from dpledger.core.lifting import lift_event


def gauss_delta(eps: float, mu: float) -> float:
    return float(norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2))


@pytest.mark.parametrize(
    ("mu", "k", "eps", "exact", "group"),
    [(0.5, 2, 0.5, 0.1269, 0.1729), (0.5, 4, 1.0, 0.0850, 0.549)],
)
def test_exact_user_level_gaussian_is_below_group_privacy(
    mu: float, k: int, eps: float, exact: float, group: float
) -> None:
    user = gauss_delta(k * eps, k * mu)
    fallback = k * math.exp((k - 1) * eps) * gauss_delta(eps, mu)
    assert user == pytest.approx(exact, abs=5e-5)
    assert fallback == pytest.approx(group, abs=5e-4)
    assert user <= fallback


def test_sensitivity_factors() -> None:
    assert Adjacency().sensitivity_factor == 1.0
    assert Adjacency(relation="replace_one").sensitivity_factor == 2.0
    rng = np.random.default_rng(0)
    rows = rng.normal(size=(10_000, 4, 3))
    rows /= np.maximum(np.linalg.norm(rows, axis=2, keepdims=True), 1.0)  # clip each row to C = 1
    assert np.linalg.norm(rows.sum(axis=1), axis=1).max() <= 4.0 + 1e-12
    aligned = np.tile(np.array([1.0, 0.0, 0.0]), (4, 1))
    assert np.linalg.norm(aligned.sum(axis=0)) == pytest.approx(4.0)  # attained


def test_lifted_gaussian_is_k_times_mu_and_accounted_exactly() -> None:
    lifted, rules = lift_event(GaussianEvent(2.0), 2)
    assert lifted == GaussianEvent(1.0) and rules == ("gaussian_l2_sensitivity_xk",)
    eps = select.account(lifted, delta=gauss_delta(1.0, 1.0)).bound.epsilon
    assert eps == pytest.approx(1.0, abs=1e-6) and eps >= 1.0 - 1e-9


def test_user_level_preconditions_are_validated() -> None:
    with pytest.raises(InvalidParameterError, match="unit_key"):
        Adjacency(unit="user", max_contributions=3)
    with pytest.raises(InvalidParameterError, match="max_contributions"):
        Adjacency(unit="row", max_contributions=2)
