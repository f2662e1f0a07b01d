"""The budget store: declare a total, book an event, read the history back.

A declaration fixes, per protected source and privacy unit, the total (epsilon, delta), the
neighbouring relation its events are stated under and the composition rule
(:mod:`dpledger.budget.rules`). A booking charges one event (stated per privacy unit) in one
transaction: it reads the rule's state, refuses the booking if it does not fit
(:class:`~dpledger.budget.rules.BudgetRefused`, nothing written), else appends the entry to
the hash chain and stores the new state. Entries are never updated or deleted: a run killed
after its booking keeps its spend booked.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpledger.budget import rules
from dpledger.budget.backend import Connection, connect, is_url
from dpledger.budget.chain import FIELDS, canonical_json, entry_hash
from dpledger.budget.odometer import odometer, odometer_defaults
from dpledger.budget.schema import apply_migrations, check_version
from dpledger.core.errors import InvalidParameterError
from dpledger.core.event_parser import event_from_dict
from dpledger.core.events import Event

__all__ = [
    "Declared",
    "book",
    "check",
    "check_declaration",
    "declare",
    "entries",
    "init",
    "new_run_id",
    "open_store",
]

RELATIONS = ("add_remove", "replace_one")


def new_run_id() -> str:
    """A fresh run id for a booking."""
    return uuid.uuid4().hex


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat()


def open_store(location: str) -> Connection:
    """A connection to an existing store of this dpledger's schema version."""
    conn = connect(location)
    try:
        check_version(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def init(location: str) -> None:
    """Create the store's tables (a new SQLite file, or an empty PostgreSQL database); an
    existing store of this schema version is left as it is."""
    fresh = not is_url(location) and not Path(location).exists()
    conn = connect(location, create=fresh)
    try:
        if conn.tables() & {"schema_version", "entries"}:
            check_version(conn)
            return
        apply_migrations(conn)
    finally:
        conn.close()


class Declared:
    """One declared budget: its total, relation, rule and the rule's parameters."""

    def __init__(self, row: tuple[Any, ...]) -> None:
        self.source, self.unit, self.relation, self.rule = (str(v) for v in row[:4])
        self.epsilon, self.delta = float(row[4]), float(row[5])
        self.params: dict[str, Any] = json.loads(row[6])
        self.declared_seq = int(row[7])

    @property
    def total(self) -> tuple[float, float]:
        return self.epsilon, self.delta

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "unit": self.unit,
            "relation": self.relation,
            "rule": self.rule,
            "theorem": rules.THEOREMS[self.rule],
            "total": {"epsilon": self.epsilon, "delta": self.delta},
            "params": self.params,
        }


_BUDGET_COLUMNS = "source, unit, relation, rule, epsilon, delta, params, declared_seq"


def declared(conn: Connection) -> list[Declared]:
    rows = conn.execute(f"SELECT {_BUDGET_COLUMNS} FROM budgets ORDER BY source, unit")
    return [Declared(r) for r in rows]


def _declared_one(conn: Connection, source: str, unit: str) -> Declared:
    rows = conn.execute(
        f"SELECT {_BUDGET_COLUMNS} FROM budgets WHERE source = ? AND unit = ?", (source, unit)
    )
    if not rows:
        raise InvalidParameterError(
            "source",
            f"source {source!r} (unit {unit!r}) has no declared budget in {conn.location}",
            f"declare it first: dpledger budget init {conn.location} --source {source} "
            f"--unit {unit} --epsilon E --delta D",
        )
    return Declared(rows[0])


