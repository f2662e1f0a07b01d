"""What the commands share: one-line usage errors, number options, backend and plugin flags.

A command imports these from here, never from another command.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, NoReturn

from dpledger.core.errors import InvalidParameterError

if TYPE_CHECKING:  # the plugin host loads when a command runs
    from dpledger.runtime.plugin_manager import PluginHost

__all__ = [
    "add_backends_option",
    "add_plugin_options",
    "backend_names",
    "host_from_args",
    "one_line_errors",
    "parse_number",
]


def one_line_errors(parser: argparse.ArgumentParser) -> None:
    """Usage errors print one line (no usage block) and exit with code 2."""

    def error(message: str) -> NoReturn:
        sys.stderr.write(f"{parser.prog}: error: {message}. Fix: see {parser.prog} --help\n")
        raise SystemExit(2)

    parser.error = error  # type: ignore[method-assign]


def backend_names(text: str) -> list[str]:
    """Accountant names from one ``--backends`` value (comma-separated)."""
    names = [n.strip() for n in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"empty accountant name in {text!r}")
    return names


def add_backends_option(parser: argparse.ArgumentParser) -> None:
    """``--backends pld,rdp`` (repeatable); a comma list never swallows the positional file."""
    parser.add_argument(
        "--backends",
        type=backend_names,
        action="extend",
        metavar="NAME[,NAME...]",
        help="only use these accountants, comma-separated (e.g. pld,rdp; default: all of "
        "closed_form, pld, rdp, prv)",
    )


def parse_number(text: str, option: str, example: str) -> float:
    """A float from the command line, or an error naming the option."""
    try:
        return float(text)
    except ValueError:
        raise InvalidParameterError(
            option, f"expected a number, got {text!r}", f"pass {example}"
        ) from None


def add_plugin_options(parser: argparse.ArgumentParser) -> None:
    """The plugin-loading flags shared by every command that loads plugins."""
    group = parser.add_argument_group("plugin loading")
    group.add_argument(
        "--plugins-allow",
        metavar="NAMES",
        default=None,
        help="load only these plugins or distributions (comma-separated; "
        "default: $DPLEDGER_PLUGINS_ALLOW, else all)",
    )
    group.add_argument(
        "--plugins-block",
        metavar="NAMES",
        default=None,
        help="never load these plugins or distributions (comma-separated; "
        "default: $DPLEDGER_PLUGINS_BLOCK)",
    )
    group.add_argument(
        "--plugins-trace",
        action="store_true",
        help="trace plugin loading and hook calls to stderr (also: DPLEDGER_PLUGINS_TRACE=1)",
    )
    group.add_argument(
        "--plugins-timeout",
        metavar="SECONDS",
        default=None,
        help="time limit of the check of one third-party distribution in a subprocess "
        "(default: $DPLEDGER_PLUGINS_TIMEOUT, else 30)",
    )


def host_from_args(args: argparse.Namespace, *, on_demand: bool = False) -> PluginHost:
    """The host the plugin-loading flags ask for; ``on_demand`` loads third-party plugins only
    when a method or mechanism that no builtin plugin provides is needed."""
    from dpledger.runtime.plugin_manager import host_from_options

    return host_from_options(
        allow=args.plugins_allow,
        block=args.plugins_block,
        trace=bool(args.plugins_trace),
        on_demand=on_demand,
        timeout=getattr(args, "plugins_timeout", None),
    )
