"""``dpledger verify RUN_DIR | FILE``: recompute every certified number in a clean room."""

from __future__ import annotations

import argparse
from typing import Any

from dpledger.commands._shared import add_plugin_options, one_line_errors


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "verify",
        help="recompute a run directory's or a pipeline file's certified numbers in a clean room",
        description="Recompute, in an isolated interpreter that loads no third-party code, the "
        "certified bound of a run directory (and check its seal, its accounted event and that "
        "its executed steps are covered by its declaration) or of a pipeline file. Exit code 1 "
        "names every mismatch.",
    )
    parser.add_argument(
        "targets",
        nargs="+",
        metavar="RUN_DIR|FILE",
        help="run directories or pipeline files (each checked on its own)",
    )
    add_plugin_options(parser)
    parser.set_defaults(func=run)
    one_line_errors(parser)


def run(args: argparse.Namespace) -> int:
    from dpledger.cleanroom.launch import run_for

    return run_for(args, "verify", {"targets": list(args.targets)})
