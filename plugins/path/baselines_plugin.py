"""Flattened marginal baselines for method C as dpledger methods: ``direct`` and ``aim``.

Privacy unit: a user's whole table. Phi maps each user to at most one flat record
(:mod:`dpledger.plugins.path.flatten`), so add/remove of one flat record is add/remove of one
user: the row-level guarantee on flat records is the user-level guarantee on tables.
``declare`` imports neither JAX nor ``mbi`` (only the core accountant, for calibration).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpledger.plugin import (
    Adjacency,
    Declaration,
    Event,
    Ledger,
    MethodSpec,
    ProofRef,
    hookimpl,
    user_tables,
)
from dpledger.plugins.path import aim, direct
from dpledger.plugins.path.plugin import one_table_per_user, user_tables_from
from dpledger.plugins.path.schema import UserTables


def _user_tables(data: Any, ledger: Ledger) -> UserTables:
    """The tables, one per user id at user level (enforced by the ledger)."""
    tables = user_tables_from(data)
    return one_table_per_user(tables, ledger) if ledger.adjacency.unit == "user" else tables


def _direct_run(
    params: direct.DirectParams, data: Any, ledger: Ledger, rng: np.random.Generator
) -> dict[str, Any]:
    tables, info = direct.run_direct(_user_tables(data, ledger), params, ledger)
    return {"tables": tables, "info": info}


def _aim_run(
    params: aim.AIMParams, data: Any, ledger: Ledger, rng: np.random.Generator
) -> dict[str, Any]:
    tables, info = aim.run_aim(_user_tables(data, ledger), params, ledger)
    return {"tables": tables, "info": info}


def _per_user(event: Event, adjacency: Adjacency) -> Event | Declaration:
    # one flat record per user: the row-level event on flat records is the user-level event
    return Declaration(event, "user") if getattr(adjacency, "unit", "row") == "user" else event


def _direct_declare(params: direct.DirectParams, adjacency: Adjacency) -> Event | Declaration:
    return _per_user(direct.declare(params, adjacency), adjacency)


def _aim_declare(params: aim.AIMParams, adjacency: Adjacency) -> Event | Declaration:
    return _per_user(aim.declare(params, adjacency), adjacency)


DIRECT_SPEC = MethodSpec(
    name="direct",
    params=direct.DirectParams,
    declare=_direct_declare,
    run=_direct_run,
    description=(
        "Flattened user tables; Gaussian-measured 1-way and adjacent-time 2-way marginals "
        "(plus same-time pairs in the 'across' variant); Private-PGM estimation"
    ),
    proof=ProofRef(
        "Balle & Wang 2018, Theorem 8 (analytic Gaussian); McKenna et al. 2019 (Private-PGM, "
        "post-processing); one flat record per user (user-level add/remove)"
    ),
    neighbours=user_tables,
)

AIM_SPEC = MethodSpec(
    name="aim",
    params=aim.AIMParams,
    declare=_aim_declare,
    run=_aim_run,
    description=(
        "AIM on flattened user tables, with a worst-case budget-bounded declaration of its "
        "adaptive rounds (Gaussian measurements and exponential-mechanism selections)"
    ),
    proof=ProofRef(
        "McKenna et al. 2022 (AIM, Algorithm 1); McSherry & Talwar 2007 (exponential "
        "mechanism); one flat record per user (user-level add/remove)"
    ),
    neighbours=user_tables,
)


@hookimpl
def dpledger_register_methods(register: Any) -> None:
    register(DIRECT_SPEC)
    register(AIM_SPEC)
