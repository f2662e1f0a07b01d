"""PLD blocks of distinct Laplace leaves grouped by cell of a coarser scale grid
(:mod:`dpledger.accountant.pld_blocks`, ``CELL_ROUNDINGS``): where the fine rounding leaves
more than MAX_BLOCKS blocks, each block holds one cell's leaves, rounded to its costliest
(upper) and cheapest (lower) member; checked per leaf, against the semi-exact reference of
``test_review_pld_blocks`` and against the leaf-by-leaf certified bracket."""

from __future__ import annotations

import pytest

import dpledger.accountant.pld_blocks as blocks_module
from dpledger.accountant.pld_blocks import _blocks, _grouped
from dpledger.core.events import Event, LaplaceEvent
from tests.accountant.test_review_pld_blocks import (
    _check_against_reference,
    _meets,
    _mixed,
    _scales,
)


def _noise(leaf: Event) -> float:
    assert isinstance(leaf, LaplaceEvent)
    return float(leaf.noise_multiplier)


@pytest.mark.parametrize("rounding", [2e-3, 1.2e-2, 5e-2])
def test_cell_blocks_round_each_leaf_to_its_side(rounding: float) -> None:
    """Per position, the upper leaf has at most the noise of the leaf it stands for and the
    lower leaf at least, within the rounding; every leaf counted once; each block is one cell
    (one upper leaf, one lower leaf)."""
    scales = _scales(3000, 1581, 3162, 11)
    events: dict[Event, int] = {LaplaceEvent(float(b)): 1 + i % 40 for i, b in enumerate(scales)}
    found = _blocks(events, rounding, by_cell=True)
    ups = sorted(_noise(e) for u, _, t in found for e in u * t)
    downs = sorted(_noise(e) for _, d, t in found for e in d * t)
    own = sorted(_noise(e) for e, k in events.items() for _ in range(k))
    assert len(ups) == len(downs) == len(own)
    assert all(u <= o <= d for u, o, d in zip(ups, own, downs, strict=True))
    assert all(o <= u * (1 + rounding) ** 2 for u, o in zip(ups, own, strict=True))
    for upper, lower, _ in found:
        assert len(set(upper)) == 1 and len(set(lower)) == 1
    # a cell gives at most two distinct blocks (its full blocks and its rest)
    cells = {u[0] for u, _, _ in found}
    assert len(found) <= 2 * len(cells)


def test_grouped_keeps_the_fine_blocks_within_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fine rounding stays where it fits MAX_BLOCKS; else the first cell rounding that fits
    is taken."""
    events: dict[Event, int] = {LaplaceEvent(float(b)): 1 for b in _scales(4000, 1581, 3162, 5)}
    fine = _blocks(events)
    monkeypatch.setattr(blocks_module, "MAX_BLOCKS", len(fine))
    assert _grouped(events) == fine
    monkeypatch.setattr(blocks_module, "MAX_BLOCKS", 100)
    monkeypatch.setattr(blocks_module, "MAX_CELL_BLOCKS", 100)
    found = _grouped(events)
    assert 0 < len(found) <= 100
    first = next(
        r for r in blocks_module.CELL_ROUNDINGS if len(_blocks(events, r, by_cell=True)) <= 100
    )
    assert found == _blocks(events, first, by_cell=True)


def test_cell_blocks_against_the_semi_exact_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """400 distinct Laplace leaves (scales 1000..1050) beside a Gaussian, with a budget of 10
    blocks (the fine rounding gives 13, cells of 1.2 % give 9): the cell blocks' bracket is
    sound against the semi-exact reference (which also checks that blocks were made)."""
    monkeypatch.setattr(blocks_module, "MAX_BLOCKS", 10)
    scales = _scales(400, 1000, 1050, 4)
    events: dict[Event, int] = {LaplaceEvent(float(b)): 1 for b in scales}
    assert len(_blocks(events)) > 10 and 0 < len(_grouped(events)) <= 10
    _check_against_reference(scales, 1.0, "add_remove", [1e-6], 4e-6)


@pytest.mark.slow
@pytest.mark.parametrize("relation", ["add_remove", "replace_one"])
def test_cell_blocks_meet_the_leaf_by_leaf_bracket(
    relation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1500 Laplace leaves grouped by cell (budget of 24 blocks, 47 at the fine rounding)
    beside a Gaussian: the bracket meets the leaf-by-leaf one, delta 1e-1..1e-30."""
    monkeypatch.setattr(blocks_module, "MAX_BLOCKS", 24)
    leaves = _mixed(8, 1500, 1000, 1150, "g")
    events: dict[Event, int] = {leaf: 1 for leaf in leaves if isinstance(leaf, LaplaceEvent)}
    assert len(_blocks(events)) > 24 and 0 < len(_grouped(events)) <= 24
    _meets(leaves, relation, [1e-1, 1e-3, 1e-5, 1e-10, 1e-20, 1e-30])


def test_noises_with_one_reciprocal_round_each_side_to_its_own_end():
    """Two noises that are adjacent doubles share a cost (1 / noise): the upper side still takes
    the smaller noise and the lower side the larger, whatever order the ledger lists them in."""
    x, y = 6074.225042156455, 6074.225042156456
    assert 1 / x == 1 / y
    for made in (
        {LaplaceEvent(x): 40, LaplaceEvent(y): 40},
        {LaplaceEvent(y): 40, LaplaceEvent(x): 40},
    ):
        for rounding in (blocks_module.ROUNDING, 0.016):
            for upper, lower, _ in _blocks(made, rounding):
                assert {e.noise_multiplier for e in upper} == {x}
                assert {e.noise_multiplier for e in lower} == {y}
