"""The clean room's own side: the entry point of the isolated interpreter.

:mod:`dpledger.cleanroom.launch` starts ``python -I -S`` with the path of
:mod:`dpledger.cleanroom.tree` and this module's :func:`main`. It refuses to work unless it
really is isolated, reads its request (JSON on stdin), runs the command in it and writes the
command's text and files itself, through its own standard output and error (inherited file
descriptors, not the parent's Python objects). Before it exits it checks that no module from
outside the standard library and its path was imported.
"""

from __future__ import annotations

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
    request = json.loads(sys.stdin.read())
    command = str(request["command"])
    from dpledger.cli import guarded

    shown = COMMAND_NAMES.get(command, command)
    code = guarded(shown, lambda: _handlers()[command](request))
    problem = foreign_modules(frozenset(request.get("extra_packages", ())))
    if problem:
        sys.stderr.write(f"dpledger {shown}: error: the clean room is not clean ({problem})\n")
        return NOT_ISOLATED
    sys.stdout.flush()
    return code


def write_needs(request: Mapping[str, Any], needs: list[dict[str, Any]]) -> int:
    """Ask the parent for third-party declarations; the room will be run again with them."""
    Path(request["needs_file"]).write_text(json.dumps(needs), encoding="utf-8")
    return NEEDS_DECLARATIONS
