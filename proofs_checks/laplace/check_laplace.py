"""Numeric checks of the Laplace profile and of the accountant against it."""

from __future__ import annotations

import math

import mpmath as mp
import pytest

from dpledger.accountant import select
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import LaplaceEvent

mp.mp.dps = 30


def delta_by_integration(eps: float, eps0: float) -> mp.mpf:

    def p(x: mp.mpf) -> mp.mpf:  # b = 1, Delta = eps0
        return mp.exp(-abs(x - eps0)) / 2

    def q(x: mp.mpf) -> mp.mpf:
        return mp.exp(-abs(x)) / 2

    def f(x: mp.mpf) -> mp.mpf:
        return max(mp.mpf(0), p(x) - mp.e**eps * q(x))

    return mp.quad(f, [-mp.inf, *sorted({0.0, (eps + eps0) / 2, eps0}), mp.inf])


def delta_closed_form(eps: float, eps0: float) -> float:
    if eps >= eps0:
        return 0.0
    if eps >= -eps0:
        return -math.expm1((eps - eps0) / 2)
    return -math.expm1(eps)


@pytest.mark.parametrize(
    ("eps", "expected"), [(0.5, 0.2211992169), (0.0, 0.39346934), (-2.0, 0.86466472), (1.0, 0.0)]
)
def test_golden_values_by_integration(eps: float, expected: float) -> None:
    assert float(delta_by_integration(eps, 1.0)) == pytest.approx(expected, abs=1e-8)
    assert delta_closed_form(eps, 1.0) == pytest.approx(expected, abs=1e-8)


@pytest.mark.parametrize("b", [0.5, 1.0, 4.0])
@pytest.mark.parametrize("delta", [1e-2, 1e-5])
def test_accountant_epsilon_brackets_the_exact_value(b: float, delta: float) -> None:
    eps0 = 1.0 / b
    exact = max(0.0, eps0 + 2 * math.log1p(-delta))
    bound = select.account(LaplaceEvent(b), delta=delta).bound
    assert exact - 1e-12 <= bound.epsilon <= eps0 + 1e-12
    assert bound.epsilon == pytest.approx(exact, abs=1e-6)


def test_pure_dp_at_eps0_and_replace_one_doubles() -> None:
    assert select.account(LaplaceEvent(1.0), epsilon=1.0).bound.delta <= 1e-12
    replace = select.account(LaplaceEvent(1.0), Adjacency(relation="replace_one"), delta=1e-9)
    assert replace.bound.epsilon == pytest.approx(2.0 + 2 * math.log1p(-1e-9), abs=1e-6)
