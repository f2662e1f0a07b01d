"""Numeric checks of the budget odometers against their definitions, computed independently
(mpmath's root finder and quadrature of the mixture integral, not the closed form)."""

from __future__ import annotations

import math

import mpmath
import pytest

from dpledger.budget import rules
from dpledger.budget.individual import IndividualRenyiFilter, gaussian_costs
from dpledger.budget.odometer import mixture_boundary, odometer, renyi_odometer


def _mixture(x: float, v: float, rho: float) -> mpmath.mpf:
    dens = 2 * mpmath.sqrt(rho / (2 * mpmath.pi))

    def f(lam: mpmath.mpf) -> mpmath.mpf:
        return mpmath.exp(lam * x - lam**2 * (v + rho) / 2) * dens

    return mpmath.quad(f, [0, 1 / mpmath.sqrt(v + rho), mpmath.inf])


@pytest.mark.parametrize(
    ("v", "rho", "delta"), [(0.01, 0.001, 1e-9), (0.3, 0.01, 1e-6), (25.0, 2.0, 1e-3)]
)
def test_mixture_boundary_is_the_root_of_the_mixture_integral(
    v: float, rho: float, delta: float
) -> None:
    x = mixture_boundary(v, rho, delta)
    with mpmath.workdps(25):
        root = mpmath.findroot(lambda z: mpmath.log(_mixture(z, v, rho)) - math.log(1 / delta), x)
    assert float(root) <= x <= float(root) * (1 + 1e-9) + 1e-12


@pytest.mark.parametrize("n", [1, 5, 40])
def test_renyi_odometer_is_the_root_of_the_mean_of_the_orders(n: int) -> None:
    orders = [1.5, 2.0, 4.0, 8.0, 16.0, 64.0]
    rdp = [n * a / (2 * 8.0**2) for a in orders]  # n Gaussian steps of sigma 8
    delta = 1e-6
    with mpmath.workdps(30):
        k = len(orders)
        u = renyi_odometer(orders, rdp, delta)

        def mean(level: float) -> mpmath.mpf:
            return (
                sum(mpmath.exp((a - 1) * (level - r)) for a, r in zip(orders, rdp, strict=True)) / k
            )

        assert mean(u) >= 1 / delta * (1 - 1e-12)
        assert mean(u * (1 - 1e-8)) < 1 / delta
        union = min(r + math.log(k / delta) / (a - 1) for a, r in zip(orders, rdp, strict=True))
        assert u <= union


def test_odometer_of_each_rule_is_its_formula() -> None:
    total = (1.0, 1e-6)
    gdp = {"mu": 0.2, "odometer_delta": 1e-6, "odometer_rho": 0.002}
    got = odometer("gdp", total, gdp, {"count": 3, "sum_mu2": 0.03})
    assert got["epsilon"] == pytest.approx(0.015 + mixture_boundary(0.03, 0.002, 1e-6), rel=1e-12)
    assert got["delta"] == 1e-6
    approx = {"delta_tail": 5e-7, "odometer_delta": 5e-7, "odometer_rho": 0.001}
    state = {"count": 3, "sum_eps2": 0.02, "sum_delta": 1.5e-11}
    got = odometer("approx", total, approx, state)
    assert got["epsilon"] == pytest.approx(0.01 + mixture_boundary(0.02, 0.001, 5e-7), rel=1e-12)
    assert got["delta"] >= 1e-6
    orders = list(rules.DEFAULT_ORDERS)
    rdp = [0.01 * a for a in orders]
    got = odometer("renyi", total, {"orders": orders}, {"count": 2, "rdp": rdp})
    assert got["epsilon"] == renyi_odometer(orders, rdp, 1e-6)


def test_individual_filter_admits_each_record_what_its_own_condition_allows() -> None:
    orders, eps, delta, s = [2.0, 8.0, 32.0], 1.0, 1e-6, 20.0
    norms = [1.0, 0.3]
    filt = IndividualRenyiFilter(2, eps, delta, orders)
    while filt.step(gaussian_costs(norms, s, orders)).any():
        pass
    for i, g in enumerate(norms):
        budgets = [eps - mpmath.log(len(orders) / mpmath.mpf(delta)) / (a - 1) for a in orders]
        expected = max(
            int(mpmath.floor(b / (a * g * g / (2 * s * s))))
            for a, b in zip(orders, budgets, strict=True)
        )
        assert filt.steps[i] == expected
        assert filt.spent(i) <= eps
