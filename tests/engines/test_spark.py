"""The Spark engine, on one real local Spark session (module scope; every Spark check is here):
releases bit-identical to the in-memory engine's, identical public records on neighbouring
tables, and a refusal raised inside a Python worker reaching the driver as one line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpledger.core.errors import InvalidParameterError
from dpledger.runtime.engines import aggregate_table, aggregation_request, spark_engine
from tests.engines.conftest import PARAMS, ledger, make_table
from tests.engines.test_engines import run, same_bits

pytest.importorskip("pyspark")
pytest.importorskip("pandas")


#: the smallest local session: one core, one shuffle partition, no UI, the JVM's quick compiler
TINY = {
    "spark.sql.shuffle.partitions": "1",
    "spark.default.parallelism": "1",
    "spark.sql.adaptive.enabled": "false",
    "spark.driver.memory": "512m",
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    with spark_engine.quiet():
        session = spark_engine.spark_session("local[1]", TINY)
    assert session.conf.get("spark.sql.execution.arrow.pyspark.fallback.enabled") == "false"
    yield session
    session.stop()


@pytest.fixture(scope="module")
def small_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A 60-row table as one Parquet file (the default tier's one Spark job reads it)."""
    pd = pytest.importorskip("pandas")
    where = tmp_path_factory.mktemp("small")
    pd.DataFrame(make_table(60)).to_parquet(where / "t.parquet")
    return {"parquet": where / "t.parquet"}


#: every metric in the default tier's one Spark job (the histogram's bins included)
EVERY_METRIC = {"metrics": ["count", "sum", "mean", "histogram"], "bin_edges": [0.0, 2.0, 5.0]}


def test_spark_releases_from_parquet_are_bit_identical_to_the_in_memory_ones(
    spark: Any, small_files: dict[str, Path]
) -> None:
    mem, _ = run(small_files["parquet"], "memory", **EVERY_METRIC)
    spk, book = run(small_files["parquet"], "spark", **EVERY_METRIC)
    assert same_bits(mem, spk)
    assert mem["histogram"].tobytes() == spk["histogram"].tobytes()
    assert mem["histogram"].shape == (4, 2)
    assert "spark engine" in book.log[0]["note"]


@pytest.mark.slow
def test_spark_releases_from_columns_csv_and_at_row_level_are_bit_identical(
    spark: Any, table: dict[str, Any], table_files: dict[str, Path]
) -> None:
    for source in (table, table_files["csv"], table_files["parquet"]):
        assert same_bits(run(source, "memory")[0], run(source, "spark")[0]), source
    # row level (no unit column: every row is its own unit)
    row = {"unit_column": None, "max_partitions_per_unit": 1, "max_rows_per_partition": 1}
    assert same_bits(run(table, "memory", **row)[0], run(table, "spark", **row)[0])


@pytest.mark.slow
def test_neighbouring_tables_give_identical_public_records_on_spark(
    spark: Any, table: dict[str, Any]
) -> None:
    keep = table["user"] != table["user"][0]
    _, full = run(table, "spark")
    _, less = run({c: v[keep] for c, v in table.items()}, "spark")
    assert full.to_dict() == less.to_dict()
    _, full = run(table, "spark", **EVERY_METRIC)
    _, less = run({c: v[keep] for c, v in table.items()}, "spark", **EVERY_METRIC)
    assert full.to_dict() == less.to_dict()


def test_a_refusal_inside_a_spark_worker_is_one_line_and_nothing_is_booked(spark: Any) -> None:
    table = make_table(60)
    bad = dict(table)
    bad["spend"] = np.asarray(table["spend"], dtype=float).copy()
    bad["spend"][5] = np.inf
    params = {**PARAMS, "engine": "spark"}
    book = ledger(7, params)
    with pytest.raises(InvalidParameterError) as err:
        aggregate_table(aggregation_request(params), bad, book)
    assert str(err.value).startswith("spend: holds NaN or infinite values. Fix: ")
    assert "\n" not in str(err.value) and book.log == []


def test_a_spark_session_that_cannot_start_is_one_line(
    monkeypatch: pytest.MonkeyPatch, table: dict[str, Any]
) -> None:
    sql = pytest.importorskip("pyspark.sql")

    class Builder:
        def __getattr__(self, name: str) -> Any:
            return lambda *a, **k: self

        def getOrCreate(self) -> Any:
            raise RuntimeError("Java gateway process exited before sending its port number")

    monkeypatch.setattr(sql.SparkSession, "getActiveSession", staticmethod(lambda: None))
    monkeypatch.setattr(sql.SparkSession, "builder", Builder())
    params = {**PARAMS, "engine": "spark"}
    book = ledger(7, params)
    with pytest.raises(InvalidParameterError, match=r"^engine: a Spark session could not start"):
        aggregate_table(aggregation_request(params), table, book)
    assert book.log == []
