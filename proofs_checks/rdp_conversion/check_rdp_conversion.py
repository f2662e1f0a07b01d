"""Numeric checks of the RDP to (epsilon, delta) conversion."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from scipy import optimize
from scipy.stats import norm

from dpledger.accountant import select
from dpledger.accountant.conversions import rdp_to_epsilon
from dpledger.core.events import GaussianEvent


def improved(r: float, a: float, delta: float) -> float:
    return r + math.log1p(-1 / a) - (math.log(delta) + math.log(a)) / (a - 1)


def mironov(r: float, a: float, delta: float) -> float:
    return r + math.log(1 / delta) / (a - 1)


def gaussian_exact(mu: float, delta: float) -> float:
    f = lambda e: norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2) - delta  # noqa: E731
    return float(optimize.brentq(f, 0.0, 50.0, xtol=1e-14))


def test_constant_rdp_golden_value() -> None:
    orders = np.arange(2.0, 33.0)
    rdp = np.full_like(orders, 1.1)
    assert min(improved(1.1, a, 1e-5) for a in orders) == pytest.approx(1.32783806176, abs=1e-10)
    eps, order = rdp_to_epsilon(orders, rdp, 1e-5)
    assert order == 32.0
    assert 1.32783806176 - 1e-11 <= eps <= 1.32783806176 + 1e-9


def test_gaussian_ordering_exact_improved_mironov() -> None:
    mu, delta = 1.0, 1e-5

    def best(conv: Callable[[float, float, float], float]) -> float:
        res = optimize.minimize_scalar(
            lambda a: conv(a * mu * mu / 2, a, delta), bounds=(1.01, 200), method="bounded"
        )
        return float(res.fun)

    exact, better, classic = gaussian_exact(mu, delta), best(improved), best(mironov)
    assert (exact, better, classic) == pytest.approx((4.3772, 4.7284, 5.2985), abs=1e-4)
    assert exact < better < classic
    rdp_bound = select.account(GaussianEvent(1.0), delta=delta, backends=["rdp"]).bound.epsilon
    assert better - 1e-9 <= rdp_bound <= better + 0.05  # a finite order grid is a little looser


def test_conversion_is_never_below_the_formula_on_a_grid() -> None:
    orders = np.array([1.5, 2.0, 4.0, 8.0, 16.0, 64.0, 256.0])
    for scale in (0.01, 0.3, 2.0):
        rdp = scale * orders
        for delta in (1e-3, 1e-8):
            eps, _ = rdp_to_epsilon(orders, rdp, delta)
            assert (
                eps
                >= min(max(0.0, improved(r, a, delta)) for r, a in zip(rdp, orders, strict=True))
                - 1e-12
            )
