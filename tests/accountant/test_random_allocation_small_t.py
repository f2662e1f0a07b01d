"""Random allocation at few steps and small sigma (the heavy lognormal tail): the geometric grid's
tables against exact t = 2 values and Monte Carlo, and the accountant against Feldman and
Shenfeld's ``pld-accounting``."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, special

from dpledger.accountant.allocation_geometric import geometric_tables
from dpledger.accountant.profiles import lower_pair_profiles
from dpledger.accountant.random_allocation import allocation_lower_pair, allocation_tables
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import GaussianEvent, RandomAllocationEvent


def _exact_two_steps(mu: float, c: float) -> tuple[float, float]:
    """(remove, add) hockey-stick values at e^eps = c for t = 2: the inner expectation over
    L_2 in closed form, the outer one over Z_1 by quadrature."""

    def remove_inner(x: float) -> float:  # E[(L - x)_+]
        if x <= 0:
            return 1.0 - x
        z = (math.log(x) + mu * mu / 2) / mu
        return float(special.ndtr(mu - z) - x * special.ndtr(-z))

    def add_inner(l1: float) -> float:  # E[(1 - c (l1 + L) / 2)_+]
        y = 2 / c - l1
        if y <= 0:
            return 0.0
        z = (math.log(y) + mu * mu / 2) / mu
        return float(special.ndtr(z) - c / 2 * (l1 * special.ndtr(z) + special.ndtr(z - mu)))

    def density(z1: float) -> float:
        return math.exp(-z1 * z1 / 2) / math.sqrt(2 * math.pi)

    def lognormal(z1: float) -> float:
        return math.exp(mu * z1 - mu * mu / 2)

    kink = (math.log(2 * c) + mu * mu / 2) / mu
    remove = integrate.quad(
        lambda z1: density(z1) * remove_inner(2 * c - lognormal(z1)) / 2,
        -14,
        14,
        points=[kink],
        limit=800,
        epsabs=0,
        epsrel=1e-11,
    )[0]
    top = (math.log(2 / c) + mu * mu / 2) / mu
    add = integrate.quad(
        lambda z1: density(z1) * add_inner(lognormal(z1)), -14, top, limit=800, epsrel=1e-11
    )[0]
    return remove, add


@pytest.mark.parametrize("mu", [0.8, 1 / 0.6, 2.5])
def test_geometric_grid_above_and_close_to_the_exact_two_step_curves(mu: float) -> None:
    eps = np.linspace(0.0, mu * (mu / 2 + 7.0), 16)
    tables = geometric_tables(1 / mu, 2, eps)
    for i, e in enumerate(eps):
        remove, add = _exact_two_steps(mu, math.exp(float(e)))
        assert remove <= tables.remove[i] <= remove * 1.01 + 1e-300
        assert add <= tables.add[i] <= add * 1.03 + 1e-300


@pytest.mark.parametrize("t", [3, 8])
def test_geometric_grid_against_monte_carlo(t: int) -> None:
    sigma = 0.7
    rng = np.random.default_rng(2024)
    ratio = np.exp(rng.standard_normal((400_000, t)) / sigma - 0.5 / sigma**2).mean(axis=1)
    eps = np.array([0.0, 0.5, 1.0, 2.0])
    tables = geometric_tables(sigma, t, eps)
    for i, e in enumerate(eps):
        c = math.exp(float(e))
        for sample, bound in (
            (np.maximum(ratio - c, 0.0), tables.remove[i]),
            (np.maximum(1.0 - c * ratio, 0.0), tables.add[i]),
        ):
            mean, se = float(sample.mean()), float(sample.std()) / math.sqrt(sample.size)
            assert bound >= mean - 6 * se
            assert bound <= mean * 1.05 + 6 * se + 1e-9


def test_tables_are_the_smaller_of_the_two_grids() -> None:
    """Where the uniform grid is coarsened (t = 10, sigma = 0.6) it has a floor near 1e-5 in
    the add direction; the accountant's raw table is at most the geometric grid's everywhere."""
    tables = allocation_tables(0.6, 10)
    geo = geometric_tables(0.6, 10, tables.epsilons)
    assert np.all(tables.remove_raw <= geo.remove) and np.all(tables.add_raw <= geo.add)
    top = tables.epsilons > 6.0
    assert np.all(tables.add_raw[top] < 1e-12) and np.all(tables.remove_raw[top] < 1e-5)


def _against_pld_accounting(t: int, sigma: float, delta: float) -> None:
    lib = pytest.importorskip("PLD_accounting")
    upper, lower = lib.gaussian_allocation_epsilon_range(
        delta=delta, sigma=sigma, num_steps=t, num_epochs=1
    )
    bound = account(RandomAllocationEvent(t, GaussianEvent(sigma)), Adjacency(), delta=delta).bound
    assert bound.epsilon >= lower * (1 - 1e-3)  # sound
    assert bound.epsilon <= upper * 1.01  # tight
    assert bound.epsilon_lower <= upper


def test_ten_steps_sigma_0_6_against_pld_accounting() -> None:
    _against_pld_accounting(10, 0.6, 1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("t", [2, 5, 10, 20])
@pytest.mark.parametrize("sigma", [0.6, 1.0])
@pytest.mark.parametrize("delta", [1e-5, 1e-10])
def test_small_t_against_pld_accounting(t: int, sigma: float, delta: float) -> None:
    _against_pld_accounting(t, sigma, delta)


@settings(max_examples=5, deadline=None)
@given(sigma=st.floats(0.4, 3.0), t=st.integers(2, 30))
def test_geometric_grid_above_the_certified_lower_curves(sigma: float, t: int) -> None:
    """Both directions lie between the max-of-steps lower curves (a certified lower bound of the
    same pair) and 1, and agree at eps = 0 (both are the total variation distance) within the
    grid's error."""
    eps = np.linspace(0.0, 3.0 / sigma, 40)
    tables = geometric_tables(sigma, t, eps)
    forward, backward = lower_pair_profiles(allocation_lower_pair(sigma, t), "max")
    assert np.all(tables.remove >= forward(eps)) and np.all(tables.add >= backward(eps))
    assert np.all(tables.remove <= 1.0) and np.all(tables.add <= 1.0)
    assert tables.remove[0] == pytest.approx(tables.add[0], rel=1e-6)
