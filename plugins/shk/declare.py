"""Declaring and running an SHK exponential-mechanism release.

``declare_shk_release(params)`` returns the ``PureDPEvent`` with Theorem 3's ``ε(t)``;
``shk_release_metadata(params)`` the tier and assumptions; ``run_shk(params, rng)`` evolves the
grid PDE for the private data and draws the released samples from the time-``t`` density.

Parameters (a mapping or :class:`SHKParams`):

* ``t`` — flow time (≥ 0); ``beta`` — inverse temperature (``V_D = β L_D``);
* ``sensitivity`` — public bound on ``‖L_D − L_D′‖∞`` (``assumption="A1"``) or on
  ``osc(L_D − L_D′)`` (``assumption="A1_prime"``) over all neighbouring datasets;
* ``loss_range`` — public bound on ``osc(L_D)`` over all datasets (2 for the cosine loss);
* ``rho0_kappa``, ``rho0_mu`` — data-independent initial density ``ρ_0 ∝ e^{κ cos(x−μ)}``.
  ``B = 2κ + β·loss_range ≥ osc(log ρ_0/π_D)`` for every D (triangle inequality);
* run only: ``data`` (angles), ``n_cells``, ``dt``, ``n_samples``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np
from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import Event, PureDPEvent, SelfComposedEvent
from dpledger.plugins.shk import bounds
from dpledger.plugins.shk.solvers import FlowResult, solve_shk
from dpledger.plugins.shk.torus import (
    DEFAULT_CELLS,
    FloatArray,
    TorusGrid,
    check_beta,
    check_data,
    cosine_loss,
    scaled,
    von_mises_density,
)

ASSUMPTIONS = ("A1", "A1_prime")
TIER = "exact-flow theorem; released sample is from a grid solver / particle approximation"


def _nonneg(field: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating):
        raise InvalidParameterError(field, f"expected a number, got {value!r}", "pass a float")
    v = float(value)
    if not (math.isfinite(v) and v >= 0):
        raise InvalidParameterError(field, f"must be >= 0 and finite, got {value!r}", "pass >= 0")
    return v


def _t(v: Any) -> float:
    return _nonneg("t", v)


def _sens(v: Any) -> float:
    return _nonneg("sensitivity", v)


def _range(v: Any) -> float:
    return _nonneg("loss_range", v)


def _kappa(v: Any) -> float:
    return _nonneg("rho0_kappa", v)


def _beta(v: Any) -> float:
    return float(check_beta(v))


def _assumption(instance: Any, attribute: Any, value: Any) -> None:
    if value not in ASSUMPTIONS:
        raise InvalidParameterError(
            "assumption", f"unknown value {value!r}", f"use one of {', '.join(ASSUMPTIONS)}"
        )


@attrs.frozen
class SHKParams:
    """Validated parameters of an SHK release."""

    t: float = attrs.field(converter=_t)
    beta: float = attrs.field(converter=_beta)
    sensitivity: float = attrs.field(converter=_sens)
    assumption: str = attrs.field(default="A1_prime", validator=_assumption)
    loss_range: float = attrs.field(default=2.0, converter=_range)
    rho0_kappa: float = attrs.field(default=0.0, converter=_kappa)
    rho0_mu: float = attrs.field(default=0.0, converter=float)
    n_cells: int = attrs.field(default=DEFAULT_CELLS)
    dt: float | None = attrs.field(default=None)
    n_samples: int = attrs.field(default=1)
    data: tuple[float, ...] | None = attrs.field(default=None)

    @property
    def initial_oscillation_bound(self) -> float:
        """``B = osc(log ρ_0) + β·loss_range`` (data-independent)."""
        return float(2.0 * self.rho0_kappa + self.beta * self.loss_range)

    @property
    def potential_sensitivity(self) -> float:
        """``Δ_pot`` (A1) or ``Δ_osc`` (A1′) of ``V = βL``."""
        return float(self.beta * self.sensitivity)


def _params(params: Mapping[str, Any] | SHKParams) -> SHKParams:
    if isinstance(params, SHKParams):
        return params
    if not isinstance(params, Mapping):
        raise InvalidParameterError("params", "expected a mapping", "pass a dict of parameters")
    known = {f.name for f in attrs.fields(SHKParams)}
    unknown = sorted(set(params) - known)
    if unknown:
        raise InvalidParameterError(
            "params", f"unknown keys {unknown}", f"use only {sorted(known)}"
        )
    for key in ("t", "beta", "sensitivity"):
        if key not in params:
            raise InvalidParameterError(key, "is missing", f"pass {key!r} in params")
    kw = dict(params)
    if kw.get("data") is not None:
        kw["data"] = tuple(float(v) for v in check_data(kw["data"]))
    return SHKParams(**kw)


def release_epsilon(params: Mapping[str, Any] | SHKParams) -> float:
    """Theorem 3's ``ε(t)`` for the declared assumption."""
    p = _params(params)
    b = p.initial_oscillation_bound
    if p.assumption == "A1":
        return float(bounds.epsilon_a1(p.t, p.potential_sensitivity, b))
    return float(bounds.epsilon_a1_prime(p.t, p.potential_sensitivity, b))


