"""The in-memory engine (the default; numpy only): the whole table is one chunk.

A table is a mapping of columns (a dict of arrays, a pandas DataFrame) or a file: CSV with a
header row (read by the standard library) or Parquet (read by pyarrow, which the ``dask`` and
``spark`` extras install).
"""

from __future__ import annotations

import csv
import importlib
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import attrs

from dpledger.core.errors import InvalidParameterError
from dpledger.runtime.engines.bounding import bound_chunk
from dpledger.runtime.engines.protocol import BoundedAggregates, combine
from dpledger.runtime.engines.query import AggregationQuery

__all__ = ["MemoryEngine", "read_table", "table_path"]

FORMATS = (".parquet", ".csv")


def table_path(source: Any) -> Path | None:
    """The file ``source`` names (checked), or None for a mapping of columns."""
    if isinstance(source, Mapping) or hasattr(source, "columns"):
        return None
    if not isinstance(source, str | Path):
        raise InvalidParameterError(
            "table",
            f"must be a file or a mapping of columns, got {type(source).__name__}",
            "name a .parquet or .csv file",
        )
    path = Path(source)
    if path.suffix.lower() not in FORMATS:
        raise InvalidParameterError(
            "table", f"{path.name} is neither Parquet nor CSV", "use a .parquet or .csv file"
        )
    if not path.is_file():
        raise InvalidParameterError("table", f"{path} does not exist", "name an existing file")
    return path


def _cell(text: str) -> Any:
    """A CSV cell as an integer, a float or text (empty: missing)."""
    if text == "":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _read_csv(path: Path, columns: tuple[str, ...]) -> dict[str, list[Any]]:
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            raise InvalidParameterError("table", f"{path.name} is empty", "give it a header row")
        missing = [c for c in columns if c not in header]
        if missing:
            raise InvalidParameterError(
                missing[0], f"is not a column of {path.name}", f"name one of {sorted(header)}"
            )
        where = [header.index(c) for c in columns]
        out: dict[str, list[Any]] = {c: [] for c in columns}
        for row in reader:
            for c, i in zip(columns, where, strict=True):
                out[c].append(_cell(row[i]) if i < len(row) else None)
    return out


def _read_parquet(path: Path, columns: tuple[str, ...]) -> dict[str, Any]:
    try:
        pq = importlib.import_module("pyarrow.parquet")
    except ImportError:
        raise InvalidParameterError(
            "table", "reading Parquet needs pyarrow", "pip install 'dpledger[dask]'"
        ) from None
    names = pq.read_schema(path).names
    missing = [c for c in columns if c not in names]
    if missing:
        raise InvalidParameterError(
            missing[0], f"is not a column of {path.name}", f"name one of {sorted(names)}"
        )
    table = pq.read_table(path, columns=list(columns))
    return {c: table.column(c).to_numpy(zero_copy_only=False) for c in columns}


def read_table(source: Any, columns: tuple[str, ...]) -> Mapping[str, Any]:
    """The named columns of ``source`` (a file or a mapping of columns)."""
    path = table_path(source)
    if path is None:
        return source  # type: ignore[no-any-return]
    if path.suffix.lower() == ".csv":
        return _read_csv(path, columns)
    return _read_parquet(path, columns)


@attrs.frozen
class _Bounded:
    aggregates: BoundedAggregates


class MemoryEngine:
    """Everything in this process: one chunk, bounded by the framework's code."""

    name = "memory"

    def bound_contributions(
        self, source: Any, query: AggregationQuery, public: Collection[str] | None
    ) -> _Bounded:
        return _Bounded(combine([bound_chunk(read_table(source, query.columns), query, public)]))

    def aggregate_per_key(self, bounded: _Bounded) -> BoundedAggregates:
        return bounded.aggregates

    def count_users_per_key(self, bounded: _Bounded) -> dict[str, int]:
        agg = bounded.aggregates
        return dict(zip(agg.keys, agg.units, strict=True))
