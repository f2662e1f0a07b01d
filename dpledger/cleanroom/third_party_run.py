"""``dpledger run`` of a method no builtin plugin provides: no third-party code in this process.

The method's ``run`` executes in a worker process (:mod:`dpledger.cleanroom.run_worker`). Its
declaration is made there first, before the worker is told where the data is, as a declaration
worker makes it (:func:`~dpledger.cleanroom.worker.declare_with`, with the canonical inputs of
``dpledger account``: method, parameters table, adjacency); it comes back as data and is
accounted here before any noise is drawn. The ``run`` executes against a proxy of the ledger;
the real :class:`~dpledger.runtime.ledger.PrivacyLedger` lives in this process, books and draws
every step, and is verified here. The method reads its data file itself, as this process would
read it (it is the method's input; the ledger, its generator and the unit keys stay here);
at user level this process loads the data and sends it bounded per user as the ledger sees
it. With ``--budget`` the accounted declaration is booked before the data is read (by the
worker or here). This process writes the outputs and the record as for a builtin method, and
the clean room confirms the staged run before anything is published.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import Any

import attrs

from dpledger.cleanroom.declarations import DeclarationReply, DeclarationRequest
from dpledger.cleanroom.ledger_channel import LedgerServer
from dpledger.cleanroom.resolver import names
from dpledger.cleanroom.run_worker import RUN_TIMEOUT_ENV, RunWorker, run_timeout
from dpledger.cleanroom.worker import plugin_timeout
from dpledger.core.adjacency import Adjacency
from dpledger.core.declaration import Declaration
from dpledger.core.errors import InvalidParameterError
from dpledger.runtime.runner import RunResult, prepare_run

__all__ = ["DATA_SUFFIXES", "run_in_worker", "run_third_party"]

#: the suffixes of the data files ``dpledger run`` reads
DATA_SUFFIXES = (".npy", ".npz", ".csv", ".json")


def _declared(reply: DeclarationReply) -> DeclarationReply:
    """The worker's declaration, or its refusal as one line naming the field."""
    if reply.error is not None:
        raise InvalidParameterError(
            str(reply.error.get("field", "method")),
            str(reply.error.get("problem", "was refused by its plugin")),
            str(reply.error.get("fix", "see `dpledger plugins`")),
        )
    return reply


def _provenance(reply: DeclarationReply) -> dict[str, Any]:
    from dpledger.runtime.plugin_loading import trust_tier

    return {
        "plugin": reply.plugin,
        "distribution": reply.distribution,
        "version": reply.version,
        "tier": trust_tier(False),
    }


def _book(
    args: argparse.Namespace,
    config: Mapping[str, Any],
    per_unit: Any,
    selection: Any,
    delta: float,
    data_file: str | None,
    worker: RunWorker,
    data: Any,
) -> Any:
    """Book the accounted declaration, then let the data be read: by the worker (its file)
    or here (at user level); the data this process sends the method."""
    from dpledger.commands._budget_run import book_declared
    from dpledger.commands._inputs import data_path_of, load_data

    book_declared(args, config, per_unit, selection, delta)
    if data_file is not None:
        worker.send_data(data_file)
    path = data_path_of(args, config)
    if data is None and path is not None and data_file is None:
        return load_data(path)
    return data


def run_in_worker(
    worker: RunWorker,
    declaration: Declaration,
    adjacency: Adjacency,
    data: Any,
    *,
    seed: int | None,
    secure: bool,
) -> RunResult:
    """Run the loaded method in ``worker`` under a ledger of this process; verified."""
    data, ledger, run_rng = prepare_run(declaration, adjacency, data, seed=seed, secure=secure)
    outputs = worker.run(LedgerServer(ledger), data, run_rng.bit_generator.state)
    ledger.verify()
    return RunResult(outputs, declaration, ledger)


def _data_inputs(
    args: argparse.Namespace, config: Mapping[str, Any], adjacency: Adjacency, booked: bool
) -> tuple[Any, str | None]:
    """(data read here, data file the worker reads). At user level the data is bounded per
    user and its unit keys read here; else the method reads its data file itself, as this
    process would (its rows are all the method sees). A booked run reads it only once its
    booking is made; a missing or unreadable file is refused right away, before booking."""
    from dpledger.commands._inputs import data_path_of, load_data

    data_path = data_path_of(args, config)
    if data_path is None:
        return None, None
    if adjacency.unit == "user":
        if booked and data_path.is_file():
            return None, None
        return load_data(data_path), None
    if not data_path.is_file() or data_path.suffix.lower() not in DATA_SUFFIXES:
        load_data(data_path)  # refused as it refuses a file it cannot read, right away
    return None, str(data_path)  # the worker starts in this directory


def run_third_party(args: argparse.Namespace, config: Mapping[str, Any], host: Any) -> int:
    """``dpledger run`` of a third-party method (see the module docstring); the exit code."""
    from dpledger.commands._inputs import params_table, parse_adjacency, query_delta
    from dpledger.commands.run import account_declaration, publish
    from dpledger.runtime import session

    table = params_table(config)
    adjacency = parse_adjacency(config)
    booked = getattr(args, "budget", None) is not None
    data, data_file = _data_inputs(args, config, adjacency, booked)
    limits = plugin_timeout(args.plugins_timeout), run_timeout(os.environ.get(RUN_TIMEOUT_ENV))
    with RunWorker(args.method, *limits) as worker:
        options = {
            "allow": names(args.plugins_allow),
            "block": names(args.plugins_block),
            "timeout": args.plugins_timeout,
        }
        request = DeclarationRequest.of(args.method, table, adjacency)
        reply, loaded = worker.load(request, options, None if booked else data_file)
        reply = _declared(reply)
        worker.who = reply.who()
        declaration = Declaration(reply.core_event(), reply.unit)
        params = loaded or {}
        delta = query_delta(args, config, params.get("delta"))
        per_unit, rules, selection = account_declaration(
            host, declaration, adjacency, method=args.method, delta=delta
        )
        if booked:  # before any noise, and before the data is read
            data = _book(args, config, per_unit, selection, delta, data_file, worker, data)
        result = run_in_worker(
            worker, declaration, adjacency, data, seed=args.seed, secure=args.secure
        )
    record = session.record_fields(
        method=args.method,
        provenance=_provenance(reply),
        params=params,
        ledger=session.public_ledger(result.ledger),
        declared_core=declaration.event,
        per_unit=per_unit,
        lift_rules=rules,
        privacy=session.privacy_section(selection),
        exact_match=result.ledger.public_matches_exactly(),
    )
    record = attrs.evolve(record, budget=getattr(args, "booking", None))
    # the clean room confirms the run from the record's parameters: it is handed this
    # declaration (made by a worker from the same parameters) instead of asking a new worker
    again = attrs.evolve(reply, request=DeclarationRequest.of(args.method, params, adjacency))
    return publish(args, record, result, replies=[again.to_dict()])
