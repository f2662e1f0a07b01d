"""``aggregate``: DP count, sum, mean and histogram per partition key of a table, on any engine.

The table is a Parquet or CSV file (``table``, or the run's data as a mapping of columns). At
unit level (``unit_column``) each unit keeps at most ``max_partitions_per_unit`` partitions
(L0) and ``max_rows_per_partition`` rows in each (L∞); values are clipped to ``[lower,
upper]``; a histogram counts each partition's kept rows in the public bins ``bin_edges`` of
the value column (values outside them in the end bins). The bounding runs as dpledger's own
code inside the engine (in memory, Dask or Spark); the engine returns bounded aggregates and
the ledger books each release before its noise is drawn. The declaration (one Gaussian or
Laplace release per metric vector) is known from the parameters alone, before any data is
read.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

from dpledger.plugin import (
    Adjacency,
    Declaration,
    InvalidParameterError,
    Ledger,
    MethodSpec,
    ProofRef,
    ReportSectionSpec,
    aggregate_table,
    aggregation_events,
    aggregation_request,
    hookimpl,
    unit_rows,
)
from dpledger.plugins.aggregate.explain import explain_section

__all__ = ["METHOD_NAME", "SPEC", "AggregateParams"]

METHOD_NAME = "aggregate"


def _listed(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


@attrs.frozen
class AggregateParams:
    """The aggregation's parameters (see ``docs/methods/aggregate.md``)."""

    partition_column: str
    noise_multiplier: float
    metrics: Any = attrs.field(default=("count",), converter=_listed)
    value_column: str | None = None
    unit_column: str | None = None
    max_partitions_per_unit: int = 1
    max_rows_per_partition: int = 1
    lower: float = 0.0
    upper: float = 1.0
    scale_bits: int = 20
    mechanism: str = "gaussian"
    engine: str = "memory"
    public_partitions: Any = attrs.field(default=None, converter=_listed)
    partition_selection: Any = None
    table: str | None = None
    bin_edges: Any = attrs.field(default=None, converter=_listed)


def _request(params: AggregateParams) -> Any:
    values = attrs.asdict(params)
    values.pop("table")
    return aggregation_request(values)


def declare(params: AggregateParams, adjacency: Adjacency) -> Declaration:
    if adjacency.unit == "user":
        raise InvalidParameterError(
            "adjacency.unit",
            "is user, but the aggregation bounds units itself",
            "leave [adjacency] at row level and name the unit column in unit_column",
        )
    return Declaration(aggregation_events(_request(params)), "row")


def protects(params: AggregateParams, adjacency: Adjacency) -> str | None:
    """The unit the bounding enforces: every row of one value of the unit column."""
    if params.unit_column is None:
        return None
    relation = "add/remove" if adjacency.relation == "add_remove" else "replace-one"
    return (
        f"{relation} of one unit: every row of one value of column {params.unit_column!r} "
        f"(at most {params.max_partitions_per_unit} partitions and "
        f"{params.max_rows_per_partition} rows in each kept per unit, enforced by the engine)"
    )


def _source(params: AggregateParams, data: Any) -> Any:
    if data is not None:
        return data
    if params.table is None:
        raise InvalidParameterError(
            "table", "is missing", 'name the Parquet or CSV file (table = "data.parquet")'
        )
    return params.table


def run(
    params: AggregateParams, data: Any, ledger: Ledger, rng: np.random.Generator
) -> dict[str, Any]:
    return dict(aggregate_table(_request(params), _source(params, data), ledger))


SPEC = MethodSpec(
    name=METHOD_NAME,
    params=AggregateParams,
    declare=declare,
    run=run,
    description=(
        "DP count, sum, mean and histogram per partition key of a Parquet or CSV table, with L0 "
        "and L∞ contribution bounds, on the in-memory, Dask or Spark engine"
    ),
    proof=ProofRef(
        "Gaussian and Laplace mechanisms (Dwork & Roth 2014, Theorem A.1 and Theorem 3.6) on "
        "per-partition aggregates whose sensitivity the L0/L∞ bound fixes "
        "(sqrt(L0)·L∞·C in L2, L0·L∞·C in L1, a histogram's with C = 1; Wilson et al., "
        "PoPETs 2020; proofs_checks/contribution_bounds/proof.md)",
        "docs/methods/aggregate.md",
    ),
    neighbours=unit_rows,
    protects=protects,
)

REPORT_SECTION = ReportSectionSpec(
    name="aggregate_plan",
    title="Aggregation: how the computation runs",
    render=explain_section,
    methods=(METHOD_NAME,),
)


@hookimpl
def dpledger_register_methods(register: Any) -> None:
    register(SPEC)


@hookimpl
def dpledger_register_report_sections(register: Any) -> None:
    register(REPORT_SECTION)
