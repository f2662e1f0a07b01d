"""The likelihood-ratio lower bound with one output above the top edge resolved: its masses
against scipy's normal, its ratio brackets, and its curves below the certified upper tables."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpledger.accountant.allocation_one_top import (
    ONE_TOP_BIN,
    _top_edge,
    allocation_one_top_pair,
)
from dpledger.accountant.allocation_ratio import allocation_ratio_pair
from dpledger.accountant.profiles import lower_pair_profiles
from dpledger.accountant.random_allocation import allocation_profiles
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import GaussianEvent, RandomAllocationEvent

CASES = [(1 / 0.7, 10_000), (2.0, 1000), (1.0, 300)]


@pytest.mark.parametrize(("mu", "t"), CASES)
def test_one_top_mass_is_below_and_near_the_closed_form(mu: float, t: int) -> None:
    """The one-top outcomes' Q-masses sum to at most t q (1 - q)^(t-1), q = P(Z > z_K)
    (scipy), and within 1e-6 of it (windows and floors drop almost nothing)."""
    pair = allocation_one_top_pair(mu, t)
    base = allocation_ratio_pair(mu, t)
    one_top = float(pair.q_upper[base.p_lower.size - 1 :].sum())
    q = float(stats.norm.sf(_top_edge(mu, t)[2]))
    exact = t * q * (1 - q) ** (t - 1)
    assert one_top <= exact * (1 + 1e-9)
    assert one_top >= exact * (1 - 1e-6)


@pytest.mark.parametrize(("mu", "t"), CASES)
def test_ratio_brackets_are_ordered_and_narrow(mu: float, t: int) -> None:
    pair = allocation_one_top_pair(mu, t)
    start = allocation_ratio_pair(mu, t).p_lower.size - 1
    q = pair.q_lower[start:]
    lo, hi = pair.p_lower[start:] / q, pair.p_upper[start:] / q
    assert np.all(lo <= hi)
    # three bins and the members' spread (rho and the top cells' mean brackets: tiny)
    assert float(np.max(hi / lo)) <= math.exp(3 * ONE_TOP_BIN) * (1 + 1e-6)


@pytest.mark.parametrize(("mu", "t"), CASES)
def test_lower_curves_stay_below_the_certified_tables(mu: float, t: int) -> None:
    forward, backward = lower_pair_profiles(allocation_one_top_pair(mu, t), "one top")
    upper = allocation_profiles(RandomAllocationEvent(t, GaussianEvent(1 / mu)), Adjacency())
    eps = np.linspace(0.0, 1.5, 61)
    assert np.all(forward(eps) <= upper.remove(eps) * (1 + 1e-9))
    assert np.all(backward(eps) <= upper.add(eps) * (1 + 1e-9))


def test_one_large_output_raises_the_curve_where_it_matters() -> None:
    """10,000 steps of noise 0.7: at eps = 0.1 the lumped top outcome left the curve below 1e-6;
    resolved, it is above 7e-6, where the certified upper table reads 1.08e-5."""
    mu, t = 1 / 0.7, 10_000
    at = np.array([0.1])
    lumped, _ = lower_pair_profiles(allocation_ratio_pair(mu, t), "ratio")
    resolved, _ = lower_pair_profiles(allocation_one_top_pair(mu, t), "one top")
    assert float(lumped(at)[0]) < 1e-6
    assert 7e-6 < float(resolved(at)[0]) < 1.08e-5
