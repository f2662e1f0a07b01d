"""The representatives' second budget (a coarse step lowered to MAX_ROUNDED_STEP where at most
MAX_ROUNDED_COMPONENTS remain) and Laplace blocks on two fine grids (the upper side coarser):
both keep the bracket certified against the leaf-by-leaf one."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpledger.accountant.pld as pld_module
import dpledger.accountant.pld_blocks as blocks_module
import dpledger.accountant.pld_components as components
from dpledger.accountant.base import EpsilonBound
from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.pld_blocks import _Parts, _spacing, block_profiles
from dpledger.accountant.pld_components import representative_components
from dpledger.accountant.representatives import Table
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    ComposedEvent,
    Event,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    RandomizedResponseEvent,
)


def _sampled(n: int, seed: int) -> dict[Event, int]:
    """``n`` distinct DP-SGD steps spread in rate and noise (two rounded parameters)."""
    rng = np.random.default_rng(seed)
    return {
        PoissonSampledEvent(float(q), GaussianEvent(float(s))): 1
        for q, s in zip(rng.uniform(1e-3, 3e-3, n), rng.uniform(0.9, 1.1, n), strict=True)
    }


def test_a_coarse_step_is_lowered_where_the_second_budget_allows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    merged = _sampled(400, seed=1)
    monkeypatch.setattr(components, "MAX_COMPONENTS", 40)
    monkeypatch.setattr(components, "MAX_ROUNDED_COMPONENTS", 0)
    _, _, coarse = representative_components(merged, 40)
    assert coarse > components.MAX_ROUNDED_STEP
    finer = Table.step_at_most(components.MAX_ROUNDED_STEP)
    monkeypatch.setattr(components, "MAX_ROUNDED_COMPONENTS", 10_000)
    upper, lower, step = representative_components(merged, 40)
    assert step <= finer < coarse
    assert len(upper) == len(lower) <= Table(merged).count(finer)
    assert sum(upper.values()) == sum(lower.values()) == sum(merged.values())
    # out of reach of the budget: the coarse step is kept
    monkeypatch.setattr(components, "MAX_ROUNDED_COMPONENTS", Table(merged).count(finer) - 1)
    assert representative_components(merged, 40)[2] == coarse


def _pld(event: Event, limit: int, rounded: int) -> EpsilonBound:
    """The PLD bracket with leaves rounded beyond ``limit`` distinct, the step lowered to
    MAX_ROUNDED_STEP (made coarse) where at most ``rounded`` components remain."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pld_module, "MAX_DISTINCT_COMPONENTS", limit)
        patch.setattr(components, "MAX_COMPONENTS", limit)
        patch.setattr(components, "MAX_REPRESENTATIVE_STEP", 1e-3)
        patch.setattr(components, "MAX_ROUNDED_STEP", 0.2)
        patch.setattr(components, "MAX_ROUNDED_COMPONENTS", rounded)
        return PLDAccountant(target_points=1 << 12).compose(event).get_epsilon(1e-5)


_LEAVES = st.one_of(
    st.floats(0.05, 0.5).map(RandomizedResponseEvent),
    st.floats(2.0, 8.0).map(LaplaceEvent),
    st.builds(PoissonSampledEvent, st.floats(0.01, 0.1), st.floats(0.8, 2.0).map(GaussianEvent)),
)


@settings(max_examples=3, deadline=None)
@given(leaves=st.lists(_LEAVES, min_size=8, max_size=14, unique=True))
def test_the_second_budget_never_crosses_the_unrounded_bounds(leaves: list[Event]) -> None:
    event = ComposedEvent(leaves)
    exact = _pld(event, 1000, 0)
    rounded = _pld(event, 3, 1000)
    assert rounded.epsilon >= exact.epsilon_lower * (1 - 1e-9)
    assert rounded.epsilon_lower <= exact.epsilon * (1 + 1e-9)


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(leaves=st.lists(_LEAVES, min_size=8, max_size=30, unique=True))
def test_the_second_budget_never_crosses_the_unrounded_bounds_wide(leaves: list[Event]) -> None:
    test_the_second_budget_never_crosses_the_unrounded_bounds.hypothesis.inner_test(leaves)  # type: ignore[attr-defined]


@pytest.mark.parametrize(("lower", "upper"), [(16, 4), (8, 16)])
def test_block_sides_on_grids_of_their_own(
    lower: int, upper: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A block's two sides on different fine grids: the upper curve above the lower one, and
    both on the side of the block composed on one common grid."""
    rng = np.random.default_rng(upper)
    leaves = [LaplaceEvent(float(b)) for b in rng.uniform(500.0, 1000.0, 6)]
    adjacency = Adjacency()
    parts = _Parts(adjacency)
    monkeypatch.setattr(blocks_module, "FINE_POINTS", lower)
    monkeypatch.setattr(blocks_module, "FINE_POINTS_UPPER", upper)
    split = block_profiles(list(leaves), list(leaves), adjacency, parts)
    h, h_up = _spacing(leaves, parts, lower), _spacing(leaves, parts, upper)
    assert split is not None and h is not None and h_up is not None
    assert h_up > h if upper < lower else h_up < h  # each side on its own spacing
    eps = np.linspace(-0.01, 0.02, 31)
    up = split.remove(eps)
    down = split.lower_remove.delta(eps)
    assert np.all(down <= up)
    # against the sides of one block on the finest and the coarsest common grid: the upper
    # side (connect-the-dots) lies above the block's curve whatever the grid, the lower
    # (dominated pairs) below it
    for common in (lower, upper):
        monkeypatch.setattr(blocks_module, "FINE_POINTS", common)
        monkeypatch.setattr(blocks_module, "FINE_POINTS_UPPER", common)
        one = block_profiles(list(leaves), list(leaves), adjacency, parts)
        assert one is not None
        assert np.all(down <= one.remove(eps))
        assert np.all(one.lower_remove.delta(eps) <= up)


@pytest.mark.slow
def test_ten_thousand_heterogeneous_leaves_within_one_percent() -> None:
    """The benchmark's 1e4 heterogeneous composition (half DP-SGD steps spread in rate and
    noise, a quarter Laplace, a quarter randomized responses) at delta 1e-5: its bracket
    within 1 %, and meeting the bracket it had with the coarser rounding and one fine grid."""
    rng = np.random.default_rng(0)
    leaves: list[Event] = [
        PoissonSampledEvent(float(q), GaussianEvent(float(s)))
        for q, s in zip(rng.uniform(1e-4, 3e-4, 5000), rng.uniform(0.9, 1.1, 5000), strict=True)
    ]
    leaves += [LaplaceEvent(float(b)) for b in rng.uniform(500, 1000, 2500)]
    leaves += [RandomizedResponseEvent(float(e)) for e in rng.uniform(1e-4, 2e-4, 2500)]
    bound = PLDAccountant().compose(ComposedEvent(leaves)).get_epsilon(1e-5)
    assert bound.epsilon - bound.epsilon_lower <= 0.01 * bound.epsilon
    # the bracket before (representative step 0.0355, one fine grid of eps / 128)
    assert bound.epsilon >= 0.2418169570379426 and bound.epsilon_lower <= 0.24477852058030128
