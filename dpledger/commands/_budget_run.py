"""``dpledger run --budget STORE``: book a run's certified declared event before it starts.

The declaration is made and accounted (``session.plan``) before any noise is drawn and before
the data is read; its event per privacy unit is booked against the source named by
``--budget-source`` (else the config's ``source``) and the config's privacy unit. A refused
booking, an unreachable store or an undeclared source stop the command there: the run never
starts unbooked. A third-party method's declaration, made by its worker, is booked once it is
accounted and before the worker reads the data. The entry holds the run's id, method,
parameters, certified bound, run directory and the hashes of the config and of the method's
parameters; the run's public record holds its booking (the store's id, the entry and its
hash, the run id, source, unit and rule). A run killed after its booking keeps its spend
booked.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Mapping
from typing import Any

from dpledger import __version__
from dpledger.commands._inputs import params_table, parse_adjacency, query_delta
from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import Event

__all__ = ["add_budget_options", "book_declared", "book_run"]


def add_budget_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("privacy budget")
    group.add_argument(
        "--budget",
        metavar="STORE",
        default=None,
        help="book the run against this budget store (SQLite file or postgresql:// URL) "
        "before it starts; refused if it does not fit",
    )
    group.add_argument(
        "--budget-source",
        metavar="NAME",
        default=None,
        help="the protected source to book against (default: the config's source)",
    )


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _source(args: argparse.Namespace, config: Mapping[str, Any]) -> str:
    source = args.budget_source or config.get("source")
    if not isinstance(source, str) or not source:
        raise InvalidParameterError(
            "--budget-source",
            "a booked run needs the protected source it spends",
            "pass --budget-source NAME or set source = 'NAME' in the config",
        )
    return source


def book_run(args: argparse.Namespace, config: Mapping[str, Any], host: Any) -> dict[str, Any]:
    """Book the run of ``args.method`` (a method of this process's host) in ``args.budget``:
    its declaration is made and accounted here, before any noise and any data."""
    from dpledger.runtime import session

    source = _source(args, config)
    spec = host.method(args.method)
    params = spec.make_params(params_table(config))
    adjacency = parse_adjacency(config)
    delta = query_delta(args, config, getattr(params, "delta", None))
    plan = session.plan(spec, params, adjacency, host.lower, delta=delta)
    return book_declared(args, config, plan.declared.per_unit, plan.selection, delta, source)


def book_declared(
    args: argparse.Namespace,
    config: Mapping[str, Any],
    per_unit: Event,
    selection: Any,
    delta: float,
    source: str | None = None,
) -> dict[str, Any]:
    """Book a run's declared event ``per_unit`` (certified as ``selection``) in
    ``args.budget``; the booking as the run record states it (also set as ``args.booking``)."""
    from dpledger.budget.store import book, new_run_id

    source = source or _source(args, config)
    adjacency = parse_adjacency(config)
    run_id = new_run_id()
    table = params_table(config)
    entry = book(
        args.budget,
        source,
        per_unit,
        unit=adjacency.unit,
        run_id=run_id,
        relation=adjacency.relation,
        parameters={
            "method": args.method,
            "params": json.loads(json.dumps(table, default=str)),
            "delta": delta,
            "certified_epsilon": selection.bound.epsilon,
            "accountant": selection.method,
            "out": str(args.out.resolve()),
        },
        provenance={
            "config_sha256": _sha256(args.config.read_bytes()),
            "params_sha256": _sha256(json.dumps(table, sort_keys=True, default=str).encode()),
            "dpledger": __version__,
        },
    )
    print(
        f"dpledger run: booked run {run_id} as entry {entry['seq']} of {args.budget} "
        f"(source {source!r}, unit {adjacency.unit!r})",
        file=sys.stderr,
    )
    booking = {
        "store_id": entry["store_id"],
        "entry": entry["seq"],
        "entry_hash": entry["hash"],
        "run_id": run_id,
        "source": source,
        "unit": adjacency.unit,
        "rule": entry["rule"],
    }
    args.booking = booking
    return booking
