"""Many distinct tabulated profiles grouped into cells (``accountant/tabulated_cells.py``):
each cell's upper table lies above every member's curves, its lower curve below every member's
claimed curve (checked in exact and 40-digit arithmetic), and the grouped brackets of the PLD
backend contain the leaf-by-leaf ones."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.accountant import pld, tabulated_cells
from dpledger.accountant.leaves import leaf_profiles
from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.select import account
from dpledger.accountant.tabulated_cells import (
    TABULATED_CELLS,
    grouped_tabulated,
    lower_profiles,
    upper_table,
)
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    ComposedEvent,
    Event,
    GaussianEvent,
    RandomizedResponseEvent,
    TabulatedProfileEvent,
)
from dpledger.proofs_checks.tabulated_cells.check_tabulated_cells import exact_chord

mp.mp.dps = 40


def _pair(
    losses: list[float], masses: list[float], inf_mass: float
) -> tuple[tuple[float, ...], tuple[float, ...], float]:
    """A pair of probability laws: P-masses scaled to 1 - inf_mass, Q-masses p e^-l at most 1."""
    total = math.fsum(masses)
    ps = [m / total * (1 - inf_mass) for m in masses]
    q = math.fsum(p * math.exp(-v) for p, v in zip(ps, losses, strict=True))
    if q > 1.0:  # shift the losses up until Q's masses fit
        shift = math.log(q) + 1e-9
        losses = [v + shift for v in losses]
    return tuple(losses), tuple(ps), inf_mass


def _curve(losses: tuple[float, ...], ps: tuple[float, ...], inf: float, eps: float) -> mp.mpf:
    """The pair's exact curve at ``eps`` (40 digits)."""
    e = mp.mpf(eps)
    return mp.mpf(inf) + sum(
        (
            mp.mpf(p) * (1 - mp.e ** (e - mp.mpf(v)))
            for v, p in zip(losses, ps, strict=True)
            if v > eps
        ),
        mp.mpf(0),
    )


def _claimed(losses: tuple[float, ...], ps: tuple[float, ...], inf: float) -> TabulatedProfileEvent:
    """A table of the pair's curve (rounded up, on a grid through its losses) claiming it."""
    grid = sorted({0.0, *(abs(v) for v in losses), max(abs(v) for v in losses) + 1.0})
    deltas = tuple(min(1.0, float(_curve(losses, ps, inf, e)) * (1 + 1e-12) + 1e-300) for e in grid)
    return TabulatedProfileEvent(
        tuple(grid),
        deltas,
        tight_losses=losses,
        tight_masses=ps,
        tight_inf_mass=inf,
        tight_claim="a test pair",
    )


_PAIRS = st.lists(
    st.tuples(
        st.lists(st.floats(-3.0, 3.0), min_size=1, max_size=5, unique=True),
        st.floats(0.0, 0.05),
    ),
    min_size=2,
    max_size=5,
)


@settings(max_examples=40, deadline=None)
@given(pairs=_PAIRS, data=st.data())
def test_lower_curve_lies_below_every_claimed_curve(
    pairs: list[tuple[list[float], float]], data: st.DataObject
) -> None:
    """Adversarial: random claimed pairs (losses of both signs, masses at infinity); the
    cell's lower curve is below every member's exact curve at every epsilon (40 digits)."""
    cell = []
    for losses, inf in pairs:
        masses = data.draw(
            st.lists(st.floats(0.01, 1.0), min_size=len(losses), max_size=len(losses))
        )
        cell.append(_claimed(*_pair(losses, masses, inf)))
    profiles = lower_profiles(cell, upper_table(cell), Adjacency())
    assert profiles is not None and profiles.lower_remove.exact
    points = np.linspace(-6.0, 6.0, 121)
    low = profiles.lower_remove.delta(points)
    for event in cell:
        assert event.tight_losses is not None and event.tight_masses is not None
        for eps, value in zip(points, low, strict=True):
            exact = _curve(event.tight_losses, event.tight_masses, event.tight_inf_mass, eps)
            assert value <= exact, (eps, value, exact)


def _gauss_table(mu: float, grid: np.ndarray) -> tuple[float, ...]:
    from scipy import stats

    d = stats.norm.cdf(-grid / mu + mu / 2) - np.exp(grid) * stats.norm.cdf(-grid / mu - mu / 2)
    return tuple(float(v) for v in np.minimum(np.maximum(d, 0.0) * (1 + 1e-9) + 1e-300, 1.0))


@settings(max_examples=30, deadline=None)
@given(
    tables=st.lists(
        st.tuples(
            st.lists(st.floats(-1.0, 8.0), min_size=2, max_size=12, unique=True),
            st.floats(0.2, 3.0),
            st.one_of(st.none(), st.floats(0.7, 1.4)),
        ),
        min_size=2,
        max_size=5,
    ),
)
def test_upper_table_lies_above_every_member(
    tables: list[tuple[list[float], float, float | None]],
) -> None:
    """Adversarial: tables on unrelated grids (some with a table for the swapped pair); the
    cell's upper table's chords lie above every member's, in both directions (exactly)."""
    cell = []
    for points, mu, ratio in tables:
        grid = np.array(sorted(points))
        add = None if ratio is None else _gauss_table(mu * ratio, grid)
        cell.append(TabulatedProfileEvent(tuple(grid.tolist()), _gauss_table(mu, grid), add))
    up = upper_table(cell)
    up_add = up.deltas if up.deltas_add is None else up.deltas_add
    for eps in np.linspace(0.0, 9.0, 91):
        for event in cell:
            add = event.deltas if event.deltas_add is None else event.deltas_add
            assert exact_chord(up.epsilons, up.deltas, eps) >= exact_chord(
                event.epsilons, event.deltas, eps
            )
            assert exact_chord(up.epsilons, up_add, eps) >= exact_chord(event.epsilons, add, eps)


