"""The ``dpledger`` command line.

Each sub-command lives in its own module under :mod:`dpledger.commands` and exposes
``register(subparsers)``; the module's parser sets ``func(args) -> int``.
Errors that are the user's (bad input) print one line and exit with code 2, no traceback.

Only the module of the command that runs is imported: ``dpledger --version`` and
``dpledger --help`` import none (the overview lists :data:`COMMANDS`), so they start without
numpy, scipy or networkx.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
from collections.abc import Callable, Sequence
from typing import Any

from dpledger import __version__
from dpledger.core.errors import DPLedgerError

#: one-line help of each command, as its module registers it (a test keeps them equal);
#: a command module missing here is imported to register itself
COMMANDS: dict[str, str] = {
    "account": "certified epsilon (or delta) of a pipeline file",
    "audit": "empirical epsilon lower bound vs the accountant's certified epsilon",
    "budget": "a persistent privacy budget: declare totals, book runs, check the history",
    "calibrate": "smallest Gaussian noise multiplier meeting an (epsilon, delta) target",
    "demo": "end-to-end demo: account a pipeline, run private trajectories, write a report",
    "plugins": "list installed plugins, their methods, mechanisms and problems",
    "report": "privacy report of a pipeline file or a run directory (md, html, json)",
    "run": "run a method under a verified privacy ledger",
    "verify": "recompute a run directory's or a pipeline file's certified numbers in a clean room",
}


def _command_names() -> list[str]:
    import dpledger.commands as commands

    # modules named with a leading underscore hold what the commands share, not a command
    return sorted(
        info.name
        for info in pkgutil.iter_modules(commands.__path__)
        if not info.name.startswith("_")
    )


class DefaultsFormatter(argparse.HelpFormatter):
    """Help that states every option's default (unless the text already does, or there is
    none to state)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            not action.option_strings
            or default is None
            or default is False
            or default == argparse.SUPPRESS
            or "default" in text.lower()
        ):
            return text
        return f"{text} (default: %(default)s)"


class _CommandParser(argparse.ArgumentParser):
    """A command's parser: help lists defaults."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", DefaultsFormatter)
        super().__init__(*args, **kwargs)


def _top_parser() -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:  # type: ignore[type-arg]
    parser = argparse.ArgumentParser(
        prog="dpledger", description="How much privacy does this pipeline spend?"
    )
    parser.add_argument("--version", action="version", version=f"dpledger {__version__}")
    subparsers = parser.add_subparsers(
        dest="command", metavar="COMMAND", parser_class=_CommandParser
    )
    return parser, subparsers


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The full parser (every command registered), or the parser of command ``only`` with the
    other commands listed by name and help."""
    parser, subparsers = _top_parser()
    for name in _command_names():
        if only is None or name == only or name not in COMMANDS:
            module = importlib.import_module(f"dpledger.commands.{name}")
            module.register(subparsers)
        else:
            subparsers.add_parser(name, help=COMMANDS[name], add_help=False)
    return parser


def _chosen(argv: Sequence[str]) -> str | None:
    """The command named on the command line (the first argument that is not an option)."""
    for token in argv:
        if not token.startswith("-"):
            return token
        if token == "--":
            return None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args_in = list(sys.argv[1:] if argv is None else argv)
    command = _chosen(args_in)
    parser = build_parser(only=command if command in COMMANDS else "")
    args = parser.parse_args(args_in)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    return guarded(str(args.command), lambda: int(args.func(args)))


def guarded(command: str, call: Callable[[], int]) -> int:
    """Run one command: the user's errors print one line (exit code 2), others one line
    asking for a report (exit code 3), never a traceback unless DPLEDGER_TRACEBACK=1."""
    try:
        return int(call())
    except DPLedgerError as exc:
        print(f"dpledger {command}: error: {exc}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as exc:
        print(f"dpledger {command}: error: {exc}", file=sys.stderr)
        return 2
    except (ArithmeticError, RecursionError, MemoryError) as exc:
        print(
            f"dpledger {command}: error: the input is beyond what can be computed "
            f"({type(exc).__name__}: {_first_line(exc)}). Fix: use smaller counts, fewer "
            "nested events or less extreme parameters",
            file=sys.stderr,
        )
        return 2
    except Exception as exc:
        if os.environ.get("DPLEDGER_TRACEBACK") == "1":
            raise
        print(
            f"dpledger {command}: internal error ({type(exc).__name__}: "
            f"{_first_line(exc)}). Fix: rerun with DPLEDGER_TRACEBACK=1 and report the "
            "traceback with the input",
            file=sys.stderr,
        )
        return 3


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else "no message"


if __name__ == "__main__":
    raise SystemExit(main())
