"""Theorem 3 of the SHK paper: the plugin's pure-DP epsilon against the solver's flows."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpledger.accountant import select
from dpledger.core.events import PureDPEvent
from dpledger.plugins.shk import bounds, paper
from dpledger.plugins.shk.solvers import solve_shk
from dpledger.plugins.shk.torus import TorusGrid, cosine_loss, osc, scaled, von_mises_density

N, BETA, KAPPA, MU = 100, 5.0, 5.5, 1.529
#: data-independent bound on osc(log rho_0 / pi_D): osc(log rho_0) + beta * range(L_D)
B_WORST = 2 * KAPPA + BETA * 2.0


def worst_epsilon(t: float) -> float:
    """Theorem 3 (A1') with the worst-case oscillation 4 beta / n over all neighbours."""
    return bounds.epsilon_a1_prime(t, BETA * 4.0 / N, B_WORST)


def test_theorem3_formulas() -> None:
    formula = BETA * 4 / N + 2 * B_WORST * math.exp(-7.0)
    assert worst_epsilon(7.0) == pytest.approx(formula, rel=1e-12)
    assert worst_epsilon(7.0) == pytest.approx(0.2383, abs=1e-4)
    assert worst_epsilon(7.0) >= BETA * 4 / N + 2 * B_WORST * math.exp(-7.0)  # rounded up
    assert bounds.epsilon_a1(3.0, 0.2, 2.0) == pytest.approx(0.4 + 4.0 * math.exp(-3.0), rel=1e-12)


def test_worst_case_oscillation_of_the_cosine_loss() -> None:
    grid = TorusGrid(400)
    y, _ = paper.exp3_data()
    moved = y.copy()
    moved[0] = y[0] + math.pi  # antipodal replacement: the worst neighbour
    h = cosine_loss(y)(grid.x) - cosine_loss(moved)(grid.x)
    assert osc(h) == pytest.approx(4.0 / N, rel=1e-3)
    assert osc(h) <= 4.0 / N + 1e-15


def flows(y2: np.ndarray, t: float, grid: TorusGrid) -> tuple[np.ndarray, np.ndarray]:
    y, _ = paper.exp3_data()
    rho0 = von_mises_density(grid, KAPPA, MU)
    v, vp = scaled(cosine_loss(y), BETA), scaled(cosine_loss(y2), BETA)
    res = solve_shk([v, vp], t, grid, rho0)
    return res.final(0), res.final(1)


def test_experiment3_pair_is_within_the_worst_case_epsilon() -> None:
    grid = TorusGrid(64)
    _, y2 = paper.exp3_data()
    p, q = flows(y2, 7.0, grid)
    eps = worst_epsilon(7.0)
    assert bounds.sup_log_ratio(p, q) <= eps
    assert bounds.symmetric_hockey_stick(p, q, eps, grid.dx) == 0.0
    assert bounds.symmetric_hockey_stick(p, q, 0.5 * eps, grid.dx) > 0.0  # not vacuous


def test_random_neighbours_are_within_the_worst_case_epsilon() -> None:
    grid = TorusGrid(64)
    rng = np.random.default_rng(0)
    eps = worst_epsilon(2.0)
    y, _ = paper.exp3_data()
    for _ in range(3):
        y2 = y.copy()
        y2[rng.integers(N)] = rng.uniform(-math.pi, math.pi)
        p, q = flows(y2, 2.0, grid)
        assert bounds.sup_log_ratio(p, q) <= eps


def test_the_papers_per_pair_bound_is_below_the_guarantee() -> None:
    pair_bound = paper.PAPER["exp3"]["bound"]
    assert pair_bound == pytest.approx(0.2201)
    assert worst_epsilon(7.0) > pair_bound


@pytest.mark.parametrize("delta", [1e-12, 1e-6, 1e-4])
def test_accountant_never_reports_more_than_the_pure_epsilon(delta: float) -> None:
    eps = worst_epsilon(7.0)
    event = PureDPEvent(eps)
    got = select.account(event, delta=delta).bound.epsilon
    assert eps - 1e-3 <= got <= eps * (1 + 1e-12)
