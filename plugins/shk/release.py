"""Running an SHK release: build ``V_D = β L_D``, approximate ``ρ_t^D`` and draw through the ledger.

Every draw is one ``ledger.sample_certified`` call whose event is the declared single-release
certificate (``NonPrivateEvent`` for the particle sampler, which has none), booked *before* the
draw; all randomness of the draw (the cell choice, or the whole
particle system) comes from the ledger's generator. The grid solve itself is deterministic. Only
the released samples and public metadata are returned (never the data-dependent density).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpledger.plugin import ApproxDPEvent, InvalidParameterError, Ledger, NonPrivateEvent
from dpledger.plugins.shk import declare
from dpledger.plugins.shk.events import TimeProfiledPureDPEvent
from dpledger.plugins.shk.params import SHKMethodParams
from dpledger.plugins.shk.particles import birth_death_langevin
from dpledger.plugins.shk.solvers import solve_shk, stable_dt
from dpledger.plugins.shk.torus import FloatArray, TorusGrid, check_data, von_mises_density

#: A grid loss whose seam jump exceeds this multiple of its largest interior jump is refused.
SEAM_FACTOR = 8.0


def _grid_losses(data: Any, p: SHKMethodParams) -> FloatArray:
    try:
        arr = np.asarray(data, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidParameterError(
            "data", "is not numeric", "pass per-record loss values"
        ) from None
    if arr.ndim != 2 or arr.shape[1] != p.n_cells:
        raise InvalidParameterError(
            "data",
            f"expected shape (n_records, {p.n_cells}), got {arr.shape}",
            "evaluate each record's loss on TorusGrid(n_cells).x",
        )
    if not np.all(np.isfinite(arr)):
        raise InvalidParameterError("data", "the loss has a non-finite value", "fix NaN/inf losses")
    if np.any(arr < 0) or np.any(arr > p.loss_range):
        raise InvalidParameterError(
            "data",
            f"per-record losses must lie in [0, {p.loss_range}]",
            "clip or rescale the loss, or raise loss_range",
        )
    jumps = np.abs(np.diff(arr, axis=1))
    interior = np.max(jumps, axis=1)
    seam = np.abs(arr[:, 0] - arr[:, -1])
    bad = seam > SEAM_FACTOR * interior + 1e-12 * (1.0 + p.loss_range)
    if np.any(bad):
        raise InvalidParameterError(
            "data",
            f"record {int(np.flatnonzero(bad)[0])}'s loss is not periodic on the torus "
            "(it jumps at the seam x = ±π)",
            "use a 2π-periodic loss (e.g. built from cos/sin of x)",
        )
    return arr


def _potential(p: SHKMethodParams, data: Any) -> tuple[Any, Any]:
    """``V_D`` and ``∇V_D`` as vectorised functions (grid losses: periodic linear interpolation)."""
    if p.loss == "cosine":
        y = check_data(data)
        scale = _normaliser(y.size, p)
        c, s = float(np.sum(np.cos(y))) / scale, float(np.sum(np.sin(y))) / scale

        def v(x: FloatArray) -> FloatArray:
            return np.asarray(p.beta * (1.0 - (c * np.cos(x) + s * np.sin(x))))

        def dv(x: FloatArray) -> FloatArray:
            return np.asarray(p.beta * (c * np.sin(x) - s * np.cos(x)))

        return v, dv
    losses = _grid_losses(data, p)
    grid = TorusGrid(p.n_cells)
    cells = p.beta * losses.sum(axis=0) / _normaliser(losses.shape[0], p)
    slope = (np.roll(cells, -1) - cells) / grid.dx
    period = 2.0 * math.pi

    def vg(x: FloatArray) -> FloatArray:
        return np.asarray(np.interp(x, grid.x, cells, period=period))

    def dvg(x: FloatArray) -> FloatArray:
        face = grid.x + 0.5 * grid.dx
        return np.asarray(np.interp(x, face, slope, period=period))

    return vg, dvg


def _normaliser(size: int, p: SHKMethodParams) -> float:
    """The empirical risk is the loss sum over ``max(size, n)``: the mean when there are at
    least ``n`` records (``n`` is the public lower bound the sensitivities use), and the sum
    over ``n`` below. One record then moves the potential by at most ``beta * loss_range / n``
    in sup norm at every size, so a dataset with fewer records than ``n`` (a neighbour of one
    with exactly ``n``) is released like any other instead of being refused."""
    return float(max(size, p.n))


def grid_release_law(p: SHKMethodParams, data: Any) -> FloatArray:
    """Cell probabilities of one grid-solver draw (the released law is piecewise uniform on them).

    This is exactly the law a draw samples from, so privacy checks compare it between neighbours.
    """
    if p.solver != "grid":
        raise InvalidParameterError("solver", f"is {p.solver!r}", "use solver = 'grid'")
    v, _ = _potential(p, data)
    grid = TorusGrid(p.n_cells)
    rho0 = von_mises_density(grid, p.rho0_kappa, p.rho0_mu)
    density = solve_shk(v, p.t, grid, rho0, dt=_capped_dt(p, v, grid, rho0)).final(0)
    w = density * grid.dx
    return np.asarray(w / w.sum(), dtype=np.float64)


def _capped_dt(p: SHKMethodParams, v: Any, grid: TorusGrid, rho0: FloatArray) -> float | None:
    """``dt`` caps the RK4 step: never above the default step (the range the checks cover)."""
    if p.dt is None:
        return None
    log_pi = np.log(grid.gibbs(np.asarray(v(grid.x), dtype=np.float64)))
    default = stable_dt(grid, log_pi, float(np.ptp(np.log(rho0) - log_pi)))
    return min(float(p.dt), default)


def _grid_sampler(p: SHKMethodParams, data: Any) -> Any:
    grid = TorusGrid(p.n_cells)
    w = grid_release_law(p, data)

    def draw(rng: np.random.Generator) -> float:
        cell = int(rng.choice(grid.n_cells, p=w))
        return float(grid.x[cell] + (rng.random() - 0.5) * grid.dx)

    return draw


def _particle_sampler(p: SHKMethodParams, v: Any, dv: Any) -> Any:
    def draw(rng: np.random.Generator) -> float:
        x0 = (
            rng.vonmises(p.rho0_mu, p.rho0_kappa, p.n_particles)
            if p.rho0_kappa > 0
            else (rng.uniform(-math.pi, math.pi, p.n_particles))
        )
        x = birth_death_langevin(
            x0, lambda z: v(z[:, 0]), lambda z: dv(z[:, 0])[:, None], p.t, p.particle_dt, rng
        )
        return float(x[int(rng.integers(p.n_particles)), 0])

    return draw


def run_release(
    params: SHKMethodParams, data: Any, ledger: Ledger, rng: np.random.Generator
) -> dict[str, Any]:
    """Approximate ``ρ_t^D`` with the chosen solver and draw ``n_samples`` points via the ledger."""
    p = declare.as_params(params)
    if data is None:
        raise InvalidParameterError("data", "is missing", "pass the private data")
    if p.solver == "grid":
        draw = _grid_sampler(p, data)
    else:
        v, dv = _potential(p, data)
        draw = _particle_sampler(p, v, dv)
    event = declare.single_release(p)
    assert isinstance(event, TimeProfiledPureDPEvent | ApproxDPEvent | NonPrivateEvent)
    tier = declare.tier(p)
    samples = np.array(
        [
            ledger.sample_certified(draw, event, step=f"shk_sample[{i}]", note=tier)
            for i in range(p.n_samples)
        ],
        dtype=np.float64,
    )
    summary = declare.certificate_summary(p)
    return {
        "samples": samples,
        "tier": tier,
        "certificate": summary["certificate"],
        "epsilon_per_sample": (
            math.inf if isinstance(event, NonPrivateEvent) else float(event.epsilon)
        ),
        "delta_per_sample": float(event.delta) if isinstance(event, ApproxDPEvent) else 0.0,
        "t": p.t,
        "solver": p.solver,
    }
