"""Clipping and the privacy unit on the runtime ledger: row clips, contribution bounds, clipped
per-record (or per-unit) sums, and what a bound in force costs a later row-level step.

The functions here back :class:`~dpledger.runtime.ledger.PrivacyLedger`'s ``clip_rows_l2``,
``bound_units`` and the clipping half of its clipped sums. They keep their state on the ledger
through its public scope API (``clip_in_force``, ``enforce_clip``, ``rows_per_unit``,
``enforce_unit``, ``units``, ``open_scopes``) and log through ``ledger.log`` and
``ledger.private_log``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from dpledger.core.errors import InvalidParameterError, LedgerViolationError
from dpledger.runtime.ledger_arguments import FloatArray, check_step, finite_array, positive
from dpledger.runtime.units import (
    bound_arguments,
    check_sample_size,
    codes_of,
    first_rows_per_unit,
    sums_per_unit,
)

if TYPE_CHECKING:
    from dpledger.runtime.ledger import PrivacyLedger

__all__ = [
    "CLIP_SHRINK",
    "bound_units",
    "check_units_sampled",
    "clip_rows_l2",
    "clipped_total",
    "effective_sensitivity",
    "rows_of_one_unit",
    "unit_note",
]

#: relative shrink applied to clipped rows so that rounding never leaves a norm above the bound
CLIP_SHRINK = 1.0 - 8.0 * np.finfo(np.float64).eps


def clip_rows_l2(ledger: PrivacyLedger, x: Any, bound: float, *, step: str) -> FloatArray:
    """Scale each row of ``x`` to L2 norm at most ``bound``; the bound stays in force."""
    step = check_step(step)
    c = positive("bound", bound)
    arr = finite_array("x", x)
    if arr.ndim == 0:
        raise InvalidParameterError("x", "must have one row per record", "pass a 2-D array")
    rows = arr.reshape(arr.shape[0], int(np.prod(arr.shape[1:], dtype=np.int64)))
    peak = np.max(np.abs(rows), axis=1, initial=0.0)
    safe = np.where(peak > 0, peak, 1.0)
    norms = peak * np.linalg.norm(rows / safe[:, None], axis=1)  # no overflow for huge rows
    factor = np.where(norms > c, (c / np.maximum(norms, np.finfo(float).tiny)) * CLIP_SHRINK, 1.0)
    clipped = rows * factor[:, None]
    ledger.enforce_clip(c, step)
    ledger.log.append({"step": step, "clip_l2": c})
    ledger.private_log.append({"step": step, "rows": int(rows.shape[0])})
    return clipped.reshape(arr.shape)


def bound_units(
    ledger: PrivacyLedger,
    max_contributions: Any,
    old: tuple[Any, ...],
    *,
    rows: Any,
    part: int | None,
    step: str,
) -> NDArray[np.int64]:
    """The rows to keep, at most ``max_contributions`` per unit of the ledger's own units
    (``old``: the old positional form's trailing arguments); the bound stays in force."""
    step = check_step(step)
    keys, k = bound_arguments(max_contributions, old)
    codes = codes_of(ledger.units, rows, part, keys, step)
    positions = first_rows_per_unit(codes, k)
    keep = positions if rows is None else np.asarray(rows, dtype=np.int64)[positions]
    ledger.enforce_unit(step, rows_per_unit=k)
    ledger.log.append({"step": step, "bound_units": k})
    ledger.private_log.append({"step": step, "rows": int(codes.size), "kept": int(keep.size)})
    return keep


def rows_of_one_unit(ledger: PrivacyLedger, step: str) -> int:
    """How many rows of one unit a row-level step may see: 1 on a row-level ledger; on a
    user-level ledger, the contribution bound in force (refused if there is none)."""
    if ledger.declaration.unit != "user":
        return 1
    k = ledger.rows_per_unit
    if k is None:
        raise LedgerViolationError(
            f"step {step!r}: the method declares a user-level event, but this row-level "
            "step runs while no contribution bound is in force, so one unit's share of it "
            "is unbounded. Fix: call ledger.bound_units(k) before it, or pass "
            "per_unit=True to a clipped sum"
        )
    return k


def unit_note(k: int) -> str:
    """The log's note on a step booked at ``k`` rows per unit (empty for one row)."""
    return f"one unit contributes up to {k} rows (bound_units)" if k > 1 else ""


def effective_sensitivity(
    ledger: PrivacyLedger, sensitivity: float, norm: str, dim: int
) -> tuple[float, str]:
    """The sensitivity a noise step is booked with: the claimed one, or the bound implied by
    the row clip in force if that is larger (with a note saying so)."""
    clip = ledger.clip_in_force
    if clip is None:
        return sensitivity, ""
    bound, clip_step = clip
    implied = bound if norm == "l2" else bound * math.sqrt(max(dim, 1))
    if sensitivity >= implied:
        return sensitivity, ""
    return implied, (
        f"claimed sensitivity {sensitivity!r} is below the {norm.upper()} bound {implied!r} "
        f"implied by the clip at step {clip_step!r}"
    )


def clipped_total(
    ledger: PrivacyLedger,
    contributions: Any,
    clip_norm: float,
    norm: str,
    step: str,
    codes: NDArray[np.int64] | None,
) -> tuple[FloatArray, tuple[int, ...], float]:
    """The sum of the contributions, each row (or, with ``codes``, each unit's total) clipped
    to ``norm`` at most ``clip_norm``; with the shape of one contribution and the clip norm."""
    c = positive("clip_norm", clip_norm)
    arr = finite_array("contributions", contributions)
    if arr.ndim == 0:
        raise InvalidParameterError(
            "contributions", "must have one row per record", "pass a 1-D or 2-D array"
        )
    shape = tuple(int(d) for d in arr.shape[1:])
    rows = arr.reshape(arr.shape[0], int(np.prod(shape, dtype=np.int64)))
    if codes is not None:
        rows = sums_per_unit(rows, codes, step)
        ledger.enforce_unit(step)
    scopes = ledger.open_scopes
    if scopes and rows.shape[0] != len(scopes[-1]):
        sample = scopes[-1]
        what = "units" if codes is not None else "rows"
        raise LedgerViolationError(
            f"step {step!r}: the contributions have {rows.shape[0]} {what}, but the open "
            f"sample {sample.step!r} holds {len(sample)}: the sampling bound is credited "
            "only to the sampled records. Fix: pass the rows of sample.indices"
        )
    if norm == "l2":
        size = np.linalg.norm(rows, axis=1) if rows.size else np.zeros(rows.shape[0])
    else:
        size = np.abs(rows).sum(axis=1) if rows.size else np.zeros(rows.shape[0])
    factor = np.where(size > c, (c / np.maximum(size, np.finfo(float).tiny)) * CLIP_SHRINK, 1.0)
    total = (rows * factor[:, None]).sum(axis=0)
    per = "unit" if codes is not None else "row"
    ledger.log.append({"step": f"{step}.clip", f"clip_{norm}": c, "per": per})
    ledger.private_log.append({"step": f"{step}.clip", "rows": int(arr.shape[0])})
    return total, shape, c


def check_units_sampled(ledger: PrivacyLedger, step: str, n: Any) -> None:
    """On a user-level ledger a sample must draw units: each unit one row."""
    if ledger.declaration.unit != "user":
        return
    if ledger.rows_per_unit != 1:
        raise LedgerViolationError(
            f"step {step!r}: the method declares a user-level event, but a sample draws "
            "rows, and a unit's rows would be drawn independently (the sampling bound "
            "assumes a unit is drawn as a whole). Fix: keep one row per unit first "
            "(ledger.bound_units(1), e.g. one table per user) and sample those"
        )
    check_sample_size(ledger.units, n, step)
