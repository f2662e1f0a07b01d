"""``dpledger verify`` inside the clean room: recompute a run's or a file's certified numbers.

For a run directory it re-reads ``ledger.json`` and checks, each independently of what the run
itself said: the seal (record and output files unchanged since the run), the declaration lifted
to the privacy unit (the accounted event), the certified bound (recomputed here: the record may
state more, never less), and that the executed steps are covered by the declaration. Every
mismatch is named; the exit code is 1 when there is any.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

import attrs

from dpledger.cleanroom.account_room import resolver_for
from dpledger.cleanroom.resolver import RoomResolver
from dpledger.cleanroom.room import NEEDS_DECLARATIONS, write_needs
from dpledger.core.errors import DPLedgerError, InvalidParameterError

#: relative slack when comparing a recorded bound with the recomputed one (float round-off)
RELATIVE_SLACK = 1e-9
#: runs that dpledger observed rather than ran (their event is what executed: there is no
#: method declaration to make again): ``dpledger.integrations.opacus.METHOD``
OBSERVED_METHODS = ("opacus_dp_sgd",)
CLEAN = "recomputed in a clean room (an isolated interpreter that loads no third-party code)"


def serve(request: Mapping[str, Any]) -> int:
    """Check every target; the worst exit code (a mismatch anywhere is 1). What the targets
    print is held until every one could be checked: a target that needs third-party
    declarations makes the command run again once they are given, and the targets before it
    must not be printed twice."""
    codes = []
    held = _HeldOutput()
    try:
        with held:
            for target in request["options"]["targets"]:
                path = Path(target)
                code = verify_run(path, request) if path.is_dir() else _verify_file(target, request)
                if code == NEEDS_DECLARATIONS:
                    held.discard()
                    return code
                codes.append(code)
    finally:
        held.replay()
    return max(codes)


class _HeldOutput(contextlib.AbstractContextManager["_HeldOutput"]):
    """Standard output and error written inside it, kept in their order to be replayed."""

    def __init__(self) -> None:
        self._parts: list[tuple[TextIO, str]] = []
        self._redirects = contextlib.ExitStack()

    def __enter__(self) -> _HeldOutput:
        out, err = sys.stdout, sys.stderr
        self._redirects.enter_context(contextlib.redirect_stdout(_Recorder(self._parts, out)))
        self._redirects.enter_context(contextlib.redirect_stderr(_Recorder(self._parts, err)))
        return self

    def __exit__(self, *exc: object) -> None:
        self._redirects.close()

    def discard(self) -> None:
        self._parts.clear()

    def replay(self) -> None:
        for stream, text in self._parts:
            stream.write(text)
        self._parts.clear()


class _Recorder(io.TextIOBase):
    """A text stream that records each write for ``stream``."""

    def __init__(self, parts: list[tuple[TextIO, str]], stream: TextIO) -> None:
        self._parts, self._stream = parts, stream

    def write(self, text: str) -> int:
        self._parts.append((self._stream, text))
        return len(text)


def _verify_file(target: str, request: Mapping[str, Any]) -> int:
    from dpledger.cleanroom import account_room

    options = request["options"]
    account_request = {
        **request,
        "options": {
            "file": target,
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
        sys.stdout.write(f"verified: {target}: {CLEAN}\n")
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


@attrs.frozen
class RunCheck:
    """What the clean room found in one run directory."""

    record: Any
    data: Mapping[str, Any]
    problems: list[str]
    notes: list[str]
    selection: Any
    bound_line: str
    rests_on: list[str]
    #: the plugin host of the builtin methods (the unit a method bounds itself)
    resolver_host: Any = None


def check_run(run_dir: Path, request: Mapping[str, Any], *, sealed: bool) -> RunCheck | int:
    """Recompute a run's declaration, accounted event and bound, and re-check its coverage
    (and its seal: when there is one, or always when ``sealed``); the exit code asking for
    declarations, if it needs any."""
    from dpledger.runtime.record_seal import SEAL_FILE, seal_problems
    from dpledger.runtime.run_record import RunRecord

    data = _read_record(run_dir)
    record = RunRecord.from_json(data)
    resolver = resolver_for(request)  # also loads the builtin plugins' event kinds
    has_seal = (run_dir / SEAL_FILE).exists()
    problems = seal_problems(run_dir) if sealed or has_seal else []
    notes: list[str] = []
    if record.method in OBSERVED_METHODS:
        notes.append("an observed run: its recorded event is what executed")
    else:
        _check_declaration(record, resolver, problems)
    if resolver.needs:
        return write_needs(request, resolver.needs)
    if record.pipeline is not None:
        selection, bound = _check_pipeline_bound(run_dir, record, resolver, problems)
    else:
        selection, bound = _check_bound(record, problems)
    _check_coverage(record, problems, notes)
    return RunCheck(
        record, data, problems, notes, selection, bound, resolver.rests_on, resolver.host
    )


def verify_run(run_dir: Path, request: Mapping[str, Any]) -> int:
    """Check one run directory; print what holds (unless the request is ``quiet``), or every
    mismatch. ``require_seal`` (default true) makes a missing seal a mismatch."""
    options = request["options"]
    check = check_run(run_dir, request, sealed=options.get("require_seal", True))
    if isinstance(check, int):
        return check
    if check.problems:
        for problem in check.problems:
            sys.stderr.write(f"dpledger verify: {run_dir}: mismatch: {problem}\n")
        return 1
    if options.get("quiet"):
        return 0
    lines = [f"verified: {run_dir}: method {check.record.method}", f"  {check.bound_line}"]
    lines += [f"  rests on: {line}" for line in check.rests_on]
    lines += [f"  {n}" for n in check.notes]
    lines.append(f"  {CLEAN}")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def _check_declaration(record: Any, resolver: RoomResolver, problems: list[str]) -> None:
    """The method's declaration, made again from the record's parameters: by dpledger's own
    code for a builtin method, by a worker (the same canonical inputs as ``account``) for a
    third-party one."""
    try:
        event, _, unit = resolver(record.method, record.params, record.adjacency)
    except DPLedgerError as exc:
        problems.append(f"the method's declaration could not be made again ({exc})")
        return
    if resolver.needs:
        return
    if event.to_dict() != dict(record.declared_core):
        problems.append(
            f"the recorded declaration ({record.core_event().describe()}) is not what method "
            f"{record.method!r} declares for the recorded parameters ({event.describe()})"
        )
    if unit != record.declared_unit:
        problems.append(
            f"the recorded unit {record.declared_unit!r} is not the method's ({unit!r})"
        )


def _compare(stated: Any, fresh: Any, delta: float, problems: list[str]) -> str:
    """Record a stated epsilon below the recomputed one; the line that states the bound."""
    from dpledger.report.numbers import fmt_up

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


def _record_delta(record: Any, problems: list[str]) -> float | None:
    delta = record.privacy.get("delta")
    if not isinstance(delta, float) or not 0 < delta < 1:
        problems.append(f"privacy.delta is {delta!r}, not a probability")
        return None
    return delta


def _check_pipeline_bound(
    run_dir: Path, record: Any, resolver: RoomResolver, problems: list[str]
) -> tuple[Any, str]:
    """A run accounted by the pipeline file beside its record (the demo): that file's bound."""
    from dpledger.accountant.graph_account import account_graph
    from dpledger.runtime.pipeline import load_pipeline

    delta = _record_delta(record, problems)
    if delta is None:
        return None, "no bound recomputed"
    pipeline = load_pipeline(run_dir / str(record.pipeline), resolver)
    fresh = account_graph(pipeline.graph, delta=delta).bound
    line = _compare(record.privacy.get("epsilon"), fresh, delta, problems)
    return None, f"{line}; accounted from {record.pipeline}"


def _check_bound(record: Any, problems: list[str]) -> tuple[Any, str]:
    """Recompute the accounted event and the bound; record what differs."""
    from dpledger.accountant import select
    from dpledger.core.declaration import stated_for_unit, unit_adjacency

    adjacency = record.adjacency
    per_unit, _ = stated_for_unit(
        record.core_event(), record.declared_unit, adjacency, release=record.method
    )
    accounted = (record.accounted or {}).get("event")
    if accounted is not None and accounted != per_unit.to_dict():
        problems.append("the accounted event is not the declaration stated per privacy unit")
    delta = _record_delta(record, problems)
    if delta is None:
        return None, "no bound recomputed"
    selection = select.account(per_unit, unit_adjacency(adjacency), delta=delta)
    line = _compare(record.privacy.get("epsilon"), selection.bound, delta, problems)
    return selection, line


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
