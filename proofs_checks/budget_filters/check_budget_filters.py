"""Numeric checks of the budget filters' halting rules against the theorems' conditions,
computed independently (scipy's normal CDF, closed-form RDP of the Gaussian mechanism)."""

from __future__ import annotations

import math

import pytest
from scipy import optimize
from scipy.stats import norm

from dpledger.budget import rules
from dpledger.core.events import GaussianEvent


def _delta_mu(eps: float, mu: float) -> float:
    return float(norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2))


@pytest.mark.parametrize(("eps", "delta"), [(0.5, 1e-5), (1.0, 1e-6), (4.0, 1e-9)])
def test_gdp_mu_is_the_largest_mu_within_the_total(eps: float, delta: float) -> None:
    exact = optimize.brentq(lambda m: _delta_mu(eps, m) - delta, 1e-6, 50.0, xtol=1e-14)
    mu = rules.gdp_mu(eps, delta)
    assert exact * (1 - 1e-9) <= mu <= exact


@pytest.mark.parametrize("sigma", [3.0, 10.0, 40.0])
def test_renyi_filter_halts_where_no_order_has_room(sigma: float) -> None:
    orders = [2.0, 4.0, 8.0, 16.0, 32.0]
    params, total = {"orders": orders}, (1.0, 1e-6)
    state, n = rules.initial_state("renyi", params), 0
    cost = rules.charge("renyi", params, GaussianEvent(sigma), "add_remove")
    while (decision := rules.decide("renyi", total, params, state, cost)).fits:
        state, n = decision.state, n + 1
    budgets = [1.0 - math.log(len(orders) / 1e-6) / (a - 1) for a in orders]
    rho = [a / (2 * sigma**2) for a in orders]
    assert any(n * r <= b for r, b in zip(rho, budgets, strict=True))
    assert all((n + 1) * r > b * (1 - 1e-9) for r, b in zip(rho, budgets, strict=True))


def test_approx_level_is_the_advanced_composition_rate() -> None:
    for s2 in (1e-6, 0.01, 0.3):
        exact = math.sqrt(2 * math.log(1e6) * s2) + s2 / 2
        assert exact <= rules.approx_level(s2, 1e-6) <= exact * (1 + 1e-11)
