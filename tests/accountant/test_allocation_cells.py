"""Many distinct random allocations grouped into cells: both bounds stay certified, nothing is
refused, and composing them builds no table."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.accountant import allocation_cells as allocation_cells_module
from dpledger.accountant import pld
from dpledger.accountant.allocation_cells import allocation_cells, is_cell_allocation
from dpledger.accountant.pld import PLDAccountant
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import UnsupportedEventError
from dpledger.core.events import (
    Event,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    RandomAllocationEvent,
)

_ALLOCATIONS = st.lists(
    st.tuples(
        st.integers(1, 400),  # steps
        st.floats(0.3, 5.0),  # noise multiplier
        st.integers(1, 50),  # count
        st.integers(1, 3),  # steps per record
    ),
    min_size=1,
    max_size=60,
)


def _ledger(rows: list[tuple[int, float, int, int]]) -> dict[Event, int]:
    out: dict[Event, int] = {}
    for t, sigma, count, k in rows:
        event = RandomAllocationEvent(t, GaussianEvent(sigma), min(k, t))
        out[event] = out.get(event, 0) + count
    return out


@settings(max_examples=60, deadline=None)
@given(_ALLOCATIONS, st.integers(1, 16))
def test_every_member_is_dominated_by_an_upper_cell_and_dominates_a_lower_one(
    rows: list[tuple[int, float, int, int]], cells: int
) -> None:
    ledger = _ledger(rows)
    upper, lower, step = allocation_cells(ledger, cells)
    assert step > 0.0
    up_cells = [e for e in upper if is_cell_allocation(e)]
    assert len(up_cells) <= cells and len(lower) <= cells
    # the upper bound composes every member's 1-of-t parts: each below some cell's steps
    # and noise (fewer steps and less noise dominate), counts kept
    parts = pld._allocation_reduced(ledger)
    for part in parts:
        if isinstance(part, GaussianEvent):
            continue  # 1-of-1 parts: their step's own Gaussian, merged with the others
        assert any(
            c.num_steps <= part.num_steps  # type: ignore[attr-defined]
            and c.event.noise_multiplier <= part.event.noise_multiplier  # type: ignore[attr-defined]
            for c in up_cells
        )
    steps_up = sum(k for e, k in upper.items() if is_cell_allocation(e))
    steps_parts = sum(k for e, k in parts.items() if is_cell_allocation(e))
    assert steps_up == steps_parts
    # the lower bound composes the members of at most cells // 2 numbers of steps per
    # record, each above some cell of its own number (more steps and more noise)
    kept = {e.num_selected for e in lower}  # type: ignore[attr-defined]
    assert len(kept) <= max(1, cells // 2)
    members = {e: k for e, k in ledger.items() if e.num_selected in kept}  # type: ignore[attr-defined]
    assert sum(lower.values()) == sum(members.values())
    for member in members:
        assert any(
            c.num_selected == member.num_selected  # type: ignore[attr-defined]
            and c.num_steps >= member.num_steps  # type: ignore[attr-defined]
            and c.event.noise_multiplier >= member.event.noise_multiplier  # type: ignore[attr-defined]
            for c in lower
        )
    # representatives take members' own values (no arithmetic)
    steps = {e.num_steps for e in members}  # type: ignore[attr-defined]
    assert all(c.num_steps in steps for c in lower)  # type: ignore[attr-defined]


def _grouped_accountant(monkeypatch: pytest.MonkeyPatch, cells: int) -> None:
    """Group allocations into ``cells`` cells from a handful of distinct leaves on."""
    monkeypatch.setattr(pld, "MAX_DISTINCT_COMPONENTS", 4)
    monkeypatch.setattr(allocation_cells_module, "ALLOCATION_LIMIT", 4)
    monkeypatch.setattr(allocation_cells_module, "ALLOCATION_CELLS", cells)


def test_grouped_bracket_contains_the_exact_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Twelve distinct allocations composed leaf by leaf, and the same grouped into 3 cells:
    the grouped bracket contains the exact one (its upper not below the exact lower, its
    lower not above the exact upper) and is wider by the rounding only."""
    ledger = [(RandomAllocationEvent(2 + i, GaussianEvent(0.9 + 0.02 * i)), 3) for i in range(12)]
    exact = PLDAccountant()
    for event, count in ledger:
        exact.compose(event, count)
    want = exact.get_epsilon(1e-5)
    assert "allocation_step" not in want.details
    _grouped_accountant(monkeypatch, 3)
    grouped = PLDAccountant()
    for event, count in ledger:
        grouped.compose(event, count)
    got = grouped.get_epsilon(1e-5)
    assert got.details["allocation_step"] > 0.1
    assert got.epsilon >= want.epsilon_lower
    assert got.epsilon_lower <= want.epsilon
    # the sandwich: all at the fewest steps and least noise, all at the most and most
    assert want.epsilon_lower < got.epsilon < 1.25 * want.epsilon
    assert 0.8 * want.epsilon_lower < got.epsilon_lower <= want.epsilon


