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

import itertools
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import ot
import torch
from scipy import special

from dpledger.plugin import Adjacency, InvalidParameterError
from dpledger.plugins.trajectories.data import uniform_times, validate_marginals
from dpledger.plugins.trajectories.declare import (
    Phase,
    TrajectoryParams,
    WarmStart,
    steps_per_phase,
    warm_start_multipliers,
)
from dpledger.plugins.trajectories.noise import NoiseSource, RecordingNoise, as_noise_source

Tensor = torch.Tensor


# --------------------------------------------------------------------------------------------
# Objective pieces


#: epsilon scaling: each stage's regularisation is this fraction of the previous one
SINKHORN_EPS_DECAY = 0.3
#: marginal error at which an intermediate (larger-regularisation) stage stops
SINKHORN_STAGE_TOL = 1e-3
#: a damped Newton step on the dual after every this many Sinkhorn sweeps
SINKHORN_NEWTON_EVERY = 3


def sinkhorn_plan(
    Xi: Tensor,
    Xj: Tensor,
    reg: float,
    iters: int = 2000,
    tol: float = 1e-9,
    warmstart: tuple[Tensor, Tensor] | None = None,
) -> tuple[Tensor, tuple[Tensor, Tensor], bool]:
    """Entropic plan between uniform particle measures for the cost ``M = |x-y|^2/2``.

    Log-domain Sinkhorn sweeps interleaved with damped Newton steps on the dual. Without
    ``warmstart`` the regularisation decreases geometrically from the largest cost to ``reg``
    (epsilon scaling, each stage starting from the last one's potentials). ``iters`` caps
    sweeps plus Newton steps over all stages. Converged means that at ``reg``, after a sweep
    (rows exact), the column marginal's L2 error is below ``tol``.

    Returns ``(P, (log_u, log_v), converged)`` with ``P = exp(log_u_i + log_v_j - M_ij/reg)``;
    ``warmstart`` is such a pair ``(log_u, log_v)``, at ``reg``, for these measures.
    """
    m, n = Xi.shape[0], Xj.shape[0]
    loga = torch.full((m,), -math.log(m), dtype=Xi.dtype, device=Xi.device)
    logb = torch.full((n,), -math.log(n), dtype=Xi.dtype, device=Xi.device)
    a, b = loga.exp(), logb.exp()
    M = 0.5 * ot.dist(Xi, Xj)
    if warmstart is None:
        eps = max(float(M.max()), reg)
        f, g = torch.zeros_like(loga), torch.zeros_like(logb)  # potentials in cost units
    else:
        eps = reg
        f, g = reg * (warmstart[0] - loga), reg * (warmstart[1] - logb)
    done = 0
    while True:
        K = -M / eps
        u, v = f / eps + loga, g / eps + logb
        final = eps <= reg
        stage_tol = tol if final else max(tol, SINKHORN_STAGE_TOL)
        err, sweeps = math.inf, 0
        while done < iters:
            v = logb - torch.logsumexp(K + u[:, None], 0)
            u = loga - torch.logsumexp(K + v[None, :], 1)
            done += 1
            sweeps += 1
            err = float(torch.linalg.vector_norm(torch.exp(K + u[:, None] + v[None, :]).sum(0) - b))
            if err < stage_tol:
                break
            if sweeps % SINKHORN_NEWTON_EVERY == 0 and done + 1 < iters:  # a sweep follows
                u, v = _dual_newton_step(K, u, v, a, b)
                done += 1
        if final:
            return torch.exp(K + u[:, None] + v[None, :]), (u, v), err < tol
        f, g = eps * (u - loga), eps * (v - logb)
        if done >= iters:  # out of iterations above reg: rows exact at reg, not converged
            K = -M / reg
            v = g / reg + logb
            u = loga - torch.logsumexp(K + v[None, :], 1)
            return torch.exp(K + u[:, None] + v[None, :]), (u, v), False
        eps = max(eps * SINKHORN_EPS_DECAY, reg)


