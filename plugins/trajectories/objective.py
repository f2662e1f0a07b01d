"""The objective ``G`` of the noisy mean-field Langevin dynamics and its first variation's
gradient (Prop. C.2): the data-fit term, its per-datum blocks and their clipping, the transport
term's gradient; non-private, full batch (the private step is :mod:`.private_grad`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

from dpledger.plugins.trajectories.declare import TrajectoryParams
from dpledger.plugins.trajectories.sinkhorn import entropic_ot_value, sinkhorn_plan

__all__ = [
    "clip_blocks",
    "data_fit",
    "first_variation_grad",
    "fit_blocks",
    "fit_weight",
    "objective",
    "transport_grad",
]

Tensor = torch.Tensor


def data_fit(X: Tensor, Y: Tensor, sigma: float) -> Tensor:
    """``DF^sigma = -(1/N) sum_j log((1/m) sum_k exp(-|x_k-y_j|^2/(2 sigma^2)))``."""
    logits = -(torch.cdist(X, Y) ** 2) / (2.0 * sigma**2)  # [m, N]
    return -(torch.logsumexp(logits, dim=0) - math.log(X.shape[0])).mean()


def fit_blocks(X: Tensor, Y: Tensor, sigma: float, weight: float) -> Tensor:
    """Per-datum contribution blocks ``B_j`` (shape ``[N, m, d]``) to the fit gradient."""
    m = X.shape[0]
    diff = X.unsqueeze(0) - Y.unsqueeze(1)  # [N, m, d]
    logits = -(diff**2).sum(-1) / (2.0 * sigma**2)  # [N, m]
    w = torch.softmax(logits, dim=1) * m  # m * softmax over particles
    return (weight / sigma**2) * w.unsqueeze(-1) * diff


def clip_blocks(blocks: Tensor, C: float) -> Tensor:
    """Scale each ``[m, d]`` block to Frobenius norm at most ``C``."""
    norms = blocks.flatten(1).norm(dim=1)
    scale = torch.clamp(C / torch.clamp(norms, min=1e-300), max=1.0)
    return blocks * scale.view(-1, 1, 1)


def transport_grad(X: Tensor, plans: Sequence[Tensor], dts: Sequence[float]) -> Tensor:
    """Gradient of the Schrodinger-potential terms at every particle, shape ``[U, m, d]``."""
    U, m, _ = X.shape
    g = torch.zeros_like(X)
    for u in range(U - 1):
        P = plans[u]
        g[u] += (X[u] - m * (P @ X[u + 1])) / dts[u]
        g[u + 1] += (X[u + 1] - m * (P.T @ X[u])) / dts[u]
    return g


def fit_weight(times: np.ndarray, lambda_: float) -> float:
    """``h / lambda`` with ``h`` the mean time step (``dt/lambda`` on a uniform grid)."""
    return float((times[-1] - times[0]) / (len(times) - 1) / lambda_)


def objective(
    X: Tensor,
    data: Sequence[Tensor],
    times: np.ndarray,
    params: TrajectoryParams,
    diffusivity: float | None = None,
) -> Tensor:
    """``G(X)`` (no entropy term); used to check the gradient by finite differences."""
    D = params.phases()[0].temperature if diffusivity is None else diffusivity
    w = fit_weight(times, params.lambda_)
    val = w * data_fit(X[0], data[0], params.sigma)
    for u in range(1, X.shape[0]):
        val = val + w * data_fit(X[u], data[u], params.sigma)
    dts = np.diff(times)
    for u in range(X.shape[0] - 1):
        reg = D * float(dts[u])
        P, _, _ = sinkhorn_plan(X[u], X[u + 1], reg, params.sinkhorn_iters, params.sinkhorn_tol)
        val = val + entropic_ot_value(P, X[u], X[u + 1], reg) / float(dts[u])
    return val


def first_variation_grad(
    X: Tensor,
    data: Sequence[Tensor],
    times: np.ndarray,
    params: TrajectoryParams,
    diffusivity: float | None = None,
) -> Tensor:
    """Non-private full-batch ``grad V^(u)`` at every particle (Prop. C.2), ``[U, m, d]``."""
    D = params.phases()[0].temperature if diffusivity is None else diffusivity
    w = fit_weight(times, params.lambda_)
    dts = [float(x) for x in np.diff(times)]
    plans = [
        sinkhorn_plan(X[u], X[u + 1], D * dts[u], params.sinkhorn_iters, params.sinkhorn_tol)[0]
        for u in range(X.shape[0] - 1)
    ]
    g = transport_grad(X, plans, dts)
    for u in range(X.shape[0]):
        g[u] += fit_blocks(X[u], data[u], params.sigma, w).mean(0)
    return g
