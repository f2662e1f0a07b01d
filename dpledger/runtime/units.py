"""The privacy unit of every row, read from the data by the runtime, never chosen by a method.

At user level (``Adjacency(unit="user", unit_key=...)``) :func:`units_from_data` reads the unit
column the adjacency names out of the data before the method runs, and the runner hands it to
the :class:`~dpledger.runtime.ledger.PrivacyLedger`. The ledger's contribution bound
(``bound_units``) and per-unit clipped sums group rows by these keys only; a method names rows
by their indices into the data, so it cannot make one user look like many by choosing keys.

Where the keys are read (the first that applies):

* a mapping of columns holding ``unit_key``: that column, one key per row; a 2-D column (or a
  list of 1-D columns) holds one row of keys per *part* of the data (e.g. one per time);
* a mapping with ``ids`` ``[T, N]`` or ``ids_0``, ``ids_1``, ... (time marginals): one part per
  time;
* user tables (an object with ``users``, or their JSON form ``{"schema", "users"}``): one key
  per table, its ``unit_key`` field if it has one, else its ``user_id``;
* a structured array with a field ``unit_key``: that field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError, LedgerViolationError

IntArray = NDArray[np.int64]


def unit_codes(keys: Any, field: str = "unit_keys") -> IntArray:
    """Integer codes of one unit key per row (any hashable, sortable keys)."""
    arr = np.asarray(keys)
    if arr.ndim != 1:
        raise InvalidParameterError(
            field, f"must be 1-D, got shape {arr.shape}", "store one unit key per row"
        )
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
        raise InvalidParameterError(field, "contains NaN or infinite keys", "give every row a key")
    try:
        _, codes = np.unique(arr, return_inverse=True)
    except TypeError:
        raise InvalidParameterError(
            field, "mixes key types that cannot be compared", "use one type of key (e.g. strings)"
        ) from None
    return codes.astype(np.int64).reshape(-1)


def first_rows_per_unit(codes: IntArray, k: int) -> IntArray:
    """Positions of each unit's first ``k`` rows, in data order."""
    if codes.size == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_codes)) + 1]
    rank = np.arange(codes.size) - np.repeat(starts, np.diff(np.r_[starts, codes.size]))
    return np.sort(order[rank < k]).astype(np.int64)


class DataUnits:
    """The unit key of every row of the data (as integer codes shared by all parts)."""

    def __init__(self, column: str, parts: Sequence[Any]) -> None:
        arrays = [np.asarray(p) for p in parts]
        for i, arr in enumerate(arrays):
            if arr.ndim != 1:
                where = column if len(arrays) == 1 else f"{column}[{i}]"
                raise InvalidParameterError(
                    where, f"must be 1-D, got shape {arr.shape}", "store one unit key per row"
                )
        joined = unit_codes(np.concatenate(arrays) if arrays else np.zeros(0), column)
        bounds = np.cumsum([0, *[a.size for a in arrays]])
        #: where the keys were read, e.g. ``data.user_id``
        self.column = column
        self._parts = tuple(joined[bounds[i] : bounds[i + 1]].copy() for i in range(len(arrays)))
        for codes in self._parts:
            codes.setflags(write=False)
        #: rows a sample may draw at user level: one per unit in every part
        self.one_per_unit = sum(int(np.unique(p).size) for p in self._parts)

    @property
    def num_parts(self) -> int:
        return len(self._parts)

    def rows_in(self, part: int | None = None) -> int:
        """How many rows of ``part`` carry a unit key."""
        return int(self._parts[self._part(part, "rows_in")].size)

    def _part(self, part: int | None, step: str) -> int:
        if part is None and len(self._parts) == 1:
            return 0
        valid = isinstance(part, int | np.integer) and not isinstance(part, bool)
        if valid and part is not None and 0 <= part < len(self._parts):
            return int(part)
        raise LedgerViolationError(
            f"step {step!r}: part={part!r} does not name one of the {len(self._parts)} parts "
            f"of the unit column {self.column}. Fix: pass part=i with 0 <= i < "
            f"{len(self._parts)} (e.g. the time index), or leave it out for a one-part column"
        )

    def codes(self, rows: Any, part: int | None, step: str) -> IntArray:
        """The unit codes of ``rows`` (indices into ``part`` of the data; None: every row)."""
        codes = self._parts[self._part(part, step)]
        if rows is None:
            return codes
        idx = np.asarray(rows)
        if idx.ndim != 1 or (idx.size and idx.dtype.kind not in "iu"):
            raise LedgerViolationError(
                f"step {step!r}: rows must be a 1-D array of row indices into the data. Fix: "
                "pass the integer indices of the rows (e.g. those bound_units returned)"
            )
        idx = idx.astype(np.int64)
        if idx.size and (idx.min() < 0 or idx.max() >= codes.size):
            raise LedgerViolationError(
                f"step {step!r}: rows holds an index outside the {codes.size} rows of the "
                f"unit column {self.column}. Fix: pass indices into the data the run was given"
            )
        if np.unique(idx).size != idx.size:
            raise LedgerViolationError(
                f"step {step!r}: rows names a row more than once. Fix: pass each row once"
            )
        picked: IntArray = codes[idx]
        return picked


