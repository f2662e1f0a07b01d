"""Reusable neighbouring-dataset rules for whole-method audits (``MethodSpec(neighbours=...)``).

Each rule is ``rule(params, data, adjacency) -> NeighbourPair`` (:mod:`dpledger.core.neighbours`).

:func:`per_record`, the generic rule (used for a method that names no rule), treats the data as
records: an array's first axis (rows of a 2-D array, the values of a 1-D array), or the common
first axis of a mapping of equal-length arrays (e.g. ``x``/``y``). The canary has

* feature values far out: ``CANARY_SCALE * (1 + largest record norm)`` along the first feature
  axis, on the side opposite to the data's mean, so that any clipping binds and the canary
  is the record the release most depends on;
* a valid value in a label-like column: the last column of a 2-D array (beside at least one
  other column) or a 1-D array (alone or in a mapping) whose values are integers with at most
  ``MAX_LABELS`` distinct values, or a mapping's array named like a label; the value is the
  smallest observed one that differs from the replaced record's.

Add/remove pairs ``data`` with ``data + canary``; replace-one swaps record ``0`` for the canary.

Data that is not a set of records, or records in a bounded domain, need another rule: a query
answer of stated sensitivity (:func:`query_answer`), a score vector (:func:`score_vector`), private
records beside public candidates (:func:`nn_records`), marginals in a public ball
(:func:`ball_marginals`), angles on the circle (:func:`circle_antipode`), user tables
(:func:`user_tables`), a table whose method bounds each unit's rows itself (:func:`unit_rows`).
A rule that cannot build neighbours raises :class:`~dpledger.core.errors.InvalidParameterError`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError
from dpledger.core.neighbours import NeighbourPair

__all__ = [
    "CANARY_SCALE",
    "LABEL_NAMES",
    "MAX_LABELS",
    "REPLACE_INDEX",
    "ball_marginals",
    "circle_antipode",
    "nn_records",
    "per_record",
    "query_answer",
    "score_vector",
    "unit_rows",
    "user_tables",
]

FloatArray = NDArray[np.float64]

#: the canary's feature norm is this many times (1 + the largest record norm)
CANARY_SCALE = 1000.0
#: integer columns with at most this many distinct values are label-like
MAX_LABELS = 64
#: mapping keys that are always label-like
LABEL_NAMES = frozenset({"y", "label", "labels", "target", "targets", "class", "classes"})
#: the record that replace-one swaps for the canary
REPLACE_INDEX = 0


# -- the generic per-record rule ---------------------------------------------------------------
def _numeric(name: str, value: Any) -> FloatArray:
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidParameterError(
            name,
            "is not numeric, so the audit cannot build a canary record for it",
            "pass numeric arrays, or register a neighbour rule with the method "
            "(MethodSpec neighbours=...)",
        ) from None
    if arr.ndim == 0 or arr.shape[0] == 0:
        raise InvalidParameterError(
            name, f"has no records (shape {arr.shape})", "pass at least one record per array"
        )
    if not np.all(np.isfinite(arr)):
        raise InvalidParameterError(name, "contains NaN or infinite values", "clean the data")
    return arr


def _is_label(column: FloatArray) -> bool:
    return bool(np.all(column == np.round(column)) and np.unique(column).size <= MAX_LABELS)


def _label_value(column: FloatArray, replaced: float | None) -> float:
    values = np.unique(column)
    others = values[values != replaced] if replaced is not None else values
    return float(others[0] if others.size else values[0])


def _far_value(features: FloatArray) -> FloatArray:
    """The canary's features: far out along the first axis, away from the data's mean."""
    flat = features.reshape(features.shape[0], -1)
    peak = float(np.max(np.linalg.norm(flat, axis=1)))
    sign = -1.0 if float(np.mean(flat[:, 0])) > 0 else 1.0
    canary = np.zeros(flat.shape[1])
    canary[0] = sign * CANARY_SCALE * (1.0 + peak)
    return canary.reshape(features.shape[1:])


def _canary_rows(
    columns: Sequence[tuple[str, FloatArray, bool]], replaced: int | None
) -> list[FloatArray]:
    out = []
    for _, arr, label in columns:
        if label:
            prev = float(arr[replaced]) if replaced is not None else None
            out.append(np.asarray(_label_value(arr, prev)))
        else:
            out.append(_far_value(arr))
    return out


def _with_canary(arr: FloatArray, canary: FloatArray, relation: str) -> FloatArray:
    if relation == "add_remove":
        return np.concatenate([arr, canary[None, ...]], axis=0)
    out = arr.copy()
    out[REPLACE_INDEX] = canary
    return out


def _check_row_level(adjacency: Adjacency) -> None:
    if adjacency.unit != "row":
        raise InvalidParameterError(
            "adjacency.unit",
            f"is {adjacency.unit!r}: the generic audit builds row-level neighbours only",
            "audit with a row-level adjacency, or register a neighbour rule with the method "
            "(MethodSpec neighbours=...)",
        )


def _describe(relation: str, canary: str) -> str:
    if relation == "add_remove":
        return f"D = data, D' = data + canary ({canary})"
    return f"D = data, D' = data with record {REPLACE_INDEX} replaced by the canary ({canary})"


def _fmt_canary(parts: Mapping[str, FloatArray]) -> str:
    shown = []
    for key, value in parts.items():
        arr = np.asarray(value)
        text = f"{float(arr):g}" if arr.ndim == 0 else f"{np.linalg.norm(arr):g} norm along axis 0"
        shown.append(f"{key}: {text}" if key else text)
    return ", ".join(shown)


def _mapping_pair(
    data: Mapping[str, Any], relation: str, record_keys: Sequence[str] | None
) -> NeighbourPair:
    """The generic rule on a mapping of equal-length per-record arrays."""
    keys = list(record_keys) if record_keys is not None else list(data)
    missing = [k for k in keys if k not in data]
    if missing or not keys:
        raise InvalidParameterError(
            "data",
            f"has no per-record arrays {missing or keys}",
            "pass a mapping of equal-length arrays (one entry per record)",
        )
    arrays = {k: _numeric(f"data.{k}", data[k]) for k in keys}
    lengths = {k: a.shape[0] for k, a in arrays.items()}
    if len(set(lengths.values())) != 1:
        raise InvalidParameterError(
            "data",
            f"arrays have different lengths {lengths}, so they are not one entry per record",
            "pass equal-length arrays, or register a neighbour rule with the method "
            "(MethodSpec neighbours=...)",
        )
    columns = [
        (k, a, k.lower() in LABEL_NAMES or (a.ndim == 1 and _is_label(a)))
        for k, a in arrays.items()
    ]
    if all(label for _, _, label in columns):  # nothing but labels: push the first out
        columns[0] = (columns[0][0], columns[0][1], False)
    replaced = REPLACE_INDEX if relation == "replace_one" else None
    canaries = _canary_rows(columns, replaced)
    d_prime = dict(data)
    for (k, arr, _), c in zip(columns, canaries, strict=True):
        d_prime[k] = _with_canary(arr, c, relation)
    text = _fmt_canary({k: c for (k, _, _), c in zip(columns, canaries, strict=True)})
    return NeighbourPair(dict(data), d_prime, relation, _describe(relation, text))


def per_record(
    params: Any, data: Any, adjacency: Adjacency, record_keys: Sequence[str] | None = None
) -> NeighbourPair:
    """The generic rule (see the module docstring); ``record_keys`` restricts a mapping's
    per-record arrays (the others are public and stay as they are)."""
    _check_row_level(adjacency)
    relation = adjacency.relation
    if isinstance(data, Mapping):
        return _mapping_pair(data, relation, record_keys)
    arr = _numeric("data", data)
    replaced = REPLACE_INDEX if relation == "replace_one" else None
    if arr.ndim == 1:
        label = _is_label(arr)
        canary = _canary_rows([("", arr, label)], replaced)[0]
    elif arr.ndim == 2:
        # only the last column can be a label (the convention of "features then label")
        labels = [False] * arr.shape[1]
        if arr.shape[1] > 1 and _is_label(arr[:, -1]):
            labels[-1] = True
        feat = [j for j, lab in enumerate(labels) if not lab]
        canary = np.zeros(arr.shape[1])
        canary[feat] = _far_value(arr[:, feat])
        for j, lab in enumerate(labels):
            if lab:
                prev = float(arr[replaced, j]) if replaced is not None else None
                canary[j] = _label_value(arr[:, j], prev)
    else:
        canary = _far_value(arr)
    text = _fmt_canary({"": canary})
    return NeighbourPair(
        arr, _with_canary(arr, canary, relation), relation, _describe(relation, text)
    )


# -- rules for data that is not a set of records ---------------------------------------------------
def _factor(adjacency: Adjacency) -> float:
    _check_row_level(adjacency)
    return adjacency.sensitivity_factor


def query_answer(params: Any, data: Any, adjacency: Adjacency) -> NeighbourPair:
    """Data is the exact answer of a query of stated (add/remove) ``params.sensitivity``:
    the neighbour's answer moves by the full sensitivity (times 2 under replace-one) along
    the first coordinate."""
    arr = _numeric("data", np.atleast_1d(np.asarray(data)))
    shift = _factor(adjacency) * float(params.sensitivity)
    moved = arr.copy()
    moved.reshape(-1)[0] += shift
    return NeighbourPair(
        arr,
        moved,
        adjacency.relation,
        f"query answer vs the answer moved by {shift:g} in coordinate 0 (the stated sensitivity)",
    )


def score_vector(params: Any, data: Any, adjacency: Adjacency) -> NeighbourPair:
    """Data is a score vector whose entries each move by at most ``params.sensitivity``: the
    neighbour raises score 0 and (unless monotonic) lowers every other score by that much
    (times 2 under replace-one)."""
    arr = _numeric("data", data)
    if arr.ndim != 1:
        raise InvalidParameterError(
            "data", f"must be a 1-D score vector, got {arr.shape}", "pass one score per candidate"
        )
    s = _factor(adjacency) * float(params.sensitivity)
    moved = arr.copy()
    if not getattr(params, "monotonic", False):
        moved -= s
        moved[0] += s
    moved[0] += s
    return NeighbourPair(
        arr,
        moved,
        adjacency.relation,
        f"scores vs score 0 raised by {s:g} and the others lowered by "
        f"{0.0 if getattr(params, 'monotonic', False) else s:g}",
    )


def nn_records(params: Any, data: Any, adjacency: Adjacency) -> NeighbourPair:
    """Only ``records`` holds private records; ``candidates`` are public."""
    return per_record(params, data, adjacency, record_keys=("records",))


def ball_marginals(params: Any, data: Any, adjacency: Adjacency) -> NeighbourPair:
    """Trajectory marginals in a public ball: the canary sits on the ball's edge (opposite to
    the mean of marginal 0) and replaces record 0 of marginal 0. The marginal sizes are public,
    so only replace-one neighbours exist."""
    _check_row_level(adjacency)
    if adjacency.relation != "replace_one":
        raise InvalidParameterError(
            "relation",
            "add_remove would change a public marginal size (n_per_time)",
            "audit this method with --relation replace_one",
        )
    if not isinstance(data, Mapping):
        raise InvalidParameterError(
            "data",
            "must hold the marginals",
            "store 'marginals' or 'marginal_0', 'marginal_1', ...",
        )
    key = "marginals" if "marginals" in data else "marginal_0"
    if key not in data:
        raise InvalidParameterError(
            "data", "has no marginals", "store 'marginals' or 'marginal_0', 'marginal_1', ..."
        )
    marginals = [np.asarray(m, dtype=np.float64) for m in data[key]] if key == "marginals" else None
    first = marginals[0] if marginals is not None else np.asarray(data[key], dtype=np.float64)
    first = _numeric(f"data.{key}", first)
    center = np.asarray(getattr(params, "center", None) or np.zeros(first.shape[1]), dtype=float)
    radius = float(getattr(params, "radius", None) or 1.0)
    sign = -1.0 if float(np.mean(first[:, 0]) - center[0]) > 0 else 1.0
    canary = center.copy()
    canary[0] += sign * radius * (1.0 - 1e-9)
    moved = first.copy()
    moved[REPLACE_INDEX] = canary
    d_prime = dict(data)
    if marginals is not None:
        d_prime[key] = [moved, *marginals[1:]]
    else:
        d_prime[key] = moved
    return NeighbourPair(
        dict(data),
        d_prime,
        "replace_one",
        f"record {REPLACE_INDEX} of marginal 0 replaced by a canary on the "
        f"edge of the public ball (radius {radius:g})",
    )


def circle_antipode(params: Any, data: Any, adjacency: Adjacency) -> NeighbourPair:
    """Angles on the circle: the canary sits at the antipode of the data's circular mean."""
    arr = np.asarray(data)
    if arr.ndim != 1:
        return per_record(params, data, adjacency)
    _check_row_level(adjacency)
    y = _numeric("data", arr)
    canary = math.atan2(float(np.mean(np.sin(y))), float(np.mean(np.cos(y)))) + math.pi
    return NeighbourPair(
        y,
        _with_canary(y, np.asarray(canary), adjacency.relation),
        adjacency.relation,
        _describe(adjacency.relation, f"angle {canary:.4g}, the antipode of the circular mean"),
    )


