"""The paper's Tables 1–4 and Experiments 3–4 (Appendix A.3), re-run.

Tolerance: 2 % relative, or 1e-3 absolute for numbers below 1e-2. The paper does not state the
initial density, the run time of Experiments 1–2 or the data of Experiment 3; the choices (and
which numbers they calibrate) are documented in ``dpledger.plugins.shk.paper``. The fast tests run
the flows on a 96-cell grid; the ``slow`` ones repeat them on the paper's 192-cell grid.
The flows use the centred finite-volume flux, which reproduces the empirical log-ratios of
Tables 1–2 to six digits (the SQRA flux converges exactly to the discrete Gibbs floor instead).
"""

from __future__ import annotations

import pytest

from dpledger.plugins.shk import paper

REL, ABS = 0.02, 1e-3


def close(ours: float, theirs: float) -> bool:
    if abs(theirs) < 1e-2:
        return abs(ours - theirs) <= ABS
    return abs(ours - theirs) <= REL * abs(theirs)


def check(ours: dict, table: str, skip: tuple[str, ...] = ()) -> None:
    bad = {
        k: (ours[k], v)
        for k, v in paper.PAPER[table].items()
        if k not in skip and not close(ours[k], v)
    }
    assert not bad, f"{table}: (ours, paper) = {bad}"


@pytest.fixture(scope="module", params=[96, pytest.param(192, marks=pytest.mark.slow)])
def n_cells(request) -> int:
    return int(request.param)


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


@pytest.mark.parametrize("table", ["table1", "table2"])
def test_pointwise_tables(table: str, n_cells: int) -> None:
    check(paper.pointwise_table(table, n_cells=n_cells), table)


def test_renyi_table(n_cells: int) -> None:
    out = paper.renyi_table(n_cells=n_cells)
    check(out, "table3")
    assert all(out[f"D{a}"] <= out["envelope"] for a in paper.RENYI_ORDERS)


def test_c_tradeoff_table4() -> None:
    out = paper.c_tradeoff()
    check(out, "table4")
    assert out["c_plateau"] == pytest.approx(0.497588, abs=1e-6)  # grid point nearest 1/2
    assert out["c_finite"] == pytest.approx(0.98)  # right end of the c grid


def test_experiment3(n_cells: int) -> None:
    out = paper.experiment3(n_cells=n_cells)
    check(out, "exp3")
    assert out["loss"] <= out["target_bound"] <= out["bound"]
    assert out["hockey_stick"] < 1e-4  # below 1/n² at ε = 0.15


def test_experiment4(n_cells: int) -> None:
    out = paper.experiment4(n_cells=n_cells)
    check(out, "exp4")
    assert out["shk_log_ratio"] <= out["envelope"]
    assert out["kl_shk"] < 1e-4 < out["kl_langevin"]


@pytest.mark.slow
def test_experiment4_initial_density_is_what_matters() -> None:
    # The tilted target ρ_0 ∝ π e^{5.73 cos x} (mass in one well, locally in equilibrium) gives
    # Langevin KL 0.370 (centred flux) / 0.3686 (SQRA flux); a flatter tilt lowers both the
    # envelope and the Langevin KL, so the envelope 0.414 and the KL 0.371 pin the tilt together.
    sqra = paper.experiment4(n_cells=96, scheme="sqra")
    assert close(sqra["kl_langevin"], paper.PAPER["exp4"]["kl_langevin"])
    assert sqra["kl_langevin"] < paper.experiment4(n_cells=96)["kl_langevin"]
    flat = paper.experiment4(n_cells=96, tilt=2.0)
    assert flat["envelope"] < 0.39 and flat["kl_langevin"] < 0.35
