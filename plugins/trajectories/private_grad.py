"""The private data-fit gradient: clipped per-datum blocks summed over a Poisson sample,
released with Gaussian noise through the noise source and divided by the public expected batch
size ``rho N``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from dpledger.plugins.trajectories.declare import TrajectoryParams
from dpledger.plugins.trajectories.noise import NoiseSource
from dpledger.plugins.trajectories.objective import clip_blocks, fit_blocks

__all__ = ["clipped_fit_sum", "private_fit_grads"]

Tensor = torch.Tensor


def clipped_fit_sum(
    X: Tensor, Y: Tensor, idx: np.ndarray, params: TrajectoryParams, weight: float
) -> Tensor:
    """``sum_{j in idx} clip_C(B_j)`` (zeros for an empty sample)."""
    if idx.size == 0:
        return torch.zeros_like(X)
    sel = torch.as_tensor(idx, device=Y.device)
    return clip_blocks(fit_blocks(X, Y[sel], params.sigma, weight), params.C).sum(0)


def private_fit_grads(
    X: Tensor,
    Ys: Sequence[Tensor],
    slices: Sequence[int],
    index: Sequence[int],
    params: TrajectoryParams,
    weight: float,
    tau: float,
    noise: NoiseSource,
    tag: str,
    n_public: Sequence[int],
    joint: bool = True,
) -> dict[int, Tensor]:
    """Noisy data-fit gradients ``(sum clip_C(B_j) + N(0, (tau C)^2)) / (rho N)`` per slice.

    The clipped sums of all ``slices`` form one Poisson-sampled release (``joint``) or one
    release per slice.
    """
    out: dict[int, Tensor] = {}
    groups = [list(slices)] if joint else [[u] for u in slices]
    for grp in groups:

        def compute(idxs: list[np.ndarray], grp: list[int] = grp) -> list[np.ndarray]:
            return [
                clipped_fit_sum(X[u], Ys[u], ix, params, weight).cpu().numpy()
                for u, ix in zip(grp, idxs, strict=True)
            ]

        noisy = noise.sampled_release(
            [len(Ys[u]) for u in grp],
            params.rho,
            compute,
            [params.C] * len(grp),
            tau,
            [f"t{index[u]}/{tag}" for u in grp],
        )
        for u, nz in zip(grp, noisy, strict=True):
            g = torch.as_tensor(nz, dtype=X.dtype, device=X.device)
            out[u] = g / (params.rho * n_public[u])
    return out
