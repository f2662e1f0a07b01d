"""Birth–death Langevin particles track the SHK PDE; plain Langevin stays metastable."""

from __future__ import annotations

import numpy as np
import pytest

from dpledger.core.errors import InvalidParameterError
from dpledger.plugins.shk import TorusGrid, solve_shk
from dpledger.plugins.shk.particles import birth_death_langevin, wrapped_kde_log
from dpledger.plugins.shk.torus import von_mises_density


def pot(x):
    return 2.5 * (1 - np.cos(2 * x[:, 0]))


def grad(x):
    return 5.0 * np.sin(2 * x)


def test_particles_follow_shk_pde() -> None:
    n, t = 400, 2.0
    x0 = np.random.default_rng(0).vonmises(0.0, 5.5, n)
    bd = birth_death_langevin(x0, pot, grad, t, 0.01, np.random.default_rng(1))
    fp = birth_death_langevin(x0, pot, grad, t, 0.01, np.random.default_rng(1), birth_death=False)
    g = TorusGrid(64)
    pde = (
        (
            solve_shk(lambda x: 2.5 * (1 - np.cos(2 * x)), t, g, von_mises_density(g, 5.5)).final()
            * g.dx
        )
        .reshape(8, 8)
        .sum(axis=1)
    )
    hist = np.histogram(bd[:, 0], bins=8, range=(-np.pi, np.pi))[0] / n
    assert 0.5 * np.abs(hist - pde).sum() < 0.15
    far = lambda x: np.mean(np.abs(x[:, 0]) > np.pi / 2)  # noqa: E731
    assert far(bd) > 0.15 and far(fp) < 0.08


def test_wrapped_kde_is_periodic_and_normalised() -> None:
    lo, hi = np.array([-np.pi, 0.0]), np.array([np.pi, 2.0])
    x = np.array([[-3.1, 0.05], [3.1, 1.95], [0.0, 1.0]])
    logk = wrapped_kde_log(x, lo, hi, 0.3)
    assert logk[0] == pytest.approx(logk[1], rel=1e-12)  # neighbours across both seams
    assert logk[0] > logk[2]


def test_particle_validation() -> None:
    with pytest.raises(InvalidParameterError, match=r"^dt:"):
        birth_death_langevin(np.zeros(5), pot, grad, 1.0, 0.0, np.random.default_rng(0))
    with pytest.raises(InvalidParameterError, match=r"^box:"):
        birth_death_langevin(np.zeros(5), pot, grad, 1.0, 0.1, np.random.default_rng(0), 1.0, 0.0)
