"""``dpledger run METHOD --config FILE --out DIR``: run a method under a verified privacy ledger.

The run use case is :mod:`dpledger.runtime.session`: the declaration is made once and accounted
before any noise is drawn, the method runs under a ledger that checks every step, and the
public record is built from both. Outputs and ``ledger.json`` are written to a temporary
directory beside ``--out``, confirmed by the clean room, and moved into place only when
everything has passed, so a failed run leaves nothing behind. The private diagnostics (the
seed, realised sizes) go to the directory ``OUT.private`` beside ``--out``, never into it.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from dpledger.commands._budget_run import add_budget_options, book_run
from dpledger.commands._inputs import (
    data_path_of,
    load_data,
    params_table,
    parse_adjacency,
    query_delta,
    read_config,
)
from dpledger.commands._shared import add_plugin_options, host_from_args
from dpledger.core.adjacency import Adjacency
from dpledger.core.declaration import Declaration, stated_for_unit, unit_adjacency
from dpledger.core.events import Event
from dpledger.core.printed_numbers import fmt_up
from dpledger.core.validation import DEFAULT_DELTA
from dpledger.runtime.run_record import RunRecord, check_run_dirs_free, private_dir

if TYPE_CHECKING:  # the accountant and the run session load where a run is made, not to parse
    from dpledger.accountant.select import Selection

__all__ = [
    "RunRefused",
    "account_declaration",
    "clean_room_certifier",
    "headline",
    "main",
    "publish",
    "register",
]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run a method under a verified privacy ledger",
        description="Run METHOD on data, verify its ledger, account it and write the outputs.",
    )
    parser.add_argument("method", metavar="METHOD", help="method name (see `dpledger plugins`)")
    parser.add_argument(
        "--config",
        required=True,
        type=Path,
        help="TOML or JSON file: [params], data = 'file', [adjacency], delta",
    )
    parser.add_argument(
        "--out", required=True, type=Path, help="output directory (must not exist or be empty)"
    )
    parser.add_argument("--seed", type=int, default=None, help="seed of the noise generator")
    parser.add_argument(
        "--secure",
        action="store_true",
        help="seed from the OS CSPRNG (no replay; floating-point caveats remain)",
    )
    parser.add_argument("--data", type=Path, default=None, help="data file (overrides the config)")
    parser.add_argument(
        "--delta",
        type=float,
        default=None,
        help="delta at which epsilon is reported (default: the config's "
        f"delta, else the method's own delta parameter, else {DEFAULT_DELTA})",
    )
    add_plugin_options(parser)
    add_budget_options(parser)
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    check_run_dirs_free(args.out)
    config = read_config(args.config)
    host = host_from_args(args, on_demand=True)
    booked = getattr(args, "budget", None) is not None
    if booked and args.method in host.methods():  # booked before any noise and any data
        book_run(args, config, host)
    if args.method not in host.methods():  # third-party: its run() executes in its own process
        # (booked once its worker's declaration is accounted, before the data is read)
        from dpledger.cleanroom.third_party_run import run_third_party

        return run_third_party(args, config, host)
    spec = host.method(args.method)
    if is_builtin(spec):  # dpledger's own method runs whole in the clean room
        from dpledger.cleanroom.builtin_run_room import method_packages, room_options
        from dpledger.cleanroom.launch import run_for

        options = room_options(args)
        return run_for(args, "run_builtin", options, extra=method_packages(spec.run.__module__))
    return run_here(args, config, host, clean_room_certifier(args))


def is_builtin(spec: Any) -> bool:
    """Whether ``spec`` is one of dpledger's own methods (its code is in this package)."""
    provenance = spec.provenance
    module = getattr(spec.run, "__module__", "") or ""
    return bool(
        provenance is not None
        and provenance.distribution == "dpledger"
        and module.startswith("dpledger.plugins.")
    )


