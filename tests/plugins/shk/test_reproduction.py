"""The paper's Tables 1–4 and Experiments 3–4 (Appendix A.3), re-run.

Every cell is judged by its relative error: within 1 %, or within the bound listed in ``GAPS``
with the reason for the gap. The paper does not state the
initial density, the run time of Experiments 1–2 or the data of Experiment 3; the choices (and
which numbers they calibrate) are documented in ``dpledger.plugins.shk.paper``. The fast tests run
the flows on a 96-cell grid; the ``slow`` ones repeat them on the paper's 192-cell grid.
The flows use the centred finite-volume flux, which reproduces the empirical log-ratios of
Tables 1–2 to six digits (the SQRA flux converges exactly to the discrete Gibbs floor instead).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpledger.plugins.shk import paper

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:  # the reproductions sit beside the package, not in it
    sys.path.insert(0, str(ROOT))

from experiments.shk import tables  # noqa: E402

#: every cell is judged by its relative error; 1 % unless listed in GAPS with its reason
REL = 0.01
#: cells further than 1 % from the paper, with the bound on the gap and why
GAPS: dict[tuple[str, str], tuple[float, str]] = {
    ("exp3", "target_bound"): (
        0.025,
        "the paper's envelope 0.2058 implies R_0 + R'_0 = 28.4 at its floor; the rho_0 used "
        "here (von Mises kappa 5.5, shared with Tables 1-2) gives 24.2 (-1.9 %)",
    ),
    ("exp3", "hockey_stick"): (
        0.10,
        "a 6.6e-6 tail quantity that moves with the grid (-0.4 % at N = 96, -7.4 % at "
        "N = 192); the paper does not state its grid",
    ),
    ("exp4", "kl_shk"): (
        0.30,
        "a 3e-5 KL between nearly equal densities that moves with the grid (+8 % at N = 96, "
        "-27 % at N = 192); the paper does not state its grid",
    ),
    ("exp4", "shk_log_ratio"): (
        0.015,
        "converged to the stationary flux value 0.35828 (the exact SQRA floor is 0.35715); "
        "the paper's 0.362 sits 1 % above it (a different time step or grid)",
    ),
}


def close(ours: float, theirs: float, table: str = "", key: str = "") -> bool:
    tolerance = GAPS.get((table, key), (REL, ""))[0]
    return abs(ours - theirs) <= tolerance * abs(theirs)


def check(ours: dict[str, Any], table: str, skip: tuple[str, ...] = ()) -> None:
    bad = {
        k: (ours[k], v, f"{(ours[k] - v) / v:+.2%}")
        for k, v in paper.PAPER[table].items()
        if k not in skip and not close(ours[k], v, table, k)
    }
    assert not bad, f"{table}: (ours, paper, relative difference) = {bad}"


@pytest.mark.experiments
def test_every_listed_gap_is_a_real_cell() -> None:
    for table, key in GAPS:
        assert key in paper.PAPER[table], (table, key)


@pytest.fixture(scope="module", params=[96, pytest.param(192, marks=pytest.mark.slow)])
def n_cells(request: pytest.FixtureRequest) -> int:
    return int(request.param)


@pytest.mark.experiments
@pytest.mark.parametrize("table", ["table1", "table2"])
def test_grid_quantities_exact(table: str) -> None:
    # ‖V−V′‖∞, 2‖V−V′‖∞, osc and the exact target floor are N = 192 grid values: 6 digits.
    st = paper._static(
        paper.TorusGrid(192),
        *paper.potentials(table),
        paper.von_mises_density(paper.TorusGrid(192), 1.0),
    )
    for key in ("sup", "two_sup", "osc", "floor"):
        assert st[key] == pytest.approx(paper.PAPER[table][key], abs=1.5e-6)


@pytest.mark.experiments
@pytest.mark.parametrize("table", ["table1", "table2"])
def test_pointwise_tables(table: str, n_cells: int) -> None:
    check(tables.pointwise_table(table, n_cells=n_cells), table)


@pytest.mark.experiments
def test_renyi_table(n_cells: int) -> None:
    out = tables.renyi_table(n_cells=n_cells)
    check(out, "table3")
    assert all(out[f"D{a}"] <= out["envelope"] for a in tables.RENYI_ORDERS)


def test_c_tradeoff_table4() -> None:
    out = tables.c_tradeoff()
    check(out, "table4")
    assert out["c_plateau"] == pytest.approx(0.497588, abs=1e-6)  # grid point nearest 1/2
    assert out["c_finite"] == pytest.approx(0.98)  # right end of the c grid


@pytest.mark.experiments
def test_experiment3(n_cells: int) -> None:
    out = paper.experiment3(n_cells=n_cells)
    check(out, "exp3")
    # the bound cell is the reading of 0.2201 that test_experiment3_reading_of_0_2201 argues
    assert out["bound"] == paper.exp3_readings(n_cells)[paper.EXP3_READING]["theorem1"]
    assert out["loss"] <= out["target_bound"] <= out["bound_data"] <= out["bound"]
    assert out["hockey_stick"] < 1e-4  # below 1/n² at ε = 0.15


def test_experiment3_reading_of_0_2201() -> None:
    """The paper's sentence: "the (A1)/(A1') theorem bound is 0.2201 and the exact target-floor
    envelope is 0.2058". The reading used must give both numbers from one R_0 + R'_0."""
    readings = paper.exp3_readings()
    ours, theirs = readings[paper.EXP3_READING], paper.PAPER["exp3"]
    assert close(ours["target"], theirs["target_bound"])
    assert close(ours["theorem1"], theirs["bound"])
    # B = 11 (R_0, R'_0 <= 11) cannot give 0.2058: its largest target envelope is 0.19994
    b11 = readings["declared_b11"]
    assert b11["target"] == pytest.approx(0.199944, abs=1e-6) and not close(
        b11["target"], theirs["target_bound"]
    )
    # 0.2058 needs R_0 + R'_0 = 28.42 > 2B = 22; at that sum Theorem 1 gives 0.22008 (A1 and A1')
    assert ours["r_sum"] == pytest.approx(28.42, abs=0.01)
    assert ours["theorem1"] == pytest.approx(0.22008, abs=1e-5)
    # as a DP claim (Theorem 3, worst neighbour Delta_osc = 4 beta / n = 0.2): every rho_0 with
    # that R_0 + R'_0 has B >= max(R_0, R'_0) >= 14.2, so epsilon >= 0.2259, above 0.2201
    e = math.exp(-paper.EXP3_T)
    assert ours["theorem3_any"] == pytest.approx(0.2 + ours["r_sum"] * e, rel=1e-12)
    assert ours["theorem3_any"] > theirs["bound"] * (1 + REL)
    assert ours["theorem3_von_mises"] == pytest.approx(0.2277, abs=1e-4)


