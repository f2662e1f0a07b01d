"""Histogram bins inside the engine: each row's bin, its tie-break and the per-bin partial rows.

Framework code the bounding runs on every chunk (:func:`~dpledger.runtime.engines.bounding.
bound_chunk`). Bin ``j`` of the declared edges ``e_0 < ... < e_B`` is ``[e_j, e_{j+1})``, the
last bin is closed, and a value outside ``[e_0, e_B]`` falls in the nearest end bin: a row's
bin is the number of interior edges at or below its value, which depends on the value and the
public edges only. A chunk's bin counts travel as partial rows keyed
``b:<bin>:<canonical key name>`` (the engines' partial schema is unchanged: the count column
holds the bin's count) and :func:`~dpledger.runtime.engines.protocol.combine` sums them apart
from the partitions' rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpledger.runtime.engines.columns import splitmix64, value_column
from dpledger.runtime.engines.query import AggregationQuery

__all__ = ["BIN_PREFIX", "bin_cell", "bin_rows", "row_bins", "split_bin_key", "tie_break"]

I64 = NDArray[np.int64]
#: the prefix of a partial row that holds one bin's count (no canonical key name starts so)
BIN_PREFIX = "b:"
BIN_SALT = np.uint64(0xD6E8FEB86659FD93)


def row_bins(columns: Mapping[str, Any], query: AggregationQuery) -> I64 | None:
    """Each row's bin (None without a histogram); the value column is checked as for a sum."""
    if query.bin_edges is None or query.value_column is None:
        return None
    values = value_column(columns[query.value_column], query.value_column)
    interior = np.asarray(query.bin_edges[1:-1], dtype=np.float64)
    bins: I64 = np.searchsorted(interior, values, side="right").astype(np.int64)
    return bins


def tie_break(fixed: I64, bins: I64 | None) -> I64:
    """What the L∞ row hash reads: the fixed-point value, mixed with the bin when there is a
    histogram (two rows of one unit and partition that differ only in their bin then hash
    apart, so which is kept does not depend on the row order)."""
    if bins is None:
        return fixed
    mixed = fixed.view(np.uint64) ^ splitmix64(bins.astype(np.uint64) ^ BIN_SALT)
    out: I64 = mixed.view(np.int64)
    return out


def bin_cell(bin_index: int, name: str) -> str:
    """The partial key (and the noise cell's name) of one bin of one partition."""
    return f"{BIN_PREFIX}{bin_index}:{name}"


def split_bin_key(key: str) -> tuple[int, str] | None:
    """``(bin, canonical key name)`` of a bin's partial key, None for any other key."""
    if not key.startswith(BIN_PREFIX):
        return None
    index, _, name = key[len(BIN_PREFIX) :].partition(":")
    return int(index), name


def bin_rows(
    codes: I64, bins: I64, names: Sequence[str], nbins: int
) -> tuple[list[str], list[int]]:
    """The partial keys and counts of the kept rows' bins (``codes``: each kept row's key
    code, ``bins``: its bin); cells no row falls in are left out."""
    cells = codes * max(nbins, 1) + bins
    found, counts = np.unique(cells, return_counts=True)
    keys = [bin_cell(int(c % nbins), names[int(c // nbins)]) for c in found]
    return keys, [int(n) for n in counts]
