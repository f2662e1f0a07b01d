"""The grid solver's released law obeys the booked Theorem 3 epsilon (numerical sweep).

``release.grid_release_law`` is exactly the law one grid draw samples from (cell ``i`` with
probability ``w_i``, then uniform in the cell), so its privacy loss between two datasets is
``max_i |log w_i − log w'_i|``. The semi-discrete SQRA flow obeys Theorem 3's bound exactly (see
proof.md); this sweep covers the RK4 time stepping, at the default step and at a user ``dt``
(which is capped at the default step), for worst-case neighbours of the cosine loss (add one
antipodal or orthogonal record, replace one record by its antipode) and of grid losses (one
record whose loss is 0 on half the torus and ``loss_range`` on the other).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping

import numpy as np
import pytest

from dpledger.plugins.shk import declare
from dpledger.plugins.shk.release import grid_release_law
from dpledger.plugins.shk.torus import TorusGrid

MU = 2.0  # ρ_0's mode, away from the data's angle 0 (larger initial oscillation R_0)


def cosine_pairs(n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    d = np.zeros(n)
    far = np.full(n, MU + math.pi)
    return [
        (d, np.concatenate([d[:-1], [math.pi]])),  # replace one by its antipode
        (d, np.concatenate([d, [math.pi]])),  # add an antipodal record
        (d, np.concatenate([d, [math.pi / 2]])),
        (far, np.concatenate([far, [MU]])),  # data opposite ρ_0's mode: R_0 near B
    ]


def worst_ratio(params: Mapping[str, object], pairs: list[tuple[np.ndarray, np.ndarray]]) -> float:
    """max over the pairs of (privacy loss of the released law) / (booked ε)."""
    p = declare.as_params(params)
    eps = declare.pure_event(p).epsilon
    worst = 0.0
    for a, b in pairs:
        emp = float(np.max(np.abs(np.log(grid_release_law(p, a) / grid_release_law(p, b)))))
        assert emp <= eps, (params, emp, eps)
        worst = max(worst, emp / eps)
    return worst


FAST = list(itertools.product([0.5, 5.0], [1, 10, 100], [0.0, 3.0], [0.01, 2.0, 8.0], [8, 16]))


@pytest.mark.parametrize(("beta", "n", "kappa", "t", "cells"), FAST)
def test_cosine_loss_release_is_within_the_booked_epsilon(
    beta: float, n: int, kappa: float, t: float, cells: int
) -> None:
    params = {"t": t, "beta": beta, "n": n, "rho0_kappa": kappa, "rho0_mu": MU, "n_cells": cells}
    worst_ratio(params, cosine_pairs(n))


def test_the_sweep_comes_close_to_the_bound() -> None:
    # not vacuous: at t = 12 the floor S dominates and the loss reaches 93.6 % of ε
    params = {"t": 12.0, "beta": 5.0, "n": 100, "rho0_mu": MU, "n_cells": 16}
    assert worst_ratio(params, cosine_pairs(100)) > 0.93


@pytest.mark.parametrize("dt", [1e-3, 10.0])
def test_a_user_step_is_capped_and_covered(dt: float) -> None:
    base = {"t": 2.0, "beta": 5.0, "n": 10, "rho0_kappa": 3.0, "rho0_mu": MU, "n_cells": 16}
    worst_ratio({**base, "dt": dt}, cosine_pairs(10))
    if dt > 1.0:  # a step above the stability limit falls back to the default step
        y = np.zeros(10)
        np.testing.assert_array_equal(
            grid_release_law(declare.as_params({**base, "dt": dt}), y),
            grid_release_law(declare.as_params(base), y),
        )


@pytest.mark.parametrize(("beta", "t"), [(1.0, 0.5), (1.0, 8.0), (10.0, 2.0)])
def test_grid_loss_release_is_within_the_booked_epsilon(beta: float, t: float) -> None:
    cells, n, rng = 16, 4, np.random.default_rng(0)
    x = TorusGrid(cells).x
    base = 1.0 + np.sin(x)[None, :] * rng.uniform(0.2, 1.0, (n, 1))  # smooth, in [0, 2]
    half = np.where(np.cos(x) > 0, 2.0, 0.0)[None, :]
    pairs = [(base, np.vstack([base, half])), (base, np.vstack([base[:-1], half]))]
    params = {"t": t, "beta": beta, "n": n, "loss": "grid", "loss_range": 2.0, "n_cells": cells}
    worst_ratio(params, pairs)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("beta", "n", "kappa", "t", "cells"),
    list(itertools.product([20.0], [1, 10], [0.0, 3.0], [0.5, 2.0], [8]))
    + list(itertools.product([0.5, 5.0], [1, 10, 100], [0.0, 3.0], [20.0], [32]))
    + list(itertools.product([1.0, 5.0], [2, 50], [0.0, 5.5], [4.0, 40.0], [64, 192])),
)
def test_larger_sweep(beta: float, n: int, kappa: float, t: float, cells: int) -> None:
    params = {"t": t, "beta": beta, "n": n, "rho0_kappa": kappa, "rho0_mu": MU, "n_cells": cells}
    worst_ratio(params, cosine_pairs(n))
