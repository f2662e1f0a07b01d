"""``dpledger report`` inside the clean room: the report is built, drawn and written here.

The room's host holds dpledger's own plugins (their report sections included); a third-party
method is declared from its worker's data, and the report warns that its bound rests on that
plugin's word. Third-party report sections are not drawn: they would be third-party code. A run
directory is first checked as ``dpledger verify`` checks it (its seal when it has one, its
declaration, bound and coverage); a mismatch refuses the report (exit code 1).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpledger.cleanroom.account_room import resolver_for
from dpledger.cleanroom.resolver import RoomResolver
from dpledger.cleanroom.room import write_needs


class RoomHost:
    """What the report asks of a plugin host, answered in the clean room."""

    def __init__(self, resolver: RoomResolver) -> None:
        self.resolver = resolver

    def resolve_method(self, name: str, values: Any, adjacency: Any) -> Any:
        return self.resolver(name, values, adjacency)

    def methods(self) -> Any:
        return self.resolver.host.methods()

    def report_sections(self) -> Any:
        return self.resolver.host.report_sections()


def _run_mismatches(run_dir: Path, request: Mapping[str, Any]) -> int | None:
    """The exit code when the run directory does not verify (or needs declarations)."""
    from dpledger.cleanroom.verify_room import check_run

    check = check_run(run_dir, request, sealed=False)
    if isinstance(check, int):
        return check
    for problem in check.problems:
        sys.stderr.write(f"dpledger report: {run_dir}: mismatch: {problem}\n")
    return 1 if check.problems else None


def serve(request: Mapping[str, Any]) -> int:
    from dpledger.commands.report import certify

    options = dict(request["options"])
    for key in ("out", "audit"):
        options[key] = None if options[key] is None else Path(options[key])
    args = argparse.Namespace(**options)
    if Path(args.input).is_dir() and (code := _run_mismatches(Path(args.input), request)):
        return code
    resolver = resolver_for(request)
    code = certify(args, RoomHost(resolver), lambda: None if resolver.needs else resolver.rests_on)
    if resolver.needs:
        return write_needs(request, resolver.needs)
    return code
