"""The report of a run whose method bounds its own unit (a user-level aggregation under a
row-level configuration) names that unit and its adjacency, as the run line does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dpledger.commands.run import headline
from dpledger.core.adjacency import Adjacency
from dpledger.plugins.aggregate.plugin import AggregateParams
from dpledger.report.render_json import render_json
from dpledger.report.run_dir import report_run_dir
from dpledger.runtime.engines import aggregation_events, aggregation_request
from dpledger.runtime.plugin_manager import PluginHost

PARAMS: dict[str, Any] = {
    "partition_column": "day",
    "value_column": "spend",
    "unit_column": "user",
    "max_partitions_per_unit": 2,
    "max_rows_per_partition": 3,
    "metrics": ["count", "histogram"],
    "bin_edges": [0.0, 1.0, 5.0],
    "noise_multiplier": 4.0,
    "public_partitions": ["mon", "tue"],
}


@pytest.fixture(scope="module")
def host() -> PluginHost:
    return PluginHost.create(builtin_only=True)


def _run_dir(tmp_path: Path, params: dict[str, Any]) -> Path:
    event = aggregation_events(aggregation_request(params)).to_dict()
    record = {
        "method": "aggregate",
        "params": {k: v for k, v in params.items()},
        "declared": event,
        "declared_core": event,
        "executed": event,
        "declared_unit": "row",
        "adjacency": Adjacency().to_dict(),
        "secure_seed": False,
        "steps": [{"step": "aggregate.count"}, {"step": "aggregate.histogram"}],
        "verified": True,
        "outputs": {"files": {"count": "count.npy", "histogram": "histogram.npy"}},
    }
    run = tmp_path / "run"
    run.mkdir()
    (run / "ledger.json").write_text(json.dumps(record))
    return run


def test_a_user_level_run_is_stated_for_its_unit_column(tmp_path: Path, host: PluginHost) -> None:
    built = report_run_dir(_run_dir(tmp_path, PARAMS), delta=1e-6, host=host, brackets=False)
    report = built.report
    unit = "every row of one value of column 'user' (at most 2 partitions and 3 rows in each"
    assert report.statement.startswith(
        "The release is (ε, δ)-differentially private with respect to add/remove of one unit: "
        + unit
    )
    assert "one row" not in report.statement and "event level" not in report.statement
    assert report.unit_of_privacy.startswith("one unit of source 'data', as the method bounds")
    assert unit in report.unit_of_privacy and unit in report.adjacency
    assert [(a.adjacency, a.unit) for a in report.data_accesses] == [(report.adjacency, "user")]
    plain = json.loads(render_json(report))
    assert unit in plain["statement"] and unit in plain["adjacency"]
    # the run line names the same unit
    spec = host.method("aggregate")
    protects = spec.protects(AggregateParams(**PARAMS), Adjacency())  # type: ignore[misc]
    line = headline("aggregate", report.bound, 1e-6, Adjacency(), tmp_path, protects)
    assert protects in line and protects == report.adjacency


def test_a_row_level_run_is_stated_for_one_row(tmp_path: Path, host: PluginHost) -> None:
    row = {**PARAMS, "unit_column": None, "max_partitions_per_unit": 1}
    row["max_rows_per_partition"] = 1
    report = report_run_dir(_run_dir(tmp_path, row), delta=1e-6, host=host, brackets=False).report
    assert "add/remove of one row" in report.statement
    assert report.unit_of_privacy == "one row (record) of source 'data'"
