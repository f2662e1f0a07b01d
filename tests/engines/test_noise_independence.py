"""The aggregation's noise: one distinct counter-based stream per (release, cell, bin), the
declared distribution and scale, no correlation across metrics or bins, and the same draws on
every engine for one seed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from scipy import stats

from dpledger.runtime.engines import aggregate as aggregate_module
from dpledger.runtime.engines import noise as noise_module
from dpledger.runtime.engines import selection as selection_module
from dpledger.runtime.engines.columns import canonical_name
from dpledger.runtime.engines.histogram import bin_cell
from tests.engines.test_engines import run

KEYS = 400
EDGES = [0.0, 1.0, 2.5, 5.0, 10.0]
EVERY: dict[str, Any] = {"metrics": ["count", "sum", "mean", "histogram"], "bin_edges": EDGES}
SELECTED: dict[str, Any] = {
    "public_partitions": None,
    "partition_selection": {"mechanism": "laplace", "epsilon": 2.0, "delta": 1e-5},
}


def wide_table(keys: int = KEYS, units_per_key: int = 40, seed: int = 0) -> dict[str, Any]:
    """``units_per_key`` units of one row in each of ``keys`` keys (every key selected)."""
    rng = np.random.default_rng(seed)
    n = keys * units_per_key
    return {
        "user": np.arange(n),
        "day": np.repeat(np.array([f"k{i}" for i in range(keys)], dtype=object), units_per_key),
        "spend": rng.uniform(-1.0, 12.0, n),
    }


class Draws:
    """What one run drew: every stream's (Philox key, step, cell), and per release the exact
    values, the noisy ones and the noise scale."""

    def __init__(self) -> None:
        self.streams: list[tuple[bytes, str, str]] = []
        self.standard: dict[str, np.ndarray] = {}
        self.scaled: dict[str, np.ndarray] = {}


@pytest.fixture
def draws(monkeypatch: pytest.MonkeyPatch) -> Iterator[Draws]:
    seen = Draws()
    real_cells, real_release = noise_module.cell_noise, aggregate_module.noisy_release

    def cells(key: Any, step: str, names: Any, mechanism: str) -> Any:
        out = real_cells(key, step, names, mechanism)
        seen.streams += [(np.asarray(key).tobytes(), step, name) for name in names]
        seen.standard[step] = np.asarray(out)
        return out

    def release(ledger: Any, values: Any, names: Any, **kw: Any) -> Any:
        noisy = real_release(ledger, values, names, **kw)
        scale = kw["noise_multiplier"] * kw["sensitivity"]
        seen.scaled[kw["step"]] = (noisy - np.asarray(values, dtype=np.float64)) / scale
        return noisy

    monkeypatch.setattr(noise_module, "cell_noise", cells)
    monkeypatch.setattr(selection_module, "cell_noise", cells)
    monkeypatch.setattr(aggregate_module, "noisy_release", release)
    yield seen


def _run(mechanism: str, selected: bool, engine: str = "memory", seed: int = 7) -> Any:
    keys = [f"k{i}" for i in range(KEYS)]
    changes = {**EVERY, "mechanism": mechanism, "public_partitions": keys}
    if selected:
        changes.update(SELECTED)
    out, _ = run(wide_table(), engine, seed=seed, max_partitions_per_unit=1, **changes)
    return out


@pytest.mark.parametrize("selected", [False, True], ids=["public", "selected"])
@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_every_release_cell_and_bin_has_its_own_stream(
    draws: Draws, mechanism: str, selected: bool
) -> None:
    out = _run(mechanism, selected)
    names = [canonical_name(k) for k in out["partitions"]]
    assert len(names) > KEYS // 2
    steps = {step for _, step, _ in draws.streams}
    expected = {"aggregate.count", "aggregate.sum", "aggregate.mean", "aggregate.histogram"}
    assert steps == expected | ({"aggregate.select"} if selected else set())
    # (a) no stream is drawn twice: every (key, step, cell) distinct, every release's key
    # its own, and the counters (what Philox reads besides the key) distinct too
    assert len(set(draws.streams)) == len(draws.streams)
    keys_by_step = {step: key for key, step, _ in draws.streams}
    assert len(set(keys_by_step.values())) == len(keys_by_step)
    counters = {noise_module._counter(step, name).tobytes() for _, step, name in draws.streams}
    assert len(counters) == len(draws.streams)
    histogram = [name for _, step, name in draws.streams if step == "aggregate.histogram"]
    assert histogram == [bin_cell(j, n) for n in names for j in range(len(EDGES) - 1)]


@pytest.mark.parametrize("selected", [False, True], ids=["public", "selected"])
@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_the_noise_has_the_declared_law_and_scale_and_no_correlation(
    draws: Draws, mechanism: str, selected: bool
) -> None:
    _run(mechanism, selected)
    law = "laplace" if mechanism == "laplace" else "norm"
    releases = ("aggregate.count", "aggregate.sum", "aggregate.mean", "aggregate.histogram")
    # (b) the noise added, divided by the declared scale, is the standard law: per release and
    # over the run (fixed seed: deterministic)
    every = np.concatenate([draws.scaled[s] for s in releases])
    for z in [*(draws.scaled[s] for s in releases), every]:
        assert stats.kstest(z, law).pvalue > 1e-3
    if selected:  # the selection's own draws (Laplace thresholding)
        assert stats.kstest(draws.standard["aggregate.select"], "laplace").pvalue > 1e-3
    # the declared scale exactly: the scaled noise is the standard draw (up to rounding)
    for step in releases:
        np.testing.assert_allclose(draws.scaled[step], draws.standard[step], atol=1e-9)
    # no correlation across metrics (same key, other release), nor across a key's bins
    n = draws.scaled["aggregate.count"].size
    bins = draws.scaled["aggregate.histogram"].reshape(n, len(EDGES) - 1)
    columns = [draws.scaled[s] for s in releases[:3]] + list(bins.T)
    corr = np.corrcoef(np.stack(columns))
    off = corr[~np.eye(len(columns), dtype=bool)]
    assert np.abs(off).max() < 5 / np.sqrt(n)
    # the histogram's draws are not shrunk towards zero beside a mean
    assert abs(np.std(bins) / np.std(draws.scaled["aggregate.count"]) - 1) < 0.2


def test_the_same_seed_gives_the_same_draws_on_every_engine(draws: Draws) -> None:
    pytest.importorskip("dask.dataframe")
    memory = _run("laplace", True, "memory")
    first = dict(draws.standard)
    dask = _run("laplace", True, "dask")
    assert memory["partitions"] == dask["partitions"]
    for step, z in first.items():
        assert z.tobytes() == draws.standard[step].tobytes()
    for metric in ("count", "sum", "mean", "histogram"):
        assert np.asarray(memory[metric]).tobytes() == np.asarray(dask[metric]).tobytes()
    other = _run("laplace", True, "memory", seed=8)
    assert not np.array_equal(other["count"], memory["count"])


def test_keys_that_look_alike_get_distinct_cells() -> None:
    """Integer and text keys, keys holding the bin prefix, separators or a NUL: one cell each."""
    keys: list[Any] = [1, "1", "b:0:s:x", "x", "0:s:x", "s:x", "a\x00b", "a", "\x00b", 10, "10"]
    names = [canonical_name(k) for k in keys]
    assert len(set(names)) == len(names)
    cells = [bin_cell(j, n) for n in names for j in range(12)]
    every = names + cells
    assert len(set(every)) == len(every)
    counters = {
        noise_module._counter(step, c).tobytes()
        for step in ("aggregate.count", "aggregate.histogram")
        for c in every
    }
    assert len(counters) == 2 * len(every)
