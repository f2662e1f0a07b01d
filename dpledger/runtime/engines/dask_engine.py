"""The Dask engine (``pip install 'dpledger[dask]'``): bounding runs on the table's chunks.

On Dask's local schedulers (threads, the default; processes; synchronous) the table is read in
slices of at most :data:`SLICE_ROWS` rows, one task per Parquet row group (a task holds one
slice of the file at a time) or per Dask partition of a CSV file or a frame (a task holds its
partition, ``dask.dataframe``'s block of the file). At
unit level each slice's rows are spilled to files on local disk by a keyed hash of their unit
(``bucket = hash(unit) mod B``, ``B`` about one bucket per :data:`BUCKET_ROWS` rows;
:mod:`~dpledger.runtime.engines.spill`); once every
slice is spilled, each bucket, which holds every row of its units, is bounded by the framework's
:func:`~dpledger.runtime.engines.bounding.bound_chunk`. At row level each slice is bounded as it
is read. Only the buckets' bounded aggregates reach the driver, and the memory the engine uses
does not grow with the table. The spill files hold raw rows: they live in a directory only this
user can read (under Dask's ``temporary_directory``, else the system's) and are removed when
the run ends, whether it succeeded or was refused.

With any other scheduler (a distributed cluster, whose workers share no disk) the table is
read by ``dask.dataframe``, shuffled on the unit column and bounded per partition
(``map_partitions``).

Which unit goes to which bucket changes nothing: bounding depends on one unit's rows only, and
sums are exact integers, so every engine and scheduler releases the same bits.
"""

from __future__ import annotations

import functools
import importlib
import math
from collections.abc import Collection, Iterator, Mapping
from typing import Any

import attrs
import numpy as np

from dpledger.core.errors import InvalidParameterError
from dpledger.runtime.engines.bounding import PARTIAL_COLUMNS, bound_chunk
from dpledger.runtime.engines.memory import table_path
from dpledger.runtime.engines.protocol import BoundedAggregates, combine
from dpledger.runtime.engines.query import AggregationQuery
from dpledger.runtime.engines.spill import Block, read_bucket, spill_file, write_blocks
from dpledger.runtime.engines.spill_dirs import make_spill_dir, remove_spill_dir

__all__ = [
    "BUCKET_ROWS",
    "SLICE_ROWS",
    "DaskEngine",
    "frame_of",
    "import_engine_module",
    "missing_engine",
    "partial_frame",
]

#: rows a bucket holds on average (each bucket is bounded as one chunk)
BUCKET_ROWS = 2**16
#: the most rows of the table one task holds at a time while it reads and spills
SLICE_ROWS = 2**16
#: how many buckets' partial aggregates one task merges
MERGE_FAN_IN = 8
#: bytes per CSV row assumed when the number of buckets is chosen from the file's size
CSV_ROW_BYTES = 16

Columns = dict[str, Any]


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


def _key_columns(query: AggregationQuery) -> tuple[str, ...]:
    return tuple(c for c in (query.partition_column, query.unit_column) if c is not None)


def _check_columns(present: Collection[str], query: AggregationQuery, where: str) -> None:
    for column in query.columns:
        if column not in present:
            raise InvalidParameterError(
                column, f"is not a column of {where}", f"name one of {sorted(present)}"
            )


@attrs.frozen
class _RowGroup:
    """One row group of a Parquet file, read in slices."""

    path: str
    row_group: int
    columns: tuple[str, ...]

    def slices(self) -> Iterator[Columns]:
        pa = importlib.import_module("pyarrow")
        pq = importlib.import_module("pyarrow.parquet")
        handle = pq.ParquetFile(self.path, buffer_size=1 << 20, pre_buffer=False)
        for batch in handle.iter_batches(
            batch_size=SLICE_ROWS, row_groups=[self.row_group], columns=list(self.columns)
        ):
            yield {c: batch.column(c).to_numpy(zero_copy_only=False) for c in self.columns}
            del batch
            pa.default_memory_pool().release_unused()  # Arrow's pool keeps what it freed
        handle.close()


