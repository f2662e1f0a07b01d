"""``dpledger verify`` inside the clean room: recompute a run's or a file's certified numbers.

For a run directory it re-reads ``ledger.json`` and checks, each independently of what the run
itself said: the seal (record and output files unchanged since the run), the declaration lifted
to the privacy unit (the accounted event), the certified bound (recomputed here: the record may
state more, never less), and that the executed steps are covered by the declaration. Every
mismatch is named; the exit code is 1 when there is any.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpledger.cleanroom.account_room import resolver_for
from dpledger.cleanroom.room import write_needs
from dpledger.core.errors import DPLedgerError, InvalidParameterError

#: relative slack when comparing a recorded bound with the recomputed one (float round-off)
RELATIVE_SLACK = 1e-9
CLEAN = "recomputed in a clean room (an isolated interpreter that loads no third-party code)"


def serve(request: Mapping[str, Any]) -> int:
    target = Path(request["options"]["target"])
    if target.is_dir():
        return verify_run(target, request)
    return _verify_file(request)


def _verify_file(request: Mapping[str, Any]) -> int:
    from dpledger.cleanroom import account_room

    options = request["options"]
    account_request = {
        **request,
        "options": {
            "file": options["target"],
            "delta": None,
            "epsilon": None,
            "json": False,
            "backends": None,
            "per_release": False,
            "crosscheck": False,
            "plugins_allow": options.get("plugins_allow"),
            "plugins_block": options.get("plugins_block"),
        },
    }
    code = account_room.serve(account_request)
    if code == 0:
        sys.stdout.write(f"verified: {options['target']}: {CLEAN}\n")
    return code


def _read_record(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "ledger.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidParameterError(
            str(path), f"cannot be read ({exc})", "pass a run directory written by dpledger run"
        ) from None
    if not isinstance(data, dict):
        raise InvalidParameterError(str(path), "is not a table", "pass a run directory")
    return data


def verify_run(run_dir: Path, request: Mapping[str, Any]) -> int:
    """Check one run directory; print what holds, or every mismatch."""
    from dpledger.runtime.record_seal import seal_problems
    from dpledger.runtime.run_record import RunRecord

    data = _read_record(run_dir)
    record = RunRecord.from_json(data)
    resolver = resolver_for(request)  # loads the builtin plugins' event kinds
    problems = seal_problems(data, run_dir)
    notes: list[str] = []
    bound = _check_bound(record, problems)
    _check_coverage(record, problems, notes)
    if resolver.needs:  # pragma: no cover - runs ask for no declarations
        return write_needs(request, resolver.needs)
    if problems:
        for problem in problems:
            sys.stderr.write(f"dpledger verify: {run_dir}: mismatch: {problem}\n")
        return 1
    lines = [f"verified: {run_dir}: method {record.method}", f"  {bound}"]
    lines += [f"  {n}" for n in notes]
    lines.append(f"  {CLEAN}")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def _check_bound(record: Any, problems: list[str]) -> str:
    """Recompute the accounted event and the bound; record what differs."""
    from dpledger.accountant import select
    from dpledger.core.declaration import stated_for_unit, unit_adjacency
    from dpledger.report.numbers import fmt_up

    adjacency = record.adjacency
    per_unit, _ = stated_for_unit(
        record.core_event(), record.declared_unit, adjacency, release=record.method
    )
    accounted = (record.accounted or {}).get("event")
    if accounted is not None and accounted != per_unit.to_dict():
        problems.append("the accounted event is not the declaration stated per privacy unit")
    delta = record.privacy.get("delta")
    if not isinstance(delta, float) or not 0 < delta < 1:
        problems.append(f"privacy.delta is {delta!r}, not a probability")
        return "no bound recomputed"
    fresh = select.account(per_unit, unit_adjacency(adjacency), delta=delta).bound
    stated = record.privacy.get("epsilon")
    if isinstance(stated, str) and stated == "inf":
        stated = math.inf
    if not isinstance(stated, int | float) or stated < fresh.epsilon * (1 - RELATIVE_SLACK):
        problems.append(
            f"privacy.epsilon is {stated!r}, below the certified bound recomputed here "
            f"({fresh.epsilon!r}, {fresh.method})"
        )
    return (
        f"epsilon <= {fmt_up(fresh.epsilon)} at delta = {delta:g} (certified upper bound; "
        f"method {fresh.method}; the record states {stated!r})"
    )


def _check_coverage(record: Any, problems: list[str], notes: list[str]) -> None:
    """The executed steps against the declaration, with the ledger's own coverage rule."""
    from dpledger.core.events import event_from_dict
    from dpledger.runtime.coverage import canonical_multiset, multiset_covered

    try:
        declared = event_from_dict(record.ledger.get("declared"))
        executed = event_from_dict(record.ledger.get("executed"))
    except DPLedgerError as exc:
        notes.append(
            "executed steps not re-checked: they use event kinds that only a third-party "
            f"plugin defines ({exc}); their coverage rests on that plugin"
        )
        return
    if not multiset_covered(canonical_multiset(executed), canonical_multiset(declared)):
        problems.append(
            f"the executed steps ({executed.describe()}) are not covered by the declaration "
            f"({declared.describe()})"
        )
        return
    notes.append("every executed step is covered by the declaration")