def check_keys_agree(keys: Any, codes: IntArray, column: str, step: str) -> None:
    """Refuse unit keys a method passed unless they group the rows as the data's column does."""
    fix = (
        "Fix: drop the keys: the ledger reads the unit column from the data "
        "(ledger.bound_units(k, rows=...), or per_unit=True on a clipped sum)"
    )
    theirs = unit_codes(keys)
    if theirs.size != codes.size:
        raise LedgerViolationError(
            f"step {step!r}: {theirs.size} unit keys were passed for {codes.size} rows of the "
            f"data's unit column {column}. {fix}"
        )
    pairs = np.unique(np.stack([theirs, codes]), axis=1).shape[1] if codes.size else 0
    mine = int(np.unique(codes).size)
    if not pairs == int(np.unique(theirs).size) == mine:
        raise LedgerViolationError(
            f"step {step!r}: the unit keys passed disagree with the data's unit column "
            f"{column} (they group the rows into {int(np.unique(theirs).size)} units, the "
            f"data into {mine}). {fix}"
        )


def _parts_of(value: Any) -> list[Any]:
    """One 1-D column of keys, or one per part (a 2-D array or a sequence of 1-D arrays)."""
    if isinstance(value, np.ndarray) and value.dtype != object:
        return list(value) if value.ndim == 2 else [value]
    items = list(value) if isinstance(value, list | tuple | np.ndarray) else [value]
    if items and all(isinstance(v, list | tuple | np.ndarray) for v in items):
        return items
    return [np.asarray(items) if isinstance(value, list | tuple) else value]


def _per_time_ids(data: Mapping[Any, Any]) -> list[Any] | None:
    if "ids" in data:
        return _parts_of(data["ids"])
    parts: list[Any] = []
    while f"ids_{len(parts)}" in data:
        parts.append(data[f"ids_{len(parts)}"])
    return parts or None


def _table_keys(users: Any, key: str) -> tuple[str, list[Any]] | None:
    """Each table's ``key`` field if every table has one, else each table's ``user_id``."""
    for field in dict.fromkeys((key, "user_id")):
        keys = [u.get(field) if isinstance(u, Mapping) else getattr(u, field, None) for u in users]
        if all(k is not None for k in keys):
            return f"data.users[].{field}", [np.asarray(keys)]
    return None


def _read(data: Any, key: str) -> tuple[str, list[Any]] | None:
    if isinstance(data, Mapping):
        if key in data:
            return f"data.{key}", _parts_of(data[key])
        ids = _per_time_ids(data)
        if ids is not None:
            return "data.ids", ids
        users = data.get("users")
    else:
        names = getattr(getattr(data, "dtype", None), "names", None) or ()
        if isinstance(data, np.ndarray) and key in names:
            return f"data.{key}", [data[key]]
        users = getattr(data, "users", None)
    if isinstance(users, list | tuple | np.ndarray):
        return _table_keys(users, key)
    return None