def run_here(
    args: argparse.Namespace, config: Mapping[str, Any], host: Any, certify: Callable[[Path], None]
) -> int:
    """Plan, execute and publish a run of ``args.method`` in this process through the run
    session; ``certify`` confirms the staged run directory before it is moved into place."""
    from dpledger.runtime import session

    spec = host.method(args.method)
    params = spec.make_params(params_table(config))
    adjacency = parse_adjacency(config)
    delta = query_delta(args, config, getattr(params, "delta", None))
    data_path = data_path_of(args, config)
    data = load_data(data_path) if data_path is not None else None
    # one frozen declaration, accounted before any noise is drawn, enforced by the ledger and
    # written to the run record: declare() is called exactly once
    plan = session.plan(spec, params, adjacency, host.lower, delta=delta)
    result = session.execute(plan.declared, data, seed=args.seed, secure=args.secure)
    record = attrs.evolve(session.record(plan, result), budget=getattr(args, "booking", None))
    return publish(args, record, result, certify=certify)


def account_declaration(
    host: Any, declaration: Declaration, adjacency: Adjacency, *, method: str, delta: float
) -> tuple[Event, tuple[str, ...], Selection]:
    """A declaration made elsewhere (a third-party method's, by a worker) stated per privacy
    unit, the lifting rules used, and its certified bound."""
    from dpledger.accountant import select

    core_event = host.lower(declaration.event, adjacency)
    per_unit, rules = stated_for_unit(core_event, declaration.unit, adjacency, release=method)
    return per_unit, rules, select.account(per_unit, unit_adjacency(adjacency), delta=delta)


def publish(
    args: argparse.Namespace,
    record: RunRecord,
    result: Any,
    per_unit: Event | None = None,
    rules: tuple[str, ...] = (),
    selection: Selection | None = None,
    *,
    replies: Sequence[Mapping[str, Any]] = (),
    certify: Callable[[Path], None] | None = None,
) -> int:
    """Write a verified run's outputs and record, once the clean room has confirmed them
    (``per_unit``, ``rules``, ``selection``: the accounting of a record built without it;
    ``replies``: third-party declarations already made by a worker, handed to the room;
    ``certify``: the confirmation, by default a clean room's)."""
    from dpledger.runtime import session
    from dpledger.runtime.run_dir import write_run_dir

    if per_unit is not None and selection is not None:
        record = attrs.evolve(
            record,
            accounted={"event": per_unit.to_dict(), "lift_rules": list(rules)},
            privacy=session.privacy_section(selection),
        )
    private = {"seed": args.seed, **result.ledger.private_dict()}
    try:
        write_run_dir(
            args.out,
            result.outputs,
            record,
            private,
            certify=certify or clean_room_certifier(args, replies),
        )
    except RunRefused as refused:
        return refused.code
    return 0


class RunRefused(Exception):
    """The clean room did not confirm a staged run (it has said why); nothing is published."""

    def __init__(self, code: int) -> None:
        super().__init__(f"refused with exit code {code}")
        self.code = code


def clean_room_certifier(
    args: argparse.Namespace, replies: Sequence[Mapping[str, Any]] = ()
) -> Callable[[Path], None]:
    """The clean room's confirmation of a run staged for ``args.out``: it makes the
    declaration again, recomputes the bound, writes the record's privacy section and seal, and
    prints the run's line; :class:`RunRefused` if it does not confirm the run."""
    from dpledger.cleanroom.launch import run_in_clean_room

    out, allow, block = args.out, args.plugins_allow, args.plugins_block
    timeout = args.plugins_timeout

    def certify(staged: Path) -> None:
        options = {
            "staged": str(staged),
            "out": str(out),
            "plugins_allow": allow,
            "plugins_block": block,
        }
        code = run_in_clean_room(
            "certify_run", options, allow=allow, block=block, timeout=timeout, given=replies
        )
        if code != 0:
            raise RunRefused(code)

    return certify


def headline(
    method: str,
    bound: Mapping[str, Any],
    delta: float,
    adjacency: Adjacency,
    out: Path,
    protects: str | None = None,
) -> str:
    """The one line ``dpledger run`` prints: the certified bound, or that there is none; the
    unit is the one the method bounds itself (``protects``), else the adjacency's."""
    eps = bound.get("epsilon")
    where = f"{bound.get('method')}, {protects or adjacency.describe()}"
    if not isinstance(eps, int | float) or not math.isfinite(eps):
        return (
            f"{method}: verified; NO privacy guarantee (epsilon unbounded at "
            f"delta={delta}; {where}); wrote {out} (private diagnostics: {private_dir(out)})"
        )
    return (
        f"{method}: verified; epsilon <= {fmt_up(float(eps))} at delta={delta} ({where}); "
        f"wrote {out} (private diagnostics, never to publish: {private_dir(out)})"
    )
