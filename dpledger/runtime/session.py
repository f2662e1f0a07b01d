"""The run use case, in one place: declare, lower, account, run under the ledger, record.

Every way of running a method (``dpledger run``, the demo, the whole-method audit) and the
Opacus integration's record go through this module:

* :func:`declare` calls the method's ``declare`` once and states the frozen declaration as
  core events, per privacy unit (:class:`Declared`);
* :func:`plan` adds the certified bound of that declaration, computed before any noise is
  drawn (:class:`RunPlan`);
* :func:`execute` runs the method under a fresh ledger and hands back its outputs only after
  the ledger has verified every step (:func:`~dpledger.runtime.runner.run_verified`);
* :func:`record` builds the public run record (:class:`~dpledger.runtime.run_record.RunRecord`)
  that :func:`~dpledger.runtime.run_dir.write_run_dir` writes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from dpledger.accountant import select
from dpledger.core.adjacency import Adjacency
from dpledger.core.declaration import Declaration, stated_for_unit, unit_adjacency
from dpledger.core.errors import DPLedgerError, PluginError
from dpledger.core.events import ComposedEvent, Event, SelfComposedEvent
from dpledger.core.validation import DEFAULT_DELTA
from dpledger.runtime.jsonform import jsonable
from dpledger.runtime.run_record import RunRecord
from dpledger.runtime.runner import RunResult, declare_checked, run_verified

if TYPE_CHECKING:
    from dpledger.core.specs import MethodSpec

__all__ = [
    "DEFAULT_DELTA",
    "Declared",
    "Lower",
    "RunPlan",
    "declare",
    "execute",
    "grouped",
    "method_failed",
    "plan",
    "privacy_section",
    "public_ledger",
    "record",
    "record_fields",
]

#: maps a declared event (plugin mechanisms included) onto core events: ``PluginHost.lower``
Lower = Callable[[Event, Adjacency], Event]


@attrs.frozen
class Declared:
    """A method's frozen declaration, stated as core events and per privacy unit."""

    spec: MethodSpec
    params: Any
    adjacency: Adjacency
    declaration: Declaration
    #: the declaration mapped onto core events (what the accountant reads)
    core: Event
    #: ``core`` stated per privacy unit (lifted by the core if it is row level)
    per_unit: Event
    #: the lifting rules used to state it per unit
    lift_rules: tuple[str, ...]

    @property
    def unit_adjacency(self) -> Adjacency:
        """The adjacency under which ``per_unit`` is accounted (one unit)."""
        return unit_adjacency(self.adjacency)


@attrs.frozen
class RunPlan:
    """A run about to happen: its declaration and that declaration's certified bound."""

    declared: Declared
    delta: float
    selection: select.Selection

    @property
    def spec(self) -> MethodSpec:
        return self.declared.spec


def declare(spec: MethodSpec, params: Any, adjacency: Adjacency, lower: Lower) -> Declared:
    """``spec.declare`` called once, frozen, lowered to core events and stated per unit."""
    declaration = declare_checked(spec, params, adjacency)
    core = lower(declaration.event, adjacency)
    per_unit, rules = stated_for_unit(core, declaration.unit, adjacency, release=spec.name)
    return Declared(spec, params, adjacency, declaration, core, per_unit, tuple(rules))


def plan(
    spec: MethodSpec, params: Any, adjacency: Adjacency, lower: Lower, *, delta: float
) -> RunPlan:
    """The declaration and its certified bound at ``delta``, before any noise is drawn."""
    declared = declare(spec, params, adjacency, lower)
    selection = select.account(declared.per_unit, declared.unit_adjacency, delta=delta)
    return RunPlan(declared, delta, selection)