def _dual_newton_step(
    K: Tensor, u: Tensor, v: Tensor, a: Tensor, b: Tensor, halvings: int = 30
) -> tuple[Tensor, Tensor]:
    """Newton ascent with Armijo backtracking on ``<a,u> + <b,v> - sum exp(K + u + v)``.

    The Hessian is singular along ``(1, -1)`` (a constant moved from ``u`` to ``v``); adding
    that direction's projector makes it invertible without changing the step. Returns the
    input when no step along the Newton direction increases the dual.
    """
    m, n = K.shape
    P = torch.exp(K + u[:, None] + v[None, :])
    r, c = P.sum(1), P.sum(0)
    H = torch.cat([torch.cat([torch.diag(r), P], 1), torch.cat([P.T, torch.diag(c)], 1)], 0)
    w = torch.cat([torch.ones_like(u), -torch.ones_like(v)]) / math.sqrt(m + n)
    H = H + torch.outer(w, w)
    grad = torch.cat([a - r, b - c])
    try:
        d = torch.linalg.solve(H, grad)
    except RuntimeError:  # singular: support split by underflow; least squares instead
        d = torch.linalg.lstsq(H, grad[:, None], driver="gelsd").solution[:, 0]
    du, dv = d[:m], d[m:]
    slope, linear, mass = float(grad @ d), float(a @ du + b @ dv), float(P.sum())
    if not slope > 0.0:  # no ascent direction (numerically singular system)
        return u, v
    t = 1.0
    for _ in range(halvings):
        un, vn = u + t * du, v + t * dv
        new_mass = float(torch.exp(torch.logsumexp((K + un[:, None] + vn[None, :]).flatten(), 0)))
        if t * linear - (new_mass - mass) >= 1e-4 * t * slope:
            return un, vn
        t *= 0.5
    return u, v


def entropic_ot_value(P: Tensor, Xi: Tensor, Xj: Tensor, reg: float) -> Tensor:
    """Primal value ``<P, |x-y|^2/2> + reg KL(P | a x b)`` (equals the dual at optimality)."""
    m, n = P.shape
    M = 0.5 * ot.dist(Xi, Xj)
    ab = 1.0 / (m * n)
    Ppos = torch.clamp(P, min=1e-300)
    value: torch.Tensor = (P * M).sum() + reg * (P * (torch.log(Ppos) - math.log(ab))).sum()
    return value


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


# --------------------------------------------------------------------------------------------
# Warm starts (numpy; every draw through the noise source)


def _public_init(
    ws: WarmStart, m: int, d: int, center: np.ndarray, radius: float, noise: NoiseSource, i: int
) -> np.ndarray:
    z = noise.public_normal((m, d), f"t{i}/init")
    if ws.public_init == "uniform":  # uniform on the box around the ball, via Phi(z)
        uniform: np.ndarray = center - radius + 2.0 * radius * special.ndtr(z)
        return uniform
    mean = center if ws.public_mean is None else np.asarray(ws.public_mean, dtype=np.float64)
    gaussian: np.ndarray = mean + ws.public_std * z
    return gaussian


def _allocate(weights: np.ndarray, m: int) -> np.ndarray:
    """Deterministic largest-remainder allocation of ``m`` particles."""
    w = np.clip(weights, 0.0, None)
    w = np.full_like(w, 1.0 / len(w)) if w.sum() <= 0 else w / w.sum()
    raw = w * m
    n = np.floor(raw).astype(int)
    rest = m - n.sum()
    n[np.argsort(-(raw - n), kind="stable")[:rest]] += 1
    return np.asarray(n)


def _groups(U: int, joint: bool) -> list[list[int]]:
    """Slices released together: all (event level) or one marginal at a time (user level)."""
    return [list(range(U))] if joint else [[u] for u in range(U)]


