"""Contribution bounding and clipping: the framework code every engine runs on its chunks.

:func:`bound_chunk` takes the rows of a chunk that holds *every* row of each unit in it (the
engines partition by the unit column first; at row level any chunk will do) and returns, per
partition key, the bounded aggregates of the rows it keeps:

1. rows whose key is not public are dropped (public partitions only);
2. values are clipped to ``[lower, upper]`` and rounded to the fixed-point grid;
3. L∞: of a unit's rows in one partition, the ``max_rows`` with the smallest row hash are kept;
4. L0: of a unit's partitions, the ``max_partitions`` with the smallest pair hash are kept;
5. per key: the number of rows kept, the integer sum of their values and the number of units;
   with a histogram, per key and bin the rows kept (:mod:`~dpledger.runtime.engines.histogram`).

Every choice depends on one unit's own rows only (so removing a unit changes at most
``L0`` partitions by at most ``L∞`` rows each), and on the values of its keys, never on
the row order or the chunk: the engines agree bit for bit.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpledger.core.errors import InvalidParameterError
from dpledger.runtime.engines.columns import (
    KeyColumn,
    UnitIds,
    key_column,
    splitmix64,
    unit_column,
    value_column,
)
from dpledger.runtime.engines.histogram import bin_rows, row_bins, tie_break
from dpledger.runtime.engines.query import SUM_LIMIT, AggregationQuery

__all__ = [
    "PARTIAL_COLUMNS",
    "ROWS_KEY",
    "bound_chunk",
    "clip_fixed",
    "kept_rows",
    "kept_rows_by_sorting",
]

I64 = NDArray[np.int64]
Units = KeyColumn | UnitIds
#: the columns of a chunk's bounded aggregates: canonical key name and three integers
PARTIAL_COLUMNS: tuple[str, ...] = ("key", "count", "sum", "units")
#: the name of the partial row that counts the rows a chunk read (no key is named so)
ROWS_KEY = "#rows"
PAIR_SALT = np.uint64(0x2545F4914F6CDD1D)
ROW_SALT = np.uint64(0x9FB21C651E98DF25)


#: rows one chunk may hold: the bound on values below keeps a chunk's 64-bit sums exact
ROWS_PER_CHUNK_BITS = 31
#: the largest value magnitude on the fixed-point grid (SUM_LIMIT / 2**ROWS_PER_CHUNK_BITS)
FIXED_TOP_LIMIT = SUM_LIMIT >> ROWS_PER_CHUNK_BITS


def clip_fixed(values: NDArray[np.float64], query: AggregationQuery) -> I64:
    """Values clipped to the query's range, as integers on its fixed-point grid."""
    clipped = np.clip(values, query.lower, query.upper)
    fixed: I64 = np.rint(np.ldexp(clipped, query.scale_bits)).astype(np.int64)
    return fixed


def _starts(sorted_values: NDArray[Any]) -> NDArray[np.bool_]:
    """For sorted values: whether each starts a run of equal values."""
    new = np.empty(sorted_values.size, dtype=bool)
    new[:1] = True
    np.not_equal(sorted_values[1:], sorted_values[:-1], out=new[1:])
    return new


def _lengths(starts: NDArray[np.intp], size: int) -> NDArray[np.intp]:
    """The length of each run, from where the runs start (the last ends at ``size``)."""
    out = np.empty_like(starts)
    np.subtract(starts[1:], starts[:-1], out=out[:-1])
    out[-1:] = size - starts[-1:]
    return out


def _runs(sorted_values: NDArray[Any]) -> tuple[I64, I64]:
    """For sorted values: the index of each value's run, and where each run starts."""
    new = np.ones(sorted_values.size, dtype=bool)
    if sorted_values.size:
        new[1:] = sorted_values[1:] != sorted_values[:-1]
    index = np.cumsum(new, dtype=np.int64)
    index -= 1
    return index, np.flatnonzero(new).astype(np.int64, copy=False)


def _sorted_by(*keys: NDArray[Any]) -> I64:
    """The order sorting by ``keys`` (the last is primary): stable sorts, least key first."""
    order = np.argsort(keys[0], kind="stable")
    for key in keys[1:]:
        order = order[np.argsort(key[order], kind="stable")]
    return order.astype(np.int64)


def _pair_hashes(keys: KeyColumn, units: Units) -> NDArray[np.uint64]:
    """Per row: the keyed hash of its (unit, partition) pair."""
    per_key = splitmix64(keys.hashes ^ PAIR_SALT)  # once per distinct key, then per row
    return splitmix64(units.row_hashes() ^ per_key[keys.codes])


