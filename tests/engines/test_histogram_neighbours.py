"""Adversarial neighbouring tables for the histogram: one unit with rows in every partition and
every bin (values on the edges, far outside them, repeated), removed or replaced, never moves
more than L0 partitions, nor one partition's bins by more than L∞ in L1 (2·L0 and 2·L∞ when it
is replaced), and a row-level table's row moves one cell by one."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dpledger.runtime.engines import aggregation_request
from dpledger.runtime.engines.bounding import bound_chunk
from dpledger.runtime.engines.protocol import BoundedAggregates, combine
from tests.engines.conftest import PARAMS

EDGES = [0.0, 1.0, 2.5, 5.0, 10.0]
BINS = len(EDGES) - 1
DAYS = np.array([f"d{i}" for i in range(8)], dtype=object)
#: values a victim picks from: every edge, just beside them, and far outside the range
NASTY = np.array([-1e300, -1.0, 0.0, 1e-300, 1.0, np.nextafter(1.0, 0), 2.5, 4.99, 5.0, 10.0,
                  np.nextafter(10.0, 11), 11.0, 1e300])  # fmt: skip


def _query(**changes: Any) -> Any:
    params = {**PARAMS, "metrics": ["count", "histogram"], "bin_edges": EDGES, **changes}
    return aggregation_request(params).query


def _histograms(table: dict[str, Any], query: Any) -> dict[str, np.ndarray]:
    agg: BoundedAggregates = combine([bound_chunk(table, query, None)])
    every = [f"s:{d}" for d in DAYS]
    rows = agg.histograms(every, BINS)
    assert all(sum(r) == agg.row(k)[0] for k, r in zip(every, rows, strict=True))
    return {k: np.asarray(r, dtype=np.int64) for k, r in zip(every, rows, strict=True)}


def _table(rng: np.random.Generator, victim_rows: int, others: int = 30) -> dict[str, Any]:
    """``others`` light units and the victim (unit -1) with ``victim_rows`` nasty rows."""
    n = others * 3
    users = np.r_[rng.integers(0, others, n), np.full(victim_rows, -1)]
    days = np.r_[rng.choice(DAYS, n), rng.choice(DAYS, victim_rows)]
    spend = np.r_[rng.uniform(-3.0, 14.0, n), rng.choice(NASTY, victim_rows)]
    return {"user": users, "day": days.astype(object), "spend": spend}


def _moves(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> np.ndarray:
    return np.stack([a[k] - b[k] for k in a])  # partitions x bins


@pytest.mark.parametrize(("l0", "linf"), [(1, 1), (2, 2), (3, 1), (1, 4)])
def test_removing_a_unit_with_rows_everywhere_moves_at_most_l0_partitions_by_linf(
    l0: int, linf: int
) -> None:
    rng = np.random.default_rng(100 * l0 + linf)
    query = _query(max_partitions_per_unit=l0, max_rows_per_partition=linf)
    for _ in range(40):
        table = _table(rng, int(rng.integers(1, 60)))
        keep = table["user"] != -1
        d = _moves(_histograms(table, query), _histograms(_rows(table, keep), query))
        assert d.min() >= 0  # removing rows never adds to a bin
        assert (d.sum(axis=1) > 0).sum() <= l0
        assert d.sum(axis=1).max() <= linf
        assert np.abs(d).sum() <= query.sensitivity("histogram", "l1")
        assert np.sqrt((d.astype(float) ** 2).sum()) <= query.sensitivity("histogram", "l2")


@pytest.mark.parametrize(("l0", "linf"), [(1, 1), (2, 2), (3, 2)])
def test_replacing_a_unit_s_rows_moves_at_most_twice_the_bounds(l0: int, linf: int) -> None:
    """Replace-one: the old rows' cells and the new rows' cells, each within the bounds."""
    rng = np.random.default_rng(7 + l0 + linf)
    query = _query(max_partitions_per_unit=l0, max_rows_per_partition=linf)
    for _ in range(40):
        table = _table(rng, int(rng.integers(1, 40)))
        other = _table(rng, int(rng.integers(1, 40)))
        light = table["user"] != -1
        victim = other["user"] == -1
        replaced = {c: np.r_[table[c][light], other[c][victim]] for c in table}
        d = _moves(_histograms(table, query), _histograms(replaced, query))
        assert (np.abs(d).sum(axis=1) > 0).sum() <= 2 * l0
        assert np.abs(d).sum(axis=1).max() <= 2 * linf
        assert np.abs(d).sum() <= 2 * query.sensitivity("histogram", "l1")


def test_the_other_units_rows_kept_do_not_depend_on_the_victim() -> None:
    """Bounding reads one unit's own rows: the victim's rows, whatever they are, leave every
    other unit's contribution as it was (the histogram of the others is the same)."""
    rng = np.random.default_rng(11)
    query = _query(max_partitions_per_unit=2, max_rows_per_partition=1)
    base = _table(rng, 0)
    alone = _histograms(base, query)
    for _ in range(20):
        table = _table(rng, int(rng.integers(1, 80)), others=0)
        victim_only = _histograms(table, query)
        both = _histograms({c: np.r_[base[c], table[c]] for c in base}, query)
        assert all(np.array_equal(both[k], alone[k] + victim_only[k]) for k in both)


def test_a_row_level_row_moves_one_cell_by_one() -> None:
    rng = np.random.default_rng(3)
    query = _query(unit_column=None, max_partitions_per_unit=1, max_rows_per_partition=1)
    table = _table(rng, 40)
    table.pop("user")
    full = _histograms(table, query)
    for i in rng.choice(table["day"].size, 25, replace=False):
        keep = np.arange(table["day"].size) != i
        d = _moves(full, _histograms(_rows(table, keep), query))
        assert d.min() >= 0 and d.sum() == 1


def _rows(table: dict[str, Any], keep: np.ndarray) -> dict[str, Any]:
    return {c: v[keep] for c, v in table.items()}
