"""Snapshots of the Markdown and JSON renderings (regenerate with DPLEDGER_UPDATE_SNAPSHOTS=1)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from dpledger import __version__
from dpledger.report import render_json, render_markdown, report_pipeline_file

SNAPSHOTS = Path(__file__).with_name("snapshots")
UPDATE = os.environ.get("DPLEDGER_UPDATE_SNAPSHOTS") == "1"


def _normalise(text: str) -> str:
    return text.replace(f"dpledger {__version__}", "dpledger <version>").replace(
        f'"dpledger_version": "{__version__}"', '"dpledger_version": "<version>"'
    )


def _close(a: Any, b: Any, path: str = "") -> None:
    """Equal structures; floats equal to 1e-9 relative (FFT round-off across machines)."""
    if isinstance(a, float) or isinstance(b, float):
        assert isinstance(a, int | float) and isinstance(b, int | float), path
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-300), f"{path}: {a} != {b}"
    elif isinstance(a, dict):
        assert isinstance(b, dict) and sorted(a) == sorted(b), path
        for k in a:
            _close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _close(x, y, f"{path}[{i}]")
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from dpledger.runtime.plugin_manager import PluginHost, make_plugin_manager

    from .conftest import PIPELINE, write_pipeline

    path = write_pipeline(tmp_path_factory.mktemp("snap") / "fixture.json", PIPELINE)
    return report_pipeline_file(path, host=PluginHost(make_plugin_manager(load_entrypoints=False)))


def _check(name: str, text: str) -> Path:
    path = SNAPSHOTS / name
    if UPDATE or not path.exists():
        if not UPDATE:
            pytest.fail(f"snapshot {name} is missing; run with DPLEDGER_UPDATE_SNAPSHOTS=1")
        path.write_text(_normalise(text), encoding="utf-8")
    return path


def test_markdown_snapshot(built: Any) -> None:
    text = render_markdown(built.report)
    path = _check("fixture.md", text)
    assert _normalise(text) == path.read_text(encoding="utf-8")


def test_json_snapshot(built: Any) -> None:
    text = render_json(built.report)
    path = _check("fixture.json", text)
    got = json.loads(_normalise(text))
    _close(got, json.loads(path.read_text(encoding="utf-8")))
    assert got["schema_version"] == 1
    # deterministic: the same report renders to the same bytes, keys sorted
    assert render_json(built.report) == text
    assert list(got) == sorted(got)