def _slices(piece: Any, columns: tuple[str, ...]) -> Iterator[Columns]:
    """A piece (a row group, or a computed pandas partition) as columns of at most
    :data:`SLICE_ROWS` rows."""
    if isinstance(piece, _RowGroup):
        yield from piece.slices()
        return
    whole = {c: piece[c].to_numpy() for c in columns}
    rows = len(piece)
    for start in range(0, max(rows, 1), SLICE_ROWS):
        yield {c: v[start : start + SLICE_ROWS] for c, v in whole.items()}


def _spill(piece: Any, task: int, where: str, query: AggregationQuery, buckets: int) -> list[Block]:
    """Write each slice's rows, grouped by a keyed hash of their unit, to this task's file."""
    assert query.unit_column is not None
    slices = _slices(piece, query.columns)
    return write_blocks(slices, spill_file(where, task), query.unit_column, buckets)


def _gather(*spilled: list[Block]) -> list[list[Block]]:
    """The spill tasks' blocks, one list per task (one dependency of every bucket task)."""
    return list(spilled)


def _bound_bucket(
    bucket: int,
    where: str,
    query: AggregationQuery,
    public: Collection[str] | None,
    spilled: list[list[Block]],
) -> dict[str, list[Any]]:
    """One bucket's bounded aggregates (``spilled``: where the spill tasks wrote its rows)."""
    return bound_chunk(read_bucket(where, bucket, query.columns, spilled), query, public)


