"""Many distinct random allocations and shuffled epochs grouped into cells: both bounds stay
certified, nothing is refused, and composing them builds no table."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize, special

from dpledger.accountant import allocation_cells as allocation_cells_module
from dpledger.accountant import pld
from dpledger.accountant.allocation_cells import (
    ALLOCATION_CELLS,
    allocation_cells,
    epoch_components,
    is_cell_allocation,
    shuffled_cells,
)
from dpledger.accountant.base import EpsilonBound
from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.pld_support import _extent_reason
from dpledger.accountant.profiles_shuffled import shuffled_base
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import UnsupportedEventError
from dpledger.core.events import (
    Event,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PureDPEvent,
    RandomAllocationEvent,
    SelfComposedEvent,
    ShuffledBatchesEvent,
    TabulatedProfileEvent,
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


def _leafwise_and_grouped(
    monkeypatch: pytest.MonkeyPatch,
    ledger: Sequence[tuple[Event, int]],
    cells: int,
    adjacency: Adjacency | None = None,
    laplace_cells: int | None = None,
) -> tuple[EpsilonBound, EpsilonBound, PLDAccountant, PLDAccountant]:
    """(leaf-by-leaf bound, grouped bound, their accountants) of ``ledger`` at delta 1e-5: the
    first queried before ``monkeypatch`` groups into ``cells`` cells (and ``laplace_cells``
    noise cells of shuffled Laplace releases), the second after."""
    exact, grouped = PLDAccountant(adjacency), PLDAccountant(adjacency)
    for event, count in ledger:
        exact.compose(event, count)
        grouped.compose(event, count)
    want = exact.get_epsilon(1e-5)
    _grouped_accountant(monkeypatch, cells)
    if laplace_cells is not None:
        monkeypatch.setattr(allocation_cells_module, "LAPLACE_CELLS", laplace_cells)
    return want, grouped.get_epsilon(1e-5), exact, grouped


def test_grouped_bracket_contains_the_exact_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Twelve distinct allocations composed leaf by leaf, and the same grouped into 3 cells:
    the grouped bracket contains the exact one (its upper not below the exact lower, its
    lower not above the exact upper) and is wider by the rounding only."""
    ledger = [(RandomAllocationEvent(2 + i, GaussianEvent(0.9 + 0.02 * i)), 3) for i in range(12)]
    want, got, exact, grouped = _leafwise_and_grouped(monkeypatch, ledger, 3)
    assert "allocation_step" not in want.details
    assert got.details["allocation_step"] > 0.1
    assert got.epsilon >= want.epsilon_lower
    assert got.epsilon_lower <= want.epsilon
    # coarse cells: the passes stop at COARSE_CELL_GROWTH times the first pass's points
    assert grouped._finest(1 << 14) == pld.COARSE_CELL_GROWTH << 14
    assert exact._finest(1 << 14) == exact.target_points
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


