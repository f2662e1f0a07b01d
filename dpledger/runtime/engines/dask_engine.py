"""The Dask engine (``pip install 'dpledger[dask]'``): bounding runs on the dataframe's chunks.

At unit level the table is shuffled on the unit column first, so each chunk holds every row of
its units; each chunk is then bounded by the framework's
:func:`~dpledger.runtime.engines.bounding.bound_chunk` (``map_partitions``), and only the
chunks' bounded aggregates reach the driver.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Collection, Mapping
from typing import Any

from dpledger.core.errors import InvalidParameterError
from dpledger.runtime.engines.bounding import PARTIAL_COLUMNS, bound_chunk
from dpledger.runtime.engines.memory import table_path
from dpledger.runtime.engines.protocol import BoundedAggregates, combine
from dpledger.runtime.engines.query import AggregationQuery

__all__ = ["DaskEngine", "frame_of", "import_engine_module", "missing_engine", "partial_frame"]


def missing_engine(engine: str, module: str) -> InvalidParameterError:
    """The one line for an engine whose package is not installed."""
    return InvalidParameterError(
        "engine",
        f"{engine!r} needs {module}, which is not installed",
        f"pip install 'dpledger[{engine}]', or use engine = \"memory\"",
    )


def import_engine_module(name: str, engine: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        raise missing_engine(engine, name.split(".")[0]) from None


def partial_frame(
    frame: Any, query: AggregationQuery, public: Collection[str] | None, pandas: Any
) -> Any:
    """One chunk's bounded aggregates as a pandas DataFrame."""
    columns = {c: frame[c].to_numpy() for c in query.columns}
    part = bound_chunk(columns, query, public)
    out = pandas.DataFrame({"key": pandas.Series(part["key"], dtype=object)})
    for name in PARTIAL_COLUMNS[1:]:
        out[name] = pandas.Series(part[name], dtype="int64")
    return out


def _check_columns(present: Collection[str], query: AggregationQuery, where: str) -> None:
    for column in query.columns:
        if column not in present:
            raise InvalidParameterError(
                column, f"is not a column of {where}", f"name one of {sorted(present)}"
            )


class DaskEngine:
    """Bounding on a Dask dataframe's chunks (threads scheduler unless one is configured)."""

    name = "dask"

    def __init__(self, npartitions: int = 2) -> None:
        self.npartitions = npartitions

    def _frame(self, source: Any, query: AggregationQuery) -> Any:
        dd = import_engine_module("dask.dataframe", "dask")
        pd = import_engine_module("pandas", "dask")
        path = table_path(source)
        if path is None:
            frame = frame_of(source, query.columns, pd)
            dask = import_engine_module("dask", "dask")
            with dask.config.set({"dataframe.convert-string": False}):  # keep the columns' types
                return dd.from_pandas(frame, npartitions=self.npartitions)
        reader = dd.read_csv if path.suffix.lower() == ".csv" else dd.read_parquet
        ddf = reader(str(path))
        _check_columns(list(ddf.columns), query, path.name)
        return ddf[list(query.columns)]

    def bound_contributions(
        self, source: Any, query: AggregationQuery, public: Collection[str] | None
    ) -> Any:
        pd = import_engine_module("pandas", "dask")
        ddf = self._frame(source, query)
        if query.unit_column is not None:
            ddf = ddf.shuffle(on=query.unit_column)
        meta = pd.DataFrame({"key": pd.Series([], dtype=object)})
        for name in PARTIAL_COLUMNS[1:]:
            meta[name] = pd.Series([], dtype="int64")
        chunk = functools.partial(partial_frame, query=query, public=public, pandas=pd)
        return ddf.map_partitions(chunk, meta=meta)

    def aggregate_per_key(self, bounded: Any) -> BoundedAggregates:
        try:
            frame = bounded.compute()
        except (ValueError, TypeError) as exc:  # a reader's type error, not the framework's
            if isinstance(exc, InvalidParameterError):
                raise
            first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else "unreadable"
            raise InvalidParameterError(
                "table", f"could not be read by dask ({first})", "give each column one type"
            ) from None
        return combine([{c: frame[c].tolist() for c in PARTIAL_COLUMNS}])

    def count_users_per_key(self, bounded: Any) -> dict[str, int]:
        agg = self.aggregate_per_key(bounded)
        return dict(zip(agg.keys, agg.units, strict=True))


def frame_of(source: Mapping[str, Any], columns: tuple[str, ...], pandas: Any) -> Any:
    """A pandas DataFrame of the named columns of a mapping of columns."""
    missing = [c for c in columns if c not in source]
    if missing:
        raise InvalidParameterError(
            missing[0], "is not a column of the table", f"name one of {sorted(source)}"
        )
    return pandas.DataFrame({c: source[c] for c in columns})
