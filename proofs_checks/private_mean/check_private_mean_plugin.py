"""The trajectories plugin's warm-start calibration against Prop. 4.1 and the accountant."""

from __future__ import annotations

import math

import pytest
from scipy.stats import norm

from dpledger.accountant import select
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import GaussianEvent
from dpledger.plugins.trajectories.declare import analytic_gaussian_multiplier


def gauss_delta(eps: float, mu: float) -> float:
    return float(norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2))


@pytest.mark.parametrize(
    ("eps", "delta"), [(1 / 3, 0.01 / 3), (0.5, 1e-5), (1.0, 5e-4), (4.0, 1e-6)]
)
def test_plugin_multiplier_is_exact_and_certified(eps: float, delta: float) -> None:
    s = analytic_gaussian_multiplier(eps, delta)  # std / sensitivity
    assert gauss_delta(eps, 1 / s) <= delta  # (eps, delta)-DP at sensitivity 1
    assert gauss_delta(eps, 1 / (s * (1 - 1e-6))) > delta  # and optimal
    # in dpledger's units the mean's replace-one sensitivity 2R/N is 2C with C = R/N:
    bound = select.account(GaussianEvent(2 * s), Adjacency(relation="replace_one"), delta=delta)
    assert bound.bound.epsilon <= eps * (1 + 1e-9)


@pytest.mark.parametrize(("eps", "delta"), [(0.1, 1e-5), (0.5, 1e-3), (0.9, 0.5)])
def test_plugin_never_adds_more_noise_than_the_proposition_where_it_holds(
    eps: float, delta: float
) -> None:
    proposition = math.sqrt(2 * math.log(1 / delta)) / eps
    assert analytic_gaussian_multiplier(eps, delta) <= proposition


def test_plugin_adds_more_noise_than_the_proposition_where_it_fails() -> None:
    """eps = delta = 0.99: the proposition's sigma gives delta_exact = 0.9992 > 0.99."""
    proposition = math.sqrt(2 * math.log(1 / 0.99)) / 0.99
    assert gauss_delta(0.99, 1 / proposition) > 0.99
    assert analytic_gaussian_multiplier(0.99, 0.99) > proposition
