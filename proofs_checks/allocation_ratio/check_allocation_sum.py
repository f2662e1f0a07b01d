"""Numeric checks of the lattice-sum lower bound of k-of-t random allocation (proof.md, "k of t
steps")."""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from dpledger.accountant.allocation_ratio import (
    SUM_TOP_MASS,
    _cells,
    _grid,
    _matched_edges,
    _sum_bounds,
    _top_outcome,
    allocation_sum_pair,
)


def _plain(law: np.ndarray, n: int) -> np.ndarray:
    out = np.ones(1)
    for _ in range(n):
        out = np.convolve(out, law)
    return out


def _aligned_bounds(mu: float, t: int, k: int, power: float, stop: int) -> tuple[np.ndarray, ...]:
    start, bounds, _ = _sum_bounds(mu, t, k, power)
    out = []
    for b in bounds:
        full = np.zeros(max(stop, start + b.size))
        full[start : start + b.size] = b
        out.append(full)
    return tuple(out)


def test_brackets_contain_plain_repeated_convolution() -> None:
    """Without windows, Q = m^(*t) and P = m^(*(t-k)) * s^(*k) of the nominal cell laws lie
    between the bounds, entry by entry (the cells of L and of L^0.7)."""
    mu, t, k = 0.9, 6, 2
    for power in (1.0, 0.7):
        h, big = _grid(mu * power, t, SUM_TOP_MASS)
        z, index = _matched_edges(mu * power, h, big)
        mass, _, moment, _ = _cells(mu, z)
        m, s = np.zeros(int(index[-1]) + 1), np.zeros(int(index[-1]) + 1)
        m[index], s[index] = mass, moment
        plain_q = _plain(m, t)
        plain_p = np.convolve(_plain(m, t - k), _plain(s, k))
        stop = max(plain_q.size, plain_p.size)
        p_lo, p_hi, q_lo, q_hi = _aligned_bounds(mu, t, k, power, stop)
        for plain, lower, upper in ((plain_q, q_lo, q_hi), (plain_p, p_lo, p_hi)):
            ref = np.zeros(lower.size)
            ref[: plain.size] = plain
            assert np.all(lower <= ref * (1 + 1e-13) + 1e-300)
            assert np.all(ref <= upper * (1 + 1e-13) + 1e-300)
            big_enough = ref > 1e-12
            assert np.all(upper[big_enough] <= ref[big_enough] * (1 + 1e-8))


def test_the_laws_match_sampled_outputs() -> None:
    """P: each draw shifts a random k-subset; the frequency of the lattice sums in a few ranges
    lies within five standard errors of the bracketed masses (both laws)."""
    mu, t, k, n = 1.0, 5, 3, 400_000
    h, big = _grid(mu, t, SUM_TOP_MASS)
    z, index = _matched_edges(mu, h, big)
    rng = np.random.default_rng(5)
    p_lo, p_hi, q_lo, q_hi = _aligned_bounds(mu, t, k, 1.0, 0)
    for shifted, lower, upper in ((False, q_lo, q_hi), (True, p_lo, p_hi)):
        x = rng.standard_normal((n, t))
        if shifted:
            chosen = np.argsort(rng.random((n, t)), axis=1)[:, :k]
            np.put_along_axis(x, chosen, np.take_along_axis(x, chosen, axis=1) + mu, axis=1)
        cell = np.searchsorted(z, x, side="left") - 1  # cell c is (z_c, z_{c+1}]
        top = (cell >= index.size).any(axis=1)
        u = index[np.minimum(cell, index.size - 1)].sum(axis=1)[~top]
        for a, b in ((0, 20), (20, 40), (40, 60), (60, 100), (100, lower.size)):
            freq = float(((u >= a) & (u < b)).sum()) / n
            se = math.sqrt(max(freq * (1 - freq), 1e-12) / n)
            assert float(lower[a:b].sum()) <= freq + 5 * se
            assert freq - 5 * se <= float(upper[a:b].sum())


def test_top_outcome_with_k_shifted() -> None:
    t, k, z = 9, 3, 2.2
    q, p = float(special.ndtr(-z)), float(special.ndtr(0.8 - z))
    p_lo, p_hi, q_lo, q_hi = _top_outcome(t, (q, q, p, p), k)
    assert q_lo <= 1 - (1 - q) ** t <= q_hi
    assert p_lo <= 1 - (1 - p) ** k * (1 - q) ** (t - k) <= p_hi


def test_bounds_are_ordered_and_nearly_tight_on_the_example() -> None:
    """sigma = 1.1, 2 of 470 steps: every mass is bracketed, the brackets are narrow where the
    mass is not negligible, and the windows lose almost nothing."""
    mu, t, k = math.nextafter(1 / 1.1, 0.0), 470, 2
    pair = allocation_sum_pair(mu, t, k)
    assert np.all(pair.p_lower <= pair.p_upper) and np.all(pair.q_lower <= pair.q_upper)
    big = pair.q_lower > 1e-8
    assert np.all(pair.q_upper[big] <= pair.q_lower[big] * (1 + 1e-6))
    assert 1 - 1e-8 < pair.q_lower.sum() <= 1 <= pair.q_upper.sum() < 1 + 1e-7
    assert 1 - 1e-8 < pair.p_lower.sum() <= 1 <= pair.p_upper.sum() < 1 + 1e-7
