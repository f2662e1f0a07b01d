"""A DP aggregation over a table, on any engine: the plan, its events and its run.

:class:`AggregationRequest` is the public description (from the method's parameters): the
query, the metrics, the engine, the noise and the partitions. :func:`aggregation_events` is
what it spends, known before any data is read; :func:`aggregate_table` runs it: the engine
bounds and clips where the data lives and returns bounded aggregates; the driver books each
release on the ledger and only then adds noise (:mod:`dpledger.runtime.engines.noise`).

Releases, in order (each a vector over the partitions, one Gaussian or Laplace event):

* ``count`` (for ``count`` and ``mean``): rows kept per partition, row sensitivity 1;
* ``sum``: the sum of clipped values, row sensitivity ``max(|lower|, |upper|)``;
* ``mean.centred_sum``: the sum of clipped values minus the range's middle, row sensitivity
  half the range; the mean is ``centred_sum / max(count, 1) + middle`` (PipelineDP's rule);
* ``histogram``: rows kept per partition and public bin of the value column (one vector over
  every partition's bins), row sensitivity 1: a row adds 1 to one bin of one partition.

One unit's rows move a vector by at most ``L0 * L∞ * C`` (L1) or ``sqrt(L0) * L∞ * C`` (L2); a
histogram's too, with ``C = 1`` (a unit's at most ``L∞`` rows in a partition move its bins by
at most ``L∞`` in L1, hence in L2).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import ComposedEvent, Event
from dpledger.core.ledger_protocol import Ledger
from dpledger.core.partition_events import partitioned_noise_event
from dpledger.runtime.engines.columns import canonical_name, parse_name
from dpledger.runtime.engines.histogram import bin_cell
from dpledger.runtime.engines.noise import noisy_release, release_event
from dpledger.runtime.engines.protocol import BoundedAggregates, Engine
from dpledger.runtime.engines.query import METRICS, AggregationQuery
from dpledger.runtime.engines.selection import Selection, select_keys

__all__ = [
    "ENGINES",
    "AggregationRequest",
    "aggregate_table",
    "aggregation_events",
    "aggregation_plan",
    "make_engine",
]

ENGINES: tuple[str, ...] = ("memory", "dask", "spark")
MECHANISMS: tuple[str, ...] = ("gaussian", "laplace")
#: fixed-point sums must be exact as floats
EXACT_LIMIT = 2**53


def _metrics(value: Any) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else list(value or ())
    bad = [m for m in items if m not in METRICS]
    if not items or bad or len(set(items)) != len(items):
        raise InvalidParameterError(
            "metrics",
            f"must be distinct names of {list(METRICS)}, got {value!r}",
            'write e.g. metrics = ["count", "mean"]',
        )
    return tuple(m for m in METRICS if m in items)


def _public(value: Any) -> tuple[Any, ...] | None:
    if value is None:
        return None
    items = list(value) if isinstance(value, list | tuple) else None
    if not items or not all(isinstance(k, int | str) and not isinstance(k, bool) for k in items):
        raise InvalidParameterError(
            "public_partitions",
            f"must be a non-empty list of integers or texts, got {value!r}",
            'write e.g. public_partitions = ["a", "b"]',
        )
    return tuple(sorted(set(items), key=lambda k: (isinstance(k, str), k)))


def _selection(value: Any) -> Selection | None:
    return None if value is None or isinstance(value, Selection) else Selection.from_table(value)


def _choice(options: tuple[str, ...], field: str) -> Any:
    def check(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value not in options:
            raise InvalidParameterError(
                field, f"must be one of {list(options)}, got {value!r}", f"use {options[0]!r}"
            )

    return check


def _positive(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(value) or value <= 0:
        raise InvalidParameterError(
            attribute.name, f"must be a positive number, got {value!r}", "pass e.g. 1.0"
        )


@attrs.frozen
class AggregationRequest:
    """The public description of one aggregation (see the module docstring)."""

    query: AggregationQuery
    metrics: tuple[str, ...] = attrs.field(converter=_metrics)
    noise_multiplier: float = attrs.field(validator=_positive)
    mechanism: str = attrs.field(default="gaussian", validator=_choice(MECHANISMS, "mechanism"))
    engine: str = attrs.field(default="memory", validator=_choice(ENGINES, "engine"))
    public_partitions: tuple[Any, ...] | None = attrs.field(default=None, converter=_public)
    partition_selection: Selection | None = attrs.field(default=None, converter=_selection)

    def __attrs_post_init__(self) -> None:
        if (self.public_partitions is None) == (self.partition_selection is None):
            raise InvalidParameterError(
                "public_partitions",
                "is missing" if self.public_partitions is None else "is given with a selection",
                "list the keys to release (public_partitions = [...]) or select them privately "
                "(partition_selection = {...}), not both",
            )
        if self.query.value_column is None and set(self.metrics) - {"count"}:
            raise InvalidParameterError(
                "value_column", "is missing for a sum or a mean", "name the column of values"
            )
        if ("histogram" in self.metrics) != (self.query.bin_edges is not None):
            raise InvalidParameterError(
                "bin_edges",
                "is missing for a histogram"
                if self.query.bin_edges is None
                else "needs a histogram",
                'declare the bins (bin_edges = [0, 10, 20]) with metrics = [..., "histogram"], '
                "or neither",
            )

    @property
    def norm(self) -> str:
        return "l2" if self.mechanism == "gaussian" else "l1"

    def releases(self) -> tuple[str, ...]:
        """The noisy releases, in the order they are booked."""
        out = []
        if {"count", "mean"} & set(self.metrics):
            out.append("count")
        if "sum" in self.metrics:
            out.append("sum")
        if "mean" in self.metrics:
            out.append("mean")
        if "histogram" in self.metrics:
            out.append("histogram")
        return tuple(out)

    def public_names(self) -> tuple[str, ...] | None:
        if self.public_partitions is None:
            return None
        return tuple(canonical_name(k) for k in self.public_partitions)

    def partitions(self) -> dict[str, Any]:
        """How the released keys are chosen, as public facts."""
        if self.partition_selection is not None:
            return self.partition_selection.describe(self.query.max_partitions)
        return {"kind": "public", "keys": list(self.public_partitions or ())}


def release_cost(request: AggregationRequest, release: str) -> Event:
    """One release's event: Gaussian noise of multiplier ``m`` at ``sqrt(L0)·L∞·C``; Laplace
    noise stated per key, as ``L0`` releases of sensitivity ``L∞·C`` (a unit is absent from
    every other key), tighter at ``delta > 0`` than one release at ``L0·L∞·C``. A histogram is
    stated as a count (``C = 1``): per key its bins move by at most ``L∞`` in L1, and Laplace
    noise on bins whose shifts sum to ``L∞`` is dominated by one release at ``L∞``
    (``proofs_checks/contribution_bounds/proof.md``)."""
    if request.mechanism == "gaussian":
        return release_event("gaussian", request.noise_multiplier)
    q = request.query
    scale = request.noise_multiplier * q.sensitivity(release, "l1")
    top = q.row_sensitivity(release)
    return partitioned_noise_event("laplace", scale, q.max_partitions, q.max_rows, top)


def aggregation_events(request: AggregationRequest) -> Event:
    """What the aggregation spends: the selection (if private), then one event per release."""
    selection = request.partition_selection
    first = [] if selection is None else [selection.event(request.query.max_partitions)]
    return ComposedEvent([*first, *(release_cost(request, r) for r in request.releases())])


def _step(release: str) -> str:
    steps = {"count": "aggregate.count", "sum": "aggregate.sum", "histogram": "aggregate.histogram"}
    return steps.get(release, "aggregate.mean")


def aggregation_plan(request: AggregationRequest) -> dict[str, Any]:
    """The engine's plan as public facts: stages, bounds, partitions and noise."""
    q = request.query
    public = request.public_partitions is not None
    stages = [
        f"read the columns {list(q.columns)} on the {request.engine} engine",
        "drop the rows whose partition key is not public" if public else "keep every key",
        f"clip each value to [{q.lower}, {q.upper}] and round it to multiples of "
        f"2**-{q.scale_bits} (integers: sums are exact in any order)",
    ]
    if q.unit_column is not None:
        stages += [
            f"partition the rows by the unit column {q.unit_column!r}",
            f"keep at most {q.max_rows} rows per unit and partition (L∞)",
            f"keep at most {q.max_partitions} partitions per unit (L0)",
        ]
    stages.append("per partition: rows kept, their integer sum, units contributing")
    if q.bin_edges is not None:
        stages.append(
            f"per partition and bin of the edges {list(q.bin_edges)}: rows kept (a value "
            "outside the edges counted in the nearest end bin)"
        )
    if not public:
        stages.append("on the driver: select the keys privately by their units (booked first)")
    releases = [
        {
            "step": _step(r),
            "metric": r,
            "sensitivity": q.sensitivity(r, request.norm),
            "norm": request.norm,
            "noise_scale": request.noise_multiplier * q.sensitivity(r, request.norm),
        }
        for r in request.releases()
    ]
    return {
        "engine": request.engine,
        "query": q.describe(),
        "partitions": request.partitions(),
        "stages": stages,
        "mechanism": request.mechanism,
        "noise_multiplier": request.noise_multiplier,
        "releases": releases,
    }


