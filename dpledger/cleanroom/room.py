"""The clean room's own side: the entry point of the isolated interpreter.

:mod:`dpledger.cleanroom.launch` starts ``python -I -S`` with the path of
:mod:`dpledger.cleanroom.tree` and this module's :func:`main`. It refuses to work unless it
really is isolated, reads its request (JSON on stdin), runs the command in it and writes the
command's text and files itself, through its own standard output and error (inherited file
descriptors, not the parent's Python objects). Before it exits it checks that no module from
outside the standard library and its path was imported.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from dpledger.cleanroom.tree import ACCOUNTING_PACKAGES

#: exit code of a room that needs third-party declarations first (written to ``needs_file``)
NEEDS_DECLARATIONS = 10
#: exit code of a room that found itself not isolated, or that imported a foreign module
NOT_ISOLATED = 4
#: the user's command of each request that is a step of another command
COMMAND_NAMES = {"certify_run": "run", "run_builtin": "run", "audit_claims": "audit"}
ALLOWED_TOP_LEVEL = frozenset({*ACCOUNTING_PACKAGES, "dpledger"})
#: modules that compiled extensions create at run time (no file, no code of their own)
RUNTIME_MODULES = frozenset({"cython_runtime"})


def isolation_problem(extra: frozenset[str] = frozenset()) -> str | None:
    """Why this interpreter is not a clean room, or None."""
    if not (sys.flags.isolated and sys.flags.no_site):
        return "the interpreter was started without -I -S"
    if "site" in sys.modules or "sitecustomize" in sys.modules or "usercustomize" in sys.modules:
        return "site processing ran"
    return foreign_modules(extra)


def foreign_modules(extra: frozenset[str] = frozenset()) -> str | None:
    """Modules imported from outside the standard library, the clean room's packages and the
    ``extra`` ones its request names."""
    allowed = sys.stdlib_module_names | ALLOWED_TOP_LEVEL | RUNTIME_MODULES | extra
    roots = tuple(p for p in sys.path if p)
    foreign = sorted(
        {
            name
            for name, module in list(sys.modules.items())
            if (name.split(".")[0] not in allowed and not name.startswith("_"))
            or not _loaded_from(getattr(module, "__file__", None), roots)
        }
    )
    return f"modules from outside the clean room were imported: {foreign}" if foreign else None


def _loaded_from(file: object, roots: tuple[str, ...]) -> bool:
    """Whether a module's ``__file__`` lies under ``roots``; a module with no file, or with a
    bare name for one (a package's synthetic namespace such as ``torch.ops``), was not loaded
    from a path, so only its name is checked."""
    if not isinstance(file, str) or not os.path.isabs(file):
        return True
    return file.startswith(roots)


def _calibrate(request: Mapping[str, Any]) -> int:
    import argparse

    from dpledger.commands.calibrate import certify

    return certify(argparse.Namespace(**request["options"]))


def _serve(command: str, request: Mapping[str, Any]) -> int:
    return _handlers()[command](request)


def _handlers() -> Mapping[str, Callable[[Mapping[str, Any]], int]]:
    from dpledger.cleanroom import (
        account_room,
        audit_room,
        builtin_run_room,
        demo_room,
        report_room,
        run_room,
        verify_room,
    )

    return {
        "account": account_room.serve,
        "calibrate": _calibrate,
        "demo": demo_room.serve,
        "report": report_room.serve,
        "audit_claims": audit_room.serve,
        "verify": verify_room.serve,
        "certify_run": run_room.serve,
        "run_builtin": builtin_run_room.serve,
    }


def main() -> int:
    """Run one request; the exit code is the command's."""
    problem = isolation_problem()
    if problem:
        sys.stderr.write(f"dpledger: error: the clean room is not clean ({problem})\n")
        return NOT_ISOLATED
    first: dict[str, Any] = json.loads(sys.stdin.read())
    command = str(first["command"])
    from dpledger.cli import guarded

    shown = COMMAND_NAMES.get(command, command)
    conversation = _Conversation.of(first)
    request: dict[str, Any] | None = first
    current = first
    while request is not None:
        current = request
        code = guarded(shown, functools.partial(_serve, command, current))
        request = None
        if code == NEEDS_DECLARATIONS and conversation is not None:
            request = conversation.ask()
        if request is not None and request.get("command") != command:
            request = None
    problem = foreign_modules(frozenset(current.get("extra_packages", ())))
    if problem:
        sys.stderr.write(f"dpledger {shown}: error: the clean room is not clean ({problem})\n")
        return NOT_ISOLATED
    sys.stdout.flush()
    return code


class _Conversation:
    """The room's side of a launch that answers its questions without starting it again: the
    parent passes two pipe descriptors; when a command needs declarations the room says so on
    the first and reads the request that carries them (one JSON line) from the second."""

    def __init__(self, asks: int, answers: int) -> None:
        self._asks = os.fdopen(asks, "w", encoding="utf-8")
        self._answers = os.fdopen(answers, encoding="utf-8")

    @classmethod
    def of(cls, request: Mapping[str, Any]) -> _Conversation | None:
        fds = request.get("conversation_fds")
        if not (isinstance(fds, list) and len(fds) == 2 and all(type(f) is int for f in fds)):
            return None
        return cls(fds[0], fds[1])

    def ask(self) -> dict[str, Any] | None:
        """Tell the parent that the needs file is written; the next request, or None when the
        parent has no answer (the room then exits asking, as a room without a conversation)."""
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            self._asks.write("needs\n")
            self._asks.flush()
            line = self._answers.readline()
        except OSError:
            return None
        if not line:
            return None
        answer = json.loads(line)
        return answer if isinstance(answer, dict) else None


def write_needs(request: Mapping[str, Any], needs: list[dict[str, Any]]) -> int:
    """Ask the parent for third-party declarations; the command is run again, in the same
    interpreter, on a request that carries them. A command asks before it prints anything
    (what it printed would be printed again): one that checks several targets holds their
    output until each could be checked (``verify_room``)."""
    Path(request["needs_file"]).write_text(json.dumps(needs), encoding="utf-8")
    return NEEDS_DECLARATIONS