def test_least_von_mises_kappa_is_least_on_the_grid() -> None:
    # independent of the ellipse: osc on the grid of kappa cos(x - mu) + V_D and + V_D', over mu
    grid = paper.TorusGrid(paper.N_CELLS)
    y, y2 = paper.exp3_data()
    v, vp = (paper.EXP3_BETA * paper.cosine_loss(d)(grid.x) for d in (y, y2))
    ours = paper.exp3_readings()["implied"]
    mus = np.linspace(-math.pi, math.pi, 1441)

    def r_sum(kappa: float) -> np.ndarray:
        f = kappa * np.cos(grid.x[None, :] - mus[:, None])
        return np.ptp(f + v, axis=1) + np.ptp(f + vp, axis=1)

    assert r_sum(0.999 * ours["kappa"]).max() < ours["r_sum"] <= r_sum(ours["kappa"]).max() * 1.001


@pytest.mark.experiments
def test_experiment3_beside_its_non_private_baseline(n_cells: int) -> None:
    out = paper.experiment3(n_cells=n_cells)
    shk, em, erm = paper.experiment3_releases(out, n_cells=n_cells)
    assert (shk["release"], em["release"], erm["release"]) == paper.EXP3_RELEASES
    # the SHK row is the reproduced release: its pair loss and hockey-stick, and the certified
    # epsilon of the rho_0 it starts from (osc log rho_0 = 2 kappa = 11, so B = 21), above the
    # bound cell (the paper's 0.2201, a data-dependent envelope)
    assert (shk["epsilon"], shk["loss"], shk["hockey_stick"]) == (
        out["bound_run"],
        out["loss"],
        out["hockey_stick"],
    )
    assert out["bound_run"] == pytest.approx(0.2 + 42.0 * math.exp(-7.0), rel=1e-12)
    assert out["bound"] < out["bound_run"]
    # the non-private estimate is the exact minimiser: no grid cell centre has a lower risk,
    # and a cell centre is at most half a cell away (risk gap <= 1 - cos(dx / 2))
    y, y2 = paper.exp3_data()
    grid = paper.TorusGrid(n_cells)
    lx = paper.cosine_loss(y)(grid.x)
    assert 0.0 <= lx.min() - erm["risk"] <= 1.0 - math.cos(grid.dx / 2)
    # so the excess over it is the table's utility plus that gap, for the flow and for pi_D
    for row, cell in ((shk, "utility"), (em, "utility_floor")):
        assert row["excess"] - out[cell] == pytest.approx(lx.min() - erm["risk"], abs=1e-12)
        assert row["risk"] > erm["risk"] and row["distance"] > 0.0
    # without noise the estimate moves with the data, so the pair is told apart with certainty
    moved = [
        math.atan2(math.fsum(math.sin(v) for v in d), math.fsum(math.cos(v) for v in d))
        for d in (y, y2)
    ]
    assert moved[0] != moved[1]
    assert (erm["loss"], erm["hockey_stick"], erm["excess"]) == (math.inf, 1.0, 0.0)
    # pi_D: the exponential mechanism's own epsilon (Delta_osc) and loss below it
    assert em["loss"] <= em["epsilon"] < shk["epsilon"]


@pytest.mark.experiments
def test_experiment4(n_cells: int) -> None:
    out = tables.experiment4(n_cells=n_cells)
    check(out, "exp4")
    assert out["shk_log_ratio"] <= out["envelope"]
    assert out["kl_shk"] < 1e-4 < out["kl_langevin"]


@pytest.mark.experiments
@pytest.mark.slow
def test_experiment4_initial_density_is_what_matters() -> None:
    # The tilted target ρ_0 ∝ π e^{5.73 cos x} (mass in one well, locally in equilibrium) gives
    # Langevin KL 0.370 (centred flux) / 0.3686 (SQRA flux); a flatter tilt lowers both the
    # envelope and the Langevin KL, so the envelope 0.414 and the KL 0.371 pin the tilt together.
    sqra = tables.experiment4(n_cells=96, scheme="sqra")
    assert close(sqra["kl_langevin"], paper.PAPER["exp4"]["kl_langevin"])
    assert sqra["kl_langevin"] < tables.experiment4(n_cells=96)["kl_langevin"]
    flat = tables.experiment4(n_cells=96, tilt=2.0)
    assert flat["envelope"] < 0.39 and flat["kl_langevin"] < 0.35
