"""A table with one heavy unit (rows in every partition), as columns, .npz and Parquet."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

DAYS = np.array(["mon", "tue", "wed", "thu", "fri", "sat"])


def heavy_table(seed: int = 0) -> dict[str, np.ndarray]:
    """40 light units (one row each) and unit 99 with 3 rows in each of the 6 partitions."""
    rng = np.random.default_rng(seed)
    light = 40
    users = np.r_[np.arange(light), np.full(3 * DAYS.size, 99)]
    days = np.r_[rng.choice(DAYS, light), np.repeat(DAYS, 3)]
    spend = np.r_[rng.uniform(0, 1, light), np.full(3 * DAYS.size, 1000.0)]
    return {"user": users.astype(np.int64), "day": days, "spend": spend}


def config_text(table: str | None, data: str | None, **params: Any) -> str:
    """A run config of the aggregate method."""
    base: dict[str, Any] = dict(
        partition_column="day",
        value_column="spend",
        unit_column="user",
        max_partitions_per_unit=1,
        max_rows_per_partition=1,
        lower=0.0,
        upper=1.0,
        metrics=["count"],
        noise_multiplier=0.5,
        mechanism="laplace",
        public_partitions=[str(d) for d in DAYS],
        engine="memory",
    )
    base.update(params)
    if table is not None:
        base["table"] = table
    lines = ["delta = 1e-5"] + ([f'data = "{data}"'] if data else []) + ["[params]"]
    for key, value in base.items():
        if value is None:
            continue
        shown = repr(value).replace("'", '"') if not isinstance(value, str) else f'"{value}"'
        lines.append(f"{key} = {shown}")
    return "\n".join(lines) + "\n"


@pytest.fixture
def heavy() -> dict[str, np.ndarray]:
    return heavy_table()


@pytest.fixture
def heavy_files(tmp_path: Path, heavy: dict[str, np.ndarray]) -> dict[str, Path]:
    np.savez(tmp_path / "t.npz", **heavy)
    out = {"npz": tmp_path / "t.npz"}
    try:
        import pandas as pd

        pd.DataFrame(heavy).to_parquet(tmp_path / "t.parquet")
        out["parquet"] = tmp_path / "t.parquet"
    except ImportError:
        pass
    return out