def _number(name: str, value: Any) -> float:
    """A finite number (a string or a bool is not one)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidParameterError(
            name, f"must be a number, got {type(value).__name__} {value!r}", f"pass e.g. {name}=1.0"
        )
    if not math.isfinite(value):
        raise InvalidParameterError(name, f"must be finite, got {value}", f"pass e.g. {name}=1.0")
    return float(value)


def _check_declaration(
    source: str, unit: str, epsilon: Any, delta: Any, rule: str, relation: str
) -> tuple[float, float]:
    for name, text in (("source", source), ("unit", unit)):
        if not isinstance(text, str) or not text.strip():
            raise InvalidParameterError(name, f"must be a non-empty name, got {text!r}", "name it")
    eps, dlt = _number("epsilon", epsilon), _number("delta", delta)
    if eps <= 0:
        raise InvalidParameterError("epsilon", f"must be > 0, got {eps}", "pass e.g. epsilon=1.0")
    if not 0 < dlt < 1:
        raise InvalidParameterError("delta", f"must lie in (0, 1), got {dlt}", "pass delta=1e-6")
    if rule not in rules.RULES:
        raise InvalidParameterError(
            "rule", f"unknown rule {rule!r}", f"choose one of {', '.join(rules.RULES)}"
        )
    if relation not in RELATIONS:
        raise InvalidParameterError(
            "relation", f"unknown relation {relation!r}", "choose add_remove or replace_one"
        )
    return eps, dlt


def _check_params(rule: str, params: Mapping[str, Any], delta: float) -> None:
    if rule == "renyi":
        orders = params["orders"]
        if not orders or not all(
            not isinstance(a, bool) and isinstance(a, int | float) and 1 < a < math.inf
            for a in orders
        ):
            raise InvalidParameterError(
                "orders", f"must be orders > 1, got {orders!r}", "pass e.g. [2, 4, 8, 16]"
            )
    if rule == "approx":
        tail, step = _number("delta_tail", params["delta_tail"]), params["step_delta"]
        if not 0 < tail < delta or not 0 < _number("step_delta", step) < delta - tail:
            raise InvalidParameterError(
                "delta_tail",
                f"need 0 < delta_tail < delta and 0 < step_delta < delta - delta_tail, got "
                f"{tail}, {step}",
                "omit them for the defaults (delta / 2 and delta / 2 * 1e-5)",
            )


def _check_odometer(params: Mapping[str, Any]) -> None:
    if "odometer_delta" in params:
        value = _number("odometer_delta", params["odometer_delta"])
        if not 0 < value < 1:
            raise InvalidParameterError(
                "odometer_delta", f"must lie in (0, 1), got {value}", "omit it for the default"
            )
    if "odometer_rho" in params and not _number("odometer_rho", params["odometer_rho"]) > 0:
        raise InvalidParameterError(
            "odometer_rho", f"must be > 0, got {params['odometer_rho']}", "omit it for the default"
        )


def check_declaration(
    source: str,
    unit: str,
    epsilon: Any,
    delta: Any,
    rule: str,
    relation: str,
    params: Mapping[str, Any] | None = None,
) -> tuple[float, float, dict[str, Any]]:
    """The checked total and the rule's full parameters, or the one-line error."""
    eps, dlt = _check_declaration(source, unit, epsilon, delta, rule, relation)
    given = dict(params or {})
    allowed = rules.SETTABLE[rule]
    for name in given:
        if name not in allowed:
            raise InvalidParameterError(
                name,
                f"is not a parameter a {rule} store takes"
                + (" (it follows from the total)" if name == "mu" else ""),
                f"pass only {', '.join(allowed)}" if allowed else "pass no parameters",
            )
    full = {**rules.default_params(rule, eps, dlt), **given}
    _check_params(rule, full, dlt)
    _check_odometer(full)
    return eps, dlt, odometer_defaults(rule, (eps, dlt), full)


def declare(
    location: str,
    source: str,
    unit: str = "row",
    *,
    epsilon: Any,
    delta: Any,
    rule: str = "renyi",
    relation: str = "add_remove",
    params: Mapping[str, Any] | None = None,
) -> Declared:
    """Declare the total of ``source``/``unit``: an entry of the chain, written once."""
    eps, dlt, full = check_declaration(source, unit, epsilon, delta, rule, relation, params)
    conn = open_store(location)
    try:
        with conn.transaction():
            conn.lock_head()
            if conn.execute("SELECT 1 FROM budgets WHERE source = ? AND unit = ?", (source, unit)):
                raise InvalidParameterError(
                    "source",
                    f"source {source!r} (unit {unit!r}) already has a budget in {location}",
                    "a total is declared once; declare another source or unit",
                )
            parameters = {"rule": rule, "epsilon": eps, "delta": dlt, "relation": relation}
            entry = _append(
                conn, "declare", source, unit, "-", None, {**parameters, "params": full}, {}, {}
            )
            conn.execute(
                f"INSERT INTO budgets ({_BUDGET_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (source, unit, relation, rule, eps, dlt, canonical_json(full), entry["seq"]),
            )
            state = rules.initial_state(rule, full)
            conn.execute(
                "INSERT INTO filter_state (source, unit, state) VALUES (?, ?, ?)",
                (source, unit, canonical_json(state)),
            )
        return _declared_one(conn, source, unit)
    finally:
        conn.close()


def _append(
    conn: Connection,
    kind: str,
    source: str,
    unit: str,
    run_id: str,
    event: Event | None,
    parameters: Mapping[str, Any],
    provenance: Mapping[str, Any],
    cost: Mapping[str, Any],
) -> dict[str, Any]:
    """Append one entry to the chain (inside the caller's transaction)."""
    head = conn.lock_head()
    assert head is not None
    entry: dict[str, Any] = {
        "seq": head[0] + 1,
        "kind": kind,
        "source": source,
        "unit": unit,
        "run_id": run_id,
        "event": canonical_json(None if event is None else event.to_dict()),
        "parameters": canonical_json(dict(parameters)),
        "provenance": canonical_json(dict(provenance)),
        "charge": canonical_json(dict(cost)),
        "booked_at": _now(),
        "prev_hash": head[1],
    }
    entry["hash"] = entry_hash(entry)
    columns = ", ".join((*FIELDS, "hash"))
    marks = ", ".join("?" for _ in range(len(FIELDS) + 1))
    conn.execute(
        f"INSERT INTO entries ({columns}) VALUES ({marks})",
        tuple(entry[name] for name in (*FIELDS, "hash")),
    )
    conn.execute(
        "UPDATE chain_head SET seq = ?, hash = ? WHERE id = 1", (entry["seq"], entry["hash"])
    )
    return entry


