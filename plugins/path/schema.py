"""Schema and validated containers for collections of user-owned longitudinal tables.

A dataset is a tuple of :class:`UserTable` (one per user = one privacy unit), each an ordered
sequence of rows in the column order of a shared :class:`TableSchema`. Column kinds:

* ``numeric``: finite floats; ``lower``/``upper`` are optional *public* bounds (needed by the
  flattened marginal baselines, which discretise on them; values outside are clipped there).
* ``categorical``: strings from the public ``categories`` tuple.
* ``static``: a per-user constant string (an identifier or a fixed attribute).
* ``datetime``: a point in time, stored as POSIX seconds (UTC, float); given as a number, a
  :class:`datetime.datetime` (naive = UTC) or an ISO 8601 string; ``lower``/``upper`` are optional
  public bounds given the same ways. Serialized as ISO 8601 text (``2024-03-01T08:30:00``);
  every numeric treatment (discretisation, clipping, metrics) applies to its seconds.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterator, Sequence
from typing import Any, Literal

import attrs
import numpy as np

from dpledger.plugin import InvalidParameterError

ColumnKind = Literal["numeric", "categorical", "static", "datetime"]
KINDS: tuple[str, ...] = ("numeric", "categorical", "static", "datetime")
#: kinds whose values are floats (datetime: POSIX seconds)
NUMERIC_KINDS: frozenset[str] = frozenset({"numeric", "datetime"})


def seconds_from(value: Any) -> float | None:
    """POSIX seconds (UTC) of a number, a datetime (naive = UTC) or an ISO 8601 string; None if
    ``value`` is none of these or not a valid time."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float | np.integer | np.floating):
        f = float(value)
        return f if math.isfinite(f) else None
    if isinstance(value, str):
        try:
            value = dt.datetime.fromisoformat(value.strip())
        except ValueError:
            return None
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return float(value.timestamp())
    return None


def iso_text(seconds: float) -> str:
    """ISO 8601 text (UTC, no offset) of POSIX ``seconds``; whole seconds unless fractional."""
    moment = dt.datetime.fromtimestamp(seconds, tz=dt.UTC).replace(tzinfo=None)
    return moment.isoformat(timespec="seconds" if seconds == int(seconds) else "microseconds")


def _check_name(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, str) or not value:
        raise InvalidParameterError(
            "Column.name", f"must be a non-empty string, got {value!r}", "name the column"
        )


def _check_kind(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value not in KINDS:
        raise InvalidParameterError(
            f"Column.kind (column {getattr(instance, 'name', '?')!r})",
            f"unknown column type {value!r}",
            f"use one of {', '.join(KINDS)}",
        )


def _str_tuple(value: Any) -> tuple[str, ...]:
    return tuple(value)


def _column_tuple(value: Any) -> tuple[Column, ...]:
    return tuple(value)


def _bound(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, str | dt.datetime):
        seconds = seconds_from(value)
        if seconds is None:
            raise InvalidParameterError(
                "Column.lower/upper",
                f"{value!r} is not an ISO 8601 time",
                "write e.g. '2024-03-01T08:30:00'",
            )
        return seconds
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise InvalidParameterError(
            "Column.lower/upper", f"expected a number or None, got {value!r}", "pass a float"
        )
    return float(value)


@attrs.frozen
class Column:
    """One column of a user table (see the module docstring for the kinds)."""

    name: str = attrs.field(validator=_check_name)
    kind: ColumnKind = attrs.field(validator=_check_kind)
    categories: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple)
    lower: float | None = attrs.field(default=None, converter=_bound)
    upper: float | None = attrs.field(default=None, converter=_bound)

    def __attrs_post_init__(self) -> None:
        field = f"Column {self.name!r}"
        if self.kind == "categorical":
            if not self.categories:
                raise InvalidParameterError(
                    field,
                    "a categorical column needs its public categories",
                    "pass categories=('a', 'b', ...)",
                )
            if any(not isinstance(c, str) for c in self.categories):
                raise InvalidParameterError(
                    field, "categories must be strings", "convert the categories to str"
                )
            if len(set(self.categories)) != len(self.categories):
                raise InvalidParameterError(
                    field, "categories contain duplicates", "list each category once"
                )
        elif self.categories:
            raise InvalidParameterError(
                field,
                f"categories given for a {self.kind} column",
                "use kind='categorical' or drop categories",
            )
        for b in (self.lower, self.upper):
            if b is not None and (not self.is_numeric or not math.isfinite(b)):
                raise InvalidParameterError(
                    field,
                    f"bounds must be finite and only on numeric or datetime columns, got {b!r}",
                    "give finite lower/upper on numeric or datetime columns only",
                )
        if self.lower is not None and self.upper is not None and not self.lower < self.upper:
            raise InvalidParameterError(
                field, f"lower {self.lower} must be < upper {self.upper}", "fix the public bounds"
            )

    @property
    def is_numeric(self) -> bool:
        """Whether values are floats (numeric columns, and datetime columns in seconds)."""
        return self.kind in NUMERIC_KINDS

    @property
    def bounded(self) -> bool:
        """True when both public bounds are present."""
        return self.lower is not None and self.upper is not None


