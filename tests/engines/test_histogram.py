"""The histogram metric: bins counted by the engine's own code, bit-identical on every engine,
the unit's bounds held, values outside the edges in the end bins, bad bins refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpledger.core.errors import InvalidParameterError
from dpledger.runtime.engines import aggregate_table, aggregation_request
from dpledger.runtime.engines.bounding import bound_chunk
from dpledger.runtime.engines.histogram import row_bins
from dpledger.runtime.engines.protocol import combine
from tests.engines.conftest import PARAMS, ledger
from tests.engines.test_engines import run

EDGES = [0.0, 1.0, 2.5, 5.0, 10.0]
HIST: dict[str, Any] = {"metrics": ["count", "histogram"], "bin_edges": EDGES}


def hist_run(source: Any, engine: str = "memory", **changes: Any) -> tuple[dict, Any]:
    return run(source, engine, **{**HIST, **changes})


def same_histograms(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a["partitions"] == b["partitions"] and all(
        np.asarray(a[k]).tobytes() == np.asarray(b[k]).tobytes() for k in ("count", "histogram")
    )


def aggregates(table: dict[str, Any], **changes: Any) -> Any:
    query = aggregation_request({**PARAMS, **HIST, **changes}).query
    return combine([bound_chunk(table, query, None)])


def test_a_row_s_bin_is_clamped_into_the_end_bins() -> None:
    query = aggregation_request({**PARAMS, **HIST}).query
    values = np.array([-3.0, 0.0, 0.99, 1.0, 2.5, 9.99, 10.0, 1e9])
    bins = row_bins({"spend": values}, query)
    assert bins is not None and bins.tolist() == [0, 0, 0, 1, 2, 3, 3, 3]


def test_the_histogram_is_the_exact_bin_counts_and_sums_to_the_count() -> None:
    # every unit within the bounds (one row each): nothing is dropped
    rng = np.random.default_rng(5)
    n = 300
    table = {
        "user": np.arange(n),
        "day": rng.choice(np.array(["mon", "tue", "wed"], dtype=object), n),
        "spend": rng.uniform(-2.0, 14.0, n),
    }
    agg = aggregates(table)
    for day in ("mon", "tue", "wed"):
        values = np.clip(table["spend"][table["day"] == day], 0.0, 10.0)
        expected = np.histogram(values, bins=EDGES)[0]  # numpy's last bin is closed too
        assert agg.histogram(f"s:{day}", 4) == tuple(int(x) for x in expected)
        assert sum(agg.histogram(f"s:{day}", 4)) == agg.row(f"s:{day}")[0]
    assert agg.histogram("s:fri", 4) == (0, 0, 0, 0)


@pytest.mark.parametrize("form", ["columns", "parquet"])
def test_memory_and_dask_histograms_are_bit_identical(
    form: str, table: dict[str, Any], table_files: dict[str, Path]
) -> None:
    pytest.importorskip("dask.dataframe")
    source = table if form == "columns" else table_files[form]
    mem, mem_ledger = hist_run(source, "memory")
    dsk, _ = hist_run(source, "dask")
    assert same_histograms(mem, dsk)
    assert mem["histogram"].shape == (4, 4)
    assert [s["step"] for s in mem_ledger.log] == ["aggregate.count", "aggregate.histogram"]
    assert mem["plan"]["query"]["bin_edges"] == EDGES


def test_which_rows_are_kept_does_not_depend_on_the_row_order() -> None:
    """One unit's rows that clip to the same value but fall in other bins (above ``upper``)."""
    table = {
        "user": np.array([1, 1, 1, 1, 2, 2]),
        "day": np.array(["mon"] * 6, dtype=object),
        "spend": np.array([20.0, 30.0, 40.0, 12.0, 3.0, 3.0]),
    }
    edges = [0.0, 5.0, 15.0, 25.0, 50.0]
    first = aggregates(table, bin_edges=edges, upper=10.0).histogram("s:mon", 4)
    for seed in range(6):
        order = np.random.default_rng(seed).permutation(6)
        shuffled = {c: v[order] for c, v in table.items()}
        assert aggregates(shuffled, bin_edges=edges).histogram("s:mon", 4) == first
    assert sum(first) == 4  # L∞ = 2 rows of each unit


def test_one_unit_moves_the_histogram_within_its_bounds(table: dict[str, Any]) -> None:
    full = aggregates(table)
    for victim in np.unique(table["user"])[:15]:
        keep = table["user"] != victim
        less = aggregates({c: v[keep] for c, v in table.items()})
        moves = [np.subtract(full.histogram(k, 4), less.histogram(k, 4)) for k in full.keys]
        assert all(m.min() >= 0 and m.sum() <= 2 for m in moves)  # L∞ = 2 rows per key
        assert sum(int(m.sum() > 0) for m in moves) <= 2  # L0 = 2 keys


