"""The plugin module registers the three methods on a host (entry point added separately)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from dpledger.cli import main
from dpledger.plugins.swflow import plugin
from dpledger.runtime.plugin_manager import PluginHost


def test_hookimpl_registers_three_methods(dpledger_register) -> None:  # type: ignore[no-untyped-def]
    with dpledger_register(plugin, name="swflow") as host:
        assert isinstance(host, PluginHost)
        methods = host.methods()
        assert {"dpswflow-r", "dpswflow", "dpswgen"} <= set(methods)
        assert methods["dpswflow"].provenance is not None


def test_importing_the_plugin_does_not_import_torch() -> None:
    code = (
        "import sys; import dpledger.plugins.swflow.plugin; "
        "print('torch' in sys.modules, 'ot' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["False", "False"]


def test_cli_run_writes_verified_outputs(tmp_path, make_dist, capfd) -> None:  # type: ignore[no-untyped-def]
    make_dist("swflow-under-test", "0.1", {}, {"swflow": "dpledger.plugins.swflow.plugin"})
    rng = np.random.default_rng(0)
    data = rng.normal(size=(30, 2))
    np.save(tmp_path / "latents.npy", data / np.linalg.norm(data, axis=1, keepdims=True))
    (tmp_path / "run.toml").write_text(
        'data = "latents.npy"\ndelta = 1e-5\n[adjacency]\nrelation = "replace_one"\n'
        "[params]\nnum_steps = 3\nnum_projections = 4\nnum_sub_projections = 2\n"
        "num_particles = 10\ntarget_epsilon = 2.0\n"
    )
    out = tmp_path / "out"
    code = main(
        [
            "run",
            "dpswflow",
            "--config",
            str(tmp_path / "run.toml"),
            "--out",
            str(out),
            "--seed",
            "1",
            "--plugins-allow",
            "swflow",
        ]
    )
    assert code == 0, capfd.readouterr().err
    ledger = json.loads((out / "ledger.json").read_text())
    assert ledger["declared"]["kind"] == "gaussian"
    assert ledger["privacy"]["epsilon"] <= 2.0
    assert np.load(out / "particles.npy").shape == (10, 2)
