from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

#: a small pipeline with two sources of cost: a Gaussian repeated 4 times, a Laplace release and
#: a Poisson-subsampled Gaussian (so closed form, PLD, RDP and PRV all take part)
PIPELINE: dict[str, Any] = {
    "name": "report-fixture",
    "delta": 1e-5,
    "sources": [
        {
            "name": "db",
            "description": "the protected table",
            "adjacency": {"relation": "add_remove", "unit": "row"},
        }
    ],
    "releases": [
        {
            "id": "counts",
            "input": "db",
            "count": 4,
            "method": "gaussian_mechanism",
            "description": "four noisy counts",
            "event": {"kind": "gaussian", "noise_multiplier": 3.0},
        },
        {
            "id": "median",
            "input": "db",
            "method": "laplace_mechanism",
            "event": {"kind": "laplace", "noise_multiplier": 10.0},
        },
        {
            "id": "sgd",
            "input": "db",
            "count": 20,
            "after": ["counts"],
            "event": {
                "kind": "poisson_sampled",
                "sampling_probability": 0.01,
                "event": {"kind": "gaussian", "noise_multiplier": 1.0},
            },
        },
    ],
    "postprocess": [{"id": "model", "inputs": ["sgd"]}],
}


def write_pipeline(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(json.dumps(data, indent=2))
    return path


@pytest.fixture
def pipeline_file(tmp_path: Path) -> Path:
    return write_pipeline(tmp_path / "fixture.json", PIPELINE)


@pytest.fixture
def empty_host() -> Any:
    """A plugin host with no plugins (reports do not depend on what is installed)."""
    from dpledger.runtime.plugin_manager import PluginHost, make_plugin_manager

    return PluginHost(make_plugin_manager(load_entrypoints=False))
