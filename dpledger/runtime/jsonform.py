"""The JSON form of what dpledger writes: one encoder for records, reports and command output.

JSON has no infinity: an unbounded loss is the string ``"inf"`` (:func:`json_safe`). Numpy
scalars become Python numbers and an output that knows its own JSON form (``to_json()``)
gives it (:func:`jsonable`). :func:`strict_json` is the text every file of a run is written
with (sorted keys, two-space indent, no NaN).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["json_safe", "jsonable", "strict_json"]


def json_safe(value: Any) -> Any:
    """JSON has no infinity: an unbounded loss is the string ``"inf"`` (as in ``account``)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "inf" if value > 0 else ("-inf" if value < 0 else "nan")
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def jsonable(value: Any) -> Any:
    """``value`` with numpy scalars as Python numbers and ``to_json()`` forms expanded."""
    if isinstance(value, np.generic):
        return value.item()
    to_json = getattr(value, "to_json", None)
    if callable(to_json):  # outputs that know their own JSON form (e.g. synthetic tables)
        return jsonable(to_json())
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def strict_json(value: Any) -> str:
    """Strict JSON text of ``value`` (an unbounded loss is the string "inf"), newline-ended."""
    return json.dumps(json_safe(value), indent=2, sort_keys=True, allow_nan=False) + "\n"