def _row_hashes(pair: NDArray[np.uint64], fixed: I64) -> NDArray[np.uint64]:
    """Per row: the keyed hash of the row (its pair's hash and its value)."""
    return splitmix64(pair ^ splitmix64(fixed.view(np.uint64) ^ ROW_SALT))


def kept_rows(
    keys: KeyColumn, units: Units, fixed: I64, query: AggregationQuery
) -> NDArray[np.bool_]:
    """Which rows survive the L∞ and then the L0 bound (see the module docstring): by one
    sort (:func:`_kept_by_one_sort`), else by the reference rule's stable sorts."""
    pair = _pair_hashes(keys, units)
    fast = _kept_by_one_sort(keys.codes, units.codes, pair, fixed, units.code_bits, query)
    if fast is not None:
        return fast
    row = _row_hashes(pair, fixed)
    return _kept_by_sorting(keys.codes, units.codes, pair, row, keys.hashes.size, query)


def kept_rows_by_sorting(
    keys: KeyColumn, units: Units, fixed: I64, query: AggregationQuery
) -> NDArray[np.bool_]:
    """The reference rule of :func:`kept_rows`, by stable sorts (the same rows, slower)."""
    pair = _pair_hashes(keys, units)
    row = _row_hashes(pair, fixed)
    return _kept_by_sorting(keys.codes, units.codes, pair, row, keys.hashes.size, query)


def _kept_by_sorting(
    k: I64,
    u: I64,
    pair: NDArray[np.uint64],
    row: NDArray[np.uint64],
    width: int,
    query: AggregationQuery,
) -> NDArray[np.bool_]:
    pair_id = u * max(width, 1) + k  # exact: one id per (unit, partition)
    order = _sorted_by(row, pair_id)  # each pair's rows together, by row hash
    group, starts = _runs(pair_id[order])
    rank = np.arange(order.size) - starts[group]
    first = order[starts]  # one row per pair
    by_unit = _sorted_by(k[first], pair[first], u[first])  # a unit's pairs by pair hash
    unit_group, unit_starts = _runs(u[first][by_unit])
    pair_keep = np.empty(first.size, dtype=bool)
    pair_keep[by_unit] = np.arange(by_unit.size) - unit_starts[unit_group] < query.max_partitions
    keep = np.zeros(k.size, dtype=bool)
    keep[order[(rank < query.max_rows) & pair_keep[group]]] = True
    return keep


def _kept_by_one_sort(
    k: I64,
    u: I64,
    pair: NDArray[np.uint64],
    fixed: I64,
    unit_bits: int,
    query: AggregationQuery,
) -> NDArray[np.bool_] | None:
    """The rows :func:`_kept_by_sorting` keeps, by one sort on the unit's code (high bits)
    and the top bits of the pair hash; None when two partitions of a unit agree in those
    bits (then only the reference rule's tie-break by partition decides)."""
    shift = np.uint64(64 - unit_bits)
    composite = (u.astype(np.uint64) << shift) | (pair >> np.uint64(unit_bits))
    order = np.argsort(composite)
    ranked = composite[order]
    new = _starts(ranked)  # runs: one per pair, a unit's pairs by pair hash
    same = np.flatnonzero(~new[1:])  # rows whose composite repeats the one before
    if same.size and np.any(k[order[same + 1]] != k[order[same]]):
        return None
    starts = np.flatnonzero(new)
    lengths = _lengths(starts, order.size)
    keep = np.ones(order.size, dtype=bool)
    if np.any(lengths > query.max_rows):  # L∞: the rows of larger pairs by row hash
        group = np.cumsum(new, dtype=np.int64) - 1
        at = np.flatnonzero((lengths > query.max_rows)[group])
        rows = order[at]
        row = _row_hashes(pair[rows], fixed[rows])
        at = at[np.lexsort((rows, row, group[at]))]  # ties by row index, as the reference
        sub_group, sub_starts = _runs(group[at])
        rank = np.arange(at.size) - sub_starts[sub_group]
        keep[at[rank >= query.max_rows]] = False
    unit_new = _starts(ranked[starts] >> shift)  # each pair's unit code, in order
    unit_starts = np.flatnonzero(unit_new)
    first = np.repeat(unit_starts, _lengths(unit_starts, starts.size))
    pair_keep = np.arange(starts.size) - first < query.max_partitions
    out = np.zeros(order.size, dtype=bool)
    out[order[keep & np.repeat(pair_keep, lengths)]] = True
    return out


