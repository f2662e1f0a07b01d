"""``dpledger report`` inside the clean room: the report is built, drawn and written here.

The room's host holds dpledger's own plugins (their report sections included); a third-party
method is declared from its worker's data, and the report warns that its bound rests on that
plugin's word. The report sections of the plugins whose methods the report uses are drawn by a
worker from the report's data (JSON) and included as text labelled as the plugin's. A run
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

    def protected_unit(self, name: str, values: Any, adjacency: Any) -> Any:
        """The unit a builtin method bounds itself (``MethodSpec.protects``), or None."""
        return self.resolver.host.protected_unit(name, values, adjacency)

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


def _finisher(request: Mapping[str, Any], resolver: RoomResolver) -> Any:
    """What the report adds for third-party plugins: a warning for each declaration its bound
    rests on, and their report sections (drawn by a worker from the report's data, labelled as
    the plugin's text); None (and the request recorded) while workers' answers are needed."""
    import attrs

    from dpledger.report.build import section_context
    from dpledger.report.model import ExtraSection

    def finish(built: Any) -> Any:
        if resolver.needs:
            return None
        report = built.report
        methods = sorted(resolver.third_party_methods)
        drawn = request.get("sections")
        if methods and drawn is None:
            context = section_context(report, built.graph)
            resolver.needs.append({"sections": {"methods": methods, "context": context}})
            return None
        extra = [
            ExtraSection(s["name"], s["title"], s["text"], f"{s['who']} (third-party)")
            for s in (drawn or {}).get("sections", [])
        ]
        warnings = [
            *report.warnings,
            *(f"rests on: {line}" for line in resolver.rests_on),
            *(drawn or {}).get("problems", []),
        ]
        report = attrs.evolve(
            report,
            sections=(*report.sections, *extra),
            warnings=tuple(dict.fromkeys(warnings)),
        )
        return attrs.evolve(built, report=report)

    return finish


def serve(request: Mapping[str, Any]) -> int:
    from dpledger.commands.report import certify

    options = dict(request["options"])
    for key in ("out", "audit"):
        options[key] = None if options[key] is None else Path(options[key])
    args = argparse.Namespace(**options)
    if Path(args.input).is_dir() and (code := _run_mismatches(Path(args.input), request)):
        return code
    resolver = resolver_for(request)
    code = certify(args, RoomHost(resolver), _finisher(request, resolver))
    if resolver.needs:
        return write_needs(request, resolver.needs)
    return code