def warm_start(
    data: Sequence[np.ndarray],
    index: Sequence[int],
    params: TrajectoryParams,
    adjacency: Adjacency,
    noise: NoiseSource,
    n_public: Sequence[int],
    joint: bool = True,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Initial particles ``[U, m, d]`` and the released statistics.

    ``joint``: one release over all marginals per statistic (event level); otherwise one per
    marginal.
    """
    ws = params.warm_start
    d = data[0].shape[1]
    c = np.zeros(d) if params.center is None else np.asarray(params.center, dtype=np.float64)
    R, m = params.radius, params.m
    mult = warm_start_multipliers(ws, adjacency)
    U = len(data)
    X = np.empty((U, m, d))
    info: dict[str, Any] = {"kind": ws.kind, "means": [], "contributions": []}
    if ws.kind == "none":
        for u, i in enumerate(index):
            X[u] = _public_init(ws, m, d, c, R, noise, i)
            info["contributions"].append(())
        return X, info
    if ws.kind == "mean":
        contrib = [R / n_public[u] for u in range(U)]
        queries = [(data[u] - c).sum(0) / n_public[u] for u in range(U)]
        names = [f"t{i}/warm/mean" for i in index]
        noisy = _released(noise, queries, contrib, mult[0], names, joint)
        for u, i in enumerate(index):
            mean = c + noisy[u]
            X[u] = mean + ws.spread * noise.public_normal((m, d), f"t{i}/spread")
            info["means"].append(mean)
            info["contributions"].append((contrib[u],))
        return X, info
    return _grid_warm_start(data, index, params, mult, noise, joint, X, info)


def _released(
    noise: NoiseSource,
    queries: Sequence[np.ndarray],
    contributions: Sequence[float],
    multiplier: float,
    names: Sequence[str],
    joint: bool,
) -> list[np.ndarray]:
    """The noisy ``queries`` (one per marginal, with its contribution bound and step name),
    released in groups: all in one when ``joint``, else one per marginal."""
    noisy: list[np.ndarray] = [np.empty(0)] * len(queries)
    for grp in _groups(len(queries), joint):
        out = noise.release(
            [queries[u] for u in grp],
            [contributions[u] for u in grp],
            multiplier,
            [names[u] for u in grp],
        )
        for u, o in zip(grp, out, strict=True):
            noisy[u] = o
    return noisy


def _grid_warm_start(
    data: Sequence[np.ndarray],
    index: Sequence[int],
    params: TrajectoryParams,
    mult: Sequence[float],
    noise: NoiseSource,
    joint: bool,
    X: np.ndarray,
    info: dict[str, Any],
) -> tuple[np.ndarray, dict[str, Any]]:
    """The grid warm start: noisy cell counts, then noisy sums within the ``components``
    heaviest cells; particles are allotted to the cells by their counts around their means."""
    ws = params.warm_start
    U, m, d = X.shape
    c = np.zeros(d) if params.center is None else np.asarray(params.center, dtype=np.float64)
    R = params.radius
    g = ws.grid
    width = 2.0 * R / g
    r_cell = 0.5 * width * math.sqrt(d)
    flats, counts = [], []
    for Y in data:
        cell = np.clip(np.floor((Y - (c - R)) / width).astype(int), 0, g - 1)
        flat = np.ravel_multi_index(tuple(cell.T), (g,) * d)
        flats.append(flat)
        counts.append(np.bincount(flat, minlength=g**d).astype(np.float64))
    names = [f"t{i}/warm/counts" for i in index]
    noisy_counts = _released(noise, counts, [1.0] * U, mult[0], names, joint)
    k = min(ws.components, g**d)
    tops, centres, sums = [], [], []
    for u in range(U):
        top = np.argsort(-noisy_counts[u], kind="stable")[:k]
        cen = (c - R) + width * (np.stack(np.unravel_index(top, (g,) * d), 1) + 0.5)
        sm = np.zeros((k, d))
        for r, cell_id in enumerate(top):
            sm[r] = (data[u][flats[u] == cell_id] - cen[r]).sum(0)
        tops.append(top)
        centres.append(cen)
        sums.append(sm)
    names = [f"t{i}/warm/sums" for i in index]
    noisy_sums = _released(noise, sums, [r_cell] * U, mult[1], names, joint)
    for u, i in enumerate(index):
        nc = noisy_counts[u][tops[u]]
        means = centres[u] + np.clip(
            noisy_sums[u] / np.maximum(nc, 1.0)[:, None], -width / 2, width / 2
        )
        alloc = _allocate(nc, m)
        spread = ws.spread if ws.spread > 0 else width / 2
        pts = np.repeat(means, alloc, axis=0)
        X[u] = pts + spread * noise.public_normal((m, d), f"t{i}/spread")
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
    private_steps: dict[int, int]  # per used time index: private particle steps taken


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


def _schedule(
    U: int, params: TrajectoryParams, rng: np.random.Generator
) -> list[list[tuple[list[int], bool]]]:
    """Per phase, per iteration: (marginals updated, whether a new epoch starts)."""
    out = []
    z = params.times_per_iteration
    for ph in params.phases():
        its: list[tuple[list[int], bool]] = []
        if z is None:
            its = [(list(range(U)), True) for _ in range(ph.iterations)]
        else:
            inner = np.arange(1, U - 1)
            while len(its) < ph.iterations:
                perm = rng.permutation(inner)
                for j in range(0, len(perm), z):
                    if len(its) < ph.iterations:
                        its.append((sorted(int(v) for v in perm[j : j + z]), j == 0))
        out.append(its)
    return out


#: particles farther than this many public radii from the centre mean the explicit step diverged
DIVERGENCE_RADII = 1e3


def _check_stable(X: Tensor, params: TrajectoryParams, eta: float, iteration: int) -> None:
    """Refuse to go on once the explicit Euler step has blown up (a public, data-free check)."""
    center = torch.as_tensor(params.center or (0.0,) * X.shape[-1], dtype=X.dtype, device=X.device)
    far = float(torch.linalg.vector_norm(X - center, dim=-1).max())
    if not math.isfinite(far) or far > DIVERGENCE_RADII * params.radius:
        raise InvalidParameterError(
            "eta",
            f"the particles diverged at iteration {iteration} (step {eta:g}; a particle is "
            f"{far:.3g} from the centre, radius {params.radius:g})",
            "reduce eta: the transport drift is stiff, roughly eta * (1/dt_prev + 1/dt_next) must "
            "stay below 1",
        )


def run(
    marginals: Any,
    params: TrajectoryParams,
    adjacency: Adjacency | None = None,
    times: Sequence[float] | np.ndarray | None = None,
    noise: Any = None,
    device: str | torch.device | None = None,
    n_public: Sequence[int] | None = None,
    init: np.ndarray | None = None,
    callback: Callable[[int, np.ndarray], None] | None = None,
    joint: bool | None = None,
    schedule_rng: np.random.Generator | None = None,
) -> RunResult:
    """Run the private noisy MFLD; returns final particles and entropic plans.

    ``n_public`` are the public marginal sizes used for the mean and the expected batch size
    ``rho N`` (default: the given sizes, public as in the paper, whose neighbours keep the
    marginal sizes). ``init`` (``[U, m, d]``) replaces the warm start (it must be public).
    ``joint`` (default: event level, i.e. ``adjacency.unit == 'row'``) releases all marginals'
    statistics of one step together. With ``params.times_per_iteration = z`` the end marginals
    keep their warm start and each iteration updates ``z`` interior marginals (shuffled epochs
    drawn from ``schedule_rng``, public); the noisy data-fit gradients of an epoch are released
    at its start (a marginal's particles do not move before its update in the epoch, so this
    is the same algorithm) -- one release per epoch.
    """
    adjacency = adjacency or Adjacency()
    joint = adjacency.unit == "row" if joint is None else joint
    noise_src = as_noise_source(RecordingNoise(0) if noise is None else noise)
    data_np, ts, index, npub = _used_marginals(marginals, params, times, n_public)
    X0, info = _initial_particles(data_np, index, params, adjacency, noise_src, npub, joint, init)
    dev = torch.device(device) if device is not None else torch.device("cpu")
    state = _State.start(X0, data_np, ts, index, npub, params, noise_src, joint, dev)
    sched = _schedule(len(index), params, schedule_rng or np.random.default_rng(0))
    temps = [
        _run_phase(state, params, p, ph, sched[p], callback) for p, ph in enumerate(params.phases())
    ]
    final_plans = _final_plans(state, params)
    if state.unconverged:
        warnings.warn(
            f"{state.unconverged} Sinkhorn solves hit sinkhorn_iters={params.sinkhorn_iters}; "
            "raise it or the diffusivity",
            RuntimeWarning,
            stacklevel=2,
        )
    return RunResult(
        state.X.detach().cpu().numpy(),
        X0,
        ts,
        index,
        final_plans,
        info,
        temps,
        state.unconverged,
        noise if noise is not None else noise_src,
        state.taken,
    )


def _used_marginals(
    marginals: Any,
    params: TrajectoryParams,
    times: Sequence[float] | np.ndarray | None,
    n_public: Sequence[int] | None,
) -> tuple[list[np.ndarray], np.ndarray, tuple[int, ...], list[int]]:
    """The validated marginals of the used times, those times, their indices among all times,
    and their public sizes (default: the given sizes)."""
    data_np = validate_marginals(marginals, params.radius, params.center)
    T = len(data_np)
    all_times = uniform_times(T) if times is None else np.asarray(times, dtype=np.float64)
    if (
        all_times.shape != (T,)
        or not np.all(np.isfinite(all_times))
        or np.any(np.diff(all_times) <= 0)
    ):
        raise InvalidParameterError(
            "times", f"need {T} finite, strictly increasing times", "pass one time per marginal"
        )
    index = tuple(range(T)) if params.time_subset is None else params.time_subset
    if max(index) >= T:
        raise InvalidParameterError("time_subset", f"index {max(index)} >= T={T}", "use < T")
    data_np = [data_np[i] for i in index]
    U = len(index)
    steps_per_phase(params, U)  # validates times_per_iteration against U
    npub = [len(y) for y in data_np] if n_public is None else [int(n) for n in n_public]
    if len(npub) != U or min(npub) < 1:
        raise InvalidParameterError(
            "n_public", f"need {U} positive sizes", "one public size per used time"
        )
    return data_np, all_times[list(index)], index, npub


def _initial_particles(
    data_np: list[np.ndarray],
    index: tuple[int, ...],
    params: TrajectoryParams,
    adjacency: Adjacency,
    noise: NoiseSource,
    npub: list[int],
    joint: bool,
    init: np.ndarray | None,
) -> tuple[np.ndarray, dict[str, Any]]:
    """The private warm start (:func:`warm_start`), or the public ``init`` [U, m, d] checked."""
    if init is None:
        return warm_start(data_np, index, params, adjacency, noise, npub, joint)
    X0 = np.asarray(init, dtype=np.float64)
    shape = (len(index), params.m, data_np[0].shape[1])
    if X0.shape != shape:
        raise InvalidParameterError(
            "init", f"shape {X0.shape} != {shape}", "pass [U, m, d] public initial particles"
        )
    return X0, {"kind": "given", "means": [], "contributions": [() for _ in index]}


@attrs.define
class _State:
    """What the dynamics carry from one iteration to the next (particles ``X`` [U, m, d], the
    warm starts of the Sinkhorn solves, counters) and the fixed inputs of every step."""

    X: Tensor
    Ys: list[Tensor]
    ts: np.ndarray
    index: tuple[int, ...]
    npub: list[int]
    weight: float
    noise: NoiseSource
    joint: bool
    ends: list[int]
    taken: dict[int, int]
    starts: dict[tuple[int, int], tuple[Tensor, Tensor] | None] = attrs.field(factory=dict)
    unconverged: int = 0
    k_global: int = 0

    @classmethod
    def start(
        cls,
        X0: np.ndarray,
        data_np: list[np.ndarray],
        ts: np.ndarray,
        index: tuple[int, ...],
        npub: list[int],
        params: TrajectoryParams,
        noise: NoiseSource,
        joint: bool,
        dev: torch.device,
    ) -> _State:
        """The state before the first iteration: particles ``X0``, data as float64 tensors."""
        return cls(
            X=torch.as_tensor(X0, dtype=torch.float64, device=dev).clone(),
            Ys=[torch.as_tensor(y, dtype=torch.float64, device=dev) for y in data_np],
            ts=ts,
            index=index,
            npub=npub,
            weight=fit_weight(ts, params.lambda_),
            noise=noise,
            joint=joint,
            ends=[0, len(index) - 1] if params.times_per_iteration is not None else [],
            taken=dict.fromkeys(index, 0),
        )


def _run_phase(
    state: _State,
    params: TrajectoryParams,
    p: int,
    ph: Phase,
    its: Sequence[tuple[list[int], bool]],
    callback: Callable[[int, np.ndarray], None] | None,
) -> float:
    """Every iteration of phase ``p``; returns its effective Langevin temperature."""
    D = ph.temperature
    priv_var = [(ph.eta * ph.tau * params.C / (params.rho * n)) ** 2 for n in state.npub]
    temperature = max(D, max(v / (2.0 * ph.eta) for v in priv_var))
    pending: dict[int, Tensor] = {}
    for k, (active, new_epoch) in enumerate(its):
        if new_epoch:
            pending = _epoch_grads(state, params, p, ph, its, k)
        chain = sorted(set(active) | set(state.ends))
        plans = _chain_plans(state, params, chain, D)
        state.X = _moved(state, params, (p, k, ph), active, chain, plans, pending, priv_var)
        state.k_global += 1
        _check_stable(state.X, params, ph.eta, state.k_global)
        if callback is not None:
            callback(state.k_global, state.X.detach().cpu().numpy())
    return temperature


def _epoch_grads(
    state: _State,
    params: TrajectoryParams,
    p: int,
    ph: Phase,
    its: Sequence[tuple[list[int], bool]],
    k: int,
) -> dict[int, Tensor]:
    """The noisy data-fit gradients of the epoch starting at iteration ``k`` (one release per
    epoch; every marginal at full time, the epoch's marginals under subsampled time)."""
    slices = (
        list(range(len(state.Ys)))
        if params.times_per_iteration is None
        else sorted({u for a, _ in its[k : k + _epoch_len(its, k)] for u in a})
    )
    return private_fit_grads(
        state.X,
        state.Ys,
        slices,
        state.index,
        params,
        state.weight,
        ph.tau,
        state.noise,
        f"p{p}/k{k}",
        state.npub,
        state.joint,
    )


def _chain_plans(
    state: _State, params: TrajectoryParams, chain: Sequence[int], D: float
) -> dict[tuple[int, int], tuple[Tensor, float]]:
    """Entropic plans (and time gaps) between consecutive marginals of ``chain``, each solve
    warm-started from the last one between the same pair."""
    plans = {}
    for a, b in itertools.pairwise(chain):
        dt = float(state.ts[b] - state.ts[a])
        P, state.starts[(a, b)], ok = sinkhorn_plan(
            state.X[a],
            state.X[b],
            D * dt,
            params.sinkhorn_iters,
            params.sinkhorn_tol,
            state.starts.get((a, b)),
        )
        state.unconverged += not ok
        plans[(a, b)] = (P, dt)
    return plans


def _moved(
    state: _State,
    params: TrajectoryParams,
    where: tuple[int, int, Phase],
    active: Sequence[int],
    chain: Sequence[int],
    plans: Mapping[tuple[int, int], tuple[Tensor, float]],
    pending: dict[int, Tensor],
    priv_var: Sequence[float],
) -> Tensor:
    """The particles after one explicit step of the ``active`` marginals (phase ``p``, iteration
    ``k``): noisy data-fit gradient plus the transport drift to the neighbours in ``chain``,
    topped up with public diffusion noise where the privacy noise is below ``2 eta D``."""
    p, k, ph = where
    X, m = state.X, params.m
    new = X.clone()
    for u in active:
        g = pending.pop(u)
        pos = chain.index(u)
        if pos + 1 < len(chain):
            P, dt = plans[(u, chain[pos + 1])]
            g = g + (X[u] - m * (P @ X[chain[pos + 1]])) / dt
        if pos > 0:
            P, dt = plans[(chain[pos - 1], u)]
            g = g + (X[u] - m * (P.T @ X[chain[pos - 1]])) / dt
        new[u] = X[u] - ph.eta * g
        state.taken[state.index[u]] += 1
        extra = 2.0 * ph.eta * ph.temperature - priv_var[u]
        if extra > 0:
            step = f"t{state.index[u]}/p{p}/k{k}/diff"
            z = state.noise.public_normal(tuple(X[u].shape), step)
            new[u] += math.sqrt(extra) * torch.as_tensor(z, dtype=X.dtype, device=X.device)
    return new


def _final_plans(state: _State, params: TrajectoryParams) -> list[np.ndarray]:
    """Entropic plans between consecutive used times at the last phase's temperature."""
    out = []
    D_last = params.phases()[-1].temperature
    ts = state.ts
    for u in range(len(ts) - 1):
        P, _, ok = sinkhorn_plan(
            state.X[u],
            state.X[u + 1],
            D_last * float(ts[u + 1] - ts[u]),
            params.sinkhorn_iters,
            params.sinkhorn_tol,
            state.starts.get((u, u + 1)),
        )
        state.unconverged += not ok
        out.append(P.detach().cpu().numpy())
    return out


def _epoch_len(its: Sequence[tuple[list[int], bool]], k: int) -> int:
    """Iterations from ``k`` (an epoch start) to the next epoch start."""
    j = k + 1
    while j < len(its) and not its[j][1]:
        j += 1
    return j - k
