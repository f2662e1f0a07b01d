from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("ot")


def test_demo_smoke_at_tiny_size(tmp_path: Path) -> None:
    from dpledger.core.graph import account_graph
    from dpledger.core.pipeline import load_pipeline
    from dpledger.demo import TINY, run_demo

    out = tmp_path / "demo"
    result = run_demo(out, TINY, quiet=True)
    for name in ("pipeline.toml", "ledger.json", "synthetic.npz", "synthetic_paths.csv",
                 "report.md", "report.html", "report.json", "trajectories.png",
                 "report-privacy_profile.png", "report-composition_graph.png"):
        assert (out / name).is_file(), name
    with np.load(out / "synthetic.npz") as z:
        assert z["particles"].shape == (TINY.T, TINY.m, 2)
        assert z["paths"].shape == (TINY.n_paths, TINY.T, 2)
    with (out / "synthetic_paths.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == TINY.n_paths * TINY.T and set(rows[0]) == {"path", "time", "x0", "x1"}
    ledger = json.loads((out / "ledger.json").read_text())
    assert ledger["verified"] and all(m["verified"] for m in ledger["marginals"])
    # every marginal executed its warm start and K sampled steps, each booked by its ledger
    assert all(m["executed"].count("poisson_sampled") == TINY.K for m in ledger["marginals"])
    report = json.loads((out / "report.json").read_text())
    expected = account_graph(load_pipeline(out / "pipeline.toml").graph, delta=TINY.delta).bound
    assert report["bound"]["epsilon"] == expected.epsilon == result.epsilon
    assert report["runtime"]["verified"] is True
    assert any("central-limit formula" in w for w in report["warnings"])
