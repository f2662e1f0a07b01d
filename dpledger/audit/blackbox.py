"""Black-box canaries: records of a linear model's own data, scored on the released model.

Each canary is an input of the data's largest row norm in a random direction with a random 0/1
label; the included ones are appended to the data, the method runs once (a verified run) and
each canary is scored by the released model's margin on it, ``(2 y - 1) <w, x>``: a model
trained on a canary leans towards its label. Only the final model is seen.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpledger.core.errors import InvalidParameterError
from dpledger.runtime import session

FloatArray = NDArray[np.float64]


def _xy(data: Any) -> tuple[FloatArray, FloatArray, bool]:
    """Inputs and labels of ``{x, y}`` data or of an array whose last column is the label."""
    if isinstance(data, dict) and "x" in data and "y" in data:
        return np.asarray(data["x"], float), np.asarray(data["y"], float), True
    arr = np.asarray(data, dtype=float) if isinstance(data, np.ndarray | list) else None
    if arr is None or arr.ndim != 2 or arr.shape[1] < 2:
        raise InvalidParameterError(
            "--mode",
            "black-box canaries are records (x, y) of a labelled table, and this data is not one",
            "use --mode white-box",
        )
    return arr[:, :-1], arr[:, -1], False


def canary_records(x: FloatArray, m: int, rng: np.random.Generator) -> tuple[Any, Any]:
    """``m`` canary inputs (norm: the data's largest row norm) and 0/1 labels."""
    direction = rng.normal(size=(m, x.shape[1]))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    radius = float(np.max(np.linalg.norm(x, axis=1))) if x.size else 1.0
    return direction * radius, rng.integers(0, 2, size=m).astype(float)


def blackbox_scores(declared: session.Declared, data: Any, included: Any, seed: int) -> Any:
    """Scores of the canaries on the model a verified run released."""
    inc = np.asarray(included, dtype=bool)
    x, y, mapping = _xy(data)
    rng = np.random.default_rng(seed)
    cx, cy = canary_records(x, inc.size, rng)
    x_run, y_run = np.vstack([x, cx[inc]]), np.concatenate([y, cy[inc]])
    run_data: Any = {"x": x_run, "y": y_run} if mapping else np.column_stack([x_run, y_run])
    result = session.execute(declared, run_data, seed=int(rng.integers(0, 2**62)))
    weights = result.outputs.get("weights")
    if weights is None:
        raise InvalidParameterError(
            "--mode",
            f"black-box canaries score a released linear model 'weights'; "
            f"{declared.spec.name} released {sorted(result.outputs)}",
            "use --mode white-box",
        )
    w = np.asarray(weights, dtype=float).reshape(-1)[: x.shape[1]]
    return (2.0 * cy - 1.0) * (cx @ w)
