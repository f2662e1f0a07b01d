"""Primitive plugins compute the right thing (noise made negligible where values are checked)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import GaussianEvent, LaplaceEvent, PoissonSampledEvent, SelfComposedEvent
from dpledger.plugins.primitives import bounded_mean, dp_sgd, histogram, nn_voting
from dpledger.runtime.runner import run_verified


def _run(spec, params, data, seed=0):  # type: ignore[no-untyped-def]
    return run_verified(spec, spec.make_params(params), data, seed=seed)


def test_nn_votes_exact_and_sensitivity_sqrt_k() -> None:
    candidates = np.array([[0.0, 0.0], [1.0, 0.0], [10.0, 0.0], [11.0, 0.0]])
    records = np.array([[0.1, 0.0], [10.6, 0.0], [10.4, 0.0]])
    votes = nn_voting.vote_histogram(records, candidates, 2)
    np.testing.assert_array_equal(votes, [1.0, 1.0, 2.0, 2.0])
    rng = np.random.default_rng(0)
    recs, cands = rng.normal(size=(50, 3)), rng.normal(size=(12, 3))
    for k in (1, 3, 5):
        full = nn_voting.vote_histogram(recs, cands, k)
        removed = nn_voting.vote_histogram(recs[1:], cands, k)
        diff = full - removed
        assert np.linalg.norm(diff) == pytest.approx(math.sqrt(k), rel=1e-12)
        assert set(np.unique(diff)) <= {0.0, 1.0}


def test_nn_voting_selects_the_popular_candidates() -> None:
    rng = np.random.default_rng(1)
    candidates = np.array([[0.0, 0.0], [5.0, 5.0], [-5.0, 5.0], [9.0, -9.0]])
    records = np.vstack([rng.normal(0, 0.1, size=(300, 2)), rng.normal(5, 0.1, size=(300, 2))])
    out = _run(
        nn_voting.SPEC,
        {"k": 1, "top_n": 2, "noise_multiplier": 2.0},
        {"records": records, "candidates": candidates},
    ).outputs
    assert sorted(out["selected"].tolist()) == [0, 1]  # 300 votes vs 0, noise sd 2
    with pytest.raises(InvalidParameterError, match="top_n"):
        _run(
            nn_voting.SPEC,
            {"k": 1, "top_n": 5, "noise_multiplier": 1.0},
            {"records": records, "candidates": candidates},
        )


def test_bounded_mean_clips_and_divides_by_public_n() -> None:
    data = np.array([[3.0, 4.0], [0.0, 0.5], [0.0, -0.5]])  # first row clipped to (0.6, 0.8)
    out = _run(bounded_mean.SPEC, {"radius": 1.0, "noise_multiplier": 1e-9, "n": 4}, data).outputs
    np.testing.assert_allclose(out["mean"], [0.15, 0.2], atol=1e-8)
    assert bounded_mean.SPEC.declare(
        bounded_mean.SPEC.make_params({"radius": 1.0, "noise_multiplier": 2.0, "n": 4}), None
    ) == GaussianEvent(2.0)  # type: ignore[arg-type]


def test_histogram_counts_and_domain() -> None:
    out = _run(
        histogram.SPEC, {"num_bins": 4, "noise_multiplier": 1e-9}, np.array([0, 1, 1, 3, 3, 3])
    ).outputs
    np.testing.assert_allclose(out["counts"], [1, 2, 0, 3], atol=1e-6)
    params = histogram.SPEC.make_params({"num_bins": 4, "noise_multiplier": 2.0})
    assert histogram.SPEC.declare(params, None) == LaplaceEvent(2.0)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="bin indices"):
        _run(histogram.SPEC, {"num_bins": 4, "noise_multiplier": 1.0}, np.array([0, 4]))


def test_dp_sgd_declares_subsampled_gaussians_and_learns() -> None:
    params = {
        "steps": 60,
        "sampling_probability": 0.1,
        "noise_multiplier": 1.0,
        "clip_norm": 1.0,
        "expected_batch_size": 40.0,
        "learning_rate": 1.0,
    }
    spec_params = dp_sgd.SPEC.make_params(params)
    assert dp_sgd.SPEC.declare(spec_params, None) == SelfComposedEvent(  # type: ignore[arg-type]
        PoissonSampledEvent(0.1, GaussianEvent(1.0)), 60
    )
    rng = np.random.default_rng(2)
    x = rng.normal(size=(400, 2))
    y = (x[:, 0] + x[:, 1] > 0).astype(float)
    result = _run(dp_sgd.SPEC, params, np.column_stack([x, y]), seed=4)
    w = result.outputs["weights"]
    accuracy = np.mean(((np.column_stack([x, np.ones(400)]) @ w) > 0) == (y == 1))
    assert accuracy > 0.9
    assert result.ledger.matches_exactly()