def _largest_move(table: dict[str, Any]) -> int:
    """The most rows one unit moves one key's bins by (L1), over the table's units."""
    full = aggregates(table)
    worst = 0
    for victim in np.unique(table["user"])[:15]:
        keep = table["user"] != victim
        less = aggregates({c: v[keep] for c, v in table.items()})
        for k in full.keys:
            worst = max(worst, int(np.subtract(full.histogram(k, 4), less.histogram(k, 4)).sum()))
    return worst


def test_a_planted_bug_counting_every_row_in_the_bins_is_caught(
    table: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bins counted before the L∞ bound: a unit moves a key's bins by more than L∞ = 2."""
    from dpledger.runtime.engines import bounding

    assert _largest_move(table) <= 2
    real = bounding.bin_rows
    everything: dict[str, Any] = {}

    def unbounded(codes: Any, bins: Any, names: Any, nbins: int) -> Any:
        return real(everything["codes"], everything["bins"], names, nbins)

    def spy(columns: Any, query: Any) -> Any:
        bins = real_row_bins(columns, query)
        codes = bounding.key_column(columns["day"], "day").codes
        everything.update(codes=codes, bins=bins)
        return bins

    real_row_bins = bounding.row_bins
    monkeypatch.setattr(bounding, "row_bins", spy)
    monkeypatch.setattr(bounding, "bin_rows", unbounded)
    assert _largest_move(table) > 2


@pytest.mark.parametrize("engine", ["memory", "dask"])
def test_neighbouring_tables_give_identical_public_records_with_a_histogram(
    engine: str, table: dict[str, Any]
) -> None:
    pytest.importorskip("dask.dataframe")
    keep = table["user"] != table["user"][0]
    out_d, ledger_d = hist_run(table, engine)
    out_e, ledger_e = hist_run({c: v[keep] for c, v in table.items()}, engine)
    assert ledger_d.to_dict() == ledger_e.to_dict()
    assert out_d["plan"] == out_e["plan"] and out_d["partitions"] == out_e["partitions"]
    assert out_d["histogram"].shape == out_e["histogram"].shape


def test_the_histogram_noise_has_the_declared_scale() -> None:
    rng = np.random.default_rng(3)
    n = 200
    table = {
        "user": np.arange(n),
        "day": rng.choice(np.array(["mon", "tue"], dtype=object), n),
        "spend": rng.uniform(0, 10, n),
    }
    truth = np.stack([aggregates(table).histogram(f"s:{d}", 4) for d in ("mon", "tue")])
    gaps = [
        hist_run(table, seed=seed, public_partitions=["mon", "tue"])[0]["histogram"] - truth
        for seed in range(40)
    ]
    z = np.asarray(gaps).ravel() / (2.0 * 2 * np.sqrt(2))  # multiplier x sqrt(L0) L∞
    assert abs(z.mean()) < 4 / np.sqrt(z.size) and abs(z.std() - 1) < 0.15


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"bin_edges": [0.0, 2.0, 1.0]}, "^bin_edges: must be strictly increasing"),
        ({"bin_edges": [0.0, 1.0, 1.0]}, "^bin_edges: must be strictly increasing"),
        ({"bin_edges": [1.0]}, "^bin_edges: must be a list of 2"),
        ({"bin_edges": [0.0, float("nan")]}, "^bin_edges: must be a list"),
        ({"bin_edges": [0.0, "ten"]}, "^bin_edges: must be a list"),
        ({"bin_edges": None}, "^bin_edges: is missing for a histogram"),
        ({"metrics": ["count"]}, "^bin_edges: needs a histogram"),
        ({"value_column": None}, "^value_column: is missing for a histogram"),
    ],
)
def test_bad_bins_are_refused_before_any_data_is_read(changes: Any, words: str) -> None:
    with pytest.raises(InvalidParameterError, match=words):
        aggregation_request({**PARAMS, **HIST, **changes})


@pytest.mark.parametrize("value", [float("nan"), "twelve", float("inf")])
def test_a_value_the_bins_cannot_hold_is_refused_and_nothing_is_booked(
    value: Any, table: dict[str, Any]
) -> None:
    params = {**PARAMS, **HIST, "metrics": ["histogram"]}
    bad = dict(table)
    bad["spend"] = np.asarray(table["spend"], dtype=object)
    bad["spend"][3] = value
    book = ledger(7, params)
    with pytest.raises(InvalidParameterError, match=r"^spend: holds"):
        aggregate_table(aggregation_request(params), bad, book)
    assert book.log == []