def declare_shk_release(params: Mapping[str, Any] | SHKParams) -> PureDPEvent:
    """The pure-DP event of releasing one draw from the SHK flow at time ``t``."""
    return PureDPEvent(epsilon=release_epsilon(params))


def shk_release_metadata(params: Mapping[str, Any] | SHKParams) -> dict[str, Any]:
    """Tier, assumptions and the terms of ``ε(t)``."""
    p = _params(params)
    return {
        "method": "shk_exponential_mechanism",
        "tier": TIER,
        "theorem": "Theorem 3 (pure DP from the pointwise SHK stability bound, Theorem 1)",
        "assumption": p.assumption,
        "assumptions": [
            "Θ is the 1-D torus (compact, no boundary); V_D = β·L_D is C² and 2π-periodic",
            "ρ_0 is strictly positive, smooth and does not depend on the data",
            "A1: ‖L_D − L_D′‖∞ ≤ sensitivity for all neighbours"
            if p.assumption == "A1"
            else "A1′: osc(L_D − L_D′) ≤ sensitivity for all neighbours",
            "osc(L_D) ≤ loss_range for every dataset (gives B)",
            "one sample per release; n_samples > 1 draws are composed as n_samples releases",
        ],
        "epsilon": release_epsilon(p),
        "epsilon_floor": (2.0 if p.assumption == "A1" else 1.0) * p.potential_sensitivity,
        "transient": 2.0 * p.initial_oscillation_bound * math.exp(-p.t),
        "B": p.initial_oscillation_bound,
        "t": p.t,
    }


@attrs.frozen
class SHKRelease:
    """Output of :func:`run_shk`: released samples plus the grid density they were drawn from."""

    samples: FloatArray
    density: FloatArray
    grid: TorusGrid
    flow: FlowResult
    event: Event


def sample_from_cells(
    grid: TorusGrid, density: FloatArray, n: int, rng: np.random.Generator
) -> FloatArray:
    """Draw ``n`` points from a piecewise-constant cell density (cell, then uniform within)."""
    w = np.asarray(density, dtype=np.float64) * grid.dx
    cells = rng.choice(grid.n_cells, size=n, p=w / w.sum())
    return np.asarray(grid.x[cells] + (rng.random(n) - 0.5) * grid.dx)


def run_shk(params: Mapping[str, Any] | SHKParams, rng: np.random.Generator) -> SHKRelease:
    """Solve the SHK PDE for the private data and draw ``n_samples`` released points."""
    p = _params(params)
    if p.data is None:
        raise InvalidParameterError("data", "is missing", "pass the private angles as 'data'")
    if not isinstance(rng, np.random.Generator):
        raise InvalidParameterError(
            "rng", "expected numpy.random.Generator", "pass np.random.default_rng(seed)"
        )
    if isinstance(p.n_samples, bool) or not isinstance(p.n_samples, int) or p.n_samples < 1:
        raise InvalidParameterError("n_samples", f"must be an int >= 1, got {p.n_samples!r}", "1")
    grid = TorusGrid(p.n_cells)
    rho0 = von_mises_density(grid, p.rho0_kappa, p.rho0_mu)
    v = scaled(cosine_loss(np.asarray(p.data)), p.beta)
    flow = solve_shk(v, p.t, grid, rho0, dt=p.dt)
    density = flow.final(0)
    single = declare_shk_release(p)
    event: Event = single if p.n_samples == 1 else SelfComposedEvent(single, p.n_samples)
    return SHKRelease(
        samples=sample_from_cells(grid, density, p.n_samples, rng),
        density=density,
        grid=grid,
        flow=flow,
        event=event,
    )
