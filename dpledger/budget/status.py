"""What a budget store says about itself: per source and unit, the total, the rule and its
theorem, the filter's running statistic, the certified spend so far (the odometer, valid at
every time at once), what remains, the runs that spent it, and whether
the history is intact.

The verification walks the whole chain (:func:`dpledger.budget.chain.verify_chain`), checks
that every declaration matches the budget row it created, and replays every booking's stored
charge through its rule: each must have fitted when it was booked, and the replayed state must
equal the stored one. Any disagreement names the entry.
"""

from __future__ import annotations

import json
from typing import Any

from dpledger.budget import rules
from dpledger.budget.chain import describe, verify_chain
from dpledger.budget.odometer import odometer
from dpledger.budget.store import Declared, declared, entries, open_store
from dpledger.core.event_parser import event_from_dict
from dpledger.core.events import Event

__all__ = ["status", "verify"]


def _declaration_problem(entry: dict[str, Any], budget: Declared) -> str:
    stated = json.loads(entry["parameters"])
    row = {
        "rule": budget.rule,
        "epsilon": budget.epsilon,
        "delta": budget.delta,
        "relation": budget.relation,
        "params": budget.params,
    }
    if stated != row or entry["seq"] != budget.declared_seq:
        return f"{describe(entry)}: the declared budget no longer matches its entry (edited)"
    return ""


def _replay(budget: Declared, booked: list[dict[str, Any]]) -> tuple[dict[str, Any], str]:
    """The state after replaying ``booked`` through the rule, or the first entry that would
    not have fitted."""
    state = rules.initial_state(budget.rule, budget.params)
    if budget.rule == "pld" and booked:
        # composition is monotone: if all the bookings fit together, every prefix fitted
        state = {**state, "count": len(booked) - 1}
        return _replay_composed(budget, state, booked)
    events: list[Event] = []
    for entry in booked:
        events.append(event_from_dict(json.loads(entry["event"])))
        decision = rules.decide(
            budget.rule,
            budget.total,
            budget.params,
            state,
            json.loads(entry["charge"]),
            lambda: list(events),
            budget.relation,
        )
        if not decision.fits:
            return state, f"{describe(entry)}: it does not fit the total ({decision.reason})"
        state = decision.state
    return state, ""


def _replay_composed(
    budget: Declared, state: dict[str, Any], booked: list[dict[str, Any]]
) -> tuple[dict[str, Any], str]:
    events = [event_from_dict(json.loads(e["event"])) for e in booked]
    decision = rules.decide(
        budget.rule, budget.total, budget.params, state, {}, lambda: events, budget.relation
    )
    if not decision.fits:
        return state, f"{describe(booked[-1])}: the bookings do not fit the total together"
    return decision.state, ""


class _Snapshot:
    """Everything the verification and the status read, in one read transaction (one
    consistent snapshot, also while other processes book)."""

    def __init__(self, location: str) -> None:
        conn = open_store(location)
        try:
            with conn.transaction(write=False):
                self.head = conn.execute("SELECT seq, hash FROM chain_head WHERE id = 1")
                self.entries = entries(conn)
                self.budgets = declared(conn)
                self.states = {
                    (str(r[0]), str(r[1])): json.loads(r[2])
                    for r in conn.execute("SELECT source, unit, state FROM filter_state")
                }
        finally:
            conn.close()


def verify(location: str) -> dict[str, Any]:
    """The chain's verification plus the replay of every budget."""
    return _verify(_Snapshot(location))


def _verify(snap: _Snapshot) -> dict[str, Any]:
    all_entries, budgets, stored = snap.entries, snap.budgets, snap.states
    result = verify_chain(all_entries, snap.head[0] if snap.head else None)
    if not result["ok"]:
        return result
    by_seq = {e["seq"]: e for e in all_entries}
    for budget in budgets:
        problem = _budget_problem(budget, by_seq, all_entries, stored)
        if problem:
            return {**result, "ok": False, "problem": problem}
    return result


def _budget_problem(
    budget: Declared,
    by_seq: dict[int, dict[str, Any]],
    all_entries: list[dict[str, Any]],
    stored: dict[tuple[str, str], Any],
) -> str:
    entry = by_seq.get(budget.declared_seq)
    if entry is None or entry["kind"] != "declare":
        return f"the budget of {budget.source!r} has no declaration entry"
    problem = _declaration_problem(entry, budget)
    if problem:
        return problem
    booked = [
        e
        for e in all_entries
        if e["kind"] == "book" and (e["source"], e["unit"]) == (budget.source, budget.unit)
    ]
    state, problem = _replay(budget, booked)
    if problem:
        return problem
    if not _same_state(state, stored.get((budget.source, budget.unit))):
        return (
            f"the stored state of source {budget.source!r} (unit {budget.unit!r}) does not "
            "match the replay of its entries (edited)"
        )
    return ""


def _same_state(replayed: dict[str, Any], stored: Any) -> bool:
    """Whether the stored state is the replayed one (a ``pld`` state written before bookings
    were kept grouped has no groups: its count and bound are compared)."""
    if isinstance(stored, dict) and "groups" in replayed and "groups" not in stored:
        return {k: v for k, v in replayed.items() if k != "groups"} == stored
    return bool(replayed == stored)


def status(location: str) -> dict[str, Any]:
    """Every budget's total, rule, theorem, spend, remainder and runs, and the chain's check."""
    snap = _Snapshot(location)
    check = _verify(snap)
    budgets, all_entries, states = snap.budgets, snap.entries, snap.states
    out = [
        _one(
            b, states.get((b.source, b.unit)) or rules.initial_state(b.rule, b.params), all_entries
        )
        for b in budgets
    ]
    return {"store": location, "chain": check, "budgets": out}


def _one(
    budget: Declared, state: dict[str, Any], all_entries: list[dict[str, Any]]
) -> dict[str, Any]:
    spent = rules.spent(budget.rule, budget.total, budget.params, state)
    runs = [
        {
            "seq": e["seq"],
            "run_id": e["run_id"],
            "booked_at": e["booked_at"],
            "parameters": json.loads(e["parameters"]),
        }
        for e in all_entries
        if e["kind"] == "book" and (e["source"], e["unit"]) == (budget.source, budget.unit)
    ]
    return {
        **budget.to_dict(),
        "bookings": state["count"],
        "spent": spent,
        "odometer": odometer(budget.rule, budget.total, budget.params, state),
        "remaining_epsilon": max(0.0, budget.epsilon - spent["epsilon"]),
        "state": state,
        "runs": runs,
    }