def _state(conn: Connection, source: str, unit: str) -> dict[str, Any]:
    rows = conn.execute(
        "SELECT state FROM filter_state WHERE source = ? AND unit = ?", (source, unit)
    )
    return dict(json.loads(rows[0][0]))


def booked_events(conn: Connection, source: str, unit: str) -> list[Event]:
    """Every event booked for ``source``/``unit``, in booking order."""
    rows = conn.execute(
        "SELECT event FROM entries WHERE kind = 'book' AND source = ? AND unit = ? ORDER BY seq",
        (source, unit),
    )
    return [event_from_dict(json.loads(r[0])) for r in rows]


def _decide(
    conn: Connection, budget: Declared, event: Event, cost: Mapping[str, Any]
) -> rules.Decision:
    state = _state(conn, budget.source, budget.unit)

    def history() -> list[Event]:
        return [*booked_events(conn, budget.source, budget.unit), event]

    return rules.decide(
        budget.rule,
        budget.total,
        budget.params,
        state,
        dict(cost),
        history,
        budget.relation,
        event=event,
    )


def _refusal(budget: Declared, decision: rules.Decision) -> rules.BudgetRefused:
    return rules.BudgetRefused(
        f"budget of source {budget.source!r} (unit {budget.unit!r}) exceeded: "
        f"{decision.reason} under {budget.rule} (total epsilon={budget.epsilon}, "
        f"delta={budget.delta}); nothing was booked and the run must not start. Fix: book "
        "less (more noise, fewer steps) or declare a new source"
    )


def book(
    location: str,
    source: str,
    event: Event,
    *,
    unit: str = "row",
    run_id: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    provenance: Mapping[str, Any] | None = None,
    relation: str | None = None,
) -> dict[str, Any]:
    """Book ``event`` (stated per privacy unit under ``relation``, by default the store's)
    against ``source``/``unit``: the entry booked (with ``state``, ``spent``, ``rule`` and
    ``store_id``, the hash of the store's first entry), or
    :class:`~dpledger.budget.rules.BudgetRefused`."""
    if not isinstance(event, Event):
        raise InvalidParameterError("event", f"expected an Event, got {event!r}", "pass an event")
    conn = open_store(location)
    try:
        budget = _declared_one(conn, source, unit)
        if relation is not None and relation != budget.relation:
            raise InvalidParameterError(
                "adjacency",
                f"the run is stated under {relation}, the budget of {source!r} under "
                f"{budget.relation}",
                f"state the run's adjacency as {budget.relation}, or book another source",
            )
        cost = rules.charge(budget.rule, budget.params, event, budget.relation)
        with conn.transaction():
            conn.lock_head()  # first: the state read next is the latest committed one
            decision = _decide(conn, budget, event, cost)
            if not decision.fits:
                raise _refusal(budget, decision)
            entry = _append(
                conn,
                "book",
                source,
                unit,
                run_id or new_run_id(),
                event,
                parameters or {},
                provenance or {},
                cost,
            )
            conn.execute(
                "UPDATE filter_state SET state = ? WHERE source = ? AND unit = ?",
                (canonical_json(decision.state), source, unit),
            )
            store_id = conn.execute("SELECT hash FROM entries WHERE seq = 1")[0][0]
        spent = rules.spent(budget.rule, budget.total, budget.params, decision.state)
        return {
            **entry,
            "state": decision.state,
            "spent": spent,
            "odometer": odometer(budget.rule, budget.total, budget.params, decision.state),
            "rule": budget.rule,
            "store_id": str(store_id),
        }
    finally:
        conn.close()


def check(location: str, source: str, event: Event, *, unit: str = "row") -> dict[str, Any]:
    """Whether ``event`` would fit now (nothing is written), and the spend after it."""
    conn = open_store(location)
    try:
        budget = _declared_one(conn, source, unit)
        cost = rules.charge(budget.rule, budget.params, event, budget.relation)
        with conn.transaction(write=False):
            decision = _decide(conn, budget, event, cost)
        return {
            **budget.to_dict(),
            "fits": decision.fits,
            "reason": decision.reason,
            "charge": cost,
            "spent_after": rules.spent(budget.rule, budget.total, budget.params, decision.state),
            "odometer_after": odometer(budget.rule, budget.total, budget.params, decision.state),
        }
    finally:
        conn.close()


def entries(conn: Connection, source: str | None = None) -> list[dict[str, Any]]:
    """The entries, in order (of one source, or all)."""
    columns = ", ".join((*FIELDS, "hash"))
    if source is None:
        rows = conn.execute(f"SELECT {columns} FROM entries ORDER BY seq")
    else:
        rows = conn.execute(
            f"SELECT {columns} FROM entries WHERE source = ? ORDER BY seq", (source,)
        )
    return [dict(zip((*FIELDS, "hash"), row, strict=True)) for row in rows]
