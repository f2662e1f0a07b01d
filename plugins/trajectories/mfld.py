"""Noisy mean-field Langevin dynamics for trajectory inference (Algorithm 1, made private).

Particles ``X[u]`` (``m x d``) per used time ``t_u`` minimise

    G(X) = sum_u (h/lambda) DF^sigma(mu_u, hat mu_u) + sum_u OT_{D dt_u}(mu_u, mu_{u+1}) / dt_u

plus ``D`` times the entropy (``D`` = diffusivity), with ``OT_eps`` the entropic OT value for
the cost ``|x-y|^2/2`` and ``h`` the mean time step. The first variation's gradient at a particle
(Prop. C.2) is ``m * grad_{x_k} G``:

* data fit: ``(1/N) sum_j B_j[k]``, ``B_j[k] = (h/lambda) m softmax_k(-|x-y_j|^2/2sigma^2)
  (x_k - y_j)/sigma^2`` -- the ``m x d`` block ``B_j`` is datum ``j``'s whole contribution;
* transport (public: a function of released particles): ``(x_k - m (P_u X_{u+1})_k)/dt_u +
  (x_k - m (P_{u-1}^T X_{u-1})_k)/dt_{u-1}``.

A private step clips each block ``B_j`` to Frobenius norm ``C``, sums over a Poisson sample of
rate ``rho``, adds ``N(0, (tau C)^2)`` to every coordinate of the sum and divides by the public
expected batch size ``rho N``. The Langevin step needs total per-coordinate variance
``2 eta D``; the privacy noise supplies ``(eta tau C / (rho N))^2`` of it and a public top-up
supplies the rest (if the privacy noise alone exceeds it, the effective temperature is higher
and is reported).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np
import ot
import torch
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError
from dpledger.plugins.trajectories.data import uniform_times, validate_marginals
from dpledger.plugins.trajectories.declare import (
    TrajectoryParams,
    WarmStart,
    warm_start_multipliers,
)
from dpledger.plugins.trajectories.noise import NoiseSource, RecordingNoise
from scipy import special

Tensor = torch.Tensor


# --------------------------------------------------------------------------------------------
# Objective pieces


def sinkhorn_plan(
    Xi: Tensor, Xj: Tensor, reg: float, iters: int = 2000, tol: float = 1e-9,
    warmstart: tuple[Tensor, Tensor] | None = None,
) -> tuple[Tensor, tuple[Tensor, Tensor], bool]:
    """Entropic plan between uniform particle measures, POT log-domain Sinkhorn (torch backend).

    Returns ``(P, (log_u, log_v), converged)``.
    """
    m, n = Xi.shape[0], Xj.shape[0]
    a = torch.full((m,), 1.0 / m, dtype=Xi.dtype, device=Xi.device)
    b = torch.full((n,), 1.0 / n, dtype=Xi.dtype, device=Xi.device)
    M = 0.5 * ot.dist(Xi, Xj)
    P, log = ot.sinkhorn(
        a, b, M, reg=reg, method="sinkhorn_log", numItermax=iters, stopThr=tol, log=True,
        warn=False, warmstart=warmstart,
    )
    err = log["err"][-1] if log["err"] else torch.tensor(0.0)
    converged = bool(float(err) <= tol) or int(log["niter"]) < iters - 1
    return P, (log["log_u"], log["log_v"]), converged


def entropic_ot_value(P: Tensor, Xi: Tensor, Xj: Tensor, reg: float) -> Tensor:
    """Primal value ``<P, |x-y|^2/2> + reg KL(P | a x b)`` (equals the dual at optimality)."""
    m, n = P.shape
    M = 0.5 * ot.dist(Xi, Xj)
    ab = 1.0 / (m * n)
    Ppos = torch.clamp(P, min=1e-300)
    return (P * M).sum() + reg * (P * (torch.log(Ppos) - math.log(ab))).sum()


def data_fit(X: Tensor, Y: Tensor, sigma: float) -> Tensor:
    """``DF^sigma = -(1/N) sum_j log((1/m) sum_k exp(-|x_k-y_j|^2/(2 sigma^2)))``."""
    logits = -torch.cdist(X, Y) ** 2 / (2.0 * sigma**2)  # [m, N]
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
    X: Tensor, data: Sequence[Tensor], times: np.ndarray, params: TrajectoryParams,
    diffusivity: float | None = None,
) -> Tensor:
    """``G(X)`` (no entropy term); used to check the gradient by finite differences."""
    D = params.phases()[0].temperature if diffusivity is None else diffusivity
    w = fit_weight(times, params.lambda_)
    val = sum(w * data_fit(X[u], data[u], params.sigma) for u in range(X.shape[0]))
    dts = np.diff(times)
    for u in range(X.shape[0] - 1):
        reg = D * float(dts[u])
        P, _, _ = sinkhorn_plan(X[u], X[u + 1], reg, params.sinkhorn_iters, params.sinkhorn_tol)
        val = val + entropic_ot_value(P, X[u], X[u + 1], reg) / float(dts[u])
    return val


def first_variation_grad(
    X: Tensor, data: Sequence[Tensor], times: np.ndarray, params: TrajectoryParams,
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


# --------------------------------------------------------------------------------------------
# Warm starts (numpy; every draw through the noise source)


def _public_init(
    ws: WarmStart, m: int, d: int, center: np.ndarray, radius: float, noise: NoiseSource, i: int
) -> np.ndarray:
    z = noise.gaussian((m, d), 1.0, f"public/t{i}/init")
    if ws.public_init == "uniform":  # uniform on the box around the ball, via Phi(z)
        return center - radius + 2.0 * radius * special.ndtr(z)
    mean = center if ws.public_mean is None else np.asarray(ws.public_mean, dtype=np.float64)
    return mean + ws.public_std * z


def _allocate(weights: np.ndarray, m: int) -> np.ndarray:
    """Deterministic largest-remainder allocation of ``m`` particles."""
    w = np.clip(weights, 0.0, None)
    w = np.full_like(w, 1.0 / len(w)) if w.sum() <= 0 else w / w.sum()
    raw = w * m
    n = np.floor(raw).astype(int)
    rest = m - n.sum()
    n[np.argsort(-(raw - n), kind="stable")[:rest]] += 1
    return n


def warm_start(
    data: Sequence[np.ndarray], index: Sequence[int], params: TrajectoryParams,
    adjacency: Adjacency, noise: NoiseSource, n_public: Sequence[int],
) -> tuple[np.ndarray, dict[str, Any]]:
    """Initial particles ``[U, m, d]`` and the released statistics."""
    ws = params.warm_start
    d = data[0].shape[1]
    c = np.zeros(d) if params.center is None else np.asarray(params.center, dtype=np.float64)
    R, m = params.radius, params.m
    mult = warm_start_multipliers(ws, adjacency)
    X = np.empty((len(data), m, d))
    info: dict[str, Any] = {"kind": ws.kind, "means": [], "contributions": []}
    for u, (Y, i) in enumerate(zip(data, index, strict=True)):
        if ws.kind == "none":
            X[u] = _public_init(ws, m, d, c, R, noise, i)
            info["contributions"].append(())
        elif ws.kind == "mean":
            contrib = R / n_public[u]
            mean = c + (Y - c).sum(0) / n_public[u]
            mean = mean + noise.gaussian((d,), mult[0] * contrib, f"t{i}/warm/mean")
            X[u] = mean + noise.gaussian((m, d), ws.spread, f"public/t{i}/spread")
            info["means"].append(mean)
            info["contributions"].append((contrib,))
        else:
            g = ws.grid
            width = 2.0 * R / g
            r_cell = 0.5 * width * math.sqrt(d)
            cell = np.clip(np.floor((Y - (c - R)) / width).astype(int), 0, g - 1)
            flat = np.ravel_multi_index(tuple(cell.T), (g,) * d)
            counts = np.bincount(flat, minlength=g**d).astype(np.float64)
            noisy_counts = counts + noise.gaussian((g**d,), mult[0] * 1.0, f"t{i}/warm/counts")
            k = min(ws.components, g**d)
            top = np.argsort(-noisy_counts, kind="stable")[:k]
            centres = (c - R) + width * (np.stack(np.unravel_index(top, (g,) * d), 1) + 0.5)
            sums = np.zeros((k, d))
            for r, cell_id in enumerate(top):
                sel = flat == cell_id
                sums[r] = (Y[sel] - centres[r]).sum(0)
            sums = sums + noise.gaussian((k, d), mult[1] * r_cell, f"t{i}/warm/sums")
            nc = noisy_counts[top]
            means = centres + np.clip(sums / np.maximum(nc, 1.0)[:, None], -width / 2, width / 2)
            alloc = _allocate(nc, m)
            spread = ws.spread if ws.spread > 0 else width / 2
            pts = np.repeat(means, alloc, axis=0)
            X[u] = pts + noise.gaussian((m, d), spread, f"public/t{i}/spread")
            info["means"].append(means)
            info["contributions"].append((1.0, r_cell))
            info.setdefault("weights", []).append(alloc / m)
    return X, info


# --------------------------------------------------------------------------------------------
# The run


@attrs.define
class RunResult:
    """Particles, plans and everything released or measured during a run."""

    particles: np.ndarray  # [U, m, d]
    init_particles: np.ndarray
    times: np.ndarray  # the U used times
    time_index: tuple[int, ...]
    plans: list[np.ndarray]
    warm_start: dict[str, Any]
    temperatures: list[float]  # effective Langevin temperature per phase (max over marginals)
    sinkhorn_unconverged: int
    noise: Any


def private_fit_step(
    X: Tensor, Y: Tensor, mask: np.ndarray, params: TrajectoryParams, weight: float,
    noise_std: float, noise: NoiseSource, step: str, n_public: int,
) -> Tensor:
    """``(sum_{j in batch} clip_C(B_j) + N(0, noise_std^2)) / (rho n_public)``."""
    m, d = X.shape
    total = torch.zeros_like(X)
    if mask.any():
        idx = torch.as_tensor(np.flatnonzero(mask), device=Y.device)
        total = clip_blocks(fit_blocks(X, Y[idx], params.sigma, weight), params.C).sum(0)
    xi = torch.as_tensor(noise.gaussian((m, d), noise_std, step), dtype=X.dtype, device=X.device)
    return (total + xi) / (params.rho * n_public)


def run(
    marginals: Any,
    params: TrajectoryParams,
    adjacency: Adjacency | None = None,
    times: Sequence[float] | None = None,
    noise: NoiseSource | None = None,
    device: str | torch.device | None = None,
    n_public: Sequence[int] | None = None,
    init: np.ndarray | None = None,
    callback: Callable[[int, np.ndarray], None] | None = None,
) -> RunResult:
    """Run the private noisy MFLD; returns final particles and entropic plans.

    ``n_public`` are the public marginal sizes used for the mean and the expected batch size
    ``rho N`` (default: the given sizes, public as in the paper, whose neighbours keep the
    marginal sizes). ``init`` (``[U, m, d]``) replaces the warm start (it must be public).
    """
    adjacency = adjacency or Adjacency()
    data_np = validate_marginals(marginals, params.radius, params.center)
    T = len(data_np)
    all_times = uniform_times(T) if times is None else np.asarray(times, dtype=np.float64)
    if all_times.shape != (T,) or np.any(np.diff(all_times) <= 0):
        raise InvalidParameterError(
            "times", f"need {T} strictly increasing times", "pass one time per marginal"
        )
    index = tuple(range(T)) if params.time_subset is None else params.time_subset
    if max(index) >= T:
        raise InvalidParameterError("time_subset", f"index {max(index)} >= T={T}", "use < T")
    data_np = [data_np[i] for i in index]
    ts = all_times[list(index)]
    npub = [len(y) for y in data_np] if n_public is None else [int(n) for n in n_public]
    if len(npub) != len(index) or min(npub) < 1:
        raise InvalidParameterError(
            "n_public", f"need {len(index)} positive sizes", "one public size per used time"
        )
    noise = RecordingNoise(0) if noise is None else noise
    dev = torch.device(device) if device is not None else torch.device("cpu")
    dtype = torch.float64
    m = params.m
    if init is None:
        X0, info = warm_start(data_np, index, params, adjacency, noise, npub)
    else:
        X0 = np.asarray(init, dtype=np.float64)
        if X0.shape != (len(index), m, data_np[0].shape[1]):
            raise InvalidParameterError(
                "init", f"shape {X0.shape} != {(len(index), m, data_np[0].shape[1])}",
                "pass [U, m, d] public initial particles",
            )
        info = {"kind": "given", "means": [], "contributions": [() for _ in index]}
    X = torch.as_tensor(X0, dtype=dtype, device=dev).clone()
    Ys = [torch.as_tensor(y, dtype=dtype, device=dev) for y in data_np]
    w = fit_weight(ts, params.lambda_)
    dts = [float(x) for x in np.diff(ts)]
    U = len(index)
    temps: list[float] = []
    unconverged = 0
    starts: list[tuple[Tensor, Tensor] | None] = [None] * (U - 1)
    plans: list[Tensor] = []
    k_global = 0
    for p, ph in enumerate(params.phases()):
        D = ph.temperature
        priv_var = [(ph.eta * ph.tau * params.C / (params.rho * n)) ** 2 for n in npub]
        temps.append(max(D, max(v / (2.0 * ph.eta) for v in priv_var)))
        for k in range(ph.iterations):
            plans = []
            for u in range(U - 1):
                P, starts[u], ok = sinkhorn_plan(
                    X[u], X[u + 1], D * dts[u], params.sinkhorn_iters, params.sinkhorn_tol,
                    starts[u],
                )
                unconverged += not ok
                plans.append(P)
            g = transport_grad(X, plans, dts)
            new = torch.empty_like(X)
            for u, i in enumerate(index):
                tag = f"t{i}/p{p}/k{k}"
                mask = noise.poisson_sample(len(data_np[u]), params.rho, f"{tag}/sample")
                gf = private_fit_step(
                    X[u], Ys[u], mask, params, w, ph.tau * params.C, noise, f"{tag}/noise",
                    npub[u],
                )
                new[u] = X[u] - ph.eta * (gf + g[u])
                extra = 2.0 * ph.eta * D - priv_var[u]
                if extra > 0:
                    z = noise.gaussian(tuple(X[u].shape), math.sqrt(extra),
                                       f"public/{tag}/diffusion")
                    new[u] += torch.as_tensor(z, dtype=dtype, device=dev)
            X = new
            k_global += 1
            if callback is not None:
                callback(k_global, X.detach().cpu().numpy())
    final_plans = []
    D_last = params.phases()[-1].temperature
    for u in range(U - 1):
        P, _, ok = sinkhorn_plan(X[u], X[u + 1], D_last * dts[u], params.sinkhorn_iters,
                                 params.sinkhorn_tol, starts[u])
        unconverged += not ok
        final_plans.append(P.detach().cpu().numpy())
    if unconverged:
        warnings.warn(
            f"{unconverged} Sinkhorn solves hit sinkhorn_iters={params.sinkhorn_iters}; "
            "raise it or the diffusivity", RuntimeWarning, stacklevel=2,
        )
    return RunResult(
        X.detach().cpu().numpy(), X0, ts, index, final_plans, info, temps, unconverged, noise
    )
