"""Numeric checks of the Gaussian profile and of the accountant against it."""

from __future__ import annotations

import mpmath as mp
import pytest

from dpledger.accountant import select
from dpledger.accountant.base import EpsilonBound
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import GaussianEvent

mp.mp.dps = 40


def delta_exact(eps: float, mu: float) -> mp.mpf:
    eps, mu = mp.mpf(eps), mp.mpf(mu)
    return mp.ncdf(-eps / mu + mu / 2) - mp.e**eps * mp.ncdf(-eps / mu - mu / 2)


def delta_by_integration(eps: float, mu: float) -> mp.mpf:
    """sup_S P(S) - e^eps Q(S) = integral of (p - e^eps q)_+, computed without the formula."""

    def p(x: mp.mpf) -> mp.mpf:
        return mp.npdf(x, mu, 1)

    def q(x: mp.mpf) -> mp.mpf:
        return mp.npdf(x, 0, 1)

    def f(x: mp.mpf) -> mp.mpf:
        return max(mp.mpf(0), p(x) - mp.e**eps * q(x))

    cut = mp.mpf(eps) / mu + mp.mpf(mu) / 2  # the integrand's kink, for accurate quadrature
    return mp.quad(f, [-mp.inf, cut - 5, cut, cut + 5, mp.inf])


def epsilon_exact(mu: float, delta: float) -> float:
    lo, hi = mp.mpf(0), mp.mpf(1)
    while delta_exact(float(hi), mu) > delta:
        hi *= 2
    for _ in range(120):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if delta_exact(float(mid), mu) > delta else (lo, mid)
    return float(hi)


def test_golden_value() -> None:
    assert float(delta_exact(1.0, 1.0)) == pytest.approx(0.1269367375, abs=1e-10)


@pytest.mark.parametrize(("eps", "mu"), [(0.3, 0.5), (1.0, 1.0), (3.0, 2.0), (-1.0, 3.0)])
def test_closed_form_equals_integration(eps: float, mu: float) -> None:
    assert delta_exact(eps, mu) == pytest.approx(delta_by_integration(eps, mu), rel=1e-20)


@pytest.mark.parametrize("sigma", [0.5, 1.0, 2.0, 5.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-6, 1e-9])
def test_accountant_epsilon_is_an_upper_bound_and_tight(sigma: float, delta: float) -> None:
    exact = epsilon_exact(1.0 / sigma, delta)
    bound = select.account(GaussianEvent(sigma), delta=delta).bound
    assert isinstance(bound, EpsilonBound)
    assert bound.epsilon >= exact - 1e-12
    assert bound.epsilon <= exact + 1e-6
    assert bound.epsilon_lower <= exact + 1e-12


def test_replace_one_is_the_add_remove_mechanism_at_half_the_noise() -> None:
    replace = select.account(GaussianEvent(2.0), Adjacency(relation="replace_one"), delta=1e-5)
    add_remove = select.account(GaussianEvent(1.0), delta=1e-5)
    assert replace.bound.epsilon == pytest.approx(add_remove.bound.epsilon, rel=1e-9)
    assert replace.bound.epsilon >= epsilon_exact(1.0, 1e-5) - 1e-12


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_precondition_noise_multiplier_is_validated(bad: float) -> None:
    with pytest.raises(InvalidParameterError, match="noise_multiplier"):
        GaussianEvent(bad)