def make_engine(name: str) -> Engine:
    """The engine named ``name`` (its package is imported when it runs)."""
    if name == "dask":
        from dpledger.runtime.engines.dask_engine import DaskEngine

        return DaskEngine()
    if name == "spark":
        from dpledger.runtime.engines.spark_engine import SparkEngine

        return SparkEngine()
    from dpledger.runtime.engines.memory import MemoryEngine

    return MemoryEngine()


def _exact(value: int) -> float:
    """``value`` clamped to the integers a double holds exactly. Clamping moves two values no
    further apart, so a release keeps its sensitivity; refusing instead would publish, by the
    refusal, that some partition's aggregate is large."""
    return float(max(-EXACT_LIMIT + 1, min(EXACT_LIMIT - 1, value)))


def _exact_values(
    release: str, rows: Sequence[tuple[int, int, int]], query: AggregationQuery
) -> list[float]:
    """The aggregate of each partition (integers scaled, exact in floating point)."""
    if release == "count":
        return [_exact(c) for c, _, _ in rows]
    if release == "sum":
        return [math.ldexp(_exact(s), -query.scale_bits) for _, s, _ in rows]
    mid = query.fixed_middle
    return [math.ldexp(_exact(s - c * mid), -query.scale_bits) for c, s, _ in rows]


