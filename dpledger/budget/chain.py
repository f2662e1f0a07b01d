"""The hash chain of a budget store's entries, and its verification.

Every entry (a declaration or a booking) stores the hash of the one before it and its own
hash over all its fields as stored (sequence number, kind, source, unit, run id, event,
parameters, provenance hashes, charge, time, previous hash). Editing, removing or reordering
any entry breaks the chain at that entry, and the verification names it. (A writer who can
rewrite the whole table consistently is caught only against a head hash kept elsewhere:
``status`` prints the head.)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["FIELDS", "GENESIS", "Entry", "canonical_json", "entry_hash", "verify_chain"]

#: the previous hash of the first entry
GENESIS = "0" * 64
#: the columns of an entry, in the order they are hashed
FIELDS = (
    "seq",
    "kind",
    "source",
    "unit",
    "run_id",
    "event",
    "parameters",
    "provenance",
    "charge",
    "booked_at",
    "prev_hash",
)
Entry = dict[str, Any]


def canonical_json(value: Any) -> str:
    """One text per value (sorted keys, no spaces): what is stored and hashed."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def entry_hash(entry: Entry) -> str:
    """The SHA-256 of an entry's fields (without its own hash)."""
    payload = canonical_json([entry[name] for name in FIELDS])
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def describe(entry: Entry) -> str:
    """How a report names an entry."""
    what = "declaration" if entry["kind"] == "declare" else f"booking of run {entry['run_id']}"
    return f"entry {entry['seq']} ({what}, source {entry['source']!r}, unit {entry['unit']!r})"


def verify_chain(entries: Iterable[Entry], head: Sequence[Any] | None) -> dict[str, Any]:
    """``{"ok", "entries", "head", "broken_at", "problem"}``: the first entry whose hash, link
    or sequence number is wrong, or a head that does not match the last entry."""
    prev, expected_seq, count = GENESIS, 1, 0
    for entry in entries:
        problem = _entry_problem(entry, prev, expected_seq)
        if problem:
            return _broken(entry["seq"], f"{describe(entry)}: {problem}", count)
        prev, expected_seq, count = entry["hash"], expected_seq + 1, count + 1
    if head is not None and (int(head[0]) != count or str(head[1]) != prev):
        return _broken(
            count, f"the chain head (entry {head[0]}) does not match the last entry {count}", count
        )
    return {"ok": True, "entries": count, "head": prev, "broken_at": None, "problem": None}


def _entry_problem(entry: Entry, prev: str, expected_seq: int) -> str:
    if entry["seq"] != expected_seq:
        return (
            f"sequence number {entry['seq']} where {expected_seq} was expected (an entry is "
            "missing or was inserted)"
        )
    if entry["prev_hash"] != prev:
        return (
            "its link to the entry before does not match (an entry before it was removed or "
            "reordered)"
        )
    if entry_hash(entry) != entry["hash"]:
        return "its hash does not match its contents (it was edited after it was written)"
    return ""


def _broken(seq: int, problem: str, count: int) -> dict[str, Any]:
    return {"ok": False, "entries": count, "head": None, "broken_at": seq, "problem": problem}
