"""``dpledger audit METHOD --config FILE`` on the heavy builtin methods (trajectories, the
sliced-Wasserstein flows, SHK, PATH) and the table baselines (Direct, AIM): no violation at
delta 1e-3 (slow tier: each audit runs its method hundreds of times).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpledger.audit.auditor import NO_VIOLATION
from dpledger.audit.method_audit import audit_method
from dpledger.core.adjacency import Adjacency
from dpledger.runtime.plugin_manager import PluginHost

from .method_audit_inputs import audit_json, write_config

TRAJ_PARAMS = {
    "n_per_time": [3, 3],
    "m": 2,
    "K": 1,
    "tau": 2.0,
    "C": 1.0,
    "rho": 0.5,
    "eta": 0.2,
    "sigma": 0.5,
    "lambda_": 1.0,
    "diffusivity": 0.2,
    "radius": 1.0,
    "center": [0.0, 0.0],
    "warm_start": {"kind": "none", "public_init": "gaussian", "public_std": 0.05},
    "sinkhorn_iters": 2000,
    "sinkhorn_tol": 1e-6,
}
SW_DATA = np.array([[-0.9, 0.0], [0.0, 0.0], [0.2, 0.1]])
SW_COMMON = {"num_steps": 1, "num_projections": 2, "num_particles": 16, "noise_multiplier": 2.0}
PATH_PARAMS = {
    "noise_multiplier": 4.0,
    "delta": 1e-3,
    "steps": 1,
    "sampling_probability": 1.0,
    "clip_norm": 0.1,
    "selection_epsilon": 0.5,
    "k": 1,
    "overgeneration": 2.0,
    "embedder": "summary",
    "lora_rank": 1,
    "n_layer": 1,
    "n_head": 1,
    "n_embd": 4,
    "max_tokens": 64,
    "max_rows": 1,
    "physical_batch": 4,
    "length_pmf": [1.0],
    "n_synthetic": 1,
    "generation_batch": 8,
    "max_row_tokens": 32,
    "expected_batch_size": 3.0,
}
TABLES = {
    "schema": [
        {"name": "id", "kind": "static"},
        {"name": "x", "kind": "numeric", "lower": -5.0, "upper": 5.0},
        {"name": "c", "kind": "categorical", "categories": ["a", "b"]},
    ],
    "users": [{"user_id": str(i), "rows": [[str(i), -4.0, "a"]]} for i in range(3)],
}
USER = {"unit": "user", "unit_key": "id"}
HEAVY: dict[str, tuple[str, Any, dict[str, Any], dict[str, Any], str, int]] = {
    # label: (method, data, params, adjacency, plugin, runs)
    "trajectories": (
        "trajectories",
        {
            "marginal_0": np.array([[-0.9, 0.0], [0.0, 0.0], [0.1, 0.1]]),
            "marginal_1": np.zeros((3, 2)),
        },
        TRAJ_PARAMS,
        {"relation": "replace_one"},
        "trajectories",
        300,
    ),
    "dpswflow": (
        "dpswflow",
        SW_DATA,
        {**SW_COMMON, "num_sub_projections": 2},
        {"relation": "replace_one"},
        "swflow",
        600,
    ),
    "dpswflow-r": (
        "dpswflow-r",
        SW_DATA,
        {**SW_COMMON, "dataset_size": 3, "batch_size": 1},
        {"relation": "replace_one"},
        "swflow",
        600,
    ),
    "dpswgen": (
        "dpswgen",
        SW_DATA,
        {
            **SW_COMMON,
            "dataset_size": 3,
            "batch_size": 2,
            "hidden": 4,
            "noise_dim": 2,
            "learning_rate": 0.5,
        },
        {"relation": "replace_one"},
        "swflow",
        300,
    ),
    "shk_grid": (
        "shk",
        np.array([0.0, 0.1]),
        {"t": 3.0, "beta": 1.0, "n": 2, "n_cells": 32, "n_samples": 1},
        {},
        "shk",
        300,
    ),
    "path": ("path", TABLES, PATH_PARAMS, USER, "path", 60),
}


@pytest.fixture
def _one_torch_thread() -> Iterator[None]:
    """Torch runs are much faster single-threaded at these sizes (and the machine is shared)."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(old)


@pytest.mark.slow
@pytest.mark.usefixtures("_one_torch_thread")
@pytest.mark.parametrize("label", sorted(HEAVY))
def test_heavy_method_shows_no_violation(
    label: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    method, data, params, adjacency, plugin, runs = HEAVY[label]
    if method == "path":
        (tmp_path / "tables.json").write_text(json.dumps(data))
        config: dict[str, Any] = {"data": "tables.json", "params": params, "adjacency": adjacency}
        cfg = tmp_path / "cfg.json"
        cfg.write_text(json.dumps(config))
    else:
        cfg = write_config(tmp_path, data, params, adjacency)
    code, out = audit_json(
        capfd,
        method,
        "--config",
        str(cfg),
        "--relation",
        "both",
        "--runs",
        str(runs),
        "--delta",
        "1e-3",
        "--seed",
        "0",
        "--plugins-allow",
        plugin,
    )
    for rel in out["relations"]:
        for a in rel["audits"]:
            print(
                f"{label} [{rel['relation']}]: claim {a['claimed_epsilon']:.3f}, lower bound "
                f"{a['epsilon_lower']:.3f}, ceiling {a['ceiling']:.2f}: {a['verdict']}"
            )
            assert math.isfinite(a["claimed_epsilon"]) and a["claimed_epsilon"] > 0
    for rel, reason in ((s["relation"], s["reason"]) for s in out["skipped"]):
        print(f"{label} [{rel}]: not audited ({reason})")
    assert code == 0 and out["verdict"] == NO_VIOLATION
    assert out["relations"], "no relation was audited"


@pytest.mark.slow
@pytest.mark.parametrize("method", ["direct", "aim"])
def test_table_baselines_show_no_violation(method: str) -> None:
    from dpledger.plugins.path.ddp import tables_from_json

    host = PluginHost.create(allow=["path_baselines"])
    spec = host.method(method)
    params = spec.make_params(
        {
            "epsilon": 1.0,
            "delta": 1e-3,
            "length": 1,
            "bins": 2,
            "iters": 1,
            **({"rounds": 2} if method == "aim" else {}),
        }
    )
    result = audit_method(
        spec,
        params,
        tables_from_json(TABLES),
        adjacency=Adjacency(unit="user", unit_key="id"),
        relation="both",
        runs=300,
        seed=0,
        lower=host.lower,
    )
    for rel in result.relations:
        row = rel.result.at(1e-3)
        print(
            f"{method} [{rel.relation}]: claim {row.claimed_epsilon}, lower bound "
            f"{row.epsilon_lower:.3f}, ceiling {row.ceiling:.2f}: {row.verdict}"
        )
    assert result.verdict == NO_VIOLATION and result.relations
