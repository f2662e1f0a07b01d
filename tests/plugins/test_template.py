"""The plugin template: its spec passes the contract, and it installs as a real distribution."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from dpledger.runtime.testing import MethodPluginContract

TEMPLATE = Path(__file__).resolve().parents[2] / "examples" / "plugin_template"


def _load_template_plugin() -> Any:
    path = TEMPLATE / "dpledger_plugin_template" / "plugin.py"
    spec = importlib.util.spec_from_file_location("_dpledger_template_plugin_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


template = _load_template_plugin()


class TestTemplateContract(MethodPluginContract):
    spec = template.SPEC
    valid_params: ClassVar[dict[str, Any]] = {"clip": 2.0, "noise_multiplier": 0.8}
    bad_params: ClassVar[list[dict[str, Any]]] = [{"clip": -2.0}]

    def make_data(self, rng: np.random.Generator) -> Any:
        return rng.normal(size=(10, 2))


def test_template_declares_its_entry_point() -> None:
    import tomllib

    project = tomllib.loads((TEMPLATE / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["dpledger"] == {
        "template_clipped_sum": "dpledger_plugin_template.plugin"
    }


@pytest.mark.slow
def test_template_installs_and_is_listed(tmp_path: Path) -> None:
    pip = [sys.executable, "-m", "pip"]
    build = tmp_path / "src"
    shutil.copytree(TEMPLATE, build, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    subprocess.run(
        [*pip, "install", "--no-deps", "--no-build-isolation", "--no-index", "-q", str(build)],
        check=True,
        capture_output=True,
    )
    try:
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "dpledger",
                "plugins",
                "--json",
                "--plugins-allow",
                "template_clipped_sum",
            ],
            check=True,
            capture_output=True,
            text=True,
            cwd=tmp_path,
        ).stdout
        [info] = json.loads(out)["plugins"]
        assert info["name"] == "template_clipped_sum"
        assert info["distribution"] == "dpledger-plugin-template"
        assert info["version"] == "0.1.0" and info["tier"] == "unverified"
        assert info["methods"] == ["clipped_sum"] and info["problems"] == []
    finally:
        # put back the copy the test environment installs (other tests account its method)
        subprocess.run(
            [
                *pip,
                "install",
                "--no-deps",
                "--no-build-isolation",
                "--no-index",
                "--force-reinstall",
                "-q",
                str(TEMPLATE),
            ],
            check=True,
            capture_output=True,
        )


def test_template_method_is_accounted_from_a_pipeline_file(tmp_path: Path) -> None:
    """A release naming the installed template's method is accounted from its declaration."""
    pytest.importorskip("dpledger_plugin_template")

    pipeline = tmp_path / "template.toml"
    pipeline.write_text(
        'delta = 1e-6\n[[sources]]\nname = "rows"\n'
        '[[releases]]\nid = "sum"\ninput = "rows"\nmethod = "clipped_sum"\n'
        "params = { clip = 1.0, noise_multiplier = 2.0 }\ncount = 10\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "dpledger", "account", str(pipeline), "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    # 10 Gaussian releases of multiplier 2 are one Gaussian of multiplier 2 / sqrt(10)
    event_file = tmp_path / "event.toml"
    event_file.write_text(
        'delta = 1e-6\n[[sources]]\nname = "rows"\n'
        '[[releases]]\nid = "sum"\ninput = "rows"\n'
        'event = { kind = "gaussian", noise_multiplier = 2.0 }\ncount = 10\n'
    )
    ref = subprocess.run(
        [sys.executable, "-m", "dpledger", "account", str(event_file), "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )
    assert data["epsilon"] == json.loads(ref.stdout)["epsilon"]
    assert "template_clipped_sum" in out.stdout

    pipeline.write_text(pipeline.read_text().replace("clip = 1.0", "clip = -1.0"))
    bad = subprocess.run(
        [sys.executable, "-m", "dpledger", "account", str(pipeline)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert bad.returncode == 2
    assert "releases[0].params.clip" in bad.stderr and "Traceback" not in bad.stderr
