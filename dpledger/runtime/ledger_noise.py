"""The noise primitives of the runtime ledger: Gaussian and Laplace noise, clipped sums, a
charged cost and a certified sampler.

The functions here back the methods of the same names of
:class:`~dpledger.runtime.ledger.PrivacyLedger` (whose docstrings are the reference). Each books
its event through the ledger's public scope API (``ledger.book``: checked against the
declaration first) *before* it draws from ``ledger.rng``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from dpledger.core.errors import InvalidParameterError, LedgerViolationError
from dpledger.core.events import Event, GaussianEvent, LaplaceEvent
from dpledger.runtime.ledger_arguments import check_step, finite_array, positive
from dpledger.runtime.ledger_units import (
    clipped_total,
    effective_sensitivity,
    rows_of_one_unit,
    unit_note,
)
from dpledger.runtime.units import grouping

if TYPE_CHECKING:
    from dpledger.runtime.ledger import PrivacyLedger

__all__ = [
    "charge",
    "clipped_sum_gaussian",
    "clipped_sum_laplace",
    "gaussian",
    "laplace",
    "sample_certified",
]


def gaussian(
    ledger: PrivacyLedger,
    values: Any,
    sensitivity: float,
    noise_multiplier: float,
    *,
    step: str,
    per_unit: bool = False,
) -> Any:
    """``values + N(0, (noise_multiplier * sensitivity)^2)``; ``per_unit``: ``sensitivity`` is
    already that of one unit (a per-unit clip), so no contribution bound multiplies it."""
    step = check_step(step)
    s = positive("sensitivity", sensitivity)
    m = positive("noise_multiplier", noise_multiplier)
    arr = finite_array("values", values)
    eff, note = effective_sensitivity(ledger, s, "l2", arr.size)
    k = 1 if per_unit else rows_of_one_unit(ledger, step)
    note = "; ".join(n for n in (note, unit_note(k)) if n)
    event = GaussianEvent(m if eff * k == s else m * s / (eff * k))
    try:
        ledger.book(event, step, {"sensitivity": s, "std": m * s, "note": note})
    except LedgerViolationError as exc:
        raise LedgerViolationError(f"{exc} ({note})" if note else str(exc)) from None
    out = arr + ledger.rng.normal(0.0, m * s, size=arr.shape)
    return float(out) if out.ndim == 0 else out


def laplace(
    ledger: PrivacyLedger, values: Any, sensitivity: float, noise_multiplier: float, *, step: str
) -> Any:
    """``values + Laplace(noise_multiplier * sensitivity)`` (L1)."""
    step = check_step(step)
    s = positive("sensitivity", sensitivity)
    m = positive("noise_multiplier", noise_multiplier)
    arr = finite_array("values", values)
    eff, note = effective_sensitivity(ledger, s, "l1", arr.size)
    k = rows_of_one_unit(ledger, step)
    note = "; ".join(n for n in (note, unit_note(k)) if n)
    event = LaplaceEvent(m * s / (eff * k))
    try:
        ledger.book(event, step, {"sensitivity": s, "scale": m * s, "note": note})
    except LedgerViolationError as exc:
        raise LedgerViolationError(f"{exc} ({note})" if note else str(exc)) from None
    out = arr + ledger.rng.laplace(0.0, m * s, size=arr.shape)
    return float(out) if out.ndim == 0 else out


def _clipped(
    ledger: PrivacyLedger,
    contributions: Any,
    clip_norm: float,
    noise_multiplier: float,
    norm: str,
    step: str,
    grouped: tuple[bool, Any, int | None, Any],
) -> tuple[Any, Any, Any, float]:
    """A clipped sum's unit grouping (None per row), its clipped total, shape and bound."""
    positive("noise_multiplier", noise_multiplier)
    codes = grouping(ledger.units, *grouped, step)
    return (codes, *clipped_total(ledger, contributions, clip_norm, norm, step, codes))


def clipped_sum_gaussian(
    ledger: PrivacyLedger,
    contributions: Any,
    clip_norm: float,
    noise_multiplier: float,
    *,
    step: str,
    per_unit: bool,
    rows: Any,
    part: int | None,
    unit_keys: Any,
) -> Any:
    """The sum of the contributions clipped to L2 norm ``clip_norm`` (per row, or per unit),
    plus Gaussian noise."""
    step = check_step(step)
    grouped = (per_unit, rows, part, unit_keys)
    codes, total, shape, c = _clipped(
        ledger, contributions, clip_norm, noise_multiplier, "l2", step, grouped
    )
    return gaussian(
        ledger,
        total.reshape(shape) if shape else total[0],
        c,
        noise_multiplier,
        step=step,
        per_unit=codes is not None,
    )


def clipped_sum_laplace(
    ledger: PrivacyLedger,
    contributions: Any,
    clip_norm: float,
    noise_multiplier: float,
    *,
    step: str,
    per_unit: bool,
    rows: Any,
    part: int | None,
    unit_keys: Any,
) -> Any:
    """The sum of the contributions clipped to L1 norm ``clip_norm`` (per row, or per unit),
    plus Laplace noise of scale ``noise_multiplier * clip_norm``."""
    step = check_step(step)
    grouped = (per_unit, rows, part, unit_keys)
    codes, total, shape, c = _clipped(
        ledger, contributions, clip_norm, noise_multiplier, "l1", step, grouped
    )
    scale = noise_multiplier * c
    k = 1 if codes is not None else rows_of_one_unit(ledger, step)
    event = LaplaceEvent(float(noise_multiplier) / k)
    detail = {"sensitivity": c, "scale": scale, "norm": "l1", "note": unit_note(k)}
    ledger.book(event, step, detail)
    noisy = total + ledger.rng.laplace(0.0, scale, size=total.shape)
    return noisy.reshape(shape) if shape else float(noisy[0])


def charge(ledger: PrivacyLedger, event: Event, *, step: str, reason: str) -> None:
    """Book a privacy cost that no draw carries (``reason`` goes into the log)."""
    step = check_step(step)
    if not isinstance(event, Event):
        raise InvalidParameterError(
            "event", f"must be an Event, got {type(event).__name__}", "pass the charged event"
        )
    ledger.book(event, step, {"reason": reason} if reason else {})


def sample_certified(
    ledger: PrivacyLedger,
    sampler: Callable[[np.random.Generator], Any],
    event: Event,
    *,
    step: str,
    note: str,
) -> Any:
    """``sampler(ledger.rng)``, run once ``event`` (which certifies it) is booked."""
    step = check_step(step)
    if not isinstance(event, Event):
        raise InvalidParameterError(
            "event",
            f"must be an Event, got {type(event).__name__}",
            "pass the certifying event",
        )
    if not callable(sampler):
        raise InvalidParameterError("sampler", "must be callable", "pass a function of an rng")
    ledger.book(event, step, {"note": note} if note else {})
    return sampler(ledger.rng)
