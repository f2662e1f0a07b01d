"""The sliced-Wasserstein flow paper's reproduction helpers (``experiments/swflow``): the toy
mixture and the digit splits, the public models' training, the Frechet distance and figures of
samples, and the smoothed flow of the toy problem."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from dpledger.core.errors import InvalidParameterError
from dpledger.plugins.swflow import latent
from dpledger.plugins.swflow.metrics import sliced_wasserstein
from dpledger.plugins.swflow.transport import flow_step, sorted_columns

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:  # the reproductions sit beside the package, not in it
    sys.path.insert(0, str(ROOT))

from experiments.swflow.datasets import TOY_CENTRES, digit_splits, toy_mixture  # noqa: E402
from experiments.swflow.evaluation import (  # noqa: E402
    frechet_distance,
    sample_grid,
    scatter_panels,
)
from experiments.swflow.smoothed import smoothed_flow  # noqa: E402
from experiments.swflow.training import train_autoencoder, train_classifier  # noqa: E402

pytestmark = pytest.mark.experiments
D = torch.float64


def test_digit_splits_are_disjoint_and_complete() -> None:
    s = digit_splits(seed=0)
    assert len(s.public) + len(s.private) + len(s.test) == 1797
    assert s.public.shape[1] == 64 and s.public.min() >= 0 and s.public.max() <= 1
    rows = {r.tobytes() for r in s.public} & {r.tobytes() for r in s.private}
    assert len(rows) <= 5  # the digits set holds a few exact duplicate images
    with pytest.raises(InvalidParameterError, match="public"):
        digit_splits(public=0.9, test=0.2)


def test_toy_mixture_has_five_equal_components() -> None:
    x = toy_mixture(5000, np.random.default_rng(0))
    nearest = np.argmin(((x[:, None, :] - TOY_CENTRES[None]) ** 2).sum(-1), axis=1)
    np.testing.assert_allclose(np.bincount(nearest, minlength=5) / 5000, 0.2, atol=0.02)
    with pytest.raises(InvalidParameterError, match="n"):
        toy_mixture(0, np.random.default_rng(0))


def test_autoencoder_latents_are_unit_and_training_helps() -> None:
    s = digit_splits(seed=1)
    untrained = train_autoencoder(s.public[:150], 4, epochs=1, lr=1e-6, seed=0)
    trained = train_autoencoder(s.public[:150], 4, epochs=8, seed=0)
    z = latent.encode(trained, s.test[:50])
    np.testing.assert_allclose(np.linalg.norm(z, axis=1), 1.0, rtol=1e-10)

    def err(model: latent.AutoEncoder) -> float:
        recon = latent.decode(model, latent.encode(model, s.test[:100]))
        return float(np.mean((recon - s.test[:100]) ** 2))

    assert err(trained) < 0.7 * err(untrained)
    # decoding projects arbitrary latents back onto the sphere first
    np.testing.assert_allclose(latent.decode(trained, 3 * z), latent.decode(trained, z))


def test_classifier_learns_the_public_split() -> None:
    s = digit_splits(seed=2)
    clf = train_classifier(s.public, s.public_labels, epochs=10, seed=0)
    assert latent.accuracy(clf, s.test, s.test_labels) > 0.85
    assert latent.features(clf, s.test[:5]).shape == (5, 32)
    with pytest.raises(InvalidParameterError, match="epochs"):
        train_classifier(s.public, s.public_labels, epochs=0)


def test_frechet_distance_of_samples_converges() -> None:
    rng = np.random.default_rng(0)
    a = rng.normal(size=(20000, 2))
    b = rng.normal(size=(20000, 2)) * 2 + 1
    # means differ by (1, 1): 2; variances 1 vs 4: 2 * (1 - 2)^2 = 2
    assert frechet_distance(a, b) == pytest.approx(4.0, rel=0.03)


def test_figures_are_written(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    sample_grid(rng.random((10, 64)), tmp_path / "grid.png", rows=2, cols=5, title="t")
    scatter_panels(
        [("a", rng.normal(size=(20, 2)))], rng.normal(size=(20, 2)), tmp_path / "toy.png"
    )
    assert (tmp_path / "grid.png").stat().st_size > 1000
    assert (tmp_path / "toy.png").stat().st_size > 1000
    with pytest.raises(InvalidParameterError, match="images"):
        sample_grid(rng.random((4, 10)), tmp_path / "bad.png")


def test_toy_swd_orders_sigma_zero_below_half_below_one() -> None:
    """Small-size version of the paper's toy problem (Fig. 1): more smoothing, worse fit."""
    n = 200
    target = toy_mixture(n, np.random.default_rng(0))
    swd = {}
    for sigma in (0.0, 0.5, 1.0):
        gen = torch.Generator().manual_seed(11)
        x0 = torch.randn((n, 2), generator=gen, dtype=D)
        x = smoothed_flow(
            torch.from_numpy(target),
            x0,
            num_projections=50,
            num_steps=60,
            step_size=1.0,
            reg=0.001,
            sigma=sigma,
            generator=gen,
        )
        swd[sigma] = sliced_wasserstein(x.numpy(), target, num_projections=200, seed=3)
    assert swd[0.0] < 0.6 * swd[0.5]
    assert swd[0.5] < 0.8 * swd[1.0]
    # and the non-private flow has converged well below the initial distance
    assert swd[0.0] < 0.1


