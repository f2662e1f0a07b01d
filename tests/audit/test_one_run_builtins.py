"""No false alarm at full size: every builtin method a one-run audit follows stays below its
certified upper bound (1000 canaries, three seeds); those it cannot follow are refused in one
line naming the fix."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dpledger.audit import canaries
from dpledger.core.errors import InvalidParameterError
from dpledger.plugins.primitives import (
    bounded_mean,
    dp_sgd,
    gaussian,
    histogram,
    laplace,
    nn_voting,
    selection,
)
from dpledger.runtime.plugin_manager import host_from_options

RNG = np.random.default_rng(7)
N = 1000
SGD_DATA = {"x": RNG.normal(size=(N, 8)), "y": (RNG.random(N) < 0.5).astype(float)}
FULL = {
    "gaussian": (gaussian.SPEC, gaussian.GaussianParams(1.0, 1.0), np.zeros(N)),
    "laplace": (laplace.SPEC, laplace.LaplaceParams(1.0, 1.0), np.zeros(N)),
    "histogram": (histogram.SPEC, histogram.HistogramParams(8, 1.0), RNG.integers(0, 8, N)),
    "histogram-gauss": (
        histogram.SPEC,
        histogram.HistogramParams(8, 1.0, mechanism="gaussian"),
        RNG.integers(0, 8, N).astype(float),
    ),
    "mean": (
        bounded_mean.SPEC,
        bounded_mean.BoundedMeanParams(1.0, 1.0, N),
        RNG.normal(size=(N, 3)),
    ),
    "dp_sgd": (dp_sgd.SPEC, dp_sgd.DPSGDParams(50, 0.05, 1.0, 1.0, 50.0), SGD_DATA),
    "nn_voting": (
        nn_voting.SPEC,
        nn_voting.NNVotingParams(k=3, top_n=1, noise_multiplier=1.0),
        {"records": RNG.normal(size=(N, 1)), "candidates": np.arange(30.0)[:, None]},
    ),
}
TRAJ = {
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


def _no_false_alarm(result: canaries.OneRunResult) -> None:
    assert result.verdict == canaries.NO_VIOLATION
    for row in result.rows:
        assert not row.curve_rejected
        assert row.estimates[0].epsilon_lower <= row.certified_upper
        assert row.estimates[1].epsilon_lower <= row.certified_upper


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("label", sorted(FULL))
def test_no_false_alarm_at_full_size(label: str, seed: int) -> None:
    spec, params, data = FULL[label]
    result = canaries.audit_one_run(
        spec, params, data, canaries=1000, deltas=(1e-5, 1e-6), seed=seed
    )
    _no_false_alarm(result)


@pytest.mark.slow
def test_no_false_alarm_on_trajectories() -> None:
    host = host_from_options()
    spec = host.method("trajectories")
    rng = np.random.default_rng(0)
    data = {f"marginal_{t}": rng.uniform(-0.5, 0.5, size=(200, 2)) for t in range(2)}
    params = spec.make_params(dict(TRAJ, n_per_time=[200, 200]))
    result = canaries.audit_one_run(spec, params, data, canaries=200, seed=0, lower=host.lower)
    _no_false_alarm(result)


SELECTIONS: list[tuple[Any, Any, Any]] = [
    (selection.EXPONENTIAL, selection.SelectionParams(epsilon=1.0), np.arange(50.0)),
    (selection.REPORT_NOISY_MAX, selection.SelectionParams(epsilon=1.0), np.arange(50.0)),
    (selection.NOISY_TOP_K, selection.TopKParams(epsilon=1.0, k=1), np.arange(50.0)),
]


@pytest.mark.parametrize(
    ("spec", "params", "data"), SELECTIONS, ids=lambda v: getattr(v, "name", "")
)
def test_methods_without_a_noisy_sum_are_refused_in_one_line(
    spec: Any, params: Any, data: Any
) -> None:
    with pytest.raises(InvalidParameterError, match="drop --one-run") as caught:
        canaries.audit_one_run(spec, params, data, canaries=20, seed=0)
    assert "\n" not in str(caught.value)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("method", "params", "data", "line"),
    [
        (
            "dpswflow",
            {
                "num_steps": 1,
                "num_projections": 2,
                "num_particles": 16,
                "noise_multiplier": 2.0,
                "num_sub_projections": 2,
            },
            np.tile([[-0.9, 0.0], [0.0, 0.0], [0.2, 0.1]], (10, 1)),
            "use Adjacency(relation='replace_one')",
        ),
        (
            "shk",
            {"t": 3.0, "beta": 1.0, "n": 2, "n_cells": 32, "n_samples": 1},
            np.tile([0.0, 0.1], 10),
            "drop --one-run",
        ),
    ],
)
def test_methods_the_canaries_cannot_follow_are_refused_in_one_line(
    method: str, params: dict[str, Any], data: Any, line: str
) -> None:
    host = host_from_options()
    spec = host.method(method)
    with pytest.raises(InvalidParameterError) as caught:
        canaries.audit_one_run(
            spec, spec.make_params(params), data, canaries=10, seed=0, lower=host.lower
        )
    assert line in str(caught.value) and "\n" not in str(caught.value)
