"""Argument checks shared by the primitives of the runtime ledger (:mod:`dpledger.runtime.ledger`).

Each check raises :class:`~dpledger.core.errors.InvalidParameterError` naming the argument and
the fix, before the ledger books anything or draws any noise.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpledger.core.errors import InvalidParameterError

__all__ = ["FloatArray", "check_step", "finite_array", "positive"]

FloatArray = NDArray[np.float64]


def check_step(step: Any) -> str:
    """``step`` if it is a non-empty name."""
    if not isinstance(step, str) or not step:
        raise InvalidParameterError("step", f"must be a non-empty name, got {step!r}", "name it")
    return step


def positive(name: str, value: Any) -> float:
    """``value`` as a float, if it is a number > 0 and finite."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating | np.integer):
        raise InvalidParameterError(name, f"expected a number, got {value!r}", "pass a float")
    v = float(value)
    if not (v > 0 and math.isfinite(v)):
        raise InvalidParameterError(name, f"must be > 0 and finite, got {value!r}", "pass e.g. 1.0")
    return v


def finite_array(name: str, values: Any) -> FloatArray:
    """``values`` as a float array, if it is numeric with no NaN or infinite entry."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidParameterError(name, "is not numeric", "pass an array of numbers") from None
    if not np.all(np.isfinite(arr)):
        raise InvalidParameterError(name, "contains NaN or infinite values", "clean the input")
    return arr
