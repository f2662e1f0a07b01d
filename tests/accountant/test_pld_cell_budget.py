"""Blocks by cell of many Laplace leaves take their count off the representatives' budgets
(:data:`dpledger.accountant.pld.BLOCK_BUDGET_SHARE`, ``representative_components``'s
``reserved``), so the components stay about as many as without the blocks; fine blocks do
not (their compositions are unchanged)."""

from __future__ import annotations

import numpy as np
import pytest

import dpledger.accountant.pld_blocks as blocks_module
from dpledger.accountant.pld_blocks import block_components, is_cell_block
from dpledger.accountant.pld_components import (
    MAX_COMPONENTS,
    MAX_ROUNDED_COMPONENTS,
    representative_components,
)
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    Event,
    GaussianEvent,
    LaplaceEvent,
    PartitionSelectionEvent,
    PoissonSampledEvent,
)
from tests.accountant.test_review_pld_blocks import _scales


def _sampled(n: int) -> dict[Event, int]:
    rng = np.random.default_rng(3)
    rates, noises = rng.uniform(1e-4, 3e-4, n), rng.uniform(0.9, 1.1, n)
    return {
        PoissonSampledEvent(float(q), GaussianEvent(float(s))): 1
        for q, s in zip(rates, noises, strict=True)
    }


@pytest.mark.parametrize("reserved", [40, 120])
def test_reserved_components_come_off_the_budgets(reserved: int) -> None:
    merged = _sampled(3000)
    up0, low0, step0 = representative_components(merged, 256)
    up, low, step = representative_components(merged, 256, reserved)
    assert step >= step0 and len(up) <= len(up0) and len(low) <= len(low0)
    assert len(up) <= max(MAX_COMPONENTS, MAX_ROUNDED_COMPONENTS) - reserved
    # every leaf stands for itself in both directions: counts are kept
    assert sum(up.values()) == sum(low.values()) == len(merged)


def test_only_blocks_by_cell_are_marked(monkeypatch: pytest.MonkeyPatch) -> None:
    merged: dict[Event, int] = {LaplaceEvent(float(b)): 1 for b in _scales(400, 1000, 1050, 4)}
    merged[GaussianEvent(1.0)] = 1
    _, fine = block_components(merged, Adjacency())
    assert fine and not any(is_cell_block(d) for d, _ in fine)
    monkeypatch.setattr(blocks_module, "MAX_BLOCKS", 10)
    _, cells = block_components(merged, Adjacency())
    assert 0 < len(cells) <= 10 and all(is_cell_block(d) for d, _ in cells)
    # the mark is a name only: the curves are those of the unmarked blocks
    d = cells[0][0]
    assert d.remove is d.add and d.lower_remove is d.lower_add
    assert d.remove.delta is not None and d.lower_remove.dual is not None


def test_no_reservation_where_unrounded_leaves_alone_exceed_the_reduced_budget():
    """200 partition selections (never rounded) beside 400 distinct sampled Gaussians: a
    reservation of 72 leaves no step that fits, and must not coarsen the Gaussians' step to
    the grid's coarsest (it was 6.39 against 0.108 without it)."""
    rng = np.random.default_rng(1)
    merged: dict[Event, int] = {
        PartitionSelectionEvent("laplace", float(e), 1e-10): 1 for e in rng.uniform(0.01, 0.02, 200)
    }
    rates, noises = rng.uniform(1e-3, 3e-3, 400), rng.uniform(0.8, 1.2, 400)
    for q, s in zip(rates, noises, strict=True):
        merged[PoissonSampledEvent(float(q), GaussianEvent(float(s)))] = 1
    plain = representative_components(merged, 256)
    reserved = representative_components(merged, 256, 72)
    assert plain[2] < 0.2
    assert reserved[2] == plain[2] and reserved[0] == plain[0]
