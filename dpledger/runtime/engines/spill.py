"""Spill files of the Dask engine: a table's rows grouped on local disk by a keyed hash of their
unit, so that each bucket, read back, holds every row of its units.

A spill task writes each slice it reads as one *block* of its file: the slice's rows sorted by
bucket (``bucket = hash(unit) mod B``, the hash :func:`~dpledger.runtime.engines.columns.
unit_hashes` gives the unit), as fixed-size records when every column has a fixed-size type
(one write a slice, one read a bucket and block), else pickled bucket by bucket (text read as
Python objects). Which rows share a bucket, and in which order a bucket holds them, changes no
bounding decision.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from dpledger.runtime.engines.columns import unit_hashes

__all__ = ["Block", "read_bucket", "spill_file", "write_blocks"]

Columns = dict[str, Any]


@attrs.frozen
class Block:
    """One slice's rows in a spill file, sorted by bucket: ``ends[b]`` rows lie in buckets up
    to ``b``; as records of ``dtype`` (field ``f<i>``: column ``names[i]``) from ``offset``,
    or (``dtype`` None) pickled, bucket ``b`` at ``pickled[b] = (offset, size)``."""

    names: tuple[str, ...]
    offset: int
    ends: NDArray[np.uint32]
    dtype: np.dtype[Any] | None = None
    pickled: Mapping[int, tuple[int, int]] = attrs.field(factory=dict)


def spill_file(where: str, task: int) -> str:
    return os.path.join(where, f"spill-{task}.bin")


def _buckets_of(columns: Columns, unit: str, buckets: int) -> NDArray[np.int64]:
    hashes = unit_hashes(columns[unit], unit)
    out: NDArray[np.int64] = (hashes % np.uint64(buckets)).astype(np.int64)
    return out


def _records(columns: Columns) -> np.dtype[Any] | None:
    """The records' dtype of the columns (fields ``f0, f1, ...`` in order), None when a column
    holds Python objects."""
    if any(np.asarray(v).dtype.kind == "O" for v in columns.values()):
        return None
    return np.dtype([(f"f{i}", np.asarray(v).dtype) for i, v in enumerate(columns.values())])


def _block(handle: Any, columns: Columns, unit: str, buckets: int) -> Block:
    """Write one slice to ``handle``, its rows sorted by bucket."""
    bucket = _buckets_of(columns, unit, buckets)
    order = np.argsort(bucket.astype(np.uint16 if buckets <= 2**16 else np.int64), kind="stable")
    counts = np.bincount(bucket, minlength=buckets)
    ends = np.cumsum(counts).astype(np.uint32)
    offset = handle.tell()
    dtype = _records(columns)
    if dtype is not None:
        records = np.empty(order.size, dtype=dtype)
        for i, values in enumerate(columns.values()):
            records[f"f{i}"] = values
        handle.write(records[order].view(np.uint8).data)
        return Block(tuple(columns), offset, ends, dtype)
    pickled: dict[int, tuple[int, int]] = {}
    for b in np.flatnonzero(counts):
        take = order[int(ends[b]) - int(counts[b]) : int(ends[b])]
        data = pickle.dumps({c: np.asarray(v)[take] for c, v in columns.items()}, protocol=5)
        pickled[int(b)] = (handle.tell(), len(data))
        handle.write(data)
    return Block(tuple(columns), offset, ends, None, pickled)


def write_blocks(slices: Iterable[Columns], path: str, unit: str, buckets: int) -> list[Block]:
    """Write every slice to the file ``path`` as a block (see the module docstring)."""
    with open(path, "wb") as handle:
        return [_block(handle, columns, unit, buckets) for columns in slices]


def _bucket_part(handle: int, block: Block, bucket: int) -> Columns | None:
    start, end = _span(block, bucket)
    if end == start:
        return None
    if block.dtype is None:
        at, size = block.pickled[bucket]
        part: Columns = pickle.loads(os.pread(handle, size, at))
        return part
    size = block.dtype.itemsize
    data = os.pread(handle, (end - start) * size, block.offset + start * size)
    records = np.frombuffer(data, dtype=block.dtype)
    return {c: records[f"f{i}"] for i, c in enumerate(block.names)}


def _span(block: Block, bucket: int) -> tuple[int, int]:
    """The rows of ``bucket`` in ``block``: ``(first, end)``."""
    return (int(block.ends[bucket - 1]) if bucket else 0), int(block.ends[bucket])


def _read_into(handle: int, view: memoryview, at: int) -> None:
    """Fill ``view`` from the file at offset ``at``."""
    while view.nbytes:
        done = os.preadv(handle, [view], at)
        if done <= 0:
            raise OSError(f"spill file ended {view.nbytes} bytes early")
        view, at = view[done:], at + done


def _read_records(
    where: str, bucket: int, spilled: Sequence[Sequence[Block]], dtype: np.dtype[Any]
) -> NDArray[Any]:
    """Bucket ``bucket`` of spill files whose blocks all hold records of ``dtype``: each
    block's rows read straight into one array."""
    spans = [[_span(block, bucket) for block in blocks] for blocks in spilled]
    records = np.empty(sum(end - first for task in spans for first, end in task), dtype=dtype)
    buffer, size, filled = records.view(np.uint8).data, dtype.itemsize, 0
    for task, blocks in enumerate(spilled):
        if not any(end > first for first, end in spans[task]):
            continue
        handle = os.open(spill_file(where, task), os.O_RDONLY)
        try:
            for block, (first, end) in zip(blocks, spans[task], strict=True):
                rows = (end - first) * size
                _read_into(handle, buffer[filled : filled + rows], block.offset + first * size)
                filled += rows
        finally:
            os.close(handle)
    return records


def read_bucket(
    where: str, bucket: int, columns: tuple[str, ...], spilled: Sequence[Sequence[Block]]
) -> Columns:
    """Every row of bucket ``bucket`` (``spilled[task]``: the blocks task ``task`` wrote)."""
    kinds = {(block.dtype, block.names) for blocks in spilled for block in blocks}
    if len(kinds) == 1:
        ((dtype, names),) = kinds
        if dtype is not None and names == columns:
            records = _read_records(where, bucket, spilled, dtype)
            return {c: records[f"f{i}"] for i, c in enumerate(columns)}
    parts: list[Columns] = []
    for task, blocks in enumerate(spilled):
        if not blocks:
            continue
        handle = os.open(spill_file(where, task), os.O_RDONLY)
        try:
            for block in blocks:
                part = _bucket_part(handle, block, bucket)
                if part is not None:
                    parts.append(part)
        finally:
            os.close(handle)
    if not parts:
        return {c: np.zeros(0, dtype=np.int64) for c in columns}
    return {c: np.concatenate([p[c] for p in parts]) for c in columns}