def _rr_table(eps: float, name: str, claim: bool = True) -> TabulatedProfileEvent:
    """Binary randomized response at ``eps`` as a table on [0, 0.5] (claiming its pair)."""
    p = math.exp(eps) / (1 + math.exp(eps))
    grid = np.linspace(0.0, 0.5, 26)
    deltas = np.minimum(np.maximum(p - np.exp(grid) * (1 - p), 0.0) * (1 + 1e-12) + 1e-300, 1.0)
    if not claim:
        return TabulatedProfileEvent(tuple(grid.tolist()), tuple(deltas.tolist()), name=name)
    return TabulatedProfileEvent(
        tuple(grid.tolist()),
        tuple(deltas.tolist()),
        name=name,
        tight_losses=(eps, -eps),
        tight_masses=(p, 1 - p),
        tight_claim="binary randomized response",
    )


def test_grouped_bracket_contains_the_leaf_by_leaf_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forty distinct claimed tables grouped into 6 cells, and leaf by leaf: the grouped
    bracket contains the exact one, and both contain the randomized responses' own."""
    tables = [_rr_table(0.05 * (1 + i / 40), f"rr{i}") for i in range(40)]
    exact = PLDAccountant()
    exact.compose(ComposedEvent(tables))
    want = exact.get_epsilon(1e-5)
    monkeypatch.setattr(pld, "MAX_DISTINCT_COMPONENTS", 4)
    monkeypatch.setattr(tabulated_cells, "TABULATED_LIMIT", 4)
    monkeypatch.setattr(tabulated_cells, "TABULATED_CELLS", 6)
    grouped = PLDAccountant()
    grouped.compose(ComposedEvent(tables))
    got = grouped.get_epsilon(1e-5)
    assert 0.0 < got.epsilon_lower <= want.epsilon_lower <= want.epsilon <= got.epsilon
    assert got.epsilon <= 1.08 * want.epsilon  # cells spanning ~12 % in epsilon each
    assert got.epsilon_lower >= 0.92 * want.epsilon_lower
    native = account(
        ComposedEvent([RandomizedResponseEvent(0.05 * (1 + i / 40)) for i in range(40)]),
        delta=1e-5,
    ).bound
    assert got.epsilon_lower <= native.epsilon and native.epsilon_lower <= got.epsilon


def test_many_distinct_tables_are_accounted_not_refused() -> None:
    """300 distinct claimed tables (refused before: more than 256 distinct leaves of a kind
    never rounded): a bracket inside the randomized responses' sandwich, in seconds."""
    eps = [0.01 * (1 + i / 300) for i in range(300)]
    bound = account(
        ComposedEvent([_rr_table(e, f"rr{i}") for i, e in enumerate(eps)]), delta=1e-5
    ).bound
    native = account(ComposedEvent([RandomizedResponseEvent(e) for e in eps]), delta=1e-5).bound
    assert bound.method == "pld"
    assert 0.0 < bound.epsilon_lower <= native.epsilon
    assert native.epsilon_lower <= bound.epsilon <= 1.2 * native.epsilon


def test_a_cell_with_a_table_that_claims_nothing_leaves_the_lower_bound() -> None:
    """A table without a claimed pair gives no lower curve: its cell is left out of the lower
    bound (a sub-composition), the other cells keep theirs."""
    tables = [_rr_table(0.01 * (1 + i / 300), f"rr{i}") for i in range(300)]
    tables[0] = _rr_table(0.01, "rr0", claim=False)
    upper, cells_up, cells_low = grouped_tabulated({t: 1 for t in tables}, 256, Adjacency())
    assert upper == {}
    size = math.ceil(300 / TABULATED_CELLS)  # runs of 5 neighbours: 60 cells
    assert len(cells_up) == math.ceil(300 / size)
    assert sum(k for _, k in cells_low) == 300 - size
    bound = account(ComposedEvent(tables), delta=1e-5).bound
    assert bound.epsilon_lower > 0.0


def test_one_member_cells_are_the_members_themselves(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cell of one member composes the member itself: its table above, its claimed pair's
    own curves below."""
    table = _rr_table(0.2, "solo")
    assert upper_table([table]) is table
    monkeypatch.setattr(tabulated_cells, "TABULATED_LIMIT", 0)
    _, up, low = grouped_tabulated({table: 3}, 0, Adjacency())
    assert up == {table: 3}
    assert len(low) == 1 and low[0][1] == 3
    own = leaf_profiles(table, Adjacency())
    assert low[0][0].lower_remove.name == own.lower_remove.name


def test_few_tables_or_few_leaves_are_not_grouped() -> None:
    tables: dict[Event, int] = {_rr_table(0.01 * (1 + i / 50), f"t{i}"): 1 for i in range(50)}
    assert grouped_tabulated(tables, 256, Adjacency()) == (tables, {}, [])
    many: dict[Event, int] = {GaussianEvent(1 + i / 300): 1 for i in range(300)}
    assert grouped_tabulated({**many, **tables}, 256, Adjacency())[0] == {**many, **tables}
