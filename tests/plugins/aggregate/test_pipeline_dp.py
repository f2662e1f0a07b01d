"""Cross-check against PipelineDP's local backend (``pipeline-dp``) on the same data, bounds and
budget: dpledger's per-partition noise is no larger, its certified ε of the whole job is no
larger than PipelineDP's accounted total, and both release the same aggregates on average."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.runtime.engines import aggregate_table, aggregation_events, aggregation_request
from dpledger.runtime.ledger import PrivacyLedger

pipeline_dp = pytest.importorskip("pipeline_dp")

EPSILON, DELTA = 1.0, 1e-6
L0, LINF, LOWER, UPPER = 2, 3, 0.0, 10.0
PARTITIONS = ["a", "b", "c", "d"]
MECHANISM = re.compile(
    r"parameter=([0-9.e+-]+)\s+eps=([0-9.e+-]+)\s+delta=([0-9.e+-]+)\s+"
    r"l2_sensitivity=([0-9.e+-]+)"
)


def _rows(seed: int = 0, n: int = 1500) -> list[tuple[int, str, float]]:
    rng = np.random.default_rng(seed)
    users = rng.integers(0, 300, n).tolist()
    keys = rng.choice(np.array(PARTITIONS[:3]), n).tolist()
    values = rng.exponential(3.0, n).tolist()
    return list(zip(users, keys, values, strict=True))


def pipeline_dp_run(rows: list[tuple[int, str, float]]) -> tuple[dict[str, Any], list[Any]]:
    """PipelineDP's released count and sum per partition, and its mechanisms' parameters."""
    from pipeline_dp.report_generator import ExplainComputationReport

    accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=EPSILON, total_delta=DELTA)
    engine = pipeline_dp.DPEngine(accountant, pipeline_dp.LocalBackend())
    params = pipeline_dp.AggregateParams(
        noise_kind=pipeline_dp.NoiseKind.GAUSSIAN,
        metrics=[pipeline_dp.Metrics.COUNT, pipeline_dp.Metrics.SUM],
        max_partitions_contributed=L0,
        max_contributions_per_partition=LINF,
        min_value=LOWER,
        max_value=UPPER,
    )
    extractors = pipeline_dp.DataExtractors(
        privacy_id_extractor=lambda r: r[0],
        partition_extractor=lambda r: r[1],
        value_extractor=lambda r: r[2],
    )
    report = ExplainComputationReport()
    result = engine.aggregate(
        rows, params, extractors, PARTITIONS, out_explain_computation_report=report
    )
    accountant.compute_budgets()
    released = {k: (m.count, m.sum) for k, m in result}
    mechanisms = [tuple(float(x) for x in m) for m in MECHANISM.findall(report.text())]
    return released, mechanisms


def _params(noise_multiplier: float) -> dict[str, Any]:
    return dict(
        partition_column="key",
        value_column="value",
        unit_column="user",
        max_partitions_per_unit=L0,
        max_rows_per_partition=LINF,
        lower=LOWER,
        upper=UPPER,
        metrics=["count", "sum"],
        noise_multiplier=noise_multiplier,
        public_partitions=PARTITIONS,
    )


def _columns(rows: list[tuple[int, str, float]]) -> dict[str, np.ndarray]:
    users, keys, values = zip(*rows, strict=True)
    return {"user": np.asarray(users), "key": np.asarray(keys), "value": np.asarray(values)}


def test_noise_no_larger_and_certified_epsilon_no_larger_than_pipeline_dps() -> None:
    _, mechanisms = pipeline_dp_run(_rows())
    assert len(mechanisms) == 2  # count and sum, each at (ε/2, δ/2) by the naive accountant
    assert sum(m[1] for m in mechanisms) == pytest.approx(EPSILON)
    # PipelineDP's per-partition noise: std = parameter at its L2 sensitivity sqrt(L0)·L∞·C
    multiplier = min(std / l2 for std, _, _, l2 in mechanisms)
    request = aggregation_request(_params(multiplier))
    for (std, _, _, l2), release in zip(mechanisms, ("count", "sum"), strict=True):
        ours = request.query.sensitivity(release, "l2")
        assert ours == pytest.approx(l2, rel=1e-12)  # the same lifted sensitivity
        assert multiplier * ours <= std * (1 + 1e-12)  # noise std no larger
    bound = account(aggregation_events(request), Adjacency(), delta=DELTA).bound
    assert bound.epsilon <= EPSILON  # certified for the whole job, PLD-composed


def test_both_release_the_same_aggregates_on_average() -> None:
    """Every unit within the bounds (so neither library drops a row): the mean release over
    many seeds is the exact aggregate for both."""
    rng = np.random.default_rng(5)
    rows = [(u, str(rng.choice(PARTITIONS[:3])), float(rng.uniform(0, 12))) for u in range(600)]
    exact_count = {k: sum(1 for _, kk, _ in rows if kk == k) for k in PARTITIONS}
    _, mechanisms = pipeline_dp_run(rows)
    multiplier = min(std / l2 for std, _, _, l2 in mechanisms)
    params = _params(multiplier)
    ours = []
    for seed in range(100):
        book = PrivacyLedger(aggregation_events(aggregation_request(params)), rng=seed)
        ours.append(aggregate_table(aggregation_request(params), _columns(rows), book)["count"])
    theirs = [[pipeline_dp_run(rows)[0][k][0] for k in PARTITIONS] for _ in range(20)]
    std = mechanisms[0][0]
    truth = np.asarray([exact_count[k] for k in PARTITIONS], dtype=float)
    assert np.all(np.abs(np.mean(ours, axis=0) - truth) < 4 * std / np.sqrt(100))
    assert np.all(np.abs(np.mean(theirs, axis=0) - truth) < 4 * std / np.sqrt(20))


SELECTED_KEYS = {"k8": 8, "k11": 11, "k12": 12, "k14": 14, "k16": 16}


def _selection_rows() -> list[tuple[int, str, float]]:
    rows, user = [], 0
    for key, n in SELECTED_KEYS.items():
        for _ in range(n):
            rows.append((user, key, 1.0))
            user += 1
    return rows


def _pipeline_dp_selected(rows: list[tuple[int, str, float]], mechanism: str) -> set[str]:
    strategy = {
        "laplace": pipeline_dp.PartitionSelectionStrategy.LAPLACE_THRESHOLDING,
        "truncated_geometric": pipeline_dp.PartitionSelectionStrategy.TRUNCATED_GEOMETRIC,
    }[mechanism]
    accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=EPSILON, total_delta=1e-5)
    engine = pipeline_dp.DPEngine(accountant, pipeline_dp.LocalBackend())
    params = pipeline_dp.SelectPartitionsParams(
        max_partitions_contributed=1, partition_selection_strategy=strategy
    )
    extractors = pipeline_dp.DataExtractors(
        privacy_id_extractor=lambda r: r[0], partition_extractor=lambda r: r[1]
    )
    result = engine.select_partitions(rows, params, extractors)
    accountant.compute_budgets()
    return set(result)


@pytest.mark.parametrize("mechanism", ["laplace", "truncated_geometric"])
def test_selected_partitions_are_distributed_as_pipeline_dps_and_as_the_rule(
    mechanism: str,
) -> None:
    """Each key's release frequency over many runs: dpledger's against PipelineDP's (a
    two-proportion z-test) and against the rule's own probability (the accountant's)."""
    from dpledger.accountant.partition_selection import selection_release_probability

    rows = _selection_rows()
    selection = {"mechanism": mechanism, "epsilon": EPSILON, "delta": 1e-5}
    params = {
        **_params(1.0),
        "unit_column": "user",
        "max_partitions_per_unit": 1,
        "max_rows_per_partition": 1,
        "metrics": ["count"],
        "public_partitions": None,
        "partition_selection": selection,
    }
    request = aggregation_request(params)
    runs = 300
    ours = {k: 0 for k in SELECTED_KEYS}
    for seed in range(runs):
        book = PrivacyLedger(aggregation_events(request), rng=seed)
        for key in aggregate_table(request, _columns(rows), book)["partitions"]:
            ours[key] += 1
    theirs = {k: 0 for k in SELECTED_KEYS}
    for _ in range(runs):
        for key in _pipeline_dp_selected(rows, mechanism):
            theirs[key] += 1
    for key, n in SELECTED_KEYS.items():
        p = selection_release_probability(mechanism, EPSILON, 1e-5, 1, n)
        a, b = ours[key] / runs, theirs[key] / runs
        pooled = (a + b) / 2
        spread = np.sqrt(max(pooled * (1 - pooled), 1e-4) * 2 / runs)
        assert abs(a - b) < 4.5 * spread, (key, a, b)
        assert abs(a - p) < 4.5 * np.sqrt(max(p * (1 - p), 1e-4) / runs), (key, a, p)
