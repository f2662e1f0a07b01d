"""Small attrs validators that raise :class:`InvalidParameterError` naming the field."""

from __future__ import annotations

import math
from typing import Any

import attrs

from dpledger.core.errors import InvalidParameterError


def _number(field: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidParameterError(field, f"expected a number, got {value!r}", "pass a float")
    v = float(value)
    if math.isnan(v):
        raise InvalidParameterError(field, "is NaN", "pass a finite number")
    return v


def positive_finite(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """Require 0 < value < inf."""
    v = _number(attribute.name, value)
    if not (v > 0 and math.isfinite(v)):
        raise InvalidParameterError(
            attribute.name, f"must be > 0 and finite, got {value!r}", "pass a positive number"
        )


def nonnegative_finite(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """Require 0 <= value < inf."""
    v = _number(attribute.name, value)
    if not (v >= 0 and math.isfinite(v)):
        raise InvalidParameterError(
            attribute.name, f"must be >= 0 and finite, got {value!r}", "pass a non-negative number"
        )


def probability(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """Require 0 <= value <= 1."""
    v = _number(attribute.name, value)
    if not (0.0 <= v <= 1.0):
        raise InvalidParameterError(
            attribute.name, f"must lie in [0, 1], got {value!r}", "pass a sampling rate in [0, 1]"
        )


def delta_closed_open(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """Require 0 <= value < 1 (a delta of an (eps, delta) guarantee)."""
    v = _number(attribute.name, value)
    if not (0.0 <= v < 1.0):
        raise InvalidParameterError(
            attribute.name, f"must lie in [0, 1), got {value!r}", "pass a delta in [0, 1)"
        )


def positive_int(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """Require an int >= 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidParameterError(
            attribute.name, f"must be an integer >= 1, got {value!r}", "pass a positive integer"
        )


def nonnegative_int(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """Require an int >= 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidParameterError(
            attribute.name, f"must be an integer >= 0, got {value!r}", "pass a non-negative integer"
        )


def check_delta_query(delta: float) -> float:
    """Validate a delta at which epsilon is queried: 0 < delta < 1."""
    v = _number("delta", delta)
    if not (0.0 < v < 1.0):
        raise InvalidParameterError("delta", f"must lie in (0, 1), got {delta!r}", "pass e.g. 1e-5")
    return v


def check_epsilon_query(epsilon: float) -> float:
    """Validate an epsilon at which delta is queried: finite (may be negative)."""
    v = _number("epsilon", epsilon)
    if not math.isfinite(v):
        raise InvalidParameterError("epsilon", f"must be finite, got {epsilon!r}", "pass e.g. 1.0")
    return v
