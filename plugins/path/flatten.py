"""The flattening transformation Phi (paper C, Definition 1 and Section 5.1) and its inverse.

A user table of ``T`` rows becomes ONE flat record with ``L`` time steps: attribute
``"<column>@<t>"`` for every modelled column and ``t = 0..L-1``. Numeric columns are
discretised into ``bins`` equal-width bins on their *public* bounds (values outside are clipped);
categorical columns keep their category index. Static columns are not modelled (synthetic users
get fresh identifiers).

Two modes:

* ``"truncate"`` (the paper's baselines, Section 5.1): keep users with ``T >= L`` and their first
  ``L`` rows; every value is in its plain domain.
* ``"pad"`` (Definition 1): every user, rows after ``L`` dropped, shorter tables padded with a
  NULL code (the last code of every attribute's domain).

Privacy unit. One user maps to at most one flat record and no record depends on another user,
so adding or removing a user adds or removes at most one record: row-level add/remove DP on the
flattened records is user-level add/remove DP on the tables.
"""

from __future__ import annotations

from typing import Literal

import attrs
import numpy as np

from dpledger.plugin import InvalidParameterError
from dpledger.plugins.path.schema import Column, TableSchema, UserTable, UserTables

Mode = Literal["truncate", "pad"]


@attrs.frozen
class FlatSpec:
    """How tables map to flat records: the schema, ``L``, the bin count and the mode."""

    schema: TableSchema
    length: int
    bins: int = 16
    mode: Mode = "truncate"

    def __attrs_post_init__(self) -> None:
        for name, v, lo in (("length", self.length, 1), ("bins", self.bins, 2)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise InvalidParameterError(
                    name, f"must be an integer >= {lo}, got {v!r}", f"pass an integer >= {lo}"
                )
        if self.mode not in ("truncate", "pad"):
            raise InvalidParameterError(
                "mode", f"unknown flattening mode {self.mode!r}", "use 'truncate' or 'pad'"
            )
        for c in self.schema.numeric:
            if not c.bounded:
                raise InvalidParameterError(
                    f"column {c.name!r}",
                    "has no public bounds to discretise on",
                    "give Column(..., lower=..., upper=...) from public knowledge",
                )
        if not self.columns:
            raise InvalidParameterError(
                "schema", "has no numeric or categorical column", "add a column to model"
            )

    @property
    def columns(self) -> tuple[Column, ...]:
        """Modelled columns: numeric then categorical (schema order within each kind)."""
        return self.schema.numeric + self.schema.categorical

    def base_size(self, col: Column) -> int:
        return self.bins if col.is_numeric else len(col.categories)

    @property
    def attributes(self) -> tuple[str, ...]:
        return tuple(f"{c.name}@{t}" for t in range(self.length) for c in self.columns)

    @property
    def shape(self) -> tuple[int, ...]:
        pad = 1 if self.mode == "pad" else 0
        return tuple(self.base_size(c) + pad for _ in range(self.length) for c in self.columns)

    def edges(self, col: Column) -> np.ndarray:
        assert col.lower is not None and col.upper is not None
        return np.linspace(col.lower, col.upper, self.bins + 1)


def discretise(values: np.ndarray, col: Column, bins: int) -> np.ndarray:
    """Equal-width bin index on the public bounds (clipped into ``[0, bins)``)."""
    assert col.lower is not None and col.upper is not None
    scaled = (np.asarray(values, dtype=float) - col.lower) / (col.upper - col.lower) * bins
    return np.clip(np.floor(scaled), 0, bins - 1).astype(np.int64)


def flatten(tables: UserTables, spec: FlatSpec) -> dict[str, np.ndarray]:
    """Phi: one integer record per kept user, as ``{attribute: codes[n_records]}``."""
    if tables.schema != spec.schema:
        raise InvalidParameterError(
            "tables.schema",
            "differs from the flattening spec's schema",
            "build the FlatSpec from tables.schema",
        )
    L = spec.length
    n_num = len(spec.schema.numeric)
    keep = [i for i, t in enumerate(tables.lengths.tolist()) if spec.mode == "pad" or t >= L]
    out = {a: np.empty(len(keep), dtype=np.int64) for a in spec.attributes}
    for r, i in enumerate(keep):
        num = tables.numeric_array(i)[:L]
        cat = tables.categorical_codes(i)[:L]
        T = num.shape[0]
        for j, col in enumerate(spec.columns):
            codes = discretise(num[:, j], col, spec.bins) if col.is_numeric else cat[:, j - n_num]
            null = spec.base_size(col)
            for t in range(L):
                out[f"{col.name}@{t}"][r] = codes[t] if t < T else null
    return out


def unflatten(
    records: dict[str, np.ndarray],
    spec: FlatSpec,
    rng: np.random.Generator,
    id_prefix: str = "syn",
) -> UserTables:
    """Phi^-1 on (synthetic) flat records: numeric codes become uniform draws within their bin.

    In pad mode a table ends at its first time step holding any NULL; records whose first step
    is NULL have no rows and are dropped. Static columns get the synthetic user id.
    """
    missing = [a for a in spec.attributes if a not in records]
    if missing:
        raise InvalidParameterError(
            "records", f"missing attributes {missing[:3]}", "pass one array per flat attribute"
        )
    n = len(records[spec.attributes[0]])
    cols = spec.schema.columns
    users: list[UserTable] = []
    for r in range(n):
        uid = f"{id_prefix}-{r}"
        rows: list[tuple[object, ...]] = []
        for t in range(spec.length):
            vals: dict[str, object] = {}
            stop = False
            for col in spec.columns:
                code = int(records[f"{col.name}@{t}"][r])
                if code >= spec.base_size(col):
                    stop = True
                    break
                if col.is_numeric:
                    e = spec.edges(col)
                    vals[col.name] = float(rng.uniform(e[code], e[code + 1]))
                else:
                    vals[col.name] = col.categories[code]
            if stop:
                break
            rows.append(tuple(uid if c.kind == "static" else vals[c.name] for c in cols))
        if rows:
            users.append(UserTable(uid, tuple(rows)))
    if not users:
        raise InvalidParameterError(
            "records",
            "every synthetic record is empty (NULL at the first step)",
            "generate more records or use mode='truncate'",
        )
    return UserTables(spec.schema, tuple(users))
