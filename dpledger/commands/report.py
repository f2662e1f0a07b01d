"""``dpledger report INPUT --format md|html|json --out PATH``: a privacy report.

INPUT is a pipeline file (``.toml``/``.json``) or a run directory holding ``ledger.json``.
The numbers are those of ``dpledger account INPUT --json --per-release`` (same code path).
``dpledger report --diff A.json B.json`` names what changed between two JSON reports.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from dpledger.commands._shared import (
    add_backends_option,
    add_plugin_options,
    one_line_errors,
    parse_number,
)
from dpledger.core.errors import InvalidParameterError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "report",
        help="privacy report of a pipeline file or a run directory (md, html, json)",
        description="Write a privacy report: formal (epsilon, delta) statement, adjacency, "
        "accounting assumptions, per-release table, every accountant's bracket, audit, "
        "warnings and figures. With --diff, compare two JSON reports.",
    )
    parser.add_argument("input", nargs="?", help="pipeline file or run directory")
    parser.add_argument(
        "--format",
        choices=("md", "html", "json"),
        default="md",
        help="report format: Markdown, self-contained HTML or JSON",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output file (default: print to stdout, without figures for md)",
    )
    query = parser.add_mutually_exclusive_group()
    query.add_argument("--delta", help="report epsilon at this delta (default: the input's)")
    query.add_argument("--epsilon", help="report delta at this epsilon")
    add_backends_option(parser)
    add_plugin_options(parser)
    parser.add_argument(
        "--audit",
        type=Path,
        default=None,
        help="JSON audit result to include (dpledger audit --json)",
    )
    parser.add_argument("--no-figures", action="store_true", help="skip the figures")
    parser.add_argument(
        "--diff",
        nargs=2,
        type=Path,
        metavar=("A", "B"),
        help="compare two JSON reports instead of writing one",
    )
    parser.set_defaults(func=run)
    one_line_errors(parser)


def _load_json(path: Path, option: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidParameterError(
            option, f"cannot read {path}: {exc}", "pass a JSON file written by dpledger"
        ) from None


def _diff(args: argparse.Namespace) -> int:
    from dpledger.report.diff import diff_reports

    a, b = (_load_json(p, "--diff") for p in args.diff)
    result = diff_reports(a, b)
    sys.stdout.write("\n".join(result.lines()) + "\n")
    return 0


def _query(args: argparse.Namespace) -> tuple[float | None, float | None]:
    delta = epsilon = None
    if args.delta is not None:
        delta = parse_number(args.delta, "--delta", "--delta 1e-5")
        if not 0 < delta < 1:
            raise InvalidParameterError(
                "--delta", f"must lie in (0, 1), got {args.delta}", "pass e.g. --delta 1e-5"
            )
    if args.epsilon is not None:
        epsilon = parse_number(args.epsilon, "--epsilon", "--epsilon 1.0")
    return delta, epsilon


#: the options the clean room receives (plain JSON values)
ROOM_OPTIONS = (
    "input",
    "format",
    "delta",
    "epsilon",
    "backends",
    "audit",
    "no_figures",
    "plugins_allow",
    "plugins_block",
)
#: what the report's figures and HTML need beside the accounting packages (where installed)
REPORT_DISTRIBUTIONS = ("matplotlib", "markdown-it-py")


def run(args: argparse.Namespace) -> int:
    if args.diff is not None:
        if args.input is not None:
            raise InvalidParameterError("--diff", "takes no INPUT", "drop INPUT or --diff")
        return _diff(args)
    if args.input is None:
        raise InvalidParameterError(
            "INPUT", "is missing", "pass a pipeline file or a run directory"
        )
    from dpledger.cleanroom.launch import run_for
    from dpledger.cleanroom.tree import dependency_closure

    options = {k: getattr(args, k) for k in ROOM_OPTIONS}
    options["out"] = None if args.out is None else str(args.out)
    options["audit"] = None if args.audit is None else str(args.audit)
    return run_for(args, "report", options, extra=dependency_closure(REPORT_DISTRIBUTIONS))


def certify(args: argparse.Namespace, host: Any, finish: Any) -> int:
    """Build, draw and write the report (run inside the clean room: ``host`` holds the builtin
    plugins and declares third-party methods from their workers' data; ``finish(built)`` adds
    what rests on third-party plugins, or is None while their workers' answers are needed)."""
    from dpledger.report import report_input, write_report
    from dpledger.report.figures import NO_MATPLOTLIB, figures_available, make_figures
    from dpledger.report.write import render

    if args.backends is not None and not args.backends:
        raise InvalidParameterError("--backends", "is empty", "name at least one accountant")
    delta, epsilon = _query(args)
    audit = _load_json(args.audit, "--audit") if args.audit is not None else None
    built = report_input(
        args.input, delta=delta, epsilon=epsilon, backends=args.backends, audit=audit, host=host
    )
    built = finish(built)
    if built is None:
        return -1  # third-party declarations or sections are still needed
    draw = (
        not args.no_figures
        and args.format != "json"
        and (args.out is not None or args.format == "html")
    )
    if draw and not figures_available():
        sys.stderr.write(f"dpledger report: {NO_MATPLOTLIB}\n")
        draw = False
    figures = make_figures(built) if draw else None
    if args.out is None:
        text, _ = render(built, args.format, None, figures=figures)
        sys.stdout.write(text)
        return 0
    written = write_report(built, args.format, args.out, figures=figures)
    for path in written:
        print(f"wrote {path}")
    return 0
