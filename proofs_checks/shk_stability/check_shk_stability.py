"""Theorem 1 of the SHK paper on the SHK plugin's solver (read-only calls)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpledger.plugins.shk import bounds, paper
from dpledger.plugins.shk.solvers import solve_shk
from dpledger.plugins.shk.torus import Potential, TorusGrid, osc, von_mises_density

N_CELLS = 64


def setup(name: str) -> tuple[TorusGrid, np.ndarray, Potential, Potential, dict[str, float]]:
    grid = TorusGrid(N_CELLS)
    rho0 = von_mises_density(grid, 5.5, 1.529)
    v, vp = paper.potentials(name)
    h = v(grid.x) - vp(grid.x)
    lr0 = np.log(rho0)
    terms = {
        "sup": float(np.max(np.abs(h))),
        "osc": osc(h),
        "r0": osc(lr0 - np.log(grid.gibbs(v(grid.x)))),
        "r0p": osc(lr0 - np.log(grid.gibbs(vp(grid.x)))),
    }
    return grid, rho0, v, vp, terms


@pytest.mark.parametrize("name", ["table1", "table2", "exp2"])
def test_log_ratio_stays_below_both_envelopes(name: str) -> None:
    grid, rho0, v, vp, st = setup(name)
    res = solve_shk([v, vp], 4.0, grid, rho0, record_every=40)
    assert len(res.times) >= 5
    for k, t in enumerate(res.times):
        emp = bounds.sup_log_ratio(res.densities[k, 0], res.densities[k, 1])
        a1 = bounds.log_ratio_envelope(float(t), 2 * st["sup"], st["r0"], st["r0p"])
        a1p = bounds.log_ratio_envelope(float(t), st["osc"], st["r0"], st["r0p"])
        assert emp <= min(a1, a1p), (name, t)
    assert emp > 0.1 * st["osc"]  # the flows really differ: the check is not vacuous


def test_the_factor_two_of_a1_is_needed() -> None:
    grid, rho0, v, vp, st = setup("table2")
    assert st["osc"] == pytest.approx(2 * st["sup"], rel=1e-3)
    res = solve_shk([v, vp], 8.0, grid, rho0)
    emp = bounds.sup_log_ratio(res.final(0), res.final(1))
    without_factor_two = st["sup"] + math.exp(-8.0) * (st["r0"] + st["r0p"])
    assert emp > without_factor_two
    assert emp <= bounds.log_ratio_envelope(8.0, 2 * st["sup"], st["r0"], st["r0p"])
