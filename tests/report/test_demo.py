from __future__ import annotations

import csv
import json
from pathlib import Path

import attrs
import numpy as np
import pytest

from tests.conftest import TinyDemo

pytest.importorskip("torch")
pytest.importorskip("ot")


def test_demo_smoke_at_tiny_size(tiny_demo: TinyDemo) -> None:
    from dpledger.accountant.graph_account import account_graph
    from dpledger.core.events import event_from_dict
    from dpledger.demo import TINY
    from dpledger.report.numbers import tidy_text
    from dpledger.runtime.coverage import canonical_multiset
    from dpledger.runtime.pipeline import load_pipeline

    out, result = tiny_demo.out, tiny_demo.result
    for name in (
        "pipeline.toml",
        "ledger.json",
        "synthetic.npz",
        "synthetic_paths.csv",
        "report.md",
        "report.html",
        "report.json",
        "report-privacy_profile.png",
        "report-composition_graph.png",
    ):
        assert (out / name).is_file(), name
    # the raw data figure and the seed are private: beside the published directory, not in it
    private = out.with_name("demo.private")
    assert sorted(p.name for p in private.iterdir()) == [
        "PRIVATE-diagnostics.json",
        "PRIVATE-trajectories.png",
    ]
    assert not list(out.glob("PRIVATE-*"))
    assert json.loads((private / "PRIVATE-diagnostics.json").read_text())["seed"] == TINY.seed
    assert set(result.files) >= {private / "PRIVATE-trajectories.png", out / "ledger.json"}
    with np.load(out / "synthetic.npz") as z:
        assert z["particles"].shape == (TINY.T, TINY.m, 2)
        assert z["init_particles"].shape == (TINY.T, TINY.m, 2)
        assert z["paths"].shape == (TINY.n_paths, TINY.T, 2)
        np.testing.assert_allclose(z["times"], np.linspace(0.0, 1.0, TINY.T))
    with (out / "synthetic_paths.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == TINY.n_paths * TINY.T and set(rows[0]) == {"path", "time", "x0", "x1"}

    ledger = json.loads((out / "ledger.json").read_text())
    assert ledger["method"] == "trajectories" and ledger["provenance"]["plugin"] == "trajectories"
    assert ledger["verified"] is True and ledger["exact_match"] is True
    declared = event_from_dict(ledger["declared_core"])
    executed = event_from_dict(ledger["executed"])
    assert canonical_multiset(executed) == canonical_multiset(declared)
    # one joint release per step over all marginals: the mixture warm start (counts, sums),
    # then K Poisson samples, each closed by one Gaussian draw
    samples = [s for s in ledger["steps"] if "poisson_sample" in s]
    noises = [s for s in ledger["steps"] if s.get("event", {}).get("kind") == "gaussian"]
    assert len(samples) == TINY.K and all(s["poisson_sample"] == TINY.rho for s in samples)
    # what ran on each Poisson batch is logged privately (a batch's size depends on the data)
    assert len(noises) == 2 and len(ledger["steps"]) == TINY.K + 2
    assert [s["step"].split("/", 1)[1] for s in noises] == ["warm/counts", "warm/sums"]
    private = json.loads((out.with_name("demo.private") / "PRIVATE-diagnostics.json").read_text())
    batch_noises = [s for s in private["steps"] if s.get("event", {}).get("kind") == "gaussian"]
    assert len(batch_noises) == TINY.K
    assert all(s["event"]["noise_multiplier"] == TINY.tau for s in batch_noises)
    assert batch_noises[0]["step"] == "t0+t1+t2/p0/k0/noise"
    assert batch_noises[0]["batch"] == f"sample {samples[0]['step']!r}"
    assert ledger["params"]["n_per_time"] == [TINY.N] * TINY.T

    report = json.loads((out / "report.json").read_text())
    expected = account_graph(load_pipeline(out / "pipeline.toml").graph, delta=TINY.delta).bound
    assert report["bound"]["epsilon"] == expected.epsilon == result.epsilon
    assert report["runtime"]["verified"] is True
    assert report["runtime"]["method"] == "trajectories"
    assert report["runtime"]["steps"] == TINY.K + 2
    # text follows the printing rule: a parameter of more than six digits shown with six, "≈"
    assert report["runtime"]["declared_core"] == tidy_text(declared.describe())
    # written compactly: the two equal warm-start draws and the K steps each fold into one term
    warm = declared.events[0]
    assert warm == declared.events[1] and warm.kind == "gaussian"
    assert report["runtime"]["executed"] == tidy_text(
        f"composed(self_composed(count=2, {warm.describe()}), "
        f"self_composed(count={TINY.K}, poisson_sampled(sampling_probability={TINY.rho}, "
        f"gaussian(noise_multiplier={TINY.tau}))))"
    )
    assert any("central-limit formula" in w for w in report["warnings"])
    md = (out / "report.md").read_text()
    assert "- method: trajectories" in md and "- ledger verified" in md
    # the method's report section sees the declared events and compares Lemma 3.1 with them
    row = next(line for line in md.splitlines() if line.startswith(f"| {TINY.rho:g} | "))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2] == str(TINY.K)
    assert float(cells[4]) < float(cells[5]) and cells[6] == "**yes**"