def _merge(*parts: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """Partial aggregates summed per key, exactly (Python integers; one dict per column, so
    that no container is made per key for the garbage collector to walk)."""
    counts: dict[str, int] = {}
    sums: dict[str, int] = {}
    units: dict[str, int] = {}
    for part in parts:
        for key, count, total, held in zip(
            part["key"], part["count"], part["sum"], part["units"], strict=True
        ):
            name = str(key)
            counts[name] = counts.get(name, 0) + int(count)
            sums[name] = sums.get(name, 0) + int(total)
            units[name] = units.get(name, 0) + int(held)
    return {
        "key": list(counts),
        "count": list(counts.values()),
        "sum": list(sums.values()),
        "units": list(units.values()),
    }


def _bound_piece(
    piece: Any, query: AggregationQuery, public: Collection[str] | None
) -> dict[str, list[Any]]:
    """Row level: each slice bounded as it is read (any chunk will do), merged."""
    return _merge(
        *(bound_chunk(columns, query, public) for columns in _slices(piece, query.columns))
    )


@attrs.frozen
class _Plan:
    """The bounding on a local scheduler, built when it runs (it needs a spill directory)."""

    pieces: list[Any]
    rows: int
    query: AggregationQuery
    public: Collection[str] | None

    @property
    def buckets(self) -> int:
        return max(1, math.ceil(self.rows / BUCKET_ROWS))

    def compute(self) -> list[dict[str, list[Any]]]:
        dask = import_engine_module("dask", "dask")
        task = functools.partial(dask.delayed, pure=False)
        if self.query.unit_column is None:
            pieces = [task(_bound_piece)(p, self.query, self.public) for p in self.pieces]
            return _merged(dask, task, pieces)
        where = make_spill_dir(_spill_dir(dask))
        try:
            spill = functools.partial(_spill, where=where, query=self.query, buckets=self.buckets)
            spills = task(_gather)(*(task(spill)(p, i) for i, p in enumerate(self.pieces)))
            bounded = [
                task(_bound_bucket)(b, where, self.query, self.public, spills)
                for b in range(self.buckets)
            ]  # every row is in one bucket: the buckets' row counts add up to the table's
            return _merged(dask, task, bounded)
        finally:
            remove_spill_dir(where)


def _merged(dask: Any, task: Any, parts: list[Any]) -> list[dict[str, list[Any]]]:
    """The tasks' partial aggregates, merged in a tree as they come (few held at once)."""
    while len(parts) > 1:
        parts = [
            task(_merge)(*parts[i : i + MERGE_FAN_IN]) for i in range(0, len(parts), MERGE_FAN_IN)
        ]
    return list(dask.compute(*parts))


def _spill_dir(dask: Any) -> str | None:
    where = dask.config.get("temporary_directory", None)
    return str(where) if where else None


#: the modules of Dask's schedulers that run on this machine (threads, sync, processes)
LOCAL_SCHEDULERS = ("dask.threaded", "dask.local", "dask.multiprocessing")


def _local(dask: Any) -> bool:
    """Whether the configured scheduler runs on this machine (no scheduler: threads)."""
    get = dask.base.get_scheduler()
    return get is None or getattr(get, "__module__", None) in LOCAL_SCHEDULERS


class DaskEngine:
    """Bounding on Dask (see the module docstring): spilled buckets on a local scheduler,
    a shuffle on the unit column on a cluster."""

    name = "dask"

    def __init__(self, npartitions: int = 2) -> None:
        self.npartitions = npartitions

    def _frame(self, source: Any, query: AggregationQuery) -> Any:
        dd = import_engine_module("dask.dataframe", "dask")
        pd = import_engine_module("pandas", "dask")
        path = table_path(source)
        if path is None:
            frame = frame_of(source, query.columns, pd, _key_columns(query))
            dask = import_engine_module("dask", "dask")
            with dask.config.set({"dataframe.convert-string": False}):  # keep the columns' types
                return dd.from_pandas(frame, npartitions=self.npartitions)
        reader = dd.read_csv if path.suffix.lower() == ".csv" else dd.read_parquet
        ddf = reader(str(path))
        _check_columns(list(ddf.columns), query, path.name)
        return ddf[list(query.columns)]

    def _plan(self, source: Any, query: AggregationQuery, public: Collection[str] | None) -> _Plan:
        path = table_path(source)
        if path is not None and path.suffix.lower() == ".parquet":
            pq = import_engine_module("pyarrow.parquet", "dask")
            try:
                meta = pq.ParquetFile(str(path)).metadata
            except (OSError, ValueError) as exc:  # not Parquet, truncated, ...
                first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else "unreadable"
                raise InvalidParameterError(
                    "table", f"could not be read as Parquet ({first})", "name a Parquet file"
                ) from None
            _check_columns(meta.schema.names, query, path.name)
            groups = [_RowGroup(str(path), g, query.columns) for g in range(meta.num_row_groups)]
            return _Plan(groups, meta.num_rows, query, public)
        ddf = self._frame(source, query)
        if path is None:
            rows = len(next(iter(source.values())) if isinstance(source, Mapping) else source)
        else:
            rows = path.stat().st_size // CSV_ROW_BYTES
        return _Plan(list(ddf.to_delayed()), rows, query, public)

    def bound_contributions(
        self, source: Any, query: AggregationQuery, public: Collection[str] | None
    ) -> Any:
        dask = import_engine_module("dask", "dask")
        if _local(dask):
            return self._plan(source, query, public)
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
            if isinstance(bounded, _Plan):
                return combine(bounded.compute())
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


def frame_of(
    source: Mapping[str, Any], columns: tuple[str, ...], pandas: Any, keys: Collection[str] = ()
) -> Any:
    """A pandas DataFrame of the named columns of a mapping of columns; the ``keys`` columns
    read as the in-memory engine reads them whole (:func:`_one_key_type`)."""
    missing = [c for c in columns if c not in source]
    if missing:
        raise InvalidParameterError(
            missing[0], "is not a column of the table", f"name one of {sorted(source)}"
        )
    frame = pandas.DataFrame({c: source[c] for c in columns})
    for column in keys:
        if frame[column].dtype == object:
            frame[column] = pandas.Series(_one_key_type(frame[column].tolist()), dtype=object)
    return frame


def _missing(x: Any) -> bool:
    try:
        return x is None or bool(x != x)
    except (TypeError, ValueError):
        return True


def _one_key_type(items: list[Any]) -> list[Any]:
    """A key column of Python objects that does not hold integers only is text throughout, as
    the in-memory engine reads the whole column: chunks read apart would otherwise read one
    unit as the integer 1 in one chunk and as the text "1" in another (two units). Missing
    values stay missing (each chunk refuses them)."""
    if all(isinstance(x, int | np.integer) for x in items if not _missing(x)):
        return items
    return [x if _missing(x) else str(x) for x in items]
