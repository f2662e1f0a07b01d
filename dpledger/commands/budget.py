"""``dpledger budget init | status | log | check | book | migrate``: a persistent privacy budget.

A store (a SQLite file, or a ``postgresql://`` URL) holds per protected source and privacy
unit a declared total (epsilon, delta) and the rule that composes its bookings; runs book
their certified declared event before any noise is drawn (``dpledger run --budget STORE``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from dpledger.commands._shared import one_line_errors, parse_number
from dpledger.core.errors import InvalidParameterError
from dpledger.core.printed_numbers import fmt_up

HELP = "a persistent privacy budget: declare totals, book runs, check the history"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "budget", help=HELP, description=HELP + " (SQLite file or postgresql:// URL)"
    )
    one_line_errors(parser)
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    _init_parser(sub)
    for name, helptext in (
        ("status", "remaining budget per source, rule and theorem, runs; chain check"),
        ("log", "every entry of the chain, in order (with a booked run's directory)"),
        ("migrate", "bring an older store's schema up to this dpledger's"),
    ):
        p = sub.add_parser(name, help=helptext, description=helptext)
        p.add_argument("store", metavar="STORE", help="SQLite file or postgresql:// URL")
        p.add_argument("--json", action="store_true", help="print JSON")
        one_line_errors(p)
    sub.choices["status"].add_argument(
        "--report", type=Path, default=None, help="also write budget.md/json and spend.png here"
    )
    sub.choices["log"].add_argument("--source", default=None, help="only this source")
    for name, helptext in (
        ("check", "would this event fit now? (books nothing)"),
        ("book", "book an event (stated per privacy unit) against a source"),
    ):
        p = sub.add_parser(name, help=helptext, description=helptext)
        p.add_argument("store", metavar="STORE", help="SQLite file or postgresql:// URL")
        p.add_argument("--source", required=True, help="the protected source")
        p.add_argument("--unit", default="row", help="the privacy unit")
        p.add_argument("--event", required=True, help="a JSON event, or a file holding one")
        p.add_argument("--json", action="store_true", help="print JSON")
        one_line_errors(p)
    sub.choices["book"].add_argument("--run-id", default=None, help="id recorded in the entry")
    parser.set_defaults(func=main)


def _init_parser(sub: Any) -> None:
    p = sub.add_parser(
        "init",
        help="create a store and declare a source's total",
        description="Create the store if it does not exist and declare the total of a source.",
    )
    p.add_argument("store", metavar="STORE", help="SQLite file or postgresql:// URL")
    p.add_argument("--source", default=None, help="the protected source to declare")
    p.add_argument("--unit", default="row", help="the privacy unit (row, or user)")
    p.add_argument("--epsilon", default=None, help="total epsilon")
    p.add_argument("--delta", default=None, help="total delta")
    p.add_argument(
        "--rule",
        default="renyi",
        choices=("pld", "renyi", "approx", "gdp"),
        help="pld: a sequence fixed in advance; renyi, approx, gdp: filters for adaptive ones",
    )
    p.add_argument(
        "--relation",
        default="add_remove",
        choices=("add_remove", "replace_one"),
        help="the neighbouring relation the booked events are stated under",
    )
    p.add_argument("--orders", default=None, help="renyi: comma-separated orders > 1")
    p.add_argument("--delta-tail", default=None, help="approx: the delta of the tail bound")
    p.add_argument("--step-delta", default=None, help="approx: each booking's delta")
    p.add_argument(
        "--odometer-delta",
        default=None,
        help="renyi, approx, gdp: the delta the certified spend so far is stated at",
    )
    p.add_argument(
        "--odometer-rho",
        default=None,
        help="approx, gdp: the variance the odometer's boundary is tuned for",
    )
    one_line_errors(p)


def main(args: argparse.Namespace) -> int:
    action: str = args.action
    return int(globals()[f"_{action}"](args))


def _params(args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if args.orders is not None:
        out["orders"] = [
            parse_number(x, "--orders", "--orders 2,4,8") for x in args.orders.split(",")
        ]
    if args.delta_tail is not None:
        out["delta_tail"] = parse_number(args.delta_tail, "--delta-tail", "--delta-tail 5e-7")
    if args.step_delta is not None:
        out["step_delta"] = parse_number(args.step_delta, "--step-delta", "--step-delta 1e-12")
    if args.odometer_delta is not None:
        out["odometer_delta"] = parse_number(
            args.odometer_delta, "--odometer-delta", "--odometer-delta 1e-6"
        )
    if args.odometer_rho is not None:
        out["odometer_rho"] = parse_number(args.odometer_rho, "--odometer-rho", "--odometer-rho 1")
    return out


def _init(args: argparse.Namespace) -> int:
    from dpledger.budget import store
    from dpledger.budget.backend import is_url

    declaring = args.source is not None
    if declaring:
        if args.epsilon is None or args.delta is None:
            raise InvalidParameterError(
                "--epsilon", "a declaration needs --epsilon and --delta", "pass both"
            )
        eps = parse_number(args.epsilon, "--epsilon", "--epsilon 1.0")
        delta = parse_number(args.delta, "--delta", "--delta 1e-6")
        store.check_declaration(
            args.source, args.unit, eps, delta, args.rule, args.relation, _params(args)
        )
    fresh = not is_url(args.store) and not Path(args.store).exists()
    if fresh or is_url(args.store):
        store.init(args.store)
    try:
        if declaring:
            budget = store.declare(
                args.store,
                args.source,
                args.unit,
                epsilon=eps,
                delta=delta,
                rule=args.rule,
                relation=args.relation,
                params=_params(args),
            )
            print(
                f"declared {budget.source}/{budget.unit}: epsilon={eps}, delta={delta}, "
                f"rule {budget.rule} in {args.store}"
            )
        else:
            print(f"budget store ready: {args.store}")
    except BaseException:
        if fresh:
            Path(args.store).unlink(missing_ok=True)
        raise
    return 0


def _status(args: argparse.Namespace) -> int:
    from dpledger.budget.report import status_lines, write_report
    from dpledger.budget.status import status

    report = status(args.store)
    if args.report is not None:
        write_report(report, args.store, args.report)
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        print("\n".join(status_lines(report)))
    return 0 if report["chain"]["ok"] else 1


def _log(args: argparse.Namespace) -> int:
    from dpledger.budget.store import entries, open_store

    conn = open_store(args.store)
    try:
        rows = entries(conn, args.source)
    finally:
        conn.close()
    if args.json:
        print(json.dumps(rows, indent=2, sort_keys=True))
        return 0
    for e in rows:
        print(
            f"{e['seq']}\t{e['kind']}\t{e['source']}/{e['unit']}\trun {e['run_id']}\t"
            f"{_run_dir(e)}{e['booked_at']}\t"
            f"{e['event'] if e['kind'] == 'book' else e['parameters']}"
        )
    return 0


def _run_dir(entry: dict[str, Any]) -> str:
    """``dir OUT`` and a tab for a booking made by ``dpledger run`` (it records its output
    directory), else nothing."""
    try:
        out = json.loads(entry["parameters"]).get("out")
    except (ValueError, AttributeError):
        return ""
    return f"dir {out}\t" if isinstance(out, str) and out else ""


def _migrate(args: argparse.Namespace) -> int:
    from dpledger.budget.backend import connect
    from dpledger.budget.schema import apply_migrations, version_of

    conn = connect(args.store)
    try:
        if version_of(conn) is None:
            raise InvalidParameterError(
                "STORE", f"{args.store} is not a dpledger budget store", "name a store"
            )
        print(f"{args.store}: schema version {apply_migrations(conn)}")
    finally:
        conn.close()
    return 0


def _event(text: str) -> Any:
    from dpledger.core.event_parser import event_from_dict

    path = Path(text)
    source = path.read_text() if not text.lstrip().startswith("{") and path.is_file() else text
    try:
        data = json.loads(source)
    except json.JSONDecodeError as exc:
        raise InvalidParameterError(
            "--event",
            f"not JSON ({exc.msg})",
            'pass e.g. {"kind": "gaussian", "noise_multiplier": 10} or a file holding it',
        ) from None
    return event_from_dict(data, path="--event")


def spent_text(spent: dict[str, Any], odometer: dict[str, Any] | None) -> str:
    """The spend after a booking: certified, or the filter's statistic labelled as not
    certified beside the odometer's certified spend so far."""
    if spent["certified"]:
        return f"epsilon <= {fmt_up(spent['epsilon'])} (certified)"
    text = f"epsilon {fmt_up(spent['epsilon'])} (filter statistic, not certified)"
    if odometer is not None:
        text += (
            f"; certified spend so far epsilon <= {fmt_up(odometer['epsilon'])} at delta = "
            f"{odometer['delta']:.3g}"
        )
    return text


def _check(args: argparse.Namespace) -> int:
    from dpledger.budget.store import check

    result = check(args.store, args.source, _event(args.event), unit=args.unit)
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        verdict = "fits" if result["fits"] else f"does NOT fit ({result['reason']})"
        print(
            f"{args.source}/{args.unit}: the event {verdict} under {result['rule']}; "
            f"spent after it: {spent_text(result['spent_after'], result.get('odometer_after'))}"
        )
    return 0 if result["fits"] else 1


def _book(args: argparse.Namespace) -> int:
    from dpledger.budget.store import book

    entry = book(args.store, args.source, _event(args.event), unit=args.unit, run_id=args.run_id)
    if args.json:
        print(json.dumps(entry, indent=2, sort_keys=True))
    else:
        print(
            f"booked entry {entry['seq']} (run {entry['run_id']}) for {args.source}/"
            f"{args.unit}; spent {spent_text(entry['spent'], entry.get('odometer'))}",
            file=sys.stdout,
        )
    return 0
