from __future__ import annotations

import numpy as np
import pytest

from dpledger.core.errors import InvalidParameterError
from dpledger.plugins.trajectories.metrics import figure1, marginal_w2, w2
from dpledger.plugins.trajectories.trajectories import evaluate, sample_paths


def test_w2_of_translation_is_shift_norm() -> None:
    rng = np.random.default_rng(0)
    A = rng.normal(size=(60, 2))
    assert w2(A, A + np.array([0.3, -0.4])) == pytest.approx(0.5, rel=1e-9)
    out = marginal_w2([A, A], [A, A + 1.0])
    np.testing.assert_allclose(out, [0.0, np.sqrt(2.0)], atol=1e-9)
    with pytest.raises(InvalidParameterError):
        w2(A, rng.normal(size=(5, 3)))


def test_bridge_hits_knots_and_has_bridge_variance() -> None:
    rng = np.random.default_rng(2)
    X = np.stack([np.zeros((1, 2)), np.ones((1, 2)), np.zeros((1, 2))])
    plans = [np.ones((1, 1)), np.ones((1, 1))]
    D = 0.3
    paths = sample_paths(X, plans, [0.0, 0.5, 1.0], 20000, D, rng)
    q = [0.25, 0.5, 0.125, 1.0, 0.75]
    out = evaluate(paths, q, rng)
    np.testing.assert_allclose(out[:, 1], 1.0)  # grid time 0.5 is a knot
    np.testing.assert_allclose(out[:, 3], 0.0)
    # at t = 0.25 between 0 (t=0) and 1 (t=0.5): mean 0.5, variance D * 0.25 * 0.25 / 0.5
    assert out[:, 0].mean() == pytest.approx(0.5, abs=0.01)
    assert out[:, 0].var() == pytest.approx(D * 0.125, rel=0.05)
    # t = 0.125 is drawn given the point at 0.25 (bridge within the bridge): total var D*t*(s-t)/s
    assert out[:, 2].var() == pytest.approx(D * 0.125 * 0.375 / 0.5, rel=0.05)
    cov = np.mean((out[:, 2, 0] - out[:, 2, 0].mean()) * (out[:, 0, 0] - out[:, 0, 0].mean()))
    assert cov == pytest.approx(D * 0.125 * 0.25 / 0.5, rel=0.08)  # Brownian-bridge covariance
    with pytest.raises(InvalidParameterError):
        evaluate(paths, [1.5], rng)


def test_figure_is_written(tmp_path) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    paths = rng.normal(size=(10, 4, 2))
    marg = [paths[:, i] for i in range(4)]
    out = tmp_path / "fig.png"
    figure1(paths, marg, [m.mean(0) for m in marg], paths, path=out)
    assert out.stat().st_size > 5000
