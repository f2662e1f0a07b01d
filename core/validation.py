"""Small attrs validators that raise :class:`InvalidParameterError` naming the field."""

from __future__ import annotations

import math
import numbers
from typing import Any, cast

import attrs

from dpledger.core.errors import InvalidParameterError

#: the δ at which ε is reported when neither the command, the file nor the method names one
DEFAULT_DELTA = 1e-5


def is_number(value: Any) -> bool:
    """A real number that is not a bool (a string, a bool or None is never a number)."""
    if type(value) is float or type(value) is int:  # the common cases, at once (not bool)
        return True
    if isinstance(value, bool | str | bytes) or type(value).__name__ == "bool_":
        return False
    return isinstance(value, numbers.Real)


def _shown(value: Any) -> str:
    """``repr(value)``, shortened (a huge integer or a long string stays one readable line)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an integer of {len(str(abs(value)))} digits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def to_float(value: Any) -> float:
    """attrs converter: a real number becomes a float; anything else is left to the validator.

    Unlike ``converter=float`` it never turns a string (``"0.5"``) or a bool (``True``) into a
    number, and an integer too large for a float is kept so that the validator names the field.
    """
    if not is_number(value):
        return cast(float, value)  # not a number: the validator names the field
    try:
        return float(value)
    except (OverflowError, ValueError, TypeError):
        return cast(float, value)


def _number(field: str, value: Any) -> float:
    if not is_number(value):
        raise InvalidParameterError(
            field,
            f"expected a number, got {type(value).__name__} {_shown(value)}",
            "write a plain number (no quotes, not true/false)",
        )
    try:
        v = float(value)
    except (OverflowError, ValueError, TypeError):
        raise InvalidParameterError(
            field, f"{_shown(value)} does not fit a double", "pass a number below 1e308"
        ) from None
    if math.isnan(v):
        raise InvalidParameterError(field, "is NaN", "pass a finite number")
    return v


def positive_finite(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """Require 0 < value < inf."""
    v = _number(attribute.name, value)
    if not (v > 0 and math.isfinite(v)):
        raise InvalidParameterError(
            attribute.name, f"must be > 0 and finite, got {_shown(value)}", "pass a positive number"
        )


def nonnegative_finite(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """Require 0 <= value < inf."""
    v = _number(attribute.name, value)
    if not (v >= 0 and math.isfinite(v)):
        raise InvalidParameterError(
            attribute.name,
            f"must be >= 0 and finite, got {_shown(value)}",
            "pass a non-negative number",
        )


def probability(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """Require 0 <= value <= 1."""
    v = _number(attribute.name, value)
    if not (0.0 <= v <= 1.0):
        raise InvalidParameterError(
            attribute.name,
            f"must lie in [0, 1], got {_shown(value)}",
            "pass a sampling rate in [0, 1]",
        )


def delta_closed_open(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """Require 0 <= value < 1 (a delta of an (eps, delta) guarantee)."""
    v = _number(attribute.name, value)
    if not (0.0 <= v < 1.0):
        raise InvalidParameterError(
            attribute.name, f"must lie in [0, 1), got {_shown(value)}", "pass a delta in [0, 1)"
        )


def positive_int(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """Require an int >= 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidParameterError(
            attribute.name,
            f"must be an integer >= 1, got {_shown(value)}",
            "pass a positive integer",
        )


def nonnegative_int(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """Require an int >= 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidParameterError(
            attribute.name,
            f"must be an integer >= 0, got {_shown(value)}",
            "pass a non-negative integer",
        )


def one_of(*choices: str) -> Any:
    """An attrs validator requiring one of ``choices``."""

    def check(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if isinstance(value, bool) or value not in choices:
            raise InvalidParameterError(
                attribute.name, f"unknown value {value!r}", f"use one of {list(choices)}"
            )

    return check


def check_delta_query(delta: float) -> float:
    """Validate a delta at which epsilon is queried: 0 < delta < 1."""
    v = _number("delta", delta)
    if not (0.0 < v < 1.0):
        raise InvalidParameterError(
            "delta", f"must lie in (0, 1), got {_shown(delta)}", "pass e.g. 1e-5"
        )
    return v


def check_epsilon_query(epsilon: float) -> float:
    """Validate an epsilon at which delta is queried: finite (may be negative)."""
    v = _number("epsilon", epsilon)
    if not math.isfinite(v):
        raise InvalidParameterError(
            "epsilon", f"must be finite, got {_shown(epsilon)}", "pass e.g. 1.0"
        )
    return v
