"""The vectorised flow step against direct per-projection formulas."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dpledger.plugins.swflow.transport import (
    drift,
    empirical_cdf,
    flow_step,
    quantiles,
    sorted_columns,
)

D = torch.float64


def test_cdf_is_mid_rank_and_quantile_inverts_it() -> None:
    rng = np.random.default_rng(0)
    vals = torch.from_numpy(rng.normal(size=(9, 3)))
    srt = sorted_columns(vals)
    cdf = empirical_cdf(srt, vals)
    ranks = np.argsort(np.argsort(vals.numpy(), axis=0), axis=0)
    np.testing.assert_allclose(cdf.numpy(), (ranks + 0.5) / 9)
    # quantile at the mid-rank returns the order statistic itself
    np.testing.assert_allclose(quantiles(srt, cdf).numpy(), vals.numpy(), rtol=1e-12)
    # interpolation halfway between the first two order statistics
    half = torch.full((1, 3), 1.0 / 9, dtype=D)
    np.testing.assert_allclose(quantiles(srt, half)[0].numpy(), (srt[:, 0] + srt[:, 1]).numpy() / 2)
    # beyond the extreme order statistics the quantile is constant
    np.testing.assert_allclose(
        quantiles(srt, torch.zeros((1, 3), dtype=D))[0].numpy(), srt[:, 0].numpy()
    )


def test_one_step_in_one_dimension_is_the_exact_monotone_map() -> None:
    # d = 1, theta = 1, h = 1, no smoothing: x moves exactly onto the sorted-matched target
    rng = np.random.default_rng(1)
    x = torch.from_numpy(rng.normal(size=(50, 1)))
    y = torch.from_numpy(rng.normal(3.0, 0.5, size=(50, 1)))
    theta = torch.ones((1, 1), dtype=D)
    out = flow_step(
        x, theta, sorted_columns(y), step_size=1.0, reg=0.0, smoothing_std=0.0, generator=None
    )
    order = np.argsort(x[:, 0].numpy())
    np.testing.assert_allclose(out[order, 0].numpy(), np.sort(y[:, 0].numpy()), rtol=1e-12)


def test_drift_matches_a_per_projection_loop() -> None:
    rng = np.random.default_rng(2)
    x = torch.from_numpy(rng.normal(size=(30, 3)))
    y = torch.from_numpy(rng.normal(size=(20, 3)) + 1.0)
    theta = torch.from_numpy(rng.normal(size=(7, 3)))
    theta = theta / theta.norm(dim=1, keepdim=True)
    v = drift(x, theta, sorted_columns(y @ theta.T), 0.0, None).numpy()
    ref = np.zeros((30, 3))
    for j in range(7):
        th = theta[j].numpy()
        z = x.numpy() @ th
        t = np.sort(y.numpy() @ th)
        f = (np.argsort(np.argsort(z)) + 0.5) / 30
        q = np.interp(f * 20 - 0.5, np.arange(20), t)
        ref -= np.outer(z - q, th) / 7
    np.testing.assert_allclose(v, ref, rtol=1e-10, atol=1e-12)


def test_clean_and_noisy_evaluation_agree_without_smoothing() -> None:
    rng = np.random.default_rng(3)
    x = torch.from_numpy(rng.normal(size=(25, 2)))
    theta = torch.eye(2, dtype=D)
    tgt = sorted_columns(torch.from_numpy(rng.normal(size=(25, 2))))
    a = drift(x, theta, tgt, 0.0, None, "noisy")
    b = drift(x, theta, tgt, 0.0, None, "clean")
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_langevin_noise_has_variance_two_h_lambda() -> None:
    x = torch.zeros((20000, 2), dtype=D)
    theta = torch.eye(2, dtype=D)
    tgt = torch.zeros((2, 1), dtype=D)  # target: a point mass at 0, particles already there
    out = flow_step(
        x,
        theta,
        tgt,
        step_size=0.5,
        reg=0.3,
        smoothing_std=0.0,
        generator=torch.Generator().manual_seed(0),
    )
    assert float(out.var()) == pytest.approx(2 * 0.5 * 0.3, rel=0.03)