def units_from_data(data: Any, adjacency: Adjacency) -> DataUnits:
    """The unit keys of ``data`` for ``adjacency`` (user level), read by the runtime."""
    key = str(adjacency.unit_key)
    found = _read(data, key)
    if found is None:
        raise InvalidParameterError(
            f"data.{key}",
            f"is missing: user-level adjacency identifies users by {key!r}",
            f"give the data a column {key!r} with one user id per row (time marginals: 'ids' "
            "[T, N]; user tables: each table's 'user_id'), or use row-level adjacency",
        )
    return DataUnits(*found)


def sums_per_unit(rows: NDArray[np.float64], codes: IntArray, step: str) -> NDArray[np.float64]:
    """The sum of each unit's rows (one row per unit, in code order)."""
    if codes.size != rows.shape[0]:
        raise LedgerViolationError(
            f"step {step!r}: the contributions have {rows.shape[0]} rows for {codes.size} rows "
            "of the unit column. Fix: pass one contribution per data row, or rows= the data "
            "indices of the rows they hold"
        )
    if codes.size == 0:
        return rows
    _, inverse = np.unique(codes, return_inverse=True)
    sums = np.zeros((int(inverse.max()) + 1, rows.shape[1]))
    np.add.at(sums, inverse.reshape(-1), rows)
    return sums


def check_sample_size(units: DataUnits | None, n: Any, step: str) -> None:
    """A user-level sample draws at most one row per unit (of every part of the data)."""
    if units is None or not isinstance(n, int | np.integer) or n <= units.one_per_unit:
        return
    raise LedgerViolationError(
        f"step {step!r}: the method declares a user-level event, but this sample draws from "
        f"{int(n)} records while the data's unit column {units.column} holds "
        f"{units.one_per_unit} units (one row each): the rows of one unit would be drawn "
        "independently. Fix: sample the rows ledger.bound_units(1) kept"
    )


def codes_of(
    units: DataUnits | None, rows: Any, part: int | None, keys: Any, step: str
) -> IntArray:
    """The data's unit codes of ``rows``; keys a method passed are only checked against them."""
    if units is None:
        raise LedgerViolationError(
            f"step {step!r}: this ledger was given no unit column, so it cannot tell one "
            "unit's rows from another's. Fix: run at user level through run_verified (or "
            "dpledger run), which reads the adjacency's unit_key column from the data"
        )
    codes = units.codes(rows, part, step)
    if keys is not None:
        check_keys_agree(keys, codes, units.column, step)
    return codes


def grouping(
    units: DataUnits | None, per_unit: bool, rows: Any, part: int | None, keys: Any, step: str
) -> IntArray | None:
    """The unit codes a per-unit clipped sum groups its rows by (None: clipped per row)."""
    if not per_unit and keys is None:
        if rows is not None or part is not None:
            raise InvalidParameterError(
                "rows", "names data rows for a per-unit sum only", "pass per_unit=True"
            )
        return None
    return codes_of(units, rows, part, keys, step)


def bound_arguments(first: Any, old: tuple[Any, ...]) -> tuple[Any, int]:
    """``(keys, k)`` of ``bound_units(k)`` (keys None) or of the old ``bound_units(keys, k)``."""
    if len(old) > 1:
        raise InvalidParameterError(
            "bound_units", f"takes at most 2 positional arguments, got {1 + len(old)}", "pass k"
        )
    keys, k = (first, old[0]) if old else (None, first)
    if isinstance(k, int | np.integer) and not isinstance(k, bool) and k >= 1:
        return keys, int(k)
    shown = repr(k) if isinstance(k, int | float | str | bool) else type(k).__name__
    raise InvalidParameterError(
        "max_contributions",
        f"must be an integer >= 1, got {shown}",
        "call ledger.bound_units(k): the ledger reads the unit keys from the data",
    )