def _cells(names: Sequence[str], bins: int) -> list[str]:
    """The histogram's cells, partition by partition and bin by bin (noise is keyed by them)."""
    return [bin_cell(j, name) for name in names for j in range(bins)]


def _release_values(
    release: str, agg: BoundedAggregates, names: Sequence[str], query: AggregationQuery
) -> tuple[list[float], list[str]]:
    """The exact values of one release and the names of its cells."""
    if release == "histogram":
        counts = [c for row in agg.histograms(names, query.bins) for c in row]
        return [_exact(c) for c in counts], _cells(names, query.bins)
    return _exact_values(release, agg.per_key(names), query), list(names)


def _note(release: str, request: AggregationRequest, sensitivity: float) -> str:
    q = request.query
    unit = "one row" if q.unit_column is None else f"all rows of one {q.unit_column!r} value"
    bins = f" in {q.bins} bins of edges {list(q.bin_edges or ())}" if release == "histogram" else ""
    return (
        f"{release} per partition{bins} on the {request.engine} engine: at most "
        f"L0={q.max_partitions} partitions and L∞={q.max_rows} rows per unit ({unit}), values "
        f"clipped to [{q.lower}, {q.upper}] on the grid 2**-{q.scale_bits}; "
        f"{request.norm.upper()} sensitivity {sensitivity!r} of one unit"
    )


def aggregate_table(request: AggregationRequest, source: Any, ledger: Ledger) -> dict[str, Any]:
    """Run the aggregation (see the module docstring); the outputs and the plan."""
    engine = make_engine(request.engine)
    public = request.public_names()
    bounded = engine.bound_contributions(source, request.query, public and frozenset(public))
    agg = engine.aggregate_per_key(bounded)  # an empty table releases noise around zeros
    names = list(public) if public is not None else _selected(request, agg, ledger)
    noisy: dict[str, np.ndarray] = {}
    for release in request.releases():
        sensitivity = request.query.sensitivity(release, request.norm)
        values, cells = _release_values(release, agg, names, request.query)
        noisy[release] = noisy_release(
            ledger,
            values,
            cells,
            step=_step(release),
            sensitivity=sensitivity,
            noise_multiplier=request.noise_multiplier,
            mechanism=request.mechanism,
            note=_note(release, request, sensitivity),
            event=release_cost(request, release),
        )
    return _outputs(request, names, noisy)


def _selected(request: AggregationRequest, agg: BoundedAggregates, ledger: Ledger) -> list[str]:
    selection = request.partition_selection
    assert selection is not None
    return select_keys(ledger, selection, request.query.max_partitions, agg.keys, agg.units)


def _outputs(
    request: AggregationRequest, names: Sequence[str], noisy: Mapping[str, np.ndarray]
) -> dict[str, Any]:
    out: dict[str, Any] = {"partitions": [parse_name(n) for n in names]}
    if "count" in request.metrics:
        out["count"] = noisy["count"]
    if "sum" in request.metrics:
        out["sum"] = noisy["sum"]
    if "mean" in request.metrics:
        middle = math.ldexp(float(request.query.fixed_middle), -request.query.scale_bits)
        out["mean"] = noisy["mean"] / np.maximum(noisy["count"], 1.0) + middle
    if "histogram" in request.metrics:
        out["histogram"] = noisy["histogram"].reshape(len(names), request.query.bins)
    out["plan"] = aggregation_plan(request)
    return out
