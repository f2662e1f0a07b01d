"""The Spark engine (``pip install 'dpledger[spark]'``): the DataFrame API only, no RDDs.

At unit level the table is repartitioned on the unit column, so each Spark partition holds
every row of its units; ``mapInPandas`` runs the framework's
:func:`~dpledger.runtime.engines.bounding.bound_chunk` on each partition, and only the bounded
aggregates are collected. Nothing here uses an RDD, so the same plan runs over Spark Connect.
The session is the active one if there is one, else a local session started here.
"""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from dpledger.core.errors import InvalidParameterError
from dpledger.runtime.engines.dask_engine import frame_of, import_engine_module, partial_frame
from dpledger.runtime.engines.memory import table_path
from dpledger.runtime.engines.protocol import BoundedAggregates, combine
from dpledger.runtime.engines.query import AggregationQuery

__all__ = ["LOCAL_CONF", "SCHEMA", "SparkEngine", "spark_session"]

#: the schema of the bounded aggregates a partition returns
SCHEMA = "key string, count long, sum long, units long"
#: a refusal raised by the framework's code inside a Python worker
_REFUSAL = re.compile(r"InvalidParameterError: ([^:\n]+): ([^\n]*?)\. Fix: ([^\n]*)")


@contextmanager
def quiet() -> Iterator[None]:
    """Spark's warning that it does not fully support pandas 3 (the engine passes it numpy
    columns and plain integers only) is silenced for the engine's own calls."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="PySpark does not yet", category=FutureWarning)
        yield


#: the local session's settings (``conf`` of :func:`spark_session` adds or overrides)
LOCAL_CONF = {
    "spark.sql.shuffle.partitions": "4",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.pyspark.fallback.enabled": "false",
}


def spark_session(master: str = "local[2]", conf: Mapping[str, str] | None = None) -> Any:
    """The active Spark session, else a local one on ``master`` with :data:`LOCAL_CONF` and
    ``conf`` (one line if Spark cannot start)."""
    sql = import_engine_module("pyspark.sql", "spark")
    active = sql.SparkSession.getActiveSession()
    if active is not None:
        return active
    try:
        builder = sql.SparkSession.builder.master(master).appName("dpledger")
        for key, value in {**LOCAL_CONF, **(conf or {})}.items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
        return session
    except Exception as exc:  # Java missing, a port taken, ...: one line, never a traceback
        reason = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        raise InvalidParameterError(
            "engine",
            f"a Spark session could not start ({reason})",
            'install Java 17 or later (java on PATH or JAVA_HOME), or use engine = "dask"',
        ) from None


def _partition(
    frames: Iterator[Any], query: AggregationQuery, public: Collection[str] | None
) -> Iterator[Any]:
    """``mapInPandas``: one partition's bounded aggregates (all its batches bounded as one
    chunk, since a unit's rows may span batches)."""
    import pandas as pd

    warnings.filterwarnings("ignore", message="PySpark does not yet", category=FutureWarning)
    batches = list(frames)
    frame = pd.concat(batches) if batches else pd.DataFrame({c: [] for c in query.columns})
    yield partial_frame(frame, query, public, pd)


def _refusal(exc: Exception) -> InvalidParameterError | None:
    match = _REFUSAL.search(str(exc))
    return InvalidParameterError(*match.groups()) if match else None


class SparkEngine:
    """Bounding in ``mapInPandas`` on a Spark DataFrame."""

    name = "spark"

    def _frame(self, spark: Any, source: Any, query: AggregationQuery) -> Any:
        path = table_path(source)
        if path is None:
            pd = import_engine_module("pandas", "spark")
            keys = tuple(c for c in (query.partition_column, query.unit_column) if c is not None)
            return spark.createDataFrame(frame_of(source, query.columns, pd, keys))
        if path.suffix.lower() == ".csv":
            df = spark.read.csv(str(path), header=True, inferSchema=True)
        else:
            df = spark.read.parquet(str(path))
        for column in query.columns:
            if column not in df.columns:
                raise InvalidParameterError(
                    column, f"is not a column of {path.name}", f"name one of {sorted(df.columns)}"
                )
        return df.select(*query.columns)

    def bound_contributions(
        self, source: Any, query: AggregationQuery, public: Collection[str] | None
    ) -> Any:
        with quiet():
            spark = spark_session()
            df = self._frame(spark, source, query)
            if query.unit_column is not None:
                df = df.repartition(query.unit_column)
            chunk = functools.partial(_partition, query=query, public=public)
            return df.mapInPandas(chunk, SCHEMA)

    def aggregate_per_key(self, bounded: Any) -> BoundedAggregates:
        try:
            with quiet():
                rows = bounded.collect()
        except Exception as exc:
            refusal = _refusal(exc)
            if refusal is None:
                raise
            raise refusal from None
        return combine(
            [
                {
                    "key": [r["key"] for r in rows],
                    "count": [r["count"] for r in rows],
                    "sum": [r["sum"] for r in rows],
                    "units": [r["units"] for r in rows],
                }
            ]
        )

    def count_users_per_key(self, bounded: Any) -> dict[str, int]:
        agg = self.aggregate_per_key(bounded)
        return dict(zip(agg.keys, agg.units, strict=True))
