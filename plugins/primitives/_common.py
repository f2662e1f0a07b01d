"""Small helpers shared by the primitive plugins."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
from numpy.typing import NDArray

from dpledger.plugin import InvalidParameterError

if TYPE_CHECKING:
    from dpledger.plugin import Ledger


def is_bool(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    """Require a real bool."""
    if not isinstance(value, bool):
        raise InvalidParameterError(
            attribute.name, f"must be true or false, got {value!r}", "pass a boolean"
        )


def float_matrix(name: str, data: Any, *, ndim: int | None) -> NDArray[np.float64]:
    """``data`` as a finite float array with ``ndim`` dimensions (any if None)."""
    try:
        arr = np.asarray(data, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidParameterError(name, "is not numeric", "pass an array of numbers") from None
    if ndim is not None and arr.ndim != ndim:
        raise InvalidParameterError(
            name, f"must be {ndim}-D, got shape {arr.shape}", f"pass a {ndim}-D array"
        )
    if not np.all(np.isfinite(arr)):
        raise InvalidParameterError(name, "contains NaN or infinite values", "clean the data")
    return arr


def field_of(data: Any, key: str) -> Any:
    """``data[key]`` for a mapping (an .npz file) with a clear error."""
    try:
        return data[key]
    except (KeyError, TypeError, IndexError, ValueError):
        raise InvalidParameterError(
            "data", f"needs an array named {key!r}", f"pass a mapping (or .npz file) with {key!r}"
        ) from None


def summed_rows(data: Any, ledger: Ledger) -> NDArray[np.float64] | None:
    """On a user-level source, the rows whose sum is the query (None at row level).

    A row-level query method on a user-level source gets one value (or vector) per kept row,
    not a query answer: releasing them one by one would make the output's length the number of
    rows, which depends on the data. Its query is then the sum of the rows, whose shape is that
    of one row. ``data`` is that one column (a mapping may also hold the unit key column).
    """
    if ledger.adjacency.unit != "user":
        return None
    if isinstance(data, Mapping):
        columns = [k for k in data if k != ledger.adjacency.unit_key]
        if len(columns) != 1:
            raise InvalidParameterError(
                "data",
                f"holds the columns {sorted(map(str, columns))} besides the unit key",
                "keep exactly one column of values (one value or vector per row)",
            )
        data = data[columns[0]]
    return float_matrix("data", data, ndim=None)


def summed_scores(data: Any, ledger: Ledger, sensitivity: float) -> NDArray[np.float64]:
    """The score vector of a selection: ``data`` itself at row level; on a user-level source,
    the sum of the rows, each a row of contributions to every candidate's score clipped to
    ``[-sensitivity, sensitivity]``, so the candidates are the columns (public), never the rows."""
    rows = summed_rows(data, ledger)
    if rows is None:
        return float_matrix("data", data, ndim=1)
    if rows.ndim != 2:
        raise InvalidParameterError(
            "data",
            f"on a user-level source must hold one row of scores per record, got shape "
            f"{rows.shape}",
            "give each row its contribution to every candidate's score (rows x candidates)",
        )
    return np.asarray(np.clip(rows, -sensitivity, sensitivity).sum(axis=0), dtype=np.float64)
