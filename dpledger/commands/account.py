"""``dpledger account FILE``: the certified privacy cost of a pipeline file."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dpledger.commands._account_units import (
    adjacency_lines,
    method_units,
    source_units,
    unit_text,
    with_method_units,
)
from dpledger.commands._shared import (
    add_backends_option,
    add_plugin_options,
    one_line_errors,
    parse_number,
)
from dpledger.core.errors import InvalidParameterError
from dpledger.core.validation import DEFAULT_DELTA, check_delta_query, check_epsilon_query

if TYPE_CHECKING:  # the graph (networkx) and the plugin host load when a command runs
    from dpledger.accountant.graph_account import GraphAccount
    from dpledger.runtime.pipeline import MethodResolver, Pipeline


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "account",
        help="certified epsilon (or delta) of a pipeline file",
        description="Reduce a pipeline file (TOML or JSON) to per-source events and report "
        "the smallest certified upper bound over the available accountants.",
    )
    parser.add_argument(
        "file",
        help="pipeline file (.toml or .json), or a dp-accounting DpEvent as JSON (its "
        "named-tuple form, as objects or as json.dump writes it)",
    )
    query = parser.add_mutually_exclusive_group()
    query.add_argument("--delta", help="report epsilon at this delta (default: file's, or 1e-5)")
    query.add_argument("--epsilon", help="report delta at this epsilon")
    parser.add_argument("--json", action="store_true", help="print JSON")
    add_backends_option(parser)
    add_plugin_options(parser)
    parser.add_argument(
        "--per-release", action="store_true", help="also bound each release on its own"
    )
    parser.add_argument(
        "--crosscheck",
        action="store_true",
        help="run every independent accountant in full (slower; default: only where cheap)",
    )
    parser.add_argument(
        "--to-dp-event",
        action="store_true",
        help="print each source's composed event as a dp-accounting DpEvent (JSON) instead of "
        "a bound",
    )
    parser.set_defaults(func=run)
    one_line_errors(parser)


def _query(
    args: argparse.Namespace, file_delta: float | None, file_eps: float | None
) -> tuple[float | None, float | None]:
    if args.delta is not None:
        delta = parse_number(args.delta, "--delta", "--delta 1e-5")
        if not 0 < delta < 1:
            raise InvalidParameterError(
                "--delta", f"must lie in (0, 1), got {args.delta}", "pass e.g. --delta 1e-5"
            )
        return check_delta_query(delta), None
    if args.epsilon is not None:
        eps = parse_number(args.epsilon, "--epsilon", "--epsilon 1.0")
        if not math.isfinite(eps):
            raise InvalidParameterError(
                "--epsilon", f"must be finite, got {args.epsilon}", "pass e.g. --epsilon 1.0"
            )
        return None, check_epsilon_query(eps)
    if file_eps is not None:
        return None, file_eps
    return (file_delta if file_delta is not None else DEFAULT_DELTA), None


def _check_backends(names: list[str]) -> None:
    from dpledger.accountant.select import backend_factories

    known = sorted({name for name, _, _ in backend_factories()})
    for name in names:
        if name not in known:
            raise InvalidParameterError(
                "--backends", f"unknown accountant {name!r}", f"use some of {known}"
            )


def _load(path: str, resolver: MethodResolver) -> Pipeline:
    """A pipeline file, or a dp-accounting ``DpEvent`` in its named-tuple JSON form."""
    from dpledger.integrations.dp_accounting import load_pipeline_or_dp_event

    return load_pipeline_or_dp_event(path, resolver)  # type: ignore[no-any-return]


#: the options the clean room receives (plain JSON values)
ROOM_OPTIONS = (
    "file",
    "delta",
    "epsilon",
    "json",
    "backends",
    "per_release",
    "crosscheck",
    "plugins_allow",
    "plugins_block",
    "to_dp_event",
)
#: the options that only shape a bound (refused with ``--to-dp-event``, which prints events)
_BOUND_OPTIONS = ("delta", "epsilon", "backends", "per_release", "crosscheck")


def run(args: argparse.Namespace) -> int:
    """Certify in the clean room: this process parses nothing and prints nothing itself."""
    from dpledger.cleanroom.launch import run_for

    if args.to_dp_event:
        given = [f"--{k.replace('_', '-')}" for k in _BOUND_OPTIONS if getattr(args, k)]
        if given:
            raise InvalidParameterError(
                "--to-dp-event",
                f"prints events, not a bound: {', '.join(given)} "
                + ("does" if len(given) == 1 else "do")
                + " not apply",
                f"drop {', '.join(given)}, or --to-dp-event",
            )
    return run_for(args, "account", {k: getattr(args, k) for k in ROOM_OPTIONS})


def certify(
    args: argparse.Namespace, pipeline: Pipeline, rests_on: list[str], host: Any = None
) -> int:
    """Account a loaded pipeline and print the bound (run inside the clean room); ``host``
    (the builtin plugins) states the unit a method bounds itself."""
    from dpledger.accountant.graph_account import account_graph
    from dpledger.accountant.select import crosscheck_mode

    if getattr(args, "to_dp_event", False):
        return _print_dp_events(pipeline, rests_on)

    delta, epsilon = _query(args, pipeline.delta, pipeline.epsilon)
    if args.backends is not None:
        _check_backends(args.backends)
    with crosscheck_mode(args.crosscheck):
        result = account_graph(
            pipeline.graph,
            delta=delta,
            epsilon=epsilon,
            backends=args.backends,
            per_release=args.per_release,
        )
    units = method_units(pipeline, result, host)
    if args.json:
        from dpledger.runtime.jsonform import json_safe

        out = with_method_units(result.to_dict(), result, units)
        out["pipeline"] = pipeline.name
        out["file"] = pipeline.origin
        if rests_on:
            out["rests_on"] = list(rests_on)
        json.dump(json_safe(out), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        name = pipeline.name or pipeline.origin
        sys.stdout.write(format_account(result, name, rests_on, units))
    return 0


def _print_dp_events(pipeline: Pipeline, rests_on: list[str]) -> int:
    """``--to-dp-event``: each source's composed event as a dp-accounting DpEvent (JSON)."""
    from dpledger.integrations.dp_accounting import pipeline_dp_events
    from dpledger.runtime.jsonform import json_safe

    out: dict[str, Any] = {"pipeline": pipeline.name, "file": pipeline.origin}
    if rests_on:
        out["rests_on"] = list(rests_on)
    out["sources"] = pipeline_dp_events(pipeline)
    json.dump(json_safe(out), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


def _bound_line(b: Any) -> str:
    """The bound for people: upper rounded up, lower rounded down (the JSON keeps them exact)."""
    from dpledger.report.numbers import fmt_down, fmt_up

    d = b.to_dict()
    eps_query = "epsilon_lower" in d
    value, lower = (
        (d["epsilon"], d["epsilon_lower"]) if eps_query else (d["delta"], d["delta_lower"])
    )
    low = f"lower bound {fmt_down(lower)}" if lower > 0 else "no lower bound certified"
    if eps_query:
        return (
            f"epsilon <= {fmt_up(value)} at delta = {d['delta']:g} "
            f"(certified upper bound; {low}; method {d['method']})"
        )
    return (
        f"delta <= {fmt_up(value)} at epsilon = {d['epsilon']:g} "
        f"(certified upper bound; {low}; method {d['method']})"
    )


def format_account(
    result: GraphAccount,
    name: str,
    rests_on: Sequence[str] = (),
    units: Mapping[str, str] | None = None,
) -> str:
    """A readable summary: overall bound (and the third-party declarations it rests on), per
    source, per release with lifting rules; ``units``: per release, the unit its method bounds
    itself (:func:`method_units`)."""
    from dpledger.core.lifting import RULE_TEXT

    units = units or {}
    covered = source_units(result, units)
    lines = [f"pipeline: {name}", _bound_line(result.bound)]
    lines.extend(f"rests on: {line}" for line in rests_on)
    lines.extend(adjacency_lines(result, covered))
    if len(result.sources) > 1:
        lines.append(f"sources combined: {result.combined}")
    lines.append("sources:")
    for s in result.sources:
        red = s.reduction
        if len(result.sources) > 1:
            lines.append(f"  {red.source}: {_bound_line(s.bound)}")
            lines.append(f"    adjacency: {covered.get(red.source, red.adjacency.describe())}")
        else:
            lines.append(f"  {red.source}: the only source (its bound is the pipeline's)")
        if len(red.alternatives) > 1:
            lines.append(
                f"    parallel composition: worst of {len(red.alternatives)} cell alternatives"
            )
        lines.extend(f"    note: {n}" for n in red.notes)
    lines.append("releases:")
    for r in result.releases:
        meta = [f"source {r.source}", f"{r.declared_unit} level", f"count {r.count}"]
        if r.max_contributions > 1:
            meta.append(f"up to {r.max_contributions} rows per user")
        if r.method:
            meta.append(f"method {r.method}")
        if r.plugin:
            meta.append(f"plugin {r.plugin}")
        lines.append(f"  {r.release_id} [{', '.join(meta)}]")
        if r.release_id in units:
            lines.append(f"    unit: {unit_text(r, units, covered)}")
        lines.append(f"    event: {r.event.describe()}")
        if r.lifted != r.event:
            lines.append(f"    lifted: {r.lifted.describe()}")
        lines.extend(
            f"    lifting: {rule}: {RULE_TEXT.get(rule, 'see core/lifting.py')}"
            for rule in dict.fromkeys(r.rules)
        )
        if r.release_id in result.release_bounds:
            lines.append(f"    alone: {_bound_line(result.release_bounds[r.release_id])}")
    return "\n".join(lines) + "\n"
