"""The lattice-sum lower bound of k-of-t random allocation: below independent upper bounds (one
Gaussian per selected step, the certified tables for k = 1, the exact curve of tiny pairs) and
above the max-of-steps lower bound it joins."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.accountant.allocation_ratio import allocation_sum_pair
from dpledger.accountant.profiles import gaussian_profile, lower_pair_profiles
from dpledger.accountant.random_allocation import allocation_lower_pair, allocation_tables
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import GaussianEvent, RandomAllocationEvent, SelfComposedEvent

EPS = np.array([0.0, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0])


def _exact_sample(mu: float, t: int, k: int, n: int, seed: int) -> np.ndarray:
    """dP/dQ under Q: the mean over the k-subsets S of prod_{i in S} L_i."""
    rng = np.random.default_rng(seed)
    lr = np.exp(mu * rng.standard_normal((n, t)) - mu * mu / 2)
    subsets = list(itertools.combinations(range(t), k))
    return sum(np.prod(lr[:, list(s)], axis=1) for s in subsets) / len(subsets)


@pytest.mark.parametrize(
    ("mu", "t", "k", "power"),
    [(1 / 1.1, 3, 2, 1.0), (1 / 1.1, 4, 2, 1.0), (1.5, 4, 3, 1.0), (1 / 1.5, 10, 3, 0.7)],
)
def test_below_a_monte_carlo_estimate_of_the_exact_curve(
    mu: float, t: int, k: int, power: float
) -> None:
    """The exact pair's hockey-stick curves, E_Q[(r - e^eps)_+] and E_Q[(1 - e^eps r)_+] with r
    the mixture's likelihood ratio over the C(t, k) shifted Gaussians, by Monte Carlo; the lower
    curves lie below them (six standard errors) and within 15% of them."""
    n = 300_000
    ratio = _exact_sample(mu, t, k, n, seed=7)
    forward, backward = lower_pair_profiles(allocation_sum_pair(mu, t, k, power), "sum")
    for eps in (0.0, 0.3, 1.0):
        c = math.exp(eps)
        for sample, lower in (
            (np.maximum(ratio - c, 0.0), forward(np.array([eps]))[0]),
            (np.maximum(1 - c * ratio, 0.0), backward(np.array([eps]))[0]),
        ):
            mean, se = float(sample.mean()), float(sample.std()) / math.sqrt(n)
            assert lower <= mean + 6 * se
            assert lower >= 0.85 * mean - 6 * se


def test_the_example_is_far_above_the_max_of_steps_and_below_k_releases() -> None:
    """sigma = 1.1, 2 of 470 steps: the lattice sum against the max of the step outputs (the
    lower bound it joins) and one Gaussian per selected step (an upper bound)."""
    sigma, t, k = 1.1, 470, 2
    mu = math.nextafter(1 / sigma, 0.0)
    forward, backward = lower_pair_profiles(allocation_sum_pair(mu, t, k), "sum")
    max_f, max_b = lower_pair_profiles(allocation_lower_pair(sigma, t, k), "max")
    gauss = gaussian_profile(math.sqrt(k) / sigma)(EPS)
    assert np.all(forward(EPS) <= gauss) and np.all(backward(EPS) <= gauss)
    assert np.all(forward(EPS[:5]) >= 2 * max_f(EPS[:5]))
    assert np.all(backward(EPS[:5]) >= 2 * max_b(EPS[:5]))


def test_the_example_bracket_is_narrow() -> None:
    """30 epochs of 2 of 470 steps at sigma = 1.1: the lower bound is within 1% of the
    certified upper one (k epochs of 1-of-t/k allocation); the max of the step outputs alone
    certified 0.9638."""
    event = SelfComposedEvent(RandomAllocationEvent(470, GaussianEvent(1.1), 2), 30)
    bound = account(event, Adjacency(), delta=1e-5).bound
    assert 0.99 * bound.epsilon <= bound.epsilon_lower <= bound.epsilon
    assert bound.epsilon_lower > 2 * 0.9638


def test_a_power_below_one_helps_when_k_over_t_is_not_small() -> None:
    """3 of 10 steps at sigma = 1.5: the likelihood ratios to the power 0.7 give a larger curve
    in the tail than to the power 1, and the accountant keeps it (2.653 with the power 1)."""
    mu = 1 / 1.5
    one, _ = lower_pair_profiles(allocation_sum_pair(mu, 10, 3), "sum")
    lower, _ = lower_pair_profiles(allocation_sum_pair(mu, 10, 3, 0.7), "sum")
    assert lower(np.array([1.5]))[0] > 1.1 * one(np.array([1.5]))[0]
    bound = account(RandomAllocationEvent(10, GaussianEvent(1.5), 3), Adjacency(), delta=1e-5)
    assert 2.7 < bound.bound.epsilon_lower <= bound.bound.epsilon


def test_bounds_bracket_each_mass() -> None:
    pair = allocation_sum_pair(0.8, 30, 3)
    assert np.all(pair.p_lower <= pair.p_upper) and np.all(pair.q_lower <= pair.q_upper)
    assert np.all(pair.p_lower >= 0) and np.all(pair.q_lower >= 0)
    assert 1 - 1e-8 <= pair.q_lower.sum() <= 1 <= pair.q_upper.sum() <= 1 + 1e-6
    assert 1 - 1e-8 <= pair.p_lower.sum() <= 1 <= pair.p_upper.sum() <= 1 + 1e-6


def test_k_outside_one_to_t_minus_one_is_refused() -> None:
    for k in (0, 5):
        with pytest.raises(ValueError, match="1 <= k < t"):
            allocation_sum_pair(1.0, 5, k)


@settings(max_examples=8, deadline=None)
@given(sigma=st.floats(0.6, 3.0), t=st.integers(2, 7), data=st.data())
def test_lower_is_below_upper(sigma: float, t: int, data: st.DataObject) -> None:
    """Small t, k, sigma: the lattice-sum curves lie below one Gaussian per selected step, for
    k = 1 below the certified tables, and the accountant's bracket is ordered."""
    k = data.draw(st.integers(1, t - 1))
    mu = math.nextafter(1 / sigma, 0.0)
    forward, backward = lower_pair_profiles(allocation_sum_pair(mu, t, k), "sum")
    gauss = gaussian_profile(math.sqrt(k) / sigma)(EPS)
    assert np.all(forward(EPS) <= gauss) and np.all(backward(EPS) <= gauss)
    if k == 1:
        tables = allocation_tables(sigma, t)
        assert np.all(forward(tables.epsilons) <= tables.remove_raw)
        assert np.all(backward(tables.epsilons) <= tables.add_raw)
    else:
        bound = account(RandomAllocationEvent(t, GaussianEvent(sigma), k), Adjacency(), delta=1e-5)
        assert 0 < bound.bound.epsilon_lower <= bound.bound.epsilon
