"""Finite-volume SHK transport–reaction and plain Fokker–Planck solvers on the 1-D torus.

Transport ``∂_x(∂_x ρ + ρ ∂_x V)`` uses the square-root (SQRA) flux between neighbouring cells,

    F_{i+½} = −(1/Δx) √(π_i π_{i+1}) (ρ_{i+1}/π_{i+1} − ρ_i/π_i),
    dρ_i/dt = −(F_{i+½} − F_{i−½})/Δx,

which is second-order consistent, conserves mass exactly and has the discrete Gibbs density
``π_i ∝ e^{−V_i}`` as its exact stationary state (``scheme="sqra"``, the default). The
``scheme="centred"`` alternative is the textbook centred flux

    F_{i+½} = −(ρ_{i+1} − ρ_i)/Δx + b_{i+½} (ρ_i + ρ_{i+1})/2,   b_{i+½} = −(V_{i+1} − V_i)/Δx,

whose stationary state differs from the discrete Gibbs density by O(Δx²); it reproduces the
empirical log-ratios of the SHK stability paper's Tables 1–2 to six digits, so it is the scheme
used to re-run the paper (it can lose positivity when ``|b|Δx > 2``; the solver then raises).

The SHK reaction ``−α_t ρ_t`` with
``α_t = log(ρ_t/π) − E_{ρ_t}[log(ρ_t/π)]`` is evaluated pointwise (it also conserves mass exactly
on the grid). Time integration is classical RK4.

Defaults: ``n_cells = 192`` and ``dt`` = 45 % of the RK4 stability limit obtained from a Gershgorin
bound on the transport operator plus the reaction rate bound ``osc(log ρ_0/π)`` (the reaction rate
never exceeds it, by Lemma 8 of the paper). Several potentials can be evolved in one call; they
share the time grid, which is what the two-neighbour privacy checks need.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import attrs
import numpy as np

from dpledger.plugin import InvalidParameterError
from dpledger.plugins.shk.torus import FloatArray, Potential, TorusGrid, evaluate

#: Real-axis extent of the RK4 stability region.
RK4_STABILITY = 2.785
#: Fraction of the stability limit used by the default time step.
DEFAULT_CFL = 0.45
SCHEMES = ("sqra", "centred")


@attrs.frozen
class FlowResult:
    """Recorded densities of one or more flows sharing a time grid.

    ``densities[r, k, i]`` is the density of flow ``k`` at ``times[r]`` on cell ``i``;
    ``targets[k]`` is the discrete Gibbs density of flow ``k``.
    """

    grid: TorusGrid
    times: FloatArray
    densities: FloatArray
    targets: FloatArray
    dt: float
    n_steps: int

    def final(self, k: int = 0) -> FloatArray:
        """Density of flow ``k`` at the last recorded time."""
        return np.asarray(self.densities[-1, k], dtype=np.float64)

    def flow(self, k: int = 0) -> FloatArray:
        """All recorded densities of flow ``k`` (shape ``(n_times, n_cells)``)."""
        return np.asarray(self.densities[:, k], dtype=np.float64)


def _check_time(t_final: float) -> float:
    if isinstance(t_final, bool) or not isinstance(t_final, int | float | np.floating):
        raise InvalidParameterError("t", f"expected a number, got {t_final!r}", "pass t >= 0")
    t = float(t_final)
    if not math.isfinite(t) or t < 0:
        raise InvalidParameterError(
            "t", f"must be >= 0 and finite, got {t_final!r}", "pass a non-negative flow time"
        )
    return t


def _edge_weights(log_pi: FloatArray, dx: float) -> FloatArray:
    """``√(π_i π_{i+1}) / Δx²`` for the face between cell i and i+1 (periodic)."""
    return np.asarray(np.exp(0.5 * (log_pi + np.roll(log_pi, -1, axis=-1))) / dx**2)


def stable_dt(
    grid: TorusGrid, log_pi: FloatArray, reaction_rate: float, scheme: str = "sqra"
) -> float:
    """Default RK4 step: ``DEFAULT_CFL`` × stability limit of the linearised right-hand side."""
    if scheme == "centred":
        drift = np.abs(np.roll(log_pi, -1, axis=-1) - log_pi) / grid.dx
        transport = 4.0 / grid.dx**2 + 2.0 * float(np.max(drift)) / grid.dx
    else:
        w = _edge_weights(log_pi, grid.dx)
        transport = 2.0 * float(np.max((w + np.roll(w, 1, axis=-1)) / np.exp(log_pi)))
    return float(DEFAULT_CFL * RK4_STABILITY / (transport + reaction_rate + 1.0))


def _face_coefficients(log_pi: FloatArray, dx: float, scheme: str) -> FloatArray:
    """SQRA: ``√(π_i π_{i+1})/Δx²``; centred: drifts ``b_{i+½} = (log π_{i+1} − log π_i)/Δx``."""
    if scheme == "centred":
        return np.asarray((np.roll(log_pi, -1, axis=-1) - log_pi) / dx)
    return _edge_weights(log_pi, dx)


def _transport(
    rho: FloatArray, log_pi: FloatArray, w: FloatArray, dx: float, centred: bool
) -> FloatArray:
    if centred:  # w holds the face drifts b_{i+½}
        r1 = np.roll(rho, -1, axis=-1)
        flux = (r1 - rho) / dx - 0.5 * w * (rho + r1)  # = −F_{i+½}
        return np.asarray((flux - np.roll(flux, 1, axis=-1)) / dx)
    u = rho / np.exp(log_pi)
    flux = w * (np.roll(u, -1, axis=-1) - u)  # = −F_{i+½}/Δx
    return np.asarray(flux - np.roll(flux, 1, axis=-1))


def _rhs(
    rho: FloatArray, log_pi: FloatArray, w: FloatArray, dx: float, react: bool, centred: bool
) -> FloatArray:
    out = _transport(rho, log_pi, w, dx, centred)
    if react:
        s = np.log(rho) - log_pi
        mean = np.sum(s * rho, axis=-1, keepdims=True) * dx
        out = out - (s - mean) * rho
    return np.asarray(out)


def _solve(
    potentials: Potential | Sequence[Potential],
    grid: TorusGrid,
    rho0: FloatArray | None,
    t_final: float,
    dt: float | None,
    record_every: int | None,
    react: bool,
    scheme: str = "sqra",
) -> FlowResult:
    t = _check_time(t_final)
    if scheme not in SCHEMES:
        raise InvalidParameterError(
            "scheme", f"unknown scheme {scheme!r}", f"use one of {', '.join(SCHEMES)}"
        )
    pots = [potentials] if callable(potentials) else list(potentials)
    if not pots:
        raise InvalidParameterError("potentials", "is empty", "pass at least one potential")
    v = np.stack([evaluate(p, grid, f"potentials[{k}]") for k, p in enumerate(pots)])
    log_pi = np.log(np.stack([grid.gibbs(row) for row in v]))
    start = np.full(grid.n_cells, 1.0 / (2.0 * math.pi)) if rho0 is None else rho0
    rho = np.tile(grid.normalise(start), (len(pots), 1))
    rate = float(np.max(np.ptp(np.log(rho) - log_pi, axis=-1))) if react else 0.0
    if dt is None:
        step = stable_dt(grid, log_pi, rate, scheme)
    else:
        if not (isinstance(dt, int | float) and math.isfinite(dt) and dt > 0):
            raise InvalidParameterError("dt", f"must be > 0 and finite, got {dt!r}", "pass dt > 0")
        step = float(dt)
    n_steps = max(1, math.ceil(t / step)) if t > 0 else 0
    h = t / n_steps if n_steps else 0.0
    every = n_steps if record_every is None else int(record_every)
    if every < 1 and n_steps:
        raise InvalidParameterError("record_every", "must be >= 1", "pass a positive step count")
    w = _face_coefficients(log_pi, grid.dx, scheme)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        return _march(rho, log_pi, w, grid, h, n_steps, every, react, scheme == "centred")


def _march(
    rho: FloatArray,
    log_pi: FloatArray,
    w: FloatArray,
    grid: TorusGrid,
    h: float,
    n_steps: int,
    every: int,
    react: bool,
    centred: bool,
) -> FlowResult:
    times, snaps = [0.0], [rho.copy()]
    for n in range(1, n_steps + 1):
        k1 = _rhs(rho, log_pi, w, grid.dx, react, centred)
        k2 = _rhs(rho + 0.5 * h * k1, log_pi, w, grid.dx, react, centred)
        k3 = _rhs(rho + 0.5 * h * k2, log_pi, w, grid.dx, react, centred)
        k4 = _rhs(rho + h * k3, log_pi, w, grid.dx, react, centred)
        rho = rho + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        if not np.all(np.isfinite(rho)) or np.any(rho <= 0):
            raise InvalidParameterError(
                "dt", f"time step {h:.3g} is unstable (density lost positivity)", "use a smaller dt"
            )
        if n % every == 0 or n == n_steps:
            times.append(n * h)
            snaps.append(rho.copy())
    return FlowResult(
        grid=grid,
        times=np.asarray(times),
        densities=np.stack(snaps),
        targets=np.exp(log_pi),
        dt=h,
        n_steps=n_steps,
    )


def solve_shk(
    potentials: Potential | Sequence[Potential],
    t_final: float,
    grid: TorusGrid | None = None,
    rho0: FloatArray | None = None,
    dt: float | None = None,
    record_every: int | None = None,
    scheme: str = "sqra",
) -> FlowResult:
    """Evolve the SHK (birth–death Langevin) PDE for each potential from the common ``rho0``.

    ``rho0`` are cell values of a positive density (default: uniform); ``record_every`` records
    every that many RK4 steps (default: only the initial and final densities); ``scheme`` is the
    transport flux (``"sqra"`` or ``"centred"``).
    """
    return _solve(potentials, grid or TorusGrid(), rho0, t_final, dt, record_every, True, scheme)


def solve_fokker_planck(
    potentials: Potential | Sequence[Potential],
    t_final: float,
    grid: TorusGrid | None = None,
    rho0: FloatArray | None = None,
    dt: float | None = None,
    record_every: int | None = None,
    scheme: str = "sqra",
) -> FlowResult:
    """Evolve the plain Fokker–Planck (Langevin, transport-only) PDE; same conventions as SHK."""
    return _solve(potentials, grid or TorusGrid(), rho0, t_final, dt, record_every, False, scheme)
