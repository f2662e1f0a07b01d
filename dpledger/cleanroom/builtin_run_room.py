"""``dpledger run`` of a builtin method, whole, inside the clean room.

A builtin method is dpledger's own code, so it runs where the certified numbers are computed:
an isolated interpreter that processed no ``.pth`` file and imported no third-party plugin.
Nothing installed beside dpledger can then change the noise the run draws, its ledger or its
bound. The room reads the config and the data, plans and executes the run through the run
session, stages the run directory, confirms it (:mod:`dpledger.cleanroom.run_room`) and moves
it into place. The room's path holds the distributions the method's own extra names (torch
and POT for the trajectory method, for example), beside the accounting ones.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

__all__ = ["method_packages", "room_options", "serve"]


def method_packages(run_module: str) -> tuple[str, ...]:
    """Top-level packages a builtin method's run may import beyond the accounting ones: what
    its plugin's extra of dpledger installs (plugin package ``dpledger.plugins.NAME``, extra
    ``NAME``)."""
    from dpledger.cleanroom.tree import extras_closure

    parts = run_module.split(".")
    if parts[:2] != ["dpledger", "plugins"] or len(parts) < 3:
        return ()
    return extras_closure((parts[2],))


def room_options(args: argparse.Namespace) -> dict[str, Any]:
    """The options of ``dpledger run`` the room needs, as JSON values."""
    return {
        "method": args.method,
        "config": str(args.config),
        "out": str(args.out),
        "seed": args.seed,
        "secure": bool(args.secure),
        "data": None if args.data is None else str(args.data),
        "delta": args.delta,
        "plugins_timeout": getattr(args, "plugins_timeout", None),
        "booking": getattr(args, "booking", None),
    }


def _args(options: Mapping[str, Any]) -> argparse.Namespace:
    return argparse.Namespace(
        method=options["method"],
        config=Path(options["config"]),
        out=Path(options["out"]),
        seed=options["seed"],
        secure=bool(options["secure"]),
        data=None if options["data"] is None else Path(options["data"]),
        delta=options["delta"],
        plugins_allow=options.get("plugins_allow"),
        plugins_block=options.get("plugins_block"),
        plugins_timeout=options.get("plugins_timeout"),
        booking=options.get("booking"),
    )


def _confirm_here(args: argparse.Namespace, extra: frozenset[str]) -> Callable[[Path], None]:
    """The room's confirmation of the staged run, made in this room (see ``run_room``), once
    it has checked that the run imported nothing from outside the room."""
    from dpledger.cleanroom import run_room
    from dpledger.cleanroom.room import NOT_ISOLATED, foreign_modules
    from dpledger.commands.run import RunRefused

    def certify(staged: Path) -> None:
        problem = foreign_modules(extra)
        if problem:  # checked before anything is moved into place
            sys.stderr.write(f"dpledger run: error: the clean room is not clean ({problem})\n")
            raise RunRefused(NOT_ISOLATED)
        options = {
            "staged": str(staged),
            "out": str(args.out),
            "plugins_allow": args.plugins_allow,
            "plugins_block": args.plugins_block,
        }
        code = run_room.serve({"command": "certify_run", "options": options, "declarations": []})
        if code != 0:
            raise RunRefused(code)

    return certify


def serve(request: Mapping[str, Any]) -> int:
    """Run the builtin method of ``request`` (see the module docstring); the exit code."""
    from dpledger.cleanroom.resolver import builtin_host, names
    from dpledger.commands._inputs import read_config
    from dpledger.commands.run import run_here

    args = _args(request["options"])
    host = builtin_host(names(args.plugins_allow), names(args.plugins_block))
    extra = frozenset(request.get("extra_packages", ()))
    return run_here(args, read_config(args.config), host, _confirm_here(args, extra))
