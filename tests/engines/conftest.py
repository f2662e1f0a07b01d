"""A small table with several units, partitions and rows per unit, as columns and as files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpledger.core.events import Event
from dpledger.runtime.engines import aggregation_events, aggregation_request
from dpledger.runtime.ledger import PrivacyLedger

PARAMS: dict[str, Any] = dict(
    partition_column="day",
    value_column="spend",
    unit_column="user",
    max_partitions_per_unit=2,
    max_rows_per_partition=2,
    lower=0.0,
    upper=10.0,
    metrics=["count", "sum", "mean"],
    noise_multiplier=2.0,
    public_partitions=["fri", "mon", "tue", "wed"],
)


def make_table(n: int = 600, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "user": rng.integers(0, n // 6, n),
        "day": rng.choice(np.array(["mon", "tue", "wed", "sun"], dtype=object), n),
        "spend": np.round(rng.exponential(4.0, n), 3),
    }


@pytest.fixture(scope="module")
def table() -> dict[str, np.ndarray]:
    return make_table()


@pytest.fixture(scope="module")
def table_files(tmp_path_factory: pytest.TempPathFactory, table: dict[str, Any]) -> dict[str, Path]:
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    where = tmp_path_factory.mktemp("tables")
    frame = pd.DataFrame(table)
    frame.to_parquet(where / "t.parquet", row_group_size=150)
    frame.to_csv(where / "t.csv", index=False)
    return {"parquet": where / "t.parquet", "csv": where / "t.csv"}


def declared(params: dict[str, Any] | None = None) -> Event:
    return aggregation_events(aggregation_request(params or PARAMS))


def ledger(seed: int = 7, params: dict[str, Any] | None = None) -> PrivacyLedger:
    return PrivacyLedger(declared(params), rng=seed)
