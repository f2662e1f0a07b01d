"""Numeric checks of the likelihood-ratio lower bound of the random-allocation pair (proof.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special

from dpledger.accountant.allocation_ratio import (
    REL_CAP,
    _cells,
    _grid,
    _matched_edges,
    _one_output,
    _top_outcome,
    allocation_ratio_pair,
)
from dpledger.accountant.profiles import lower_pair_profiles
from dpledger.accountant.random_allocation import allocation_tables


def test_cells_have_their_means_on_the_lattice() -> None:
    mu = 0.9
    h, big = _grid(mu, 50)
    z, index = _matched_edges(mu, h, big)
    mass, _, moment, _ = _cells(mu, z)
    keep = mass > 1e-200
    means = moment[keep] / mass[keep]
    assert np.all(np.abs(means / (index[keep] * h) - 1) < 1e-8)
    assert np.all(np.diff(index) > 0)  # one cell per lattice point at most
    _, rho, _ = _one_output(mu, h, big)
    assert 0 < rho <= REL_CAP


@pytest.mark.parametrize(("mu", "t"), [(0.5, 200), (1.0, 10), (1.0, 100), (1.5, 30)])
def test_below_the_certified_upper_tables_and_close_at_zero(mu: float, t: int) -> None:
    forward, backward = lower_pair_profiles(allocation_ratio_pair(mu, t), "ratio")
    tables = allocation_tables(1 / mu, t)
    eps = tables.epsilons
    assert np.all(forward(eps) <= tables.remove_raw)
    assert np.all(backward(eps) <= tables.add_raw)
    assert forward(eps[:1])[0] >= 0.99 * tables.remove_raw[0]


def test_below_a_monte_carlo_estimate_of_the_exact_curve() -> None:
    mu, t, n = 1.2, 4, 400_000
    rng = np.random.default_rng(11)
    x = rng.standard_normal((n, t))
    ratio_q = np.exp(mu * x - mu * mu / 2).mean(axis=1)  # dP/dQ under Q
    forward, backward = lower_pair_profiles(allocation_ratio_pair(mu, t), "ratio")
    for eps in (0.0, 0.3, 1.0):
        c = math.exp(eps)
        for sample, lower in (
            (np.maximum(ratio_q - c, 0.0), forward(np.array([eps]))[0]),
            (np.maximum(1 - c * ratio_q, 0.0), backward(np.array([eps]))[0]),
        ):
            se = sample.std() / math.sqrt(n)
            assert lower <= sample.mean() + 5 * se
            # tight: the lattice step (sd(L) / 8) costs at most a few percent here
            assert lower >= sample.mean() - 5 * se - 0.07 * sample.mean()


def test_top_outcome_masses() -> None:
    t, z = 7, 2.5
    q, p = float(special.ndtr(-z)), float(special.ndtr(1.1 - z))
    p_lo, p_hi, q_lo, q_hi = _top_outcome(t, (q, q, p, p))
    assert q_lo <= 1 - (1 - q) ** t <= q_hi
    assert p_lo <= 1 - (1 - p) * (1 - q) ** (t - 1) <= p_hi
    p_lo, p_hi, q_lo, q_hi = _top_outcome(t, (1.0, 1.0, 1.0, 1.0))  # every output on top
    assert p_hi == q_hi == 1.0 and 0.999 < min(p_lo, q_lo) <= 1.0


def test_windowed_sum_is_below_the_exact_convolution() -> None:
    """The windowed binary powering against plain repeated convolution of the same law."""
    from dpledger.accountant.allocation_ratio import _windowed_sum

    mu, t = 0.8, 37
    h, big = _grid(mu, t)
    law, _, _ = _one_output(mu, h, big)
    offset, w, _ = _windowed_sum(law, t, big, h)
    exact = law.copy()
    for _ in range(t - 1):
        exact = np.convolve(exact, law)
    part = exact[offset : offset + w.size]
    assert np.all(w <= part * (1 + 1e-13) + 1e-300)
    assert w.sum() >= exact.sum() * (1 - 1e-9)  # the windows drop almost nothing