def _tables_json(data: Any) -> dict[str, Any]:
    to_json = getattr(data, "to_json", None)
    value = to_json() if callable(to_json) else data
    if not (isinstance(value, Mapping) and "schema" in value and "users" in value):
        raise InvalidParameterError(
            "data", "is not a set of user tables", "pass a tables file with 'schema' and 'users'"
        )
    return {
        "schema": [dict(c) for c in value["schema"]],
        "users": [
            {"user_id": str(u["user_id"]), "rows": [list(r) for r in u["rows"]]}
            for u in value["users"]
        ],
    }


def user_tables(params: Any, data: Any, adjacency: Adjacency) -> NeighbourPair:
    """User tables (schema + users): the canary is a new user with one row, its numeric values
    at the public bound farther from the data's mean (far out if unbounded), its categorical
    values the rarest category, its static values its own id. Add/remove adds that user;
    replace-one swaps it for user 0."""
    tables = _tables_json(data)
    schema, users = tables["schema"], tables["users"]
    if not users:
        raise InvalidParameterError("data", "has no users", "pass at least one user table")
    rows = [r for u in users for r in u["rows"]]
    ids = {u["user_id"] for u in users}
    uid = next(f"canary{i}" for i in range(len(ids) + 1) if f"canary{i}" not in ids)
    canary: list[Any] = []
    for j, col in enumerate(schema):
        kind = col.get("kind")
        if kind == "numeric":
            values = np.asarray([float(r[j]) for r in rows])
            lo, hi = col.get("lower"), col.get("upper")
            far = CANARY_SCALE * (1.0 + float(np.max(np.abs(values))))
            mean = float(np.mean(values))
            if lo is not None and hi is not None:
                canary.append(float(lo) if mean > 0.5 * (float(lo) + float(hi)) else float(hi))
            else:
                canary.append(
                    float(hi)
                    if hi is not None
                    else float(lo)
                    if lo is not None
                    else (-far if mean > 0 else far)
                )
        elif kind == "categorical":
            counts = {c: 0 for c in col.get("categories", ())}
            for r in rows:
                counts[r[j]] = counts.get(r[j], 0) + 1
            canary.append(min(counts, key=lambda c: counts[c]))
        else:
            canary.append(uid)
    user = {"user_id": uid, "rows": [canary]}
    if adjacency.relation == "add_remove":
        d_prime: Any = {"schema": schema, "users": [*users, user]}
        text = f"D = tables, D' = tables + user {uid!r} with one row {canary}"
    else:
        d_prime = {"schema": schema, "users": [user, *users[1:]]}
        text = f"D = tables, D' = user 0 replaced by user {uid!r} with one row {canary}"
    if isinstance(data, Mapping):
        return NeighbourPair(tables, d_prime, adjacency.relation, text)
    # a tables object: build the neighbour with the object's own classes
    old = tuple(data.users)
    new = type(old[0])(uid, (tuple(canary),))
    kept = (*old, new) if adjacency.relation == "add_remove" else (new, *old[1:])
    return NeighbourPair(data, type(data)(data.schema, kept), adjacency.relation, text)


def unit_rows(params: Any, data: Any, adjacency: Adjacency) -> NeighbourPair:
    """A table as a mapping of equal-length columns, for a method that bounds each unit's rows
    itself: ``D`` and ``D`` without every row of the unit (``params.unit_column``) with the most
    rows; at row level (no unit column) without one row of the largest partition
    (``params.partition_column``). Add/remove only."""
    if adjacency.relation != "add_remove":
        raise InvalidParameterError(
            "relation", "a table of units is audited under add/remove", "audit add_remove"
        )
    if not isinstance(data, Mapping):
        raise InvalidParameterError(
            "data", "must be a mapping of columns to audit", "pass the table's columns (.npz)"
        )
    unit = getattr(params, "unit_column", None)
    column = unit or params.partition_column
    keys = np.asarray(data[column])
    values, counts = np.unique(keys, return_counts=True)
    victim = values[int(np.argmax(counts))]
    keep = keys != victim
    if unit is None:
        keep = np.ones(keys.size, dtype=bool)
        keep[int(np.flatnonzero(keys == victim)[0])] = False
    removed = {c: np.asarray(v)[keep] for c, v in data.items()}
    text = f"the rows of {column} = {victim!r} removed"
    return NeighbourPair(dict(data), removed, "add_remove", text)
