"""Inputs the whole-method audit tests share: small data sets, each builtin primitive's smoke
configuration, and the command line's JSON output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpledger.cli import main

__all__ = ["DATA", "RNG", "ROWS", "SELECTION", "SMOKE", "audit_json", "write_config"]

DATA = np.array([[0.3], [-0.2], [0.5], [0.1]])  # rows of one feature; |x| < 1 = clip

#: one generator for the smoke data and the tests' own draws (which come after the smoke data's)
RNG = np.random.default_rng(7)
ROWS = RNG.normal(size=(12, 3))
#: method -> (plugin entry point, data, params) of a smoke run
SMOKE: dict[str, tuple[str, Any, dict[str, Any]]] = {
    # method: (plugin entry point, data, params)
    "gaussian_mechanism": (
        "primitives.gaussian",
        np.array([2.0, -1.0]),
        {"sensitivity": 1.0, "noise_multiplier": 1.0},
    ),
    "laplace_mechanism": (
        "primitives.laplace",
        np.array([2.0, -1.0]),
        {"sensitivity": 1.0, "noise_multiplier": 1.0},
    ),
    "private_histogram": (
        "primitives.histogram",
        RNG.integers(0, 4, size=20).astype(float),
        {"num_bins": 4, "noise_multiplier": 1.0},
    ),
    "private_mean": (
        "primitives.bounded_mean",
        ROWS,
        {"radius": 1.0, "noise_multiplier": 1.0, "n": 12},
    ),
    "nn_vote_selection": (
        "primitives.nn_voting",
        {"records": ROWS, "candidates": RNG.normal(size=(5, 3))},
        {"k": 2, "top_n": 2, "noise_multiplier": 1.0},
    ),
    "dp_sgd_logistic": (
        "primitives.dp_sgd",
        {"x": ROWS, "y": (np.arange(12) % 2).astype(float)},
        {
            "steps": 2,
            "sampling_probability": 0.5,
            "noise_multiplier": 1.0,
            "clip_norm": 1.0,
            "expected_batch_size": 6.0,
        },
    ),
    "exponential_mechanism": (
        "primitives.selection",
        np.array([0.0, *[1.0] * 10]),
        {"epsilon": 1.0},
    ),
    "report_noisy_max": ("primitives.selection", np.array([0.0, *[1.0] * 10]), {"epsilon": 1.0}),
    "noisy_top_k": ("primitives.selection", np.array([0.0, *[1.0] * 10]), {"epsilon": 1.0, "k": 2}),
}
#: the selection methods state an add/remove sensitivity and are audited under add/remove here;
#: selections are claimed at twice epsilon under replace-one (own test below)
SELECTION = ("exponential_mechanism", "report_noisy_max", "noisy_top_k")


def write_config(
    tmp_path: Path, data: Any, params: dict[str, Any], adjacency: dict[str, Any] | None = None
) -> Path:
    """A JSON config naming ``data`` (saved beside it as .npy, or .npz for a dict of arrays),
    the method's parameters and, if given, its adjacency."""
    if isinstance(data, dict):
        np.savez(tmp_path / "data.npz", **data)
        name = "data.npz"
    else:
        np.save(tmp_path / "data.npy", data)
        name = "data.npy"
    config: dict[str, Any] = {"data": name, "params": params}
    if adjacency:
        config["adjacency"] = adjacency
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(config))
    return path


def audit_json(capfd: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    """``dpledger audit ARGV --json``: the exit code and the parsed output (no stderr)."""
    code = main(["audit", *argv, "--json"])
    captured = capfd.readouterr()
    assert captured.err == "", captured.err
    return code, json.loads(captured.out)
