"""The input check every method applies to its private data (finite, 2-D, non-empty; numpy
only). The experiments' data sets are in ``experiments/swflow/datasets.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpledger.plugin import InvalidParameterError

FloatArray = NDArray[np.float64]


def check_records(data: Any, *, field: str = "data") -> FloatArray:
    """A finite, non-empty ``n x d`` float array, or an InvalidParameterError naming ``field``."""
    try:
        arr = np.asarray(data, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidParameterError(
            field, "is not numeric", "pass an n x d array of floats"
        ) from None
    if arr.ndim != 2:
        raise InvalidParameterError(
            field,
            f"must be a 2-D array (records x dimensions), got shape {arr.shape}",
            "reshape to n x d (one record per row)",
        )
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise InvalidParameterError(
            field, f"is empty (shape {arr.shape})", "pass at least one record with one column"
        )
    if not np.all(np.isfinite(arr)):
        raise InvalidParameterError(
            field, "contains NaN or infinite values", "drop or impute those records first"
        )
    return arr
