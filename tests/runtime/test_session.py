"""One run session: the CLI, the demo, the whole-method audit and the Opacus integration build
their run records with :mod:`dpledger.runtime.session`, so one run gives one record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest

from dpledger.cli import main
from dpledger.core.adjacency import Adjacency
from dpledger.runtime import session
from dpledger.runtime.plugin_manager import PluginHost
from dpledger.runtime.run_record import RECORD_FILE
from tests.conftest import TinyDemo

#: fields a run directory's writer fills in for itself (which files it wrote, the pipeline
#: file the demo adds beside the record)
WRITER_FIELDS = ("outputs", "pipeline")


def _record(run_dir: Path) -> dict[str, Any]:
    data = json.loads((run_dir / RECORD_FILE).read_text())
    return {k: v for k, v in data.items() if k not in WRITER_FIELDS}


def _cli_run(tmp: Path, method: str, params: dict[str, Any], data: Any, seed: int) -> Path:
    if isinstance(data, dict):
        np.savez(tmp / "data.npz", **data)
        name = "data.npz"
    else:
        np.save(tmp / "data.npy", data)
        name = "data.npy"
    config = {"data": name, "params": {k: v for k, v in params.items() if v is not None}}
    (tmp / "run.json").write_text(json.dumps(config))
    out = tmp / "cli"
    args = ["run", method, "--config", str(tmp / "run.json"), "--out", str(out)]
    assert main([*args, "--seed", str(seed)]) == 0
    return out


def test_the_cli_writes_the_record_the_session_builds(tmp_path: Path) -> None:
    host = PluginHost.create(builtin_only=True)
    spec = host.method("gaussian_mechanism")
    params = spec.make_params({"sensitivity": 1.0, "noise_multiplier": 2.0})
    data = np.arange(5.0)
    out = _cli_run(tmp_path, spec.name, attrs.asdict(params), data, seed=7)
    plan = session.plan(spec, params, Adjacency(), host.lower, delta=1e-5)
    result = session.execute(plan.declared, data, seed=7)
    built = session.record(plan, result).to_json()
    written = _record(out)
    assert written == {
        k: v for k, v in json.loads(json.dumps(built)).items() if k not in WRITER_FIELDS
    }
    # the outputs the session's run gave are the ones the command wrote
    np.testing.assert_array_equal(np.load(out / "release.npy"), result.outputs["release"])


@pytest.mark.filterwarnings("ignore")
def test_the_demo_and_the_cli_write_one_record_for_one_run(
    tiny_demo: TinyDemo, tmp_path: Path
) -> None:
    from dpledger.demo import TINY, demo_example

    demo = _record(tiny_demo.out)
    host = PluginHost.create(builtin_only=True)
    example = demo_example(host.method("trajectories"), TINY)
    data = {"marginals": np.asarray(example.data["marginals"]), "times": example.data["times"]}
    cli = _record(_cli_run(tmp_path, "trajectories", demo["params"], data, seed=TINY.seed))
    assert cli == demo
    assert demo["exact_match"] is True and demo["accounted"]["lift_rules"] == ["unchanged_k1"]
    # the bound the record keeps (the declaration's) is the one the demo's report certifies
    # from pipeline.toml, up to the rounding of two reductions of one event
    report = json.loads((tiny_demo.out / "report.json").read_text())
    assert demo["privacy"]["epsilon"] == pytest.approx(report["bound"]["epsilon"], rel=1e-12)


def test_the_method_audit_runs_what_the_session_executes() -> None:
    from dpledger.audit.method_audit import claimed_event, method_sampler

    host = PluginHost.create(builtin_only=True)
    spec = host.method("laplace_mechanism")
    params = spec.make_params({"sensitivity": 1.0, "noise_multiplier": 2.0})
    data = np.arange(4.0)
    plan = session.plan(spec, params, Adjacency(), host.lower, delta=1e-5)
    claim, adjacency = claimed_event(spec, params, Adjacency(), host.lower)
    assert (claim, adjacency) == (plan.declared.per_unit, plan.declared.unit_adjacency)
    rng = np.random.default_rng(3)
    seed = int(np.random.default_rng(3).integers(0, 2**62))
    sampled = method_sampler(spec, params, Adjacency())(data, 1, rng)
    expected = session.execute(plan.declared, data, seed=seed).outputs["release"]
    np.testing.assert_array_equal(np.ravel(sampled), np.ravel(expected))


def test_the_opacus_record_is_built_by_the_session() -> None:
    from pathlib import Path

    from dpledger.integrations import opacus

    # the integration's modules (opacus.py and its opacus_*.py companions)
    folder = Path(opacus.__file__).parent
    source = "\n".join(p.read_text(encoding="utf-8") for p in sorted(folder.glob("opacus*.py")))
    assert "record_fields(" in source and "RunRecord(" not in source
    assert "write_run_dir(" in source and "mkdtemp" not in source