def test_pipeline_states_the_methods_declaration() -> None:
    from dpledger.core.adjacency import Adjacency
    from dpledger.core.errors import LedgerViolationError
    from dpledger.demo import (
        TINY,
        _check_declaration,
        declared_warm_start,
        demo_example,
        demo_params,
        pipeline_event,
    )
    from dpledger.plugins.trajectories.declare import warm_start_multipliers
    from dpledger.runtime.plugin_manager import PluginHost
    from dpledger.runtime.runner import declare_checked

    spec = PluginHost().method("trajectories")
    params = demo_params(spec, TINY, demo_example(spec, TINY).params)
    assert params.sizes == (TINY.N,) * TINY.T and params.total_iterations == TINY.K
    declared = declare_checked(spec, params, Adjacency()).event
    warm = warm_start_multipliers(params.warm_start, Adjacency())
    assert declared_warm_start(declared) == warm  # what the demo reads off the declaration
    _check_declaration(pipeline_event(TINY, warm), declared, spec.name)  # equal: no error
    with pytest.raises(LedgerViolationError, match=r"pipeline\.toml states"):
        _check_declaration(
            pipeline_event(attrs.evolve(TINY, K=TINY.K + 1), warm), declared, spec.name
        )


def test_plugin_reports_progress_through_the_data_mapping() -> None:
    from dpledger.core.adjacency import Adjacency
    from dpledger.core.errors import InvalidParameterError
    from dpledger.demo import TINY, demo_params
    from dpledger.plugins.trajectories.data import make_multimodal
    from dpledger.runtime.plugin_manager import PluginHost
    from dpledger.runtime.runner import run_verified

    config = attrs.evolve(TINY, K=4, sinkhorn_iters=20)
    spec = PluginHost().method("trajectories")
    data = make_multimodal(N=config.N, T=config.T, seed=0)
    public = {"n_per_time": [config.N] * config.T, "radius": data.radius, "center": data.center}
    params = demo_params(spec, config, public)
    seen: list[int] = []
    with pytest.warns(RuntimeWarning, match="Sinkhorn"):
        run = run_verified(
            spec,
            params,
            {"marginals": data.marginals, "times": data.times, "progress": seen.append},
            adjacency=Adjacency(),
            seed=1,
        )
    assert seen == [1, 2, 3, 4]
    assert run.ledger.matches_exactly()
    with pytest.raises(InvalidParameterError, match=r"data\.progress"):
        run_verified(
            spec,
            params,
            {"marginals": data.marginals, "progress": 3},
            adjacency=Adjacency(),
            seed=1,
        )


def test_fresh_directory_never_reuses_earlier_output(tmp_path: Path) -> None:
    from dpledger.commands.demo import fresh_directory

    base = tmp_path / "dpledger-demo"
    assert fresh_directory(base) == base
    base.mkdir()
    assert fresh_directory(base) == base  # empty: used as is
    (base / "report.html").write_text("earlier")
    assert fresh_directory(base) == tmp_path / "dpledger-demo-2"
    (tmp_path / "dpledger-demo-2").mkdir()
    (tmp_path / "dpledger-demo-2" / "x").write_text("")
    (tmp_path / "dpledger-demo-3").write_text("a file")
    assert fresh_directory(base) == tmp_path / "dpledger-demo-4"
    assert (base / "report.html").read_text() == "earlier"