def test_k_of_t_allocations_enter_the_upper_bound_as_their_parts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """2-of-t allocations are bounded above by their 1-of-t/2 parts grouped (so never above
    all of them at the fewest steps) and below by 2-of-t cells (so never below all of them
    at the most steps)."""
    _grouped_accountant(monkeypatch, 2)
    acc = PLDAccountant()
    for i in range(6):
        acc.compose(RandomAllocationEvent(8 + 2 * i, GaussianEvent(1.0), 2), 1)
    got = acc.get_epsilon(1e-5)
    ceiling = PLDAccountant().compose(RandomAllocationEvent(4, GaussianEvent(1.0)), 12)
    assert got.epsilon <= ceiling.get_epsilon(1e-5).epsilon * (1 + 1e-9)
    floor = PLDAccountant().compose(RandomAllocationEvent(18, GaussianEvent(1.0), 2), 6)
    assert floor.get_epsilon(1e-5).epsilon_lower * (1 - 1e-9) <= got.epsilon_lower


def test_many_distinct_allocations_are_not_refused_and_compose_without_tables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """300 distinct allocations beside 300 distinct Poisson-sampled Laplace releases compose
    (no refusal) and no table is made before a query."""

    made = pld.leaf_profiles

    def no_tables(leaf: Event, adjacency: Adjacency) -> object:
        assert not isinstance(leaf, RandomAllocationEvent), "a table was made while composing"
        return made(leaf, adjacency)

    monkeypatch.setattr(pld, "leaf_profiles", no_tables)
    acc = PLDAccountant()
    for i in range(300):
        acc.compose(RandomAllocationEvent(100 + i, GaussianEvent(1.0)), 1)
        acc.compose(PoissonSampledEvent(0.01 * (1 + i / 300), LaplaceEvent(2.0)), 1)
    assert len(acc.ledger) == 600


def test_allocation_under_replace_one_is_refused_in_one_line() -> None:
    acc = PLDAccountant(Adjacency(relation="replace_one"))
    with pytest.raises(UnsupportedEventError) as caught:
        acc.compose(RandomAllocationEvent(100, GaussianEvent(1.0)), 1)
    message = str(caught.value)
    assert "add/remove" in message and "\n" not in message


@pytest.mark.slow
def test_three_hundred_distinct_allocations_inside_the_homogeneous_sandwich() -> None:
    """300 distinct 1-of-t allocations, t = 100..399 (once refused): the bracket lies
    between all at t = 399 and all at t = 100, within 8 %."""
    acc = PLDAccountant()
    for i in range(300):
        acc.compose(RandomAllocationEvent(100 + i, GaussianEvent(1.0)), 1)
    got = acc.get_epsilon(1e-5)
    most = PLDAccountant().compose(RandomAllocationEvent(399, GaussianEvent(1.0)), 300)
    fewest = PLDAccountant().compose(RandomAllocationEvent(100, GaussianEvent(1.0)), 300)
    assert got.epsilon >= most.get_epsilon(1e-5).epsilon_lower
    assert got.epsilon_lower <= fewest.get_epsilon(1e-5).epsilon
    assert got.epsilon <= 1.08 * got.epsilon_lower
