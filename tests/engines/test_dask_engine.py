"""The Dask engine's local plan: slices of a row group, spilled buckets, merged partials; the
same bits as in memory whatever the bucket count, slice size or scheduler; nothing left on disk."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpledger.core.errors import InvalidParameterError
from dpledger.runtime.engines import aggregate_table, aggregation_request
from dpledger.runtime.engines import dask_engine as dask_module
from dpledger.runtime.engines.query import AggregationQuery
from tests.engines.conftest import PARAMS, ledger

dask = pytest.importorskip("dask")
ARRAYS = ("count", "sum", "mean")


def run(source: Any, engine: str, **changes: Any) -> dict[str, Any]:
    params = {**PARAMS, **changes, "engine": engine}
    book = ledger(7, params)
    out = aggregate_table(aggregation_request(params), source, book)
    book.verify()
    return out


def same_bits(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a["partitions"] == b["partitions"] and all(
        np.asarray(a[k]).tobytes() == np.asarray(b[k]).tobytes() for k in ARRAYS
    )


@pytest.fixture
def small_buckets(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Buckets of about 40 rows and slices of 70 (the 600-row table: 15 buckets, two levels
    of merges; the Parquet file's row groups of 150 rows: three slices each); the spill
    directory under ``tmp_path``."""
    monkeypatch.setattr(dask_module, "BUCKET_ROWS", 40)
    monkeypatch.setattr(dask_module, "SLICE_ROWS", 70)
    where = tmp_path / "spill"
    where.mkdir()
    monkeypatch.setitem(dask.config.config, "temporary_directory", str(where))
    return where


@pytest.mark.parametrize("form", ["columns", "parquet", "csv"])
def test_many_buckets_and_slices_give_the_in_memory_bits(
    form: str, table: dict[str, Any], table_files: dict[str, Path], small_buckets: Path
) -> None:
    source = table if form == "columns" else table_files[form]
    assert same_bits(run(source, "memory"), run(source, "dask"))
    assert list(small_buckets.iterdir()) == []  # the spill files are removed


def test_row_level_slices_give_the_in_memory_bits(
    table_files: dict[str, Path], small_buckets: Path
) -> None:
    row_level = {"unit_column": None, "max_partitions_per_unit": 1, "max_rows_per_partition": 1}
    source = table_files["parquet"]
    assert same_bits(run(source, "memory", **row_level), run(source, "dask", **row_level))


@pytest.mark.parametrize("scheduler", ["sync", "threads"])
def test_the_local_schedulers_give_the_same_bits(
    scheduler: str, table_files: dict[str, Path], small_buckets: Path
) -> None:
    with dask.config.set(scheduler=scheduler):
        assert dask_module._local(dask)
        out = run(table_files["parquet"], "dask")
    assert same_bits(run(table_files["parquet"], "memory"), out)


def test_a_cluster_scheduler_shuffles_on_the_unit_column(
    table: dict[str, Any], table_files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("dask.dataframe")
    monkeypatch.setattr(dask_module, "_local", lambda dask: False)
    for source in (table, table_files["parquet"]):
        assert same_bits(run(source, "memory"), run(source, "dask"))


def test_no_slice_holds_more_than_slice_rows(
    table: dict[str, Any], table_files: dict[str, Path], small_buckets: Path
) -> None:
    pd = pytest.importorskip("pandas")
    query = aggregation_request({**PARAMS, "engine": "dask"}).query
    plan = dask_module.DaskEngine()._plan(table_files["parquet"], query, None)
    assert plan.buckets == 15 and len(plan.pieces) == 4  # 600 rows, row groups of 150
    sizes = [len(s["user"]) for p in plan.pieces for s in dask_module._slices(p, query.columns)]
    assert sizes == [70, 70, 10] * 4
    frame = pd.DataFrame(table)
    sizes = [len(s["user"]) for s in dask_module._slices(frame, query.columns)]
    assert max(sizes) == 70 and sum(sizes) == 600


def test_a_unit_goes_to_one_bucket_whichever_slice_holds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Units split across slices and pieces, with integer ids read as integers in one piece
    and as floats in another, land in the same bucket: the bounds hold per unit."""
    monkeypatch.setattr(dask_module, "SLICE_ROWS", 3)
    query = AggregationQuery("k", "v", "u", 1, 1, 0.0, 1.0)
    pieces = [
        {"k": np.array(["a", "b", "c", "d"]), "u": np.array([1, 2, 1, 2]), "v": np.ones(4)},
        {"k": np.array(["e", "f"]), "u": np.array([1.0, 2.0]), "v": np.ones(2)},
    ]
    pd = pytest.importorskip("pandas")
    index = [
        dask_module._spill(pd.DataFrame(p), i, str(tmp_path), query, 7)
        for i, p in enumerate(pieces)
    ]
    buckets = [b for b in range(7) if any(b in i for i in index)]
    assert len(buckets) <= 2
    parts = [dask_module._bound_bucket(b, str(tmp_path), query, None, index) for b in range(7)]
    merged = dask_module._merge(*parts)
    kept = {k: c for k, c in zip(merged["key"], merged["count"], strict=True)}
    assert kept.pop("#rows") == 6 and sum(kept.values()) == 2  # L0 = L∞ = 1, two units


def test_a_refusal_inside_a_task_is_one_line_and_leaves_no_spill_file(
    table: dict[str, Any], small_buckets: Path
) -> None:
    bad = dict(table)
    bad["user"] = np.asarray(table["user"], dtype=object)
    bad["user"][599] = None
    params = {**PARAMS, "engine": "dask"}
    book = ledger(7, params)
    with pytest.raises(InvalidParameterError, match=r"^user: holds missing values"):
        aggregate_table(aggregation_request(params), bad, book)
    assert book.log == [] and list(small_buckets.iterdir()) == []


def test_a_file_that_is_not_parquet_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "t.parquet"
    path.write_text("user,day,spend\n1,mon,2.0\n")
    params = {**PARAMS, "engine": "dask"}
    book = ledger(7, params)
    with pytest.raises(InvalidParameterError, match=r"^table: could not be read as Parquet"):
        aggregate_table(aggregation_request(params), path, book)
    assert book.log == []


@pytest.mark.parametrize("unit", [1, np.int64(1), True])
def test_a_unit_written_as_an_integer_in_one_chunk_and_as_text_in_another_is_one_unit(
    unit: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A column of Python objects mixing integers and text is text throughout, as the
    in-memory engine reads it whole: the chunk holding only ``1`` and the one holding
    ``"1"`` must not make two units of one (each would keep its own L0 · L∞ rows)."""
    monkeypatch.setattr(dask_module, "BUCKET_ROWS", 4)
    n = 40
    users = np.empty(n, dtype=object)
    users[:20] = [unit] * 20  # the first Dask partition: the unit as an integer only
    users[20:] = [str(unit)] * 10 + ["x"] * 10
    table = {
        "user": users,
        "day": np.array(["mon", "tue", "wed", "fri"] * 10, dtype=object),
        "spend": np.ones(n),
    }
    changes = {"max_partitions_per_unit": 1, "max_rows_per_partition": 1}
    mem, dsk = run(table, "memory", **changes), run(table, "dask", **changes)
    assert same_bits(mem, dsk)
    query = aggregation_request({**PARAMS, **changes, "engine": "dask"}).query
    engine = dask_module.DaskEngine()
    assert sum(engine.aggregate_per_key(engine.bound_contributions(table, query, None)).counts) == 2
