"""``dpledger demo``, whole, inside the clean room.

The demo runs dpledger's own trajectory method: it accounts the pipeline, runs the method under
its ledger, writes the run directory and the report, and confirms the run, all in an isolated
interpreter whose path holds dpledger, its accounting dependencies and what the demo's extras
install (torch, POT, matplotlib), so nothing else installed can change what it draws or prints.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["DEMO_EXTRAS", "confirm_here", "serve"]

#: dpledger's extras the demo needs (the trajectory method and the report's figures)
DEMO_EXTRAS = ("trajectories", "reports")


def confirm_here(extra: frozenset[str]) -> Any:
    """The demo's confirmation of its written run, made in this room: nothing imported from
    outside it, and the run directory verified as ``dpledger verify`` does."""
    from dpledger.cleanroom import verify_room
    from dpledger.cleanroom.room import foreign_modules
    from dpledger.core.errors import LedgerViolationError

    def confirm(out: Path, quiet: bool) -> None:
        problem = foreign_modules(extra)
        if problem:
            raise LedgerViolationError(
                f"the clean room is not clean ({problem}). Fix: reinstall dpledger in a "
                "fresh environment"
            )
        options = {
            "targets": [str(out)],
            "quiet": quiet,
            "plugins_allow": None,
            "plugins_block": None,
        }
        if verify_room.serve({"command": "verify", "options": options, "declarations": []}):
            raise LedgerViolationError(
                f"the clean room did not confirm the run written to {out} (the mismatches are "
                "above). Fix: rerun the demo into a new directory, and report the mismatch"
            )

    return confirm


def serve(request: Mapping[str, Any]) -> int:
    """Run the demo of ``request`` (the options of ``dpledger demo``); the exit code."""
    from dpledger.commands.demo import run_here

    options = request["options"]
    args = argparse.Namespace(
        out=Path(options["out"]),
        quiet=bool(options["quiet"]),
        tiny=bool(options["tiny"]),
        seed=options["seed"],
    )
    code = run_here(args, confirm_here(frozenset(request.get("extra_packages", ()))))
    sys.stdout.flush()
    return code
