"""Engines for DP aggregations over tables: in memory (default), Dask and Spark.

The engine bounds contributions and clips values where the data lives
(:mod:`~dpledger.runtime.engines.bounding`, framework code) and returns bounded aggregates
only; the driver books every release on the ledger before it adds noise that depends on the
seed, the step and the cell's key only (:mod:`~dpledger.runtime.engines.noise`), so every
engine gives the same release bit for bit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dpledger.core.errors import InvalidParameterError
from dpledger.runtime.engines.aggregate import (
    ENGINES,
    AggregationRequest,
    aggregate_table,
    aggregation_events,
    aggregation_plan,
)
from dpledger.runtime.engines.query import AggregationQuery

__all__ = [
    "ENGINES",
    "PARAMETERS",
    "AggregationQuery",
    "AggregationRequest",
    "aggregate_table",
    "aggregation_events",
    "aggregation_plan",
    "aggregation_request",
]

#: the parameter names of an aggregation and the field each sets
PARAMETERS: dict[str, str] = {
    "partition_column": "partition_column",
    "value_column": "value_column",
    "unit_column": "unit_column",
    "max_partitions_per_unit": "max_partitions",
    "max_rows_per_partition": "max_rows",
    "lower": "lower",
    "upper": "upper",
    "scale_bits": "scale_bits",
    "bin_edges": "bin_edges",
}
REQUEST_FIELDS = (
    "metrics",
    "noise_multiplier",
    "mechanism",
    "engine",
    "public_partitions",
    "partition_selection",
)


def aggregation_request(params: Mapping[str, Any]) -> AggregationRequest:
    """An aggregation from its parameters (names of :data:`PARAMETERS` and the request's)."""
    unknown = sorted(set(params) - set(PARAMETERS) - set(REQUEST_FIELDS))
    if unknown:
        raise InvalidParameterError(
            unknown[0], "is not a parameter of an aggregation", f"use {sorted(PARAMETERS)}"
        )
    query = AggregationQuery(
        **{PARAMETERS[k]: v for k, v in params.items() if k in PARAMETERS and v is not None}
    )
    return AggregationRequest(query, **{k: params[k] for k in REQUEST_FIELDS if k in params})
