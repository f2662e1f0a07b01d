"""Cell widths per shape and parameter (representative_steps): never more components than one
step for all, less rounding by the proxy where used, and bounds that still bracket the
unrounded ones."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpledger.accountant.pld as pld_module
from dpledger.accountant.base import EpsilonBound
from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.pld_components import representative_components
from dpledger.accountant.representative_steps import rounding_cost, weighted_steps
from dpledger.accountant.representatives import Table
from dpledger.core.events import (
    ApproxDPEvent,
    ComposedEvent,
    Event,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PureDPEvent,
    RandomizedResponseEvent,
    SelfComposedEvent,
)


def _heterogeneous(n: int, seed: int = 0) -> dict[Event, int]:
    """Laplace counts carrying most of the cost beside cheap sampled Gaussians and responses."""
    rng = np.random.default_rng(seed)
    leaves: list[Event] = [
        PoissonSampledEvent(float(q), GaussianEvent(float(s)))
        for q, s in zip(rng.uniform(1e-4, 3e-4, n), rng.uniform(0.9, 1.1, n), strict=True)
    ]
    leaves += [LaplaceEvent(float(b)) for b in rng.uniform(500, 1000, n)]
    leaves += [RandomizedResponseEvent(float(e)) for e in rng.uniform(1e-4, 2e-4, n)]
    return dict.fromkeys(leaves, 1)


def test_weighted_steps_round_less_with_no_more_components() -> None:
    table = Table(_heterogeneous(400))
    uniform = table.step(64)
    steps = weighted_steps(table, uniform)
    assert steps is not None
    assert table.count(steps) <= table.count(uniform)
    assert max(rounding_cost(table, steps)) < max(rounding_cost(table, uniform))
    # the kind that carries the cost gets the finer cells
    assert steps[("laplace",)][0] < steps[("randomized_response", 2)][0]


def test_one_shape_keeps_the_one_step() -> None:
    # a single parameter of a single kind: equal widths are already the best layout
    table = Table({RandomizedResponseEvent(1e-3 * (1 + i / 500)): 1 for i in range(500)})
    assert weighted_steps(table, table.step(64)) is None


def test_an_unweighted_delta_takes_its_shapes_finest_step() -> None:
    merged: dict[Event, int] = {
        ApproxDPEvent(0.01 * (1 + i / 300), 1e-9 * (1 + i / 30)): 1 for i in range(300)
    }
    merged.update(_heterogeneous(100))
    table = Table(merged)
    steps = weighted_steps(table, table.step(64))
    if steps is not None:
        eps_step, delta_step = steps[("approx_dp",)]
        assert delta_step == eps_step


def test_representative_components_use_no_more_components_than_one_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import dpledger.accountant.pld_components as components

    merged = _heterogeneous(300)
    upper, lower, step = representative_components(merged, 40)
    assert sum(upper.values()) == sum(lower.values()) == len(merged)
    monkeypatch.setattr(components, "weighted_steps", lambda table, uniform: None)
    plain, _, plain_step = representative_components(merged, 40)
    assert len(upper) == len(lower) <= len(plain) < len(merged)
    assert step > 0 and plain_step > 0


def _pld(event: Event, limit: int) -> EpsilonBound:
    """The PLD bracket with leaves rounded beyond ``limit`` distinct, to at most ``limit``
    components (one coarse step for all, or the weighted layout where it rounds less)."""
    import dpledger.accountant.pld_components as components

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pld_module, "MAX_DISTINCT_COMPONENTS", limit)
        patch.setattr(components, "MAX_COMPONENTS", limit)
        patch.setattr(components, "MAX_REPRESENTATIVE_STEP", 10.0)
        return PLDAccountant(target_points=1 << 13).compose(event).get_epsilon(1e-5)


_LEAVES = st.one_of(
    st.floats(0.05, 0.5).map(RandomizedResponseEvent),
    st.floats(2.0, 8.0).map(LaplaceEvent),
    st.builds(PoissonSampledEvent, st.floats(0.01, 0.1), st.floats(0.8, 2.0).map(GaussianEvent)),
)


@settings(max_examples=4, deadline=None)
@given(leaves=st.lists(_LEAVES, min_size=10, max_size=16, unique=True))
def test_weighted_rounding_never_crosses_the_unrounded_bounds(leaves: list[Event]) -> None:
    event = ComposedEvent(leaves)
    exact = _pld(event, 1000)
    rounded = _pld(event, 6)
    assert rounded.epsilon >= exact.epsilon_lower * (1 - 1e-9)
    assert rounded.epsilon_lower <= exact.epsilon * (1 + 1e-9)


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(leaves=st.lists(_LEAVES, min_size=10, max_size=40, unique=True))
def test_weighted_rounding_never_crosses_the_unrounded_bounds_wide(leaves: list[Event]) -> None:
    test_weighted_rounding_never_crosses_the_unrounded_bounds.hypothesis.inner_test(leaves)  # type: ignore[attr-defined]


_EPSILON_LEAVES = st.tuples(
    st.one_of(
        st.floats(0.02, 0.3).map(RandomizedResponseEvent),
        st.tuples(st.floats(0.02, 0.3), st.integers(3, 5)).map(
            lambda t: RandomizedResponseEvent(*t)
        ),
        st.floats(0.02, 0.3).map(PureDPEvent),
        st.floats(0.02, 0.3).map(lambda e: ApproxDPEvent(e, 1e-8)),
        st.floats(2.0, 8.0).map(LaplaceEvent),
    ),
    st.integers(1, 40),
)


@settings(max_examples=4, deadline=None)
@given(leaves=st.lists(_EPSILON_LEAVES, min_size=8, max_size=14, unique_by=lambda t: t[0]))
def test_blocks_of_epsilon_leaves_never_cross_the_unrounded_bounds(
    leaves: list[tuple[Event, int]],
) -> None:
    """Rounded leaves whose equal copies are composed exactly in blocks
    (:mod:`~dpledger.accountant.epsilon_cells`) against the same leaves composed unrounded,
    copy by copy."""
    event = ComposedEvent([SelfComposedEvent(e, k) if k > 1 else e for e, k in leaves])
    exact = _pld(event, 1000)
    rounded = _pld(event, 5)
    assert rounded.epsilon >= exact.epsilon_lower * (1 - 1e-9)
    assert rounded.epsilon_lower <= exact.epsilon * (1 + 1e-9)


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(leaves=st.lists(_EPSILON_LEAVES, min_size=8, max_size=30, unique_by=lambda t: t[0]))
def test_blocks_of_epsilon_leaves_never_cross_the_unrounded_bounds_wide(
    leaves: list[tuple[Event, int]],
) -> None:
    test_blocks_of_epsilon_leaves_never_cross_the_unrounded_bounds.hypothesis.inner_test(leaves)  # type: ignore[attr-defined]


def test_a_weighted_layout_brackets_the_unrounded_composition(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import dpledger.accountant.pld_components as components

    rng = np.random.default_rng(0)  # a draw where the weighted layout rounds less
    leaves: list[Event] = [RandomizedResponseEvent(float(e)) for e in rng.uniform(0.05, 0.5, 4)]
    leaves += [LaplaceEvent(float(b)) for b in rng.uniform(2, 8, 4)]
    leaves += [
        PoissonSampledEvent(float(q), GaussianEvent(float(s)))
        for q, s in zip(rng.uniform(0.01, 0.1, 5), rng.uniform(0.8, 2, 5), strict=True)
    ]
    used = []
    weighted = components.weighted_steps

    def spy(table: Table, uniform: float) -> object:
        found = weighted(table, uniform)
        used.append(found is not None)
        return found

    monkeypatch.setattr(components, "weighted_steps", spy)
    event = ComposedEvent(leaves)
    exact = _pld(event, 1000)
    rounded = _pld(event, 6)
    assert used == [True]
    assert rounded.epsilon >= exact.epsilon_lower * (1 - 1e-9)
    assert rounded.epsilon_lower <= exact.epsilon * (1 + 1e-9)