@attrs.frozen
class TableSchema:
    """Ordered columns shared by all user tables."""

    columns: tuple[Column, ...] = attrs.field(converter=_column_tuple)

    def __attrs_post_init__(self) -> None:
        if not self.columns:
            raise InvalidParameterError(
                "TableSchema.columns", "is empty", "give at least one column"
            )
        for c in self.columns:
            if not isinstance(c, Column):
                raise InvalidParameterError(
                    "TableSchema.columns",
                    f"expected Column, got {type(c).__name__}",
                    "build columns with Column(name, kind, ...)",
                )
        names = [c.name for c in self.columns]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise InvalidParameterError(
                "TableSchema.columns", f"duplicate column names {dup}", "give unique names"
            )

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise InvalidParameterError(
            "column", f"unknown column {name!r}", f"use one of {self.names}"
        )

    def index(self, name: str) -> int:
        """Position of a column in the row order."""
        return self.names.index(self.column(name).name)

    def _of_kind(self, kind: str) -> tuple[Column, ...]:
        return tuple(c for c in self.columns if c.kind == kind)

    @property
    def numeric(self) -> tuple[Column, ...]:
        """Columns with float values (numeric, and datetime in seconds), in schema order."""
        return tuple(c for c in self.columns if c.is_numeric)

    @property
    def categorical(self) -> tuple[Column, ...]:
        return self._of_kind("categorical")

    @property
    def static(self) -> tuple[Column, ...]:
        return self._of_kind("static")


def _rows(value: Any) -> tuple[tuple[Any, ...], ...]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence | np.ndarray):
        raise InvalidParameterError(
            "UserTable.rows",
            f"expected a sequence of rows, got {type(value).__name__}",
            "pass a list of rows (each a list of values in schema order)",
        )
    out = []
    for r, row in enumerate(value):
        if isinstance(row, str | bytes) or not isinstance(row, Sequence | np.ndarray):
            raise InvalidParameterError(
                f"UserTable.rows[{r}]",
                f"expected a sequence of values, got {row!r}",
                "pass each row as a list of values in schema order",
            )
        out.append(tuple(row))
    return tuple(out)


@attrs.frozen
class UserTable:
    """The ordered rows (time steps) of one user; values in schema column order."""

    user_id: str = attrs.field(converter=str)
    rows: tuple[tuple[Any, ...], ...] = attrs.field(converter=_rows)

    def __len__(self) -> int:
        return len(self.rows)


def _normalise(schema: TableSchema, u: UserTable) -> UserTable:
    """Validate one user's rows; return them with numeric values as float."""
    d = len(schema.columns)
    uid = u.user_id
    if not u.rows:
        raise InvalidParameterError(
            f"user {uid!r}",
            "has zero rows",
            "drop users without rows before building UserTables (a user owns >= 1 row)",
        )
    rows: list[tuple[Any, ...]] = []
    first: tuple[Any, ...] = u.rows[0]
    for r, row in enumerate(u.rows):
        where = f"user {uid!r} row {r}"
        if len(row) != d:
            raise InvalidParameterError(
                where,
                f"has {len(row)} values but the schema has {d} columns {schema.names}",
                "give every row exactly one value per schema column, in schema order",
            )
        vals = [
            _cell(col, v, first[c], f"{where} column {col.name!r}")
            for c, (col, v) in enumerate(zip(schema.columns, row, strict=True))
        ]
        rows.append(tuple(vals))
    return UserTable(uid, tuple(rows))


def _cell(col: Column, v: Any, first: Any, at: str) -> Any:
    """One value of a column, checked against its kind (numeric values as float, times as
    POSIX seconds); ``first`` is the user's value in the first row (static columns keep it)."""
    if col.kind == "numeric":
        ok = not isinstance(v, bool) and isinstance(v, int | float | np.integer | np.floating)
        if not ok:
            raise InvalidParameterError(
                at,
                f"non-numeric value {v!r} in a numeric column",
                "convert the value to float (or declare the column categorical)",
            )
        f = float(v)
        if not math.isfinite(f):
            raise InvalidParameterError(
                at, f"value {v!r} is not finite", "remove or impute NaN/inf values"
            )
        return f
    if col.kind == "datetime":
        seconds = seconds_from(v)
        if seconds is None:
            raise InvalidParameterError(
                at,
                f"value {v!r} is not a time",
                "give POSIX seconds, a datetime or ISO 8601 text (2024-03-01T08:30:00)",
            )
        return seconds
    if col.kind == "categorical":
        if not isinstance(v, str) or v not in col.categories:
            raise InvalidParameterError(
                at,
                f"value {v!r} is not one of the public categories {col.categories}",
                "map the value to a listed category or add it to the schema",
            )
        return v
    if not isinstance(v, str):
        raise InvalidParameterError(
            at, f"static value {v!r} is not a string", "convert static values to str"
        )
    if v != first:
        raise InvalidParameterError(
            at,
            f"static value {v!r} differs from the user's first row {first!r}",
            "keep static columns constant within a user (or make them categorical)",
        )
    return v


