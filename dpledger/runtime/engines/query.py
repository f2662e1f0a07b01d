"""What an aggregation asks of an engine: columns, contribution bounds, clipping and fixed point.

An :class:`AggregationQuery` is public: it is fixed by the method's parameters before any data
is read. Values are clipped to ``[lower, upper]`` and then rounded to the fixed-point grid
``2**-scale_bits``; sums are sums of integers, exact in any order (Casacuberta et al., CCS
2022, show that floating-point sums reordered across workers can exceed the sensitivity a
library accounts). Rounding is monotone, so a clipped value's integer lies in
``[round(lower * 2**s), round(upper * 2**s)]`` and the sensitivity stated here is that of the
integers, which already holds the rounding (at most ``2**-(s+1)`` per row above the real clip).

A histogram counts the kept rows of each partition in public bins of the value column, given
by their edges ``bin_edges`` (declared, never derived from the data): bin ``j`` is
``[e_j, e_{j+1})``, the last bin is closed, and a value outside ``[e_0, e_B]`` is counted in
the end bin it is nearest (clamped, as a sum clips it). Each row lies in exactly one bin, so
one row moves a partition's histogram by 1 in L1 and in L2, as it moves its count.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import attrs

from dpledger.core.errors import InvalidParameterError

__all__ = ["MAX_BINS", "METRICS", "AggregationQuery", "fixed_bound"]

#: the metrics an aggregation releases per partition key
METRICS: tuple[str, ...] = ("count", "sum", "mean", "histogram")
#: the most bins a histogram may declare
MAX_BINS = 10_000
#: the largest magnitude of a fixed-point sum: int64 with a factor 2 to spare
SUM_LIMIT = 2**62


def _name(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise InvalidParameterError(
            attribute.name, f"must be a column name, got {value!r}", "name a column of the table"
        )


def _bound(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidParameterError(
            attribute.name, f"must be an integer >= 1, got {value!r}", "pass e.g. 1"
        )


def _finite(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidParameterError(
            attribute.name, f"must be a finite number, got {value!r}", "pass e.g. 0.0"
        )


def _scale(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 40:
        raise InvalidParameterError(
            attribute.name, f"must be an integer in [0, 40], got {value!r}", "pass e.g. 20"
        )


def _edges(value: Any) -> tuple[float, ...] | None:
    """Bin edges as a tuple of floats: finite, strictly increasing, at least two."""
    if value is None:
        return None
    items = list(value) if isinstance(value, list | tuple) else None
    numbers = items is not None and all(
        isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) for x in items
    )
    if items is None or not numbers or not 2 <= len(items) <= MAX_BINS + 1:
        raise InvalidParameterError(
            "bin_edges",
            f"must be a list of 2 to {MAX_BINS + 1} finite numbers, got {value!r}",
            "write e.g. bin_edges = [0, 10, 20, 50]",
        )
    edges = tuple(float(x) for x in items)
    if any(b <= a for a, b in itertools.pairwise(edges)):
        raise InvalidParameterError(
            "bin_edges",
            f"must be strictly increasing, got {list(edges)}",
            "sort the edges and drop repeated ones",
        )
    return edges


def fixed_bound(value: float, scale_bits: int) -> int:
    """``value`` on the fixed-point grid ``2**-scale_bits`` (round half to even, as numpy)."""
    return round(float(value) * 2.0**scale_bits)


@attrs.frozen
class AggregationQuery:
    """The public shape of one aggregation (see the module docstring).

    ``unit_column`` None is row level: every row is its own unit (one partition, one row).
    """

    partition_column: str = attrs.field(validator=_name)
    value_column: str | None = attrs.field(default=None, validator=_name)
    unit_column: str | None = attrs.field(default=None, validator=_name)
    max_partitions: int = attrs.field(default=1, validator=_bound)
    max_rows: int = attrs.field(default=1, validator=_bound)
    lower: float = attrs.field(default=0.0, validator=_finite)
    upper: float = attrs.field(default=1.0, validator=_finite)
    scale_bits: int = attrs.field(default=20, validator=_scale)
    bin_edges: tuple[float, ...] | None = attrs.field(default=None, converter=_edges)

    def __attrs_post_init__(self) -> None:
        if not self.lower <= self.upper:
            raise InvalidParameterError(
                "lower", f"{self.lower!r} is above upper {self.upper!r}", "swap them"
            )
        if self.unit_column is None and (self.max_partitions, self.max_rows) != (1, 1):
            raise InvalidParameterError(
                "max_partitions_per_unit",
                "bounds contributions per unit, but no unit column is given",
                "name the unit column (unit_column), or leave both bounds at 1 for row level",
            )
        if self.unit_column is not None and self.unit_column == self.partition_column:
            raise InvalidParameterError(
                "unit_column", "is the partition column", "name the column of user ids"
            )
        if self.bin_edges is not None and self.value_column is None:
            raise InvalidParameterError(
                "value_column", "is missing for a histogram", "name the column of values"
            )

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns the engine reads (partition key, then unit, then value)."""
        named = (self.partition_column, self.unit_column, self.value_column)
        return tuple(c for c in named if c is not None)

    @property
    def bins(self) -> int:
        """The number of histogram bins (0 without a histogram)."""
        return 0 if self.bin_edges is None else len(self.bin_edges) - 1

    @property
    def fixed_lower(self) -> int:
        return fixed_bound(self.lower, self.scale_bits)

    @property
    def fixed_upper(self) -> int:
        return fixed_bound(self.upper, self.scale_bits)

    @property
    def fixed_middle(self) -> int:
        """The grid point nearest the middle of the range (the mean's centre)."""
        return (self.fixed_lower + self.fixed_upper) // 2

    @property
    def unit_factor_l1(self) -> int:
        """Rows one unit moves, summed over partitions: ``L0 * L∞``."""
        return self.max_partitions * self.max_rows

    @property
    def unit_factor_l2(self) -> float:
        """The L2 norm of one unit's row counts over partitions: ``sqrt(L0) * L∞`` (rounded
        up)."""
        return math.nextafter(math.sqrt(self.max_partitions), math.inf) * self.max_rows

    def row_sensitivity(self, metric: str) -> float:
        """What one row moves the metric's per-key aggregate by (fixed-point grid, exact); a
        histogram's in L1 and in L2 (the row adds 1 to one bin)."""
        if metric in ("count", "histogram"):
            return 1.0
        if metric == "sum":
            top = max(abs(self.fixed_lower), abs(self.fixed_upper))
        else:  # the mean's centred sum
            mid = self.fixed_middle
            top = max(abs(self.fixed_lower - mid), abs(self.fixed_upper - mid))
        return math.ldexp(float(top), -self.scale_bits)

    def sensitivity(self, metric: str, norm: str) -> float:
        """One unit's sensitivity of a metric's vector over partitions (``l1`` or ``l2``):
        ``L0 * L∞ * C`` or ``sqrt(L0) * L∞ * C``, rounded up."""
        factor = self.unit_factor_l1 if norm == "l1" else self.unit_factor_l2
        return math.nextafter(factor * self.row_sensitivity(metric), math.inf)

    def describe(self) -> dict[str, Any]:
        """The query's public facts, as JSON values."""
        out: dict[str, Any] = {
            "partition_column": self.partition_column,
            "value_column": self.value_column,
            "unit_column": self.unit_column,
            "level": "row" if self.unit_column is None else "unit",
            "max_partitions_per_unit (L0)": self.max_partitions,
            "max_rows_per_unit_and_partition (Linf)": self.max_rows,
            "clip": [self.lower, self.upper],
            "fixed_point": f"2**-{self.scale_bits}",
        }
        if self.bin_edges is not None:
            out["bin_edges"] = list(self.bin_edges)
            out["out_of_range_values"] = "counted in the nearest end bin"
        return out