def execute(
    declared: Declared, data: Any, *, seed: int | None = None, secure: bool = False
) -> RunResult:
    """The method run under a fresh ledger holding its frozen declaration; outputs only once
    the ledger has verified every step. A failure of the method's own code is one
    :class:`PluginError` naming the method and its plugin."""
    try:
        return run_verified(
            declared.spec,
            declared.params,
            data,
            adjacency=declared.adjacency,
            seed=seed,
            secure=secure,
            declaration=declared.declaration,
        )
    except (DPLedgerError, MemoryError, RecursionError):
        raise
    except Exception as exc:  # the method's own failure: name it and its plugin
        raise method_failed(declared.spec, exc) from exc


def method_failed(spec: Any, exc: Exception) -> PluginError:
    """A method's ``run()`` raised: one line naming the method and its plugin."""
    who = f"plugin {spec.provenance.plugin!r}" if spec.provenance else "its plugin"
    hint = ""
    if isinstance(exc, attrs.exceptions.FrozenInstanceError):
        hint = " (its parameters are frozen: make a changed copy with attrs.evolve)"
    message = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else "no message"
    return PluginError(
        f"method {spec.name!r} ({who}) failed in run(): {type(exc).__name__}: {message}{hint}. "
        "Fix: report it to the plugin's author, with the config"
    )


def privacy_section(selection: select.Selection) -> dict[str, Any]:
    """The bound a run record keeps: the reported one, every backend's, and the unavailable."""
    return {
        **selection.bound.to_dict(),
        "candidates": [c.to_dict() for c in selection.candidates],
        "unavailable": [{"backend": n, "reason": r} for n, r in selection.unavailable],
    }


def record(plan_: RunPlan, result: RunResult, *, pipeline: str | None = None) -> RunRecord:
    """The public record of a verified run (its outputs are filled in when it is written)."""
    declared = plan_.declared
    ledger = result.ledger
    spec = declared.spec
    return record_fields(
        method=spec.name,
        provenance=spec.provenance.to_dict() if spec.provenance else None,
        params=attrs.asdict(declared.params),
        ledger=public_ledger(ledger),
        declared_core=declared.core,
        per_unit=declared.per_unit,
        lift_rules=declared.lift_rules,
        privacy=privacy_section(plan_.selection),
        exact_match=ledger.public_matches_exactly(),
        pipeline=pipeline,
    )


def public_ledger(ledger: Any) -> dict[str, Any]:
    """What a run record states of its ledger: its data-independent facts, the executed steps
    folded (:func:`grouped`)."""
    facts: dict[str, Any] = ledger.to_dict()
    return {**facts, "executed": grouped(ledger.public_executed_event()).to_dict()}


def record_fields(
    *,
    method: str,
    provenance: Mapping[str, Any] | None,
    params: Mapping[str, Any],
    ledger: Mapping[str, Any],
    declared_core: Event,
    per_unit: Event,
    lift_rules: tuple[str, ...],
    privacy: Mapping[str, Any],
    exact_match: bool,
    pipeline: str | None = None,
) -> RunRecord:
    """A run record from its parts: the one place a :class:`RunRecord` is built."""
    return RunRecord(
        method=method,
        provenance=provenance,
        params=jsonable(dict(params)),
        ledger=ledger,
        declared_core=declared_core.to_dict(),
        privacy=dict(privacy),
        accounted={"event": per_unit.to_dict(), "lift_rules": list(lift_rules)},
        exact_match=exact_match,
        pipeline=pipeline,
    )


def grouped(event: Event) -> Event:
    """``event`` with runs of equal consecutive steps folded into ``SelfComposedEvent``
    (the same composition, written compactly; the record keeps every step in ``steps``)."""
    if not isinstance(event, ComposedEvent):
        return event
    parts: list[Event] = []
    counts: list[int] = []
    for e in event.events:
        if parts and parts[-1] == e:
            counts[-1] += 1
        else:
            parts.append(e)
            counts.append(1)
    folded = [e if n == 1 else SelfComposedEvent(e, n) for e, n in zip(parts, counts, strict=True)]
    return ComposedEvent(folded)
