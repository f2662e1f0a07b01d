"""Cross-check of the histogram metric against PipelineDP's local backend on the same data,
bounds and budget.

PipelineDP 0.3.1 has no histogram metric, and its ``VECTOR_SUM`` (a histogram as the sum of
one-hot bin vectors) fails on public partitions (it clips the empty accumulator it builds for
each public partition, ``None``). The equivalent PipelineDP computation is therefore a
``COUNT`` keyed by ``(partition, bin)`` with the bounds every unit within dpledger's bounds
meets: at most ``L0 * min(L∞, bins)`` cells per unit (``max_partitions_contributed``) and at
most ``L∞`` rows per cell (``max_contributions_per_partition``). Its L2 sensitivity,
``sqrt(L0 * min(L∞, bins)) * L∞``, is dpledger's ``sqrt(L0) * L∞`` at ``L∞ = 1`` and larger
above: dpledger bounds the rows per partition, so a unit's ``L∞`` rows in one partition move
its bins by ``L∞`` in L2 however they spread over them.

Checked: per bin, dpledger's noise is no larger than PipelineDP's at a certified ε no larger
than PipelineDP's accounted total, and both release the exact histogram on average.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.runtime.engines import aggregate_table, aggregation_events, aggregation_request
from dpledger.runtime.ledger import PrivacyLedger
from tests.plugins.aggregate.test_pipeline_dp import DELTA, EPSILON, MECHANISM

pipeline_dp = pytest.importorskip("pipeline_dp")

EDGES = [0.0, 2.5, 5.0, 7.5, 10.0]
BINS = len(EDGES) - 1
PARTITIONS = ["a", "b", "c"]


def _bin(value: float) -> int:
    """dpledger's bin of a value: interior edges at or below it (ends clamp)."""
    return int(np.searchsorted(np.asarray(EDGES[1:-1]), value, side="right"))


def _rows(seed: int = 0, n: int = 900, users: int = 200) -> list[tuple[int, str, float]]:
    rng = np.random.default_rng(seed)
    return list(
        zip(
            rng.integers(0, users, n).tolist(),
            rng.choice(np.array(PARTITIONS), n).tolist(),
            rng.uniform(-1.0, 11.0, n).tolist(),
            strict=True,
        )
    )


def pipeline_dp_histogram(
    rows: list[tuple[int, str, float]], l0: int, linf: int
) -> tuple[np.ndarray, tuple[float, ...]]:
    """PipelineDP's noisy count per (partition, bin), as dpledger's array, and its
    mechanism's ``(std, eps, delta, l2_sensitivity)``."""
    from pipeline_dp.report_generator import ExplainComputationReport

    accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=EPSILON, total_delta=DELTA)
    engine = pipeline_dp.DPEngine(accountant, pipeline_dp.LocalBackend())
    params = pipeline_dp.AggregateParams(
        noise_kind=pipeline_dp.NoiseKind.GAUSSIAN,
        metrics=[pipeline_dp.Metrics.COUNT],
        max_partitions_contributed=l0 * min(linf, BINS),
        max_contributions_per_partition=linf,
    )
    extractors = pipeline_dp.DataExtractors(
        privacy_id_extractor=lambda r: r[0],
        partition_extractor=lambda r: (r[1], _bin(r[2])),
        value_extractor=lambda r: 0,
    )
    cells = [(k, j) for k in PARTITIONS for j in range(BINS)]
    report = ExplainComputationReport()
    result = engine.aggregate(
        rows, params, extractors, cells, out_explain_computation_report=report
    )
    accountant.compute_budgets()
    released = dict(result)
    (mechanism,) = [tuple(float(x) for x in m) for m in MECHANISM.findall(report.text())]
    counts = np.asarray([released[c].count for c in cells]).reshape(len(PARTITIONS), BINS)
    return counts, mechanism


def _params(l0: int, linf: int, noise_multiplier: float) -> dict[str, Any]:
    return dict(
        partition_column="key",
        value_column="value",
        unit_column="user",
        max_partitions_per_unit=l0,
        max_rows_per_partition=linf,
        lower=0.0,
        upper=10.0,
        metrics=["histogram"],
        bin_edges=EDGES,
        noise_multiplier=noise_multiplier,
        public_partitions=PARTITIONS,
    )


def _columns(rows: list[tuple[int, str, float]]) -> dict[str, np.ndarray]:
    users, keys, values = zip(*rows, strict=True)
    return {"user": np.asarray(users), "key": np.asarray(keys), "value": np.asarray(values)}


@pytest.mark.parametrize(("l0", "linf"), [(2, 1), (2, 3), (3, 2)])
def test_histogram_noise_no_larger_and_certified_epsilon_no_larger_than_pipeline_dps(
    l0: int, linf: int
) -> None:
    _, (std, eps, delta, l2) = pipeline_dp_histogram(_rows(), l0, linf)
    assert (eps, delta) == pytest.approx((EPSILON, DELTA))  # the whole budget, one mechanism
    assert l2 == pytest.approx(np.sqrt(l0 * min(linf, BINS)) * linf, rel=1e-12)
    ours = aggregation_request(_params(l0, linf, 1.0)).query.sensitivity("histogram", "l2")
    assert ours <= l2 * (1 + 1e-12)  # equal at L∞ = 1, smaller above
    request = aggregation_request(_params(l0, linf, std / ours))
    plan = aggregate_table(request, _columns(_rows()), PrivacyLedger(aggregation_events(request)))
    (release,) = plan["plan"]["releases"]
    assert release["metric"] == "histogram"
    assert release["noise_scale"] <= std * (1 + 1e-12)  # per bin, noise std no larger
    bound = account(aggregation_events(request), Adjacency(), delta=DELTA).bound
    assert bound.epsilon <= EPSILON  # certified for the whole job


def test_both_release_the_exact_histogram_on_average() -> None:
    """One row per unit (neither library drops a row): over many seeds the mean release of
    each (partition, bin) is its exact count, for both."""
    rows = _rows(seed=3, n=600, users=600)
    rows = [(i, key, value) for i, (_, key, value) in enumerate(rows)]
    truth = np.zeros((len(PARTITIONS), BINS))
    for _, key, value in rows:
        truth[PARTITIONS.index(key), _bin(value)] += 1
    theirs, (std, _, _, l2) = pipeline_dp_histogram(rows, 2, 1)
    request = aggregation_request(_params(2, 1, std / l2))
    ours = [
        aggregate_table(request, _columns(rows), PrivacyLedger(aggregation_events(request), rng=s))[
            "histogram"
        ]
        for s in range(60)
    ]
    more = [theirs] + [pipeline_dp_histogram(rows, 2, 1)[0] for _ in range(14)]
    assert np.all(np.abs(np.mean(ours, axis=0) - truth) < 4.5 * std / np.sqrt(len(ours)))
    assert np.all(np.abs(np.mean(more, axis=0) - truth) < 4.5 * std / np.sqrt(len(more)))