def _users(value: Any) -> tuple[UserTable, ...]:
    if isinstance(value, UserTable) or not isinstance(value, Sequence):
        raise InvalidParameterError(
            "UserTables.users",
            f"expected a sequence of UserTable, got {type(value).__name__}",
            "pass a list of UserTable",
        )
    for i, u in enumerate(value):
        if not isinstance(u, UserTable):
            raise InvalidParameterError(
                f"UserTables.users[{i}]",
                f"expected UserTable, got {type(u).__name__}",
                "wrap each user's rows in UserTable(user_id, rows)",
            )
    return tuple(value)


@attrs.frozen
class UserTables:
    """A validated collection of user tables (one :class:`UserTable` per privacy unit)."""

    schema: TableSchema
    users: tuple[UserTable, ...] = attrs.field(converter=_users)
    _numeric: tuple[np.ndarray, ...] = attrs.field(init=False, repr=False, eq=False)
    _codes: tuple[np.ndarray, ...] = attrs.field(init=False, repr=False, eq=False)

    def to_json(self) -> dict[str, Any]:
        """A JSON-able form (schema and rows); ``dpledger run`` writes outputs with it."""
        return {
            "schema": [
                {
                    "name": c.name,
                    "kind": c.kind,
                    "categories": list(c.categories),
                    "lower": c.lower,
                    "upper": c.upper,
                }
                for c in self.schema.columns
            ],
            "users": [
                {"user_id": u.user_id, "rows": [list(r) for r in u.rows]} for u in self.users
            ],
        }

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.schema, TableSchema):
            raise InvalidParameterError(
                "UserTables.schema",
                f"expected TableSchema, got {type(self.schema).__name__}",
                "pass TableSchema(columns)",
            )
        if not self.users:
            raise InvalidParameterError("UserTables.users", "is empty", "pass at least one user")
        users = tuple(_normalise(self.schema, u) for u in self.users)
        seen: set[str] = set()
        for u in users:
            if u.user_id in seen:
                raise InvalidParameterError(
                    f"user {u.user_id!r}",
                    "appears twice",
                    "merge a user's rows into one UserTable (one table per user)",
                )
            seen.add(u.user_id)
        object.__setattr__(self, "users", users)
        num_idx = [i for i, c in enumerate(self.schema.columns) if c.is_numeric]
        cat_idx = [i for i, c in enumerate(self.schema.columns) if c.kind == "categorical"]
        lookup = [{v: k for k, v in enumerate(self.schema.columns[i].categories)} for i in cat_idx]
        numeric = []
        codes = []
        for u in users:
            numeric.append(
                np.array([[row[i] for i in num_idx] for row in u.rows], dtype=float).reshape(
                    len(u.rows), len(num_idx)
                )
            )
            codes.append(
                np.array(
                    [[lk[row[i]] for i, lk in zip(cat_idx, lookup, strict=True)] for row in u.rows],
                    dtype=np.int64,
                ).reshape(len(u.rows), len(cat_idx))
            )
        object.__setattr__(self, "_numeric", tuple(numeric))
        object.__setattr__(self, "_codes", tuple(codes))

    def __len__(self) -> int:
        return len(self.users)

    def __iter__(self) -> Iterator[UserTable]:
        return iter(self.users)

    def __getitem__(self, i: int) -> UserTable:
        return self.users[i]

    @property
    def lengths(self) -> np.ndarray:
        """Row count of every user, shape ``[n_users]``."""
        return np.array([len(u.rows) for u in self.users], dtype=np.int64)

    def numeric_array(self, i: int) -> np.ndarray:
        """User ``i``'s numeric values, shape ``[rows, n_numeric]`` (schema order)."""
        return self._numeric[i].copy()

    def categorical_codes(self, i: int) -> np.ndarray:
        """User ``i``'s categorical values as category indices, shape ``[rows, n_categorical]``."""
        return self._codes[i].copy()

    def subset(self, indices: Sequence[int] | np.ndarray) -> UserTables:
        """The users at ``indices`` (in that order), revalidated."""
        idx = [int(i) for i in np.asarray(indices, dtype=np.int64).reshape(-1)]
        for i in idx:
            if not -len(self.users) <= i < len(self.users):
                raise InvalidParameterError(
                    "indices",
                    f"index {i} out of range for {len(self.users)} users",
                    "pass indices in [0, n_users)",
                )
        return UserTables(self.schema, tuple(self.users[i] for i in idx))
