"""rdp_to_delta against its formula, and its consistency with rdp_to_epsilon."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from dpledger.accountant.conversions import rdp_to_delta, rdp_to_epsilon

ORDERS = np.array([1.25, 1.5, 2.0, 3.0, 4.0, 8.0, 16.0, 32.0, 64.0, 256.0])


def delta_formula(r: float, a: float, eps: float) -> float:
    """delta = exp((a-1)(r - eps + ln(1 - 1/a)) - ln a), the inverse of the epsilon formula."""
    log_d = (a - 1) * (r - eps + math.log1p(-1 / a)) - math.log(a)
    return math.exp(min(log_d, 0.0))


def gaussian_exact_delta(eps: float, mu: float) -> float:
    return float(norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2))


@pytest.mark.parametrize("eps", [0.5, 2.0, 5.0])
@pytest.mark.parametrize("scale", [0.05, 0.5, 2.0])
def test_delta_is_never_below_the_formula_or_the_truth(eps: float, scale: float) -> None:
    rdp = scale * ORDERS  # a Gaussian with mu^2 = 2 * scale
    d, order = rdp_to_delta(ORDERS, rdp, eps)
    formula = min(
        [delta_formula(r, a, eps) for r, a in zip(rdp, ORDERS, strict=True)]
        + [math.sqrt(-math.expm1(-float(rdp.min())))]
    )
    assert order is not None
    assert min(formula, 1.0) <= d <= min(formula, 1.0) * (1 + 1e-9) + 1e-300
    assert d >= gaussian_exact_delta(eps, math.sqrt(2 * scale)) - 1e-15


@pytest.mark.parametrize("delta", [1e-2, 1e-5, 1e-10])
@pytest.mark.parametrize("scale", [0.01, 0.3, 3.0])
def test_round_trip_with_rdp_to_epsilon(delta: float, scale: float) -> None:
    """delta(eps(delta)) <= delta (up to rounding): the two queries never contradict."""
    rdp = scale * ORDERS
    eps, _ = rdp_to_epsilon(ORDERS, rdp, delta)
    back, _ = rdp_to_delta(ORDERS, rdp, eps)
    assert back <= delta * (1 + 1e-9)


def test_non_finite_orders_are_skipped_and_no_finite_order_gives_one() -> None:
    rdp = np.array([np.inf, np.nan, 0.2])
    orders = np.array([2.0, 3.0, 4.0])
    d, order = rdp_to_delta(orders, rdp, 1.0)
    assert order == 4.0 and d == pytest.approx(delta_formula(0.2, 4.0, 1.0), rel=1e-9)
    assert rdp_to_delta(orders, np.full(3, np.inf), 1.0) == (1.0, None)


def test_total_variation_branch() -> None:
    """Tiny RDP: delta >= sqrt(1 - e^-r) (Bretagnolle-Huber) even at eps = 0."""
    rdp = np.full_like(ORDERS, 1e-6)
    d, _ = rdp_to_delta(ORDERS, rdp, 0.0)
    assert d == pytest.approx(math.sqrt(-math.expm1(-1e-6)), rel=1e-6)
    assert d >= math.sqrt(-math.expm1(-1e-6))
