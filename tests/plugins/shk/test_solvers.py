"""Grid solvers: convergence under refinement, mass conservation, Gibbs stationarity, validation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpledger.core.errors import InvalidParameterError
from dpledger.plugins.shk import TorusGrid, solve_fokker_planck, solve_shk
from dpledger.plugins.shk.torus import check_potential, cosine_loss, von_mises_density


def v_double_well(x: np.ndarray) -> np.ndarray:
    return 1.2 * (1.0 - np.cos(2.0 * x)) + 0.3 * np.sin(x)


def _coarse(fine: np.ndarray, factor: int) -> np.ndarray:
    return fine.reshape(-1, factor).mean(axis=1)


def test_grid_refinement_converges() -> None:
    out = {}
    for n in (48, 96, 192):
        g = TorusGrid(n)
        res = solve_shk(v_double_well, 0.5, g, von_mises_density(g, 3.0, 2.0))
        out[n] = res.final(0)
    e1 = np.max(np.abs(_coarse(out[96], 2) - out[48]))
    e2 = np.max(np.abs(_coarse(out[192], 2) - out[96]))
    assert e2 < 2e-3  # default grid is converged to ~1e-3 in density
    assert e2 < e1 / 2.5  # second-order-ish decrease


def test_time_step_refinement_converges() -> None:
    g = TorusGrid(64)
    rho0 = von_mises_density(g, 3.0, 2.0)
    a = solve_shk(v_double_well, 0.5, g, rho0).final(0)
    b = solve_shk(v_double_well, 0.5, g, rho0, dt=1e-4).final(0)
    assert np.max(np.abs(a - b)) < 1e-8


@pytest.mark.parametrize("solver", [solve_shk, solve_fokker_planck])
def test_mass_is_conserved(solver) -> None:
    g = TorusGrid(64)
    res = solver(v_double_well, 1.0, g, von_mises_density(g, 4.0, 1.0), record_every=50)
    mass = res.densities[:, 0, :].sum(axis=1) * g.dx
    assert np.max(np.abs(mass - 1.0)) < 1e-12


@pytest.mark.parametrize("solver", [solve_shk, solve_fokker_planck])
def test_gibbs_density_is_stationary(solver) -> None:
    g = TorusGrid(64)
    pi = g.gibbs(v_double_well(g.x))
    res = solver(v_double_well, 1.0, g, pi)
    assert np.max(np.abs(res.final(0) / pi - 1.0)) < 1e-12


def test_shk_converges_to_gibbs_and_faster_than_langevin() -> None:
    g = TorusGrid(64)
    v = lambda x: 2.5 * (1.0 - np.cos(2.0 * x))  # noqa: E731
    pi = g.gibbs(v(g.x))
    rho0 = von_mises_density(g, 5.0, 0.0)
    shk = solve_shk(v, 8.0, g, rho0).final(0)
    fp = solve_fokker_planck(v, 8.0, g, rho0).final(0)
    assert np.max(np.abs(np.log(shk / pi))) < 1e-3
    assert np.max(np.abs(np.log(fp / pi))) > 0.1  # metastable: Langevin still unbalanced


def test_log_oscillation_contracts_like_lemma_8() -> None:
    g = TorusGrid(64)
    v = v_double_well
    log_pi = np.log(g.gibbs(v(g.x)))
    res = solve_shk(v, 3.0, g, von_mises_density(g, 4.0, 2.5), record_every=1)
    s = np.log(res.densities[:, 0, :]) - log_pi
    osc = np.ptp(s, axis=1)
    assert np.all(osc <= osc[0] * np.exp(-res.times) + 1e-9)


def test_invalid_inputs_name_the_field() -> None:
    g = TorusGrid(32)
    with pytest.raises(InvalidParameterError, match="potential"):
        check_potential(lambda x: x)  # V(−π) ≠ V(π)
    with pytest.raises(InvalidParameterError, match="not 2π-periodic"):
        check_potential(lambda x: np.cos(x / 2.0) + 0 * x)
    with pytest.raises(InvalidParameterError, match="non-finite"):
        check_potential(lambda x: np.where(x > 0, np.inf, 0.0))
    with pytest.raises(InvalidParameterError, match=r"^t:"):
        solve_shk(v_double_well, -1.0, g)
    with pytest.raises(InvalidParameterError, match=r"^t:"):
        solve_shk(v_double_well, math.nan, g)
    with pytest.raises(InvalidParameterError, match=r"^data:"):
        cosine_loss([0.1, math.nan])
    with pytest.raises(InvalidParameterError, match=r"^rho0:"):
        solve_shk(v_double_well, 1.0, g, np.zeros(32))
    with pytest.raises(InvalidParameterError, match=r"^dt:"):
        solve_shk(v_double_well, 1.0, g, dt=0.5)
    with pytest.raises(InvalidParameterError, match=r"^n_cells:"):
        TorusGrid(4)


def test_centred_flux_conserves_mass_and_nearly_keeps_gibbs() -> None:
    g = TorusGrid(96)
    pi = g.gibbs(v_double_well(g.x))
    res = solve_fokker_planck(v_double_well, 1.0, g, pi, scheme="centred", record_every=100)
    mass = res.densities[:, 0, :].sum(axis=1) * g.dx
    assert np.max(np.abs(mass - 1.0)) < 1e-12
    drift = np.max(np.abs(np.log(res.final(0) / pi)))
    assert 1e-4 < drift < 1e-2  # O(Δx²) away from the discrete Gibbs density, not exact
    coarse = TorusGrid(48)
    pi_c = coarse.gibbs(v_double_well(coarse.x))
    res_c = solve_fokker_planck(v_double_well, 1.0, coarse, pi_c, scheme="centred")
    assert np.max(np.abs(np.log(res_c.final(0) / pi_c))) > 3.0 * drift  # second order
    with pytest.raises(InvalidParameterError, match=r"^scheme:"):
        solve_shk(v_double_well, 1.0, g, scheme="upwind")