_SHUFFLED = st.lists(
    st.tuples(
        st.integers(1, 500),  # batch size
        st.floats(0.3, 5.0),  # noise multiplier
        st.integers(1, 50),  # count
        st.integers(1, 3),  # Gaussian releases per batch
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=60, deadline=None)
@given(_SHUFFLED, st.integers(1, 16))
def test_shuffled_epochs_upper_their_gaussians_lower_below_every_member(
    rows: list[tuple[int, float, int, int]], cells: int
) -> None:
    ledger: dict[Event, int] = {}
    for b, sigma, count, r in rows:
        inner: Event = (
            GaussianEvent(sigma) if r == 1 else SelfComposedEvent(GaussianEvent(sigma), r)
        )
        event = ShuffledBatchesEvent(1000, b, inner)
        ledger[event] = ledger.get(event, 0) + count
    upper, lower, _ = shuffled_cells(ledger, cells)
    # the upper bound: each epoch's Gaussian (its upper curve), counts kept
    want: dict[Event, int] = {}
    for event, count in ledger.items():
        gauss = shuffled_base(event)[0]  # type: ignore[arg-type]
        want[gauss] = want.get(gauss, 0) + count
    assert upper == want
    # the lower bound: every member above some cell (more batches, more noise)
    assert len(lower) <= cells and sum(lower.values()) == sum(ledger.values())
    for member in ledger:
        release = shuffled_base(member)[1]  # type: ignore[arg-type]
        assert isinstance(release, GaussianEvent)
        assert any(
            c.num_batches >= member.num_batches  # type: ignore[attr-defined]
            and c.event.noise_multiplier >= release.noise_multiplier  # type: ignore[attr-defined]
            for c in lower
        )


def test_grouped_shuffled_epochs_keep_the_upper_and_lower_below_the_leafwise_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ten distinct shuffled epochs, leaf by leaf and grouped into 3 cells: the same upper
    bound (their Gaussians, merged into one), a lower bound below the leaf-by-leaf one but
    not far (cells of at most ~50 % apart here)."""
    replace = Adjacency(relation="replace_one")
    ledger = [
        (ShuffledBatchesEvent(6000, 20 + 6 * i, GaussianEvent(1.5 + i / 20)), 2) for i in range(10)
    ]
    want, got, _, _ = _leafwise_and_grouped(monkeypatch, ledger, 3, replace)
    assert got.details["allocation_step"] > 0.1
    assert got.epsilon == pytest.approx(want.epsilon, rel=1e-5)
    assert got.epsilon >= want.epsilon_lower
    assert 0.5 * want.epsilon_lower < got.epsilon_lower <= want.epsilon_lower * (1 + 1e-3)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(10, 500), st.floats(0.5, 40.0), st.integers(1, 20)),
        min_size=1,
        max_size=60,
    ),
    st.integers(1, 16),
    st.integers(1, 16),
)
def test_laplace_shuffled_epochs_upper_at_less_noise_lower_below_every_member(
    rows: list[tuple[int, float, int]], cells: int, laplace_cells: int
) -> None:
    ledger: dict[Event, int] = {}
    for b, scale, count in rows:
        event = ShuffledBatchesEvent(1000, b, LaplaceEvent(scale))
        ledger[event] = ledger.get(event, 0) + count
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(allocation_cells_module, "LAPLACE_CELLS", laplace_cells)
        upper, lower, step = shuffled_cells(ledger, cells)
    total = sum(ledger.values())
    assert all(isinstance(e, LaplaceEvent) for e in upper) and len(upper) <= laplace_cells
    assert sum(upper.values()) == total and sum(lower.values()) == total
    assert len(lower) <= cells
    scales = sorted(e.noise_multiplier for e in upper)  # type: ignore[attr-defined]
    for member in ledger:
        noise = member.event.noise_multiplier  # type: ignore[attr-defined]
        # a cell at no more noise, within one cell width
        below = [s for s in scales if s <= noise]
        assert below and noise <= below[-1] * (1 + step) ** 1.000001
        assert any(
            c.num_batches >= member.num_batches  # type: ignore[attr-defined]
            and c.event.noise_multiplier >= noise  # type: ignore[attr-defined]
            and isinstance(c.event, LaplaceEvent)  # type: ignore[attr-defined]
            for c in lower
        )


def test_gaussian_and_laplace_batches_never_share_a_cell() -> None:
    """Shuffled epochs of both kinds of batch: one lower cell per kind at least (a single cell
    asked for gives two), and the component count charges the extra cell and the Laplace
    releases' upper cells."""
    gauss = [ShuffledBatchesEvent(2000, 100 + i, GaussianEvent(1.0)) for i in range(20)]
    laplace = [ShuffledBatchesEvent(2000, 100 + i, LaplaceEvent(1.0 + i / 10)) for i in range(10)]
    _, lower, _ = shuffled_cells(dict.fromkeys(gauss + laplace, 1), 1)
    kinds = sorted(type(c.event).__name__ for c in lower)  # type: ignore[attr-defined]
    assert kinds == ["GaussianEvent", "LaplaceEvent"]
    assert epoch_components(gauss + laplace) == ALLOCATION_CELLS + 1 + 10
    assert epoch_components(gauss[:10] + laplace[:5]) == 15  # leaf by leaf


def test_grouped_laplace_shuffled_epochs_bracket_the_leafwise_bracket(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ten distinct shuffled epochs of Laplace batches, leaf by leaf and grouped into 3 cells
    (3 noise cells for the upper bound): the grouped upper bound at or above the leafwise one
    and within 10 %, the lower bound at or below it and above half of it."""
    replace = Adjacency(relation="replace_one")
    ledger = [
        (ShuffledBatchesEvent(2000, 200 + 30 * i, LaplaceEvent(4.0 + i / 10)), 3) for i in range(10)
    ]
    want, got, _, _ = _leafwise_and_grouped(monkeypatch, ledger, 3, replace, laplace_cells=3)
    assert got.details["allocation_step"] > 0.05
    assert want.epsilon * (1 - 1e-9) <= got.epsilon <= 1.1 * want.epsilon
    assert 0.5 * want.epsilon_lower < got.epsilon_lower <= want.epsilon_lower * (1 + 1e-3)


def test_three_hundred_distinct_laplace_shuffled_epochs_are_bracketed_by_pld() -> None:
    """300 distinct shuffled epochs of Laplace batches (once refused by PLD, answered by RDP
    with a lower bound of 0): PLD brackets them between the homogeneous ledgers at the
    extremes: the upper bound below all 300 at the least noise, the lower bound above all
    300 at the most batches and most noise."""
    replace = Adjacency(relation="replace_one")

    def epoch(i: int) -> ShuffledBatchesEvent:
        return ShuffledBatchesEvent(2000, 200 + i, LaplaceEvent(20.0 + i / 30))

    def bracket(ledger: list[tuple[Event, int]]) -> tuple[float, float]:
        acc = PLDAccountant(replace)
        for event, count in ledger:
            acc.compose(event, count)
        got = acc.get_epsilon(1e-5)
        return got.epsilon_lower, got.epsilon

    low, up = bracket([(epoch(i), 1) for i in range(300)])
    assert up < bracket([(LaplaceEvent(20.0), 300)])[1]
    assert (
        low
        > bracket(
            [
                (
                    ShuffledBatchesEvent(
                        2000, 200, LaplaceEvent(epoch(299).event.noise_multiplier)
                    ),
                    300,
                )
            ]
        )[0]
    )  # type: ignore[attr-defined]
    assert 0.0 < low < up


def test_shuffled_epoch_under_add_remove_is_refused_in_one_line() -> None:
    with pytest.raises(UnsupportedEventError) as caught:
        PLDAccountant().compose(ShuffledBatchesEvent(100, 10, GaussianEvent(1.0)), 1)
    message = str(caught.value)
    assert "replace-one" in message and "\n" not in message


@pytest.mark.slow
def test_three_hundred_distinct_shuffled_epochs_are_bracketed() -> None:
    """300 distinct shuffled epochs (once refused): the upper bound is their Gaussians
    composed (the Gaussian curve at mu = sqrt(sum (2 / s_i)^2), solved here with SciPy), the
    lower bound positive."""
    acc = PLDAccountant(Adjacency(relation="replace_one"))
    sigmas = [1.0 + i / 300 for i in range(300)]
    for i, sigma in enumerate(sigmas):
        acc.compose(ShuffledBatchesEvent(60000, 100 + i, GaussianEvent(sigma)), 1)
    got = acc.get_epsilon(1e-5)
    mu = math.sqrt(sum((2.0 / s) ** 2 for s in sigmas))

    def excess(eps: float) -> float:
        tail = math.exp(eps + special.log_ndtr(-eps / mu - mu / 2))
        return float(special.ndtr(-eps / mu + mu / 2)) - tail - 1e-5

    assert got.epsilon == pytest.approx(optimize.brentq(excess, 1.0, 2000.0), rel=1e-4)
    assert 10.0 < got.epsilon_lower < got.epsilon


@pytest.mark.slow
@settings(max_examples=8, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(2, 30), st.floats(0.7, 1.5), st.integers(1, 3)),
        min_size=5,
        max_size=8,
        unique_by=lambda row: row[0],
    ),
    st.integers(1, 3),
)
def test_grouped_bounds_never_cross_the_leafwise_bracket(
    rows: list[tuple[int, float, int]], cells: int
) -> None:
    """Random small sets of allocations, leaf by leaf and grouped: the grouped upper bound is
    never below the leaf-by-leaf lower bound, the grouped lower never above its upper."""
    ledger = [(RandomAllocationEvent(t, GaussianEvent(s)), k) for t, s, k in rows]
    with pytest.MonkeyPatch.context() as patch:
        want, got, _, _ = _leafwise_and_grouped(patch, ledger, cells)
    assert "allocation_step" in got.details
    assert got.epsilon >= want.epsilon_lower
    assert got.epsilon_lower <= want.epsilon


@pytest.mark.slow
@settings(max_examples=8, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(100, 1000), st.floats(0.5, 8.0), st.integers(1, 3), st.booleans()),
        min_size=5,
        max_size=8,
        unique_by=lambda row: row[0],
    ),
    st.integers(1, 3),
)
def test_grouped_shuffled_bounds_never_cross_the_leafwise_bracket(
    rows: list[tuple[int, float, int, bool]], cells: int
) -> None:
    """Random small sets of shuffled epochs, Laplace or Gaussian batches, leaf by leaf and
    grouped: the grouped upper bound is never below the leaf-by-leaf lower bound, the grouped
    lower never above its upper."""
    replace = Adjacency(relation="replace_one")
    ledger = [
        (ShuffledBatchesEvent(2000, b, LaplaceEvent(s) if laplace else GaussianEvent(s)), k)
        for b, s, k, laplace in rows
    ]
    with pytest.MonkeyPatch.context() as patch:
        want, got, _, _ = _leafwise_and_grouped(patch, ledger, cells, replace, cells)
    assert "allocation_step" in got.details
    assert got.epsilon >= want.epsilon_lower
    assert got.epsilon_lower <= want.epsilon


def test_epochs_count_against_the_components_left_to_unrounded_leaves() -> None:
    """250 distinct shuffled epochs of pure-DP batches (a kind neither rounded nor grouped)
    fit alone; beside 10 distinct allocations (not grouped: ten components) they exceed the
    budget of 256 and are refused in one line naming both; beside 300 distinct allocations
    (16 cells) 230 of them fit and 250 do not. 250 distinct tabulated profiles are grouped
    into 64 cells and fit beside either."""
    epochs = [ShuffledBatchesEvent(60_000, 100 + i, PureDPEvent(1.0)) for i in range(250)]
    few = [RandomAllocationEvent(10 + i, GaussianEvent(1.0)) for i in range(10)]
    many = [RandomAllocationEvent(10 + i, GaussianEvent(1.0)) for i in range(300)]
    assert _extent_reason([(e, 1) for e in epochs], []) is None
    why = _extent_reason([(e, 1) for e in epochs + few], [])
    assert why is not None and "\n" not in why
    assert "250 distinct shuffled_batches releases (more than 246 beside 10 components" in why
    assert _extent_reason([(e, 1) for e in epochs[:230] + many], []) is None
    why = _extent_reason([(e, 1) for e in epochs + many], [])
    assert why is not None and "more than 240 beside 16 components" in why
    tables = [
        TabulatedProfileEvent((0.0, 1.0), (0.5, 0.1 + i * 1e-4), relation="add_remove")
        for i in range(250)
    ]
    assert _extent_reason([(e, 1) for e in tables + few], []) is None
    assert _extent_reason([(e, 1) for e in tables + many], []) is None
    far = [
        TabulatedProfileEvent((0.0, 800.0), (0.5, 0.1 + i * 1e-4), relation="add_remove")
        for i in range(250)
    ]  # epsilons beyond 700 are not grouped
    assert _extent_reason([(e, 1) for e in far + few], []) is not None
