"""``dpledger run`` of a method no builtin plugin provides: no third-party code in this process.

The declaration comes from a worker process (:func:`~dpledger.cleanroom.worker.declare_in_worker`,
the same canonical inputs as ``dpledger account``: method, parameters table, adjacency) and is
accounted here before any noise is drawn. The method's ``run`` executes in another worker
(:mod:`dpledger.cleanroom.run_worker`) against a proxy of the ledger; the real
:class:`~dpledger.runtime.ledger.PrivacyLedger` lives in this process, books and draws every
step, and is verified here. This process loads the data (the worker gets it as arrays, bounded
per user as the ledger sees it), writes the outputs and the record as for a builtin method, and
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
from dpledger.cleanroom.worker import declare_in_worker, plugin_timeout
from dpledger.core.adjacency import Adjacency
from dpledger.core.declaration import Declaration
from dpledger.core.errors import InvalidParameterError
from dpledger.runtime.run_record import RunRecord
from dpledger.runtime.runner import RunResult, prepare_run


def _declaration(args: argparse.Namespace, table: Mapping[str, Any], adjacency: Adjacency) -> Any:
    """The method's declaration, made in a worker process, as data."""
    request = DeclarationRequest.of(args.method, table, adjacency)
    reply = declare_in_worker(
        request,
        allow=names(args.plugins_allow),
        block=names(args.plugins_block),
        timeout=args.plugins_timeout,
    )
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


def run_third_party(args: argparse.Namespace, config: Mapping[str, Any], host: Any) -> int:
    """``dpledger run`` of a third-party method (see the module docstring); the exit code."""
    from dpledger.commands.run import (
        _adjacency,
        account_declaration,
        data_path_of,
        load_data,
        params_table,
        publish,
        query_delta,
    )

    table = params_table(config)
    adjacency = _adjacency(config)
    data_path = data_path_of(args, config)
    data = load_data(data_path) if data_path is not None else None
    limits = plugin_timeout(args.plugins_timeout), run_timeout(os.environ.get(RUN_TIMEOUT_ENV))
    with RunWorker(args.method, *limits) as worker:  # starts while the declaration is made
        reply = _declaration(args, table, adjacency)
        worker.who = reply.who()
        declaration = Declaration(reply.core_event(), reply.unit)
        start = {
            "method": args.method,
            "params": dict(table),
            "allow": names(args.plugins_allow),
            "block": names(args.plugins_block),
            "timeout": args.plugins_timeout,
        }
        params = worker.load(start)
        delta = query_delta(args, config, params.get("delta"))
        per_unit, rules, selection = account_declaration(
            host, declaration, adjacency, method=args.method, delta=delta
        )
        result = run_in_worker(
            worker, declaration, adjacency, data, seed=args.seed, secure=args.secure
        )
    record = RunRecord(
        method=args.method,
        provenance=_provenance(reply),
        params=params,
        ledger=result.ledger.to_dict(),
        declared_core=declaration.event.to_dict(),
        privacy={},
    )
    # the clean room confirms the run from the record's parameters: it is handed this
    # declaration (made by a worker from the same parameters) instead of asking a new worker
    again = attrs.evolve(reply, request=DeclarationRequest.of(args.method, params, adjacency))
    return publish(args, record, result, per_unit, rules, selection, replies=[again.to_dict()])
