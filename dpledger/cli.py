"""The ``dpledger`` command line.

Each sub-command lives in its own module under :mod:`dpledger.commands` and exposes
``register(subparsers)``; the module's parser sets ``func(args) -> int``.
Errors that are the user's (bad input) print one line and exit with code 2, no traceback.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from dpledger import __version__
from dpledger.core.errors import DPLedgerError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dpledger", description="How much privacy does this pipeline spend?"
    )
    parser.add_argument("--version", action="version", version=f"dpledger {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    import dpledger.commands as commands

    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"dpledger.commands.{info.name}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return int(args.func(args))
    except DPLedgerError as exc:
        print(f"dpledger {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as exc:
        print(f"dpledger {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
