"""The last step of ``dpledger run``, in the clean room: certify the staged run directory.

The run has executed (in the ordinary process) and staged its outputs and record in a
temporary directory. Before anything is published, the clean room makes the method's
declaration again, recomputes the accounted event and the certified bound, re-checks that the
executed steps are covered, writes the record's privacy section and seal itself, and prints the
run's one line. A run whose record the clean room cannot confirm is refused (exit code 2) and
nothing is published.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpledger.cleanroom.verify_room import RELATIVE_SLACK, check_run

RECORD = "ledger.json"


def serve(request: Mapping[str, Any]) -> int:
    from dpledger.commands.run import headline
    from dpledger.runtime.jsonform import strict_json
    from dpledger.runtime.record_seal import write_seal
    from dpledger.runtime.session import privacy_section

    options = request["options"]
    staged = Path(options["staged"])
    check = check_run(staged, request, sealed=False)
    if isinstance(check, int):
        return check
    problems = list(check.problems)
    stated = check.data.get("privacy", {}).get("epsilon")
    if check.selection is not None and isinstance(stated, int | float):
        fresh = check.selection.bound.epsilon
        if stated < fresh * (1 - RELATIVE_SLACK):
            problems.append(
                f"the run's own process computed epsilon {stated!r}, below the {fresh!r} "
                "certified here: code in that process changed the accountant"
            )
    if problems or check.selection is None:
        for problem in problems or ["no bound could be recomputed"]:
            sys.stderr.write(f"dpledger run: refused, nothing written: {problem}\n")
        return 2
    data = {**check.data, "privacy": privacy_section(check.selection)}
    (staged / RECORD).write_text(strict_json(data), encoding="utf-8")
    write_seal(staged)
    record = check.record
    bound = check.selection.bound.to_dict()
    host = check.resolver_host
    protects = (
        host.protected_unit(record.method, record.params, record.adjacency)
        if host is not None and record.method in host.methods()
        else None
    )
    line = headline(
        record.method, bound, bound["delta"], record.adjacency, Path(options["out"]), protects
    )
    sys.stdout.write(line + "\n")
    for rest in check.rests_on:
        sys.stdout.write(f"  rests on: {rest}\n")
    return 0
