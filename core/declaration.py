"""A method's declaration for one run: the event it may spend and the unit that event protects.

``MethodSpec.declare(params, adjacency)`` returns either an :class:`~dpledger.core.events.Event`
(stated per *row*: the core lifts it to a user-level source) or a :class:`Declaration` that
names its unit explicitly. A method may state ``unit="user"`` only if its run enforces the
unit through the ledger (``PrivacyLedger.bound_units`` or a clipped sum with ``per_unit=True``,
both by the unit keys the runner read from the data); the ledger refuses a user-level
declaration whose run never did.

:func:`declare_once` calls ``declare`` exactly once per run and freezes the answer: the event is
rebuilt from its JSON form, so nothing the plugin still holds (a reference it keeps, an object it
mutates in place later) can change what is accounted, enforced or written. The same frozen
declaration is accounted, handed to the ledger and written to the run record.
"""

from __future__ import annotations

import json
from copy import deepcopy
from typing import TYPE_CHECKING, Any

import attrs

from dpledger.core.adjacency import UNITS, Adjacency
from dpledger.core.errors import DPLedgerError, InvalidParameterError, PluginError
from dpledger.core.events import Event, event_from_dict
from dpledger.core.lifting import RULE_DECLARED_USER, lift_release

if TYPE_CHECKING:
    from dpledger.core.specs import MethodSpec


def _unit_validator(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value not in UNITS:
        raise InvalidParameterError(
            attribute.name, f"unknown unit {value!r}", f"use one of {list(UNITS)}"
        )


def _event_validator(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, Event):
        raise InvalidParameterError(
            attribute.name, f"must be an Event, got {type(value).__name__}", "pass an event"
        )


@attrs.frozen
class Declaration:
    """``event`` bounds the run's privacy loss for one ``unit`` (``"row"`` or ``"user"``)."""

    event: Event = attrs.field(validator=_event_validator)
    unit: str = attrs.field(default="row", validator=_unit_validator)

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.event.to_dict(), "unit": self.unit}


def frozen_copy(event: Event) -> Event:
    """An independent copy of ``event`` (rebuilt from its JSON form where it has one)."""
    try:
        text = json.dumps(event.to_dict(), sort_keys=True, allow_nan=False)
        copy = event_from_dict(json.loads(text))
    except (AttributeError, TypeError, ValueError, DPLedgerError):
        copy = deepcopy(event)  # a plugin event whose fields are not plain JSON values
    if copy != event:
        raise PluginError(
            f"declared event {event.describe()} does not survive a copy. Fix: make the event "
            "class a plain @attrs.frozen class whose fields are numbers, strings or events"
        )
    return copy


def declare_once(spec: MethodSpec, params: Any, adjacency: Adjacency) -> Declaration:
    """Call ``spec.declare`` once and return its frozen, validated declaration."""
    if not isinstance(params, spec.params):
        raise InvalidParameterError(
            "params",
            f"expected {spec.params.__name__}, got {type(params).__name__}",
            f"build them with {spec.name}'s parameter class",
        )
    answer: object = spec.declare(params, adjacency)
    declaration: Declaration
    if isinstance(answer, Declaration):
        declaration = answer
    elif isinstance(answer, Event):
        declaration = Declaration(answer, "row")
    else:
        raise PluginError(
            f"method {spec.name!r}: declare() returned {type(answer).__name__}, "
            "not an Event or a Declaration"
        )
    if declaration.unit == "user" and adjacency.unit != "user":
        raise PluginError(
            f"method {spec.name!r}: declare() states a user-level event, but the adjacency "
            "protects rows. Fix: return the row-level event when adjacency.unit == 'row'"
        )
    return Declaration(frozen_copy(declaration.event), declaration.unit)


def stated_for_unit(
    event: Event, declaration_unit: str, adjacency: Adjacency, *, release: str
) -> tuple[Event, tuple[str, ...]]:
    """The event per privacy unit of ``adjacency`` and the lifting rules used.

    A row-level event on a user-level source is lifted by the core's proven rules (or refused
    with a :class:`~dpledger.core.errors.LiftingError` naming the fix); a user-level event is
    taken as it is (its run is checked by the ledger to enforce the unit).
    """
    if declaration_unit == "user":
        return event, (RULE_DECLARED_USER,)
    return lift_release(event, adjacency, declared_unit="row", release=release)


def unit_adjacency(adjacency: Adjacency) -> Adjacency:
    """The relation under which an event stated per unit is accounted (one unit)."""
    return Adjacency(relation=adjacency.relation)
