"""The engine protocol: three steps, and the bounded aggregates the driver gets back.

An engine runs the framework's bounding (:func:`~dpledger.runtime.engines.bounding.bound_chunk`)
where the data lives and hands the driver bounded aggregates only: per partition key the rows
kept, the integer sum of their fixed-point values and the units that contribute. Nothing the
engine returns is released as is: the driver books every release on the ledger before it adds
noise (:mod:`dpledger.runtime.engines.aggregate`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, Protocol

import attrs

from dpledger.runtime.engines.bounding import ROWS_KEY
from dpledger.runtime.engines.columns import parse_name
from dpledger.runtime.engines.histogram import split_bin_key
from dpledger.runtime.engines.query import AggregationQuery

__all__ = ["BoundedAggregates", "Engine", "combine"]


@attrs.frozen
class BoundedAggregates:
    """Per canonical key name (sorted as keys): rows kept, integer sum, contributing units;
    and the rows the engine read (private, like everything here)."""

    keys: tuple[str, ...]
    counts: tuple[int, ...]
    sums: tuple[int, ...]
    units: tuple[int, ...]
    rows: int = 0
    #: ``(key name, bin, rows kept)`` of every histogram cell a row fell in, sorted
    bin_counts: tuple[tuple[str, int, int], ...] = ()

    def row(self, key: str) -> tuple[int, int, int]:
        """``(count, sum, units)`` of ``key`` (zeros for a key no row kept)."""
        return self.per_key([key])[0]

    def per_key(self, keys: Sequence[str]) -> list[tuple[int, int, int]]:
        """:meth:`row` of each of ``keys`` (one pass over the keys)."""
        where = {key: i for i, key in enumerate(self.keys)}
        out = []
        for key in keys:
            i = where.get(key)
            out.append((0, 0, 0) if i is None else (self.counts[i], self.sums[i], self.units[i]))
        return out

    def histogram(self, key: str, bins: int) -> tuple[int, ...]:
        """The rows kept in each of the ``bins`` bins of ``key`` (zeros where none fell)."""
        return self.histograms([key], bins)[0]

    def histograms(self, keys: Sequence[str], bins: int) -> list[tuple[int, ...]]:
        """:meth:`histogram` of each of ``keys`` (one pass over the cells)."""
        where = {key: i for i, key in enumerate(keys)}
        out = [[0] * bins for _ in keys]
        for name, index, count in self.bin_counts:
            if name in where:
                out[where[name]][index] += count
        return [tuple(row) for row in out]


def _order(name: str) -> tuple[int, int, str]:
    key = parse_name(name)
    return (0, key, "") if isinstance(key, int) else (1, 0, key)


def combine(partials: Iterable[Mapping[str, Any]]) -> BoundedAggregates:
    """The chunks' bounded aggregates summed exactly (Python integers), keys sorted."""
    totals: dict[str, list[int]] = {}
    cells: dict[tuple[str, int], int] = {}
    rows = 0
    for part in partials:
        for key, count, total, units in zip(
            part["key"], part["count"], part["sum"], part["units"], strict=True
        ):
            if key == ROWS_KEY:
                rows += int(count)
                continue
            cell = split_bin_key(str(key))
            if cell is not None:
                cells[(cell[1], cell[0])] = cells.get((cell[1], cell[0]), 0) + int(count)
                continue
            row = totals.setdefault(str(key), [0, 0, 0])
            row[0] += int(count)
            row[1] += int(total)
            row[2] += int(units)
    keys = tuple(sorted(totals, key=_order))
    return BoundedAggregates(
        keys,
        tuple(totals[k][0] for k in keys),
        tuple(totals[k][1] for k in keys),
        tuple(totals[k][2] for k in keys),
        rows,
        tuple(
            (k, b, n)
            for (k, b), n in sorted(cells.items(), key=lambda c: (_order(c[0][0]), c[0][1]))
        ),
    )


class Engine(Protocol):
    """Where the bounding runs: in memory, on Dask or on Spark."""

    @property
    def name(self) -> str: ...

    def bound_contributions(
        self, source: Any, query: AggregationQuery, public: Collection[str] | None
    ) -> Any:
        """The engine's handle on the bounded, clipped rows' per-chunk aggregates (lazy)."""
        ...

    def aggregate_per_key(self, bounded: Any) -> BoundedAggregates:
        """The bounded aggregates per key, computed and combined on the driver."""
        ...

    def count_users_per_key(self, bounded: Any) -> dict[str, int]:
        """Units contributing to each key after bounding (what partition selection reads)."""
        ...