def _unit_rows(gen: torch.Generator, k: int, d: int) -> torch.Tensor:
    theta = torch.randn((k, d), generator=gen, dtype=D)
    return theta / theta.norm(dim=1, keepdim=True)


def test_sensitivity_unit_scales_sigma_by_twice_the_operator_norm() -> None:
    """sigma_unit="sensitivity": one step equals the absolute run at 2 sigma sigma_max(Theta)."""
    target = torch.from_numpy(toy_mixture(40, np.random.default_rng(1)))
    x0 = torch.randn((40, 2), generator=torch.Generator().manual_seed(2), dtype=D)
    kw = {"num_projections": 30, "num_steps": 1, "step_size": 1.0, "reg": 0.0}
    rel = smoothed_flow(
        target,
        x0,
        sigma=0.5,
        generator=torch.Generator().manual_seed(3),
        sigma_unit="sensitivity",
        **kw,
    )
    theta = _unit_rows(torch.Generator().manual_seed(3), 30, 2)
    std = 2 * 0.5 * float(torch.linalg.matrix_norm(theta, ord=2))
    assert 2 * 0.5 * np.sqrt(15) <= std <= 2 * 0.5 * np.sqrt(30)
    ab = smoothed_flow(target, x0, sigma=std, generator=torch.Generator().manual_seed(3), **kw)
    assert torch.equal(rel, ab)


def test_fixed_release_reuses_directions_and_target_noise() -> None:
    """fixed_release=True: Theta and the target's noisy projections are drawn once."""
    target = torch.from_numpy(toy_mixture(30, np.random.default_rng(4)))
    x0 = torch.randn((30, 2), generator=torch.Generator().manual_seed(5), dtype=D)
    flow = {"num_projections": 20, "num_steps": 3, "step_size": 1.0, "reg": 0.01, "sigma": 0.3}
    out = smoothed_flow(
        target, x0, **flow, generator=torch.Generator().manual_seed(6), fixed_release=True
    )
    gen = torch.Generator().manual_seed(6)
    theta = _unit_rows(gen, 20, 2)
    proj = target @ theta.T
    proj = proj + 0.3 * torch.randn(proj.shape, generator=gen, dtype=D)
    x = x0
    for _ in range(3):
        x = flow_step(
            x,
            theta,
            sorted_columns(proj),
            step_size=1.0,
            reg=0.01,
            smoothing_std=0.3,
            generator=gen,
        )
    assert torch.equal(out, x)
    fresh = smoothed_flow(target, x0, **flow, generator=torch.Generator().manual_seed(6))
    assert not torch.equal(out, fresh)


def test_unknown_sigma_unit_is_refused() -> None:
    with pytest.raises(InvalidParameterError, match="sigma_unit"):
        smoothed_flow(
            torch.zeros((3, 2), dtype=D),
            torch.zeros((3, 2), dtype=D),
            num_projections=2,
            num_steps=1,
            step_size=1.0,
            reg=0.0,
            sigma=0.1,
            generator=None,
            sigma_unit="relative",
        )
