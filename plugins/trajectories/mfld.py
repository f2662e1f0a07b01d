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

Modules: :mod:`.sinkhorn` (entropic plans), :mod:`.objective` (``G`` and its gradient),
:mod:`.private_grad` (the noisy data-fit gradient), :mod:`.warm_start` (the private warm start);
this module runs the dynamics and re-exports their names.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import torch

from dpledger.plugin import Adjacency, InvalidParameterError
from dpledger.plugins.trajectories.data import uniform_times, validate_marginals
from dpledger.plugins.trajectories.declare import Phase, TrajectoryParams, steps_per_phase
from dpledger.plugins.trajectories.noise import NoiseSource, RecordingNoise, as_noise_source
from dpledger.plugins.trajectories.objective import (
    clip_blocks,
    data_fit,
    first_variation_grad,
    fit_blocks,
    fit_weight,
    objective,
    transport_grad,
)
from dpledger.plugins.trajectories.private_grad import clipped_fit_sum, private_fit_grads
from dpledger.plugins.trajectories.sinkhorn import (
    SINKHORN_EPS_DECAY,
    SINKHORN_NEWTON_EVERY,
    SINKHORN_STAGE_TOL,
    entropic_ot_value,
    sinkhorn_plan,
)
from dpledger.plugins.trajectories.sinkhorn import _dual_newton_step as _dual_newton_step
from dpledger.plugins.trajectories.warm_start import _allocate as _allocate
from dpledger.plugins.trajectories.warm_start import _grid_warm_start as _grid_warm_start
from dpledger.plugins.trajectories.warm_start import _groups as _groups
from dpledger.plugins.trajectories.warm_start import _public_init as _public_init
from dpledger.plugins.trajectories.warm_start import _released as _released
from dpledger.plugins.trajectories.warm_start import warm_start

__all__ = [
    "DIVERGENCE_RADII",
    "SINKHORN_EPS_DECAY",
    "SINKHORN_NEWTON_EVERY",
    "SINKHORN_STAGE_TOL",
    "RunResult",
    "clip_blocks",
    "clipped_fit_sum",
    "data_fit",
    "entropic_ot_value",
    "first_variation_grad",
    "fit_blocks",
    "fit_weight",
    "objective",
    "private_fit_grads",
    "run",
    "sinkhorn_plan",
    "transport_grad",
    "warm_start",
]

Tensor = torch.Tensor


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
