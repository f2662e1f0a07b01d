"""What an aggregation asks of an engine: columns, contribution bounds, clipping and fixed point.

An :class:`AggregationQuery` is public: it is fixed by the method's parameters before any data
is read. Values are clipped to ``[lower, upper]`` and then rounded to the fixed-point grid
``2**-scale_bits``; sums are sums of integers, exact in any order (Casacuberta et al., CCS
2022, show that floating-point sums reordered across workers can exceed the sensitivity a
library accounts). Rounding is monotone, so a clipped value's integer lies in
``[round(lower * 2**s), round(upper * 2**s)]`` and the sensitivity stated here is that of the
integers, which already holds the rounding (at most ``2**-(s+1)`` per row above the real clip).
"""

from __future__ import annotations

import math
from typing import Any

import attrs

from dpledger.core.errors import InvalidParameterError

__all__ = ["METRICS", "AggregationQuery", "fixed_bound"]

#: the metrics an aggregation releases per partition key
METRICS: tuple[str, ...] = ("count", "sum", "mean")
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

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns the engine reads (partition key, then unit, then value)."""
        named = (self.partition_column, self.unit_column, self.value_column)
        return tuple(c for c in named if c is not None)

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
        """What one row moves the metric's per-key aggregate by (fixed-point grid, exact)."""
        if metric == "count":
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
        return {
            "partition_column": self.partition_column,
            "value_column": self.value_column,
            "unit_column": self.unit_column,
            "level": "row" if self.unit_column is None else "unit",
            "max_partitions_per_unit (L0)": self.max_partitions,
            "max_rows_per_unit_and_partition (Linf)": self.max_rows,
            "clip": [self.lower, self.upper],
            "fixed_point": f"2**-{self.scale_bits}",
        }
