"""Running a method: one frozen declaration, a fresh ledger, outputs only after verification.

:func:`run_verified` calls ``declare`` once (:func:`declare_checked`), enforces the privacy
unit (:func:`bound_rows_per_unit` for row-level declarations on a user-level source; for
user-level ones, the unit keys read from the data go to the ledger), runs the method against a
:class:`~dpledger.runtime.ledger.PrivacyLedger` and releases its outputs only after
:meth:`PrivacyLedger.verify` has passed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
from numpy.typing import NDArray

from dpledger.core.adjacency import Adjacency
from dpledger.core.declaration import Declaration, declare_once
from dpledger.core.errors import InvalidParameterError, LedgerViolationError, PluginError
from dpledger.core.events import (
    Event,
)
from dpledger.runtime.ledger import PrivacyLedger, make_rng
from dpledger.runtime.units import first_rows_per_unit, unit_codes, units_from_data

if TYPE_CHECKING:
    from dpledger.core.specs import MethodSpec

FloatArray = NDArray[np.float64]


# ---------------------------------------------------------------------------------------------
# Running a method
# ---------------------------------------------------------------------------------------------
@attrs.frozen
class RunResult:
    """Outputs of a verified run, the frozen declaration and the ledger."""

    outputs: Mapping[str, Any]
    declaration: Declaration
    ledger: PrivacyLedger = attrs.field(eq=False)

    @property
    def declared(self) -> Event:
        """The declared event (stated for ``declaration.unit``)."""
        return self.declaration.event


def declare_checked(spec: MethodSpec, params: Any, adjacency: Adjacency) -> Declaration:
    """``spec.declare`` called once, its answer validated and frozen."""
    return declare_once(spec, params, adjacency)


def bound_rows_per_unit(data: Any, adjacency: Adjacency) -> Any:
    """``data`` with at most ``adjacency.max_contributions`` rows per unit (first in order).

    For row-level declarations on a user-level source: the core enforces the contribution bound
    that lifting assumes. ``data`` must be a mapping of equal-length columns holding the
    adjacency's ``unit_key``; every column is filtered alike and the key column is dropped. If
    one column remains, it is returned on its own (the method's data as at row level).
    """
    key = adjacency.unit_key
    if not isinstance(data, Mapping) or key not in data:
        raise InvalidParameterError(
            f"data.{key}",
            f"is missing: user-level adjacency identifies users by {key!r}",
            f"give the data a column {key!r} with one user id per row (or use row-level adjacency)",
        )
    keys = np.asarray(data[key])
    if keys.ndim != 1:
        raise InvalidParameterError(
            f"data.{key}", f"must be 1-D, got shape {keys.shape}", "store one user id per row"
        )
    keep = first_rows_per_unit(unit_codes(keys), adjacency.max_contributions)
    n = keys.shape[0]
    out: dict[str, Any] = {}
    for name, column in data.items():
        if name == key:
            continue
        arr = np.asarray(column) if not callable(column) else None
        if arr is None or arr.ndim == 0 or arr.shape[0] != n:
            raise InvalidParameterError(
                f"data.{name}",
                f"does not hold one entry per row of {key!r} ({n} rows)",
                f"give every column of a user-level dataset one entry per row of {key!r}",
            )
        out[name] = arr[keep]
    # the unit key is consumed here; a single remaining column is the method's data as such
    return next(iter(out.values())) if len(out) == 1 else out


def prepare_run(
    declaration: Declaration,
    adjacency: Adjacency,
    data: Any,
    *,
    seed: int | None = None,
    secure: bool = False,
) -> tuple[Any, PrivacyLedger, np.random.Generator]:
    """The data the method sees, the ledger it runs under and its non-private generator.

    A row-level declaration on a user-level adjacency gets the data with at most
    ``max_contributions`` rows per user (:func:`bound_rows_per_unit`), which its lifted
    accounting assumes; a user-level declaration gets a ledger holding the unit keys read from
    the data (:func:`~dpledger.runtime.units.units_from_data`), by which it enforces the unit.
    The ledger's generator and the method's are two children of the seed's.
    """
    if adjacency.unit == "user" and declaration.unit == "row":
        data = bound_rows_per_unit(data, adjacency)
    # a user-level run enforces its unit by the keys read here, before the method sees the data
    user_level = adjacency.unit == "user" and declaration.unit == "user"
    units = units_from_data(data, adjacency) if user_level else None
    root = make_rng(seed, secure=secure)
    ledger_rng, run_rng = root.spawn(2)
    ledger = PrivacyLedger(declaration, adjacency, ledger_rng, units=units)
    ledger.secure = secure
    return data, ledger, run_rng


def run_verified(
    spec: MethodSpec,
    params: Any,
    data: Any,
    *,
    adjacency: Adjacency | None = None,
    seed: int | None = None,
    secure: bool = False,
    declaration: Declaration | None = None,
) -> RunResult:
    """Declare (once), run under a ledger, verify, and only then hand back the outputs.

    ``declaration`` is the frozen declaration already accounted for this run (from
    :func:`declare_checked`); without it ``declare`` is called here, once. A row-level
    declaration on a user-level adjacency runs on the data with at most ``max_contributions``
    rows per user (:func:`bound_rows_per_unit`), which its lifted accounting assumes; a
    user-level declaration gets a ledger holding the unit keys read from the data
    (:func:`~dpledger.runtime.units.units_from_data`), by which it enforces the unit.
    """
    adjacency = adjacency or Adjacency()
    if declaration is None:
        declaration = declare_checked(spec, params, adjacency)
    data, ledger, run_rng = prepare_run(declaration, adjacency, data, seed=seed, secure=secure)
    units = ledger.units
    outputs = spec.run(params, data, ledger, run_rng)
    ledger.verify()
    if ledger.declaration != declaration:
        raise LedgerViolationError(
            f"method {spec.name!r} changed the ledger's declaration during its run. "
            "Fix: never modify ledger.declared"
        )
    if ledger.units is not units:
        raise LedgerViolationError(
            f"method {spec.name!r} replaced the unit keys the ledger read from the data. "
            "Fix: never modify the ledger's units"
        )
    if not isinstance(outputs, Mapping) or not all(isinstance(k, str) for k in outputs):
        raise PluginError(f"method {spec.name!r}: run() must return a mapping of named outputs")
    return RunResult(dict(outputs), declaration, ledger)
