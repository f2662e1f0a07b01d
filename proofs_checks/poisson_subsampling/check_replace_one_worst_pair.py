"""Poisson sampling under replace-one: the antipodal pair is the worst step pair (numerically).

One step releases ``sum of the sampled records' clipped contributions + N(0, s^2 I)``; the
replaced record is sampled with probability q and contributes g (in D) or g' (in D'), |g|, |g'|
<= 1, and the rest is common. Revealing the common part, each step pair is
``T(g, g') = ((1 - q) N(0) + q N(g), (1 - q) N(0) + q N(g'))``. The accountant composes the
antipodal pair ``T(e, -e)``. It is symmetric, so it dominates every step pair for all orders as
soon as its hockey-stick divergence is the largest for every e^eps >= 1. That is checked here on
a grid of two-dimensional pairs (the pair's law depends only on |g|, |g'| and their angle);
it is a numerical check, not a proof.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

SIGMA, Q = 0.8, 0.05
GRID = np.linspace(-6.0, 6.0, 481)
STEP = GRID[1] - GRID[0]
Y1, Y2 = np.meshgrid(GRID, GRID, indexing="ij")
ALPHAS = np.exp(np.linspace(0.0, 5.0, 41))


def _density(mean: tuple[float, float]) -> np.ndarray:
    out: np.ndarray = stats.norm.pdf(Y1, mean[0], SIGMA) * stats.norm.pdf(Y2, mean[1], SIGMA)
    return out


def _hockey_sticks(g: tuple[float, float], g_prime: tuple[float, float]) -> np.ndarray:
    base = (1 - Q) * _density((0.0, 0.0))
    p, q = base + Q * _density(g), base + Q * _density(g_prime)
    return np.array([np.sum(np.maximum(p - a * q, 0.0)) * STEP * STEP for a in ALPHAS])


def test_antipodal_pair_has_the_largest_hockey_stick() -> None:
    antipodal = _hockey_sticks((1.0, 0.0), (-1.0, 0.0))
    for r1 in (1.0, 0.6):
        for r2 in (1.0, 0.5, 0.0):
            for angle in np.linspace(0.0, np.pi, 7):
                pair = ((r1, 0.0), (r2 * np.cos(angle), r2 * np.sin(angle)))
                assert np.all(_hockey_sticks(*pair) <= antipodal + 1e-9), pair


def test_add_remove_type_pair_is_strictly_weaker() -> None:
    """g' = 0 (the record contributes nothing in D') is not the worst case under replace-one."""
    antipodal = _hockey_sticks((1.0, 0.0), (-1.0, 0.0))
    one_sided = _hockey_sticks((1.0, 0.0), (0.0, 0.0))
    assert np.all(one_sided < antipodal)
