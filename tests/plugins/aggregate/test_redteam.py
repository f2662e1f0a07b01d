"""Planted engine bugs (L0 not enforced; clipping skipped on one partition) are caught: by the
whole-method audit (``dpledger audit aggregate`` and its API) and by a white-box check of the
change one unit makes; the honest engine passes both."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest

from dpledger.audit.auditor import NO_VIOLATION, VIOLATION
from dpledger.audit.method_audit import audit_method
from dpledger.cli import main
from dpledger.plugins.aggregate.plugin import SPEC, AggregateParams
from dpledger.runtime.engines import bounding
from dpledger.runtime.engines.protocol import combine
from dpledger.runtime.engines.query import AggregationQuery
from tests.plugins.aggregate.conftest import DAYS, config_text, heavy_table

REAL_KEPT = bounding.kept_rows
REAL_FIXED = bounding._fixed_values


def no_l0(keys: Any, units: Any, fixed: Any, query: AggregationQuery) -> Any:
    """The planted bug: L∞ enforced, L0 not."""
    return REAL_KEPT(keys, units, fixed, attrs.evolve(query, max_partitions=10**6))


def _heavy_units_partition() -> str:
    """The partition the honest bounding keeps for the heavy unit (a keyed hash picks it)."""
    table = heavy_table()
    q = AggregationQuery("day", "spend", "user", 1, 1, 0.0, 1.0, 20)
    keep = table["user"] != 99
    full = combine([bounding.bound_chunk(table, q, None)])
    less = combine([bounding.bound_chunk({c: v[keep] for c, v in table.items()}, q, None)])
    (name,) = [k for k in full.keys if full.row(k) != less.row(k)]
    return name[2:]


BUGGY = _heavy_units_partition()


def unclipped_partition(columns: Any, query: AggregationQuery, n: int) -> Any:
    """The planted bug: the values of one partition are not clipped."""
    fixed = REAL_FIXED(columns, query, n)
    days = np.asarray(columns[query.partition_column])
    raw = np.rint(np.ldexp(np.asarray(columns[query.value_column], float), query.scale_bits))
    return np.where(days == BUGGY, raw.astype(np.int64), fixed)


BUGS = {
    "no_l0": ("kept_rows", no_l0, "count"),
    "unclipped": ("_fixed_values", unclipped_partition, "sum"),
}


@pytest.fixture(params=sorted(BUGS))
def planted(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    name, bug, metric = BUGS[request.param]
    monkeypatch.setattr(bounding, name, bug)
    yield metric


def _params(metric: str) -> AggregateParams:
    return SPEC.make_params(
        dict(
            partition_column="day",
            value_column="spend",
            unit_column="user",
            metrics=[metric],
            noise_multiplier=0.5,
            mechanism="laplace",
            public_partitions=[str(d) for d in DAYS],
        )
    )


def _largest_change(heavy: dict[str, np.ndarray], metric: str) -> float:
    """The L2 change of the metric's vector when unit 99 is removed, on the grid."""
    q = AggregationQuery("day", "spend", "user", 1, 1, 0.0, 1.0, 20)
    keep = heavy["user"] != 99
    full = combine([bounding.bound_chunk(heavy, q, None)])
    less = combine([bounding.bound_chunk({c: v[keep] for c, v in heavy.items()}, q, None)])
    i = 0 if metric == "count" else 1
    scale = 1.0 if metric == "count" else 2.0**-20
    keys = set(full.keys) | set(less.keys)
    return float(np.sqrt(sum(((full.row(k)[i] - less.row(k)[i]) * scale) ** 2 for k in keys)))


def test_a_planted_bug_breaks_the_sensitivity_the_honest_engine_keeps(
    heavy: dict[str, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    for metric in ("count", "sum"):
        assert _largest_change(heavy, metric) <= 1.0  # L0 = L∞ = 1, C = 1
    for name, bug, metric in BUGS.values():
        with monkeypatch.context() as m:
            m.setattr(bounding, name, bug)
            assert _largest_change(heavy, metric) > 2.0  # more than twice the sensitivity


def test_the_audit_finds_no_violation_in_the_honest_engine(heavy: dict[str, np.ndarray]) -> None:
    result = audit_method(SPEC, _params("count"), heavy, runs=400, seed=1)
    assert result.verdict == NO_VIOLATION


def test_the_audit_catches_a_planted_engine_bug(planted: str, heavy: dict[str, np.ndarray]) -> None:
    result = audit_method(SPEC, _params(planted), heavy, runs=400, seed=1)
    assert result.verdict == VIOLATION


@pytest.mark.slow
def test_dpledger_audit_aggregate_catches_a_planted_bug(
    planted: str,
    heavy_files: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cfg = tmp_path / "audit.toml"
    cfg.write_text(config_text(None, heavy_files["npz"].name, metrics=[planted]))
    code = main(["audit", "aggregate", "--config", str(cfg), "--runs", "400", "--seed", "1"])
    out = capsys.readouterr().out
    assert code == 1 and "verdict: violation" in out.lower(), out