def _units_per_key(keys: KeyColumn, units: Units, keep: NDArray[np.bool_]) -> I64:
    """How many distinct units keep a row in each key."""
    width = max(len(keys.uniques), 1)
    pairs: NDArray[np.integer[Any]] = units.codes[keep] * width + keys.codes[keep]
    if pairs.size and int(pairs.max()) < 2**32:  # the same values, sorted faster
        pairs = pairs.astype(np.uint32)
    pairs.sort()
    _, starts = _runs(pairs)
    counts: I64 = np.bincount(pairs[starts] % width, minlength=len(keys.uniques))
    return counts


def _public_rows(
    keys: KeyColumn, names: list[str], public: Collection[str] | None
) -> NDArray[np.bool_]:
    if public is None:
        return np.ones(keys.codes.size, dtype=bool)
    known = np.asarray([name in public for name in names], dtype=bool)
    return known[keys.codes] if known.size else np.zeros(0, dtype=bool)


def _sums(codes: I64, fixed: I64, size: int) -> I64:
    """Exact integer sums of ``fixed`` per code."""
    sums = np.zeros(size, dtype=np.int64)
    np.add.at(sums, codes, fixed)
    return sums


def _column(columns: Mapping[str, Any], name: str) -> Any:
    if name not in columns:
        raise InvalidParameterError(
            name, "is not a column of the table", f"name one of {sorted(map(str, columns))}"
        )
    return columns[name]


def _fixed_values(columns: Mapping[str, Any], query: AggregationQuery, n: int) -> I64:
    if query.value_column is None:
        return np.zeros(n, dtype=np.int64)
    values = value_column(_column(columns, query.value_column), query.value_column)
    top = max(abs(query.fixed_lower), abs(query.fixed_upper))
    if top >= FIXED_TOP_LIMIT:  # decided by the parameters alone, never by the data
        raise InvalidParameterError(
            "scale_bits",
            f"values of up to {top} grid steps could overflow the 64-bit sums of a chunk of "
            f"up to 2**{ROWS_PER_CHUNK_BITS} rows",
            "lower scale_bits or narrow [lower, upper]",
        )
    if top * max(n, 1) >= SUM_LIMIT:  # only past 2**31 rows in one chunk
        raise InvalidParameterError(
            "scale_bits",
            f"fixed-point sums of {n} rows could overflow 64-bit integers",
            "lower scale_bits or narrow [lower, upper]",
        )
    return clip_fixed(values, query)


def bound_chunk(
    columns: Mapping[str, Any], query: AggregationQuery, public: Collection[str] | None
) -> dict[str, list[Any]]:
    """The bounded aggregates of one chunk (see the module docstring), as columns
    :data:`PARTIAL_COLUMNS` (keys that keep no row are left out), and a row named
    :data:`ROWS_KEY` counting the rows the chunk read."""
    keys = key_column(_column(columns, query.partition_column), query.partition_column)
    n = keys.codes.size
    fixed = _fixed_values(columns, query, n)
    bins = row_bins(columns, query)  # None without a histogram
    names = keys.names()
    keep = _public_rows(keys, names, public)
    if query.unit_column is not None:
        units = unit_column(_column(columns, query.unit_column), query.unit_column)
        if units.codes.size != n:
            raise InvalidParameterError(query.unit_column, "has another length", "one id a row")
        if keep.all():  # every key public (or no list): no subset to take
            keep = kept_rows(keys, units, tie_break(fixed, bins), query)
        else:
            sub = np.flatnonzero(keep)
            tie = tie_break(fixed, bins)[sub]
            keep[sub[~kept_rows(keys.take(sub), units.take(sub), tie, query)]] = False
        unit_counts = _units_per_key(keys, units, keep)
    else:
        unit_counts = np.bincount(keys.codes[keep], minlength=len(keys.uniques))
    counts = np.bincount(keys.codes[keep], minlength=len(keys.uniques))
    sums = _sums(keys.codes[keep], fixed[keep], len(keys.uniques))
    live = np.flatnonzero(counts > 0)
    cells, cell_counts = (
        ([], []) if bins is None else bin_rows(keys.codes[keep], bins[keep], names, query.bins)
    )
    return {
        "key": [ROWS_KEY, *(names[i] for i in live), *cells],
        "count": [n, *(int(counts[i]) for i in live), *cell_counts],
        "sum": [0, *(int(sums[i]) for i in live), *(0 for _ in cells)],
        "units": [0, *(int(unit_counts[i]) for i in live), *(0 for _ in cells)],
    }
