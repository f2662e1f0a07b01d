"""The discretisations' in-place arithmetic gives the same bits as the plain expressions."""

from __future__ import annotations

import math

import numpy as np

from dpledger.accountant import pld_dominated as dom
from dpledger.accountant.leaves import leaf_profiles
from dpledger.accountant.pld_discrete import U
from dpledger.accountant.profiles_noise import gaussian_delta
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import GaussianEvent, PoissonSampledEvent


def test_extension_floor_matches_plain_expression() -> None:
    rng = np.random.default_rng(3)
    near, far = rng.normal(size=1000), rng.normal(size=1000)
    for ratio in (math.exp(1e-3), math.exp(-1e-3)):
        diff = near - far
        factor = np.where(diff < 0, ratio * (1 + 4 * U), ratio * (1 - 4 * U))
        step = diff * factor
        plain = near + step - 4 * U * (np.abs(near) + np.abs(step))
        assert dom._extension_floor(near.copy(), far.copy(), ratio).tobytes() == plain.tobytes()


def test_fsum_matches_list_fsum() -> None:
    values = np.random.default_rng(4).random(10_001) ** 8
    assert dom._fsum(values) == math.fsum(values.tolist())
    assert dom._fsum(values[::3]) == math.fsum(values[::3].tolist())


def test_curve_from_skips_points_only() -> None:
    profile = leaf_profiles(PoissonSampledEvent(1e-3, GaussianEvent(1.0)), Adjacency()).add
    eps = np.arange(-2000, 50) * 1e-3
    full = np.asarray(profile(eps))
    part = dom._curve_from(profile, eps, 1500)
    assert part[1500:].tobytes() == full[1500:].tobytes()
    assert np.all(part[:1500] == 1.0)


def test_curves_take_scalars_and_arrays_alike() -> None:
    dp = leaf_profiles(PoissonSampledEvent(1e-3, GaussianEvent(1.0)), Adjacency())
    eps = np.linspace(-0.5, 3.0, 101)
    for profile in (dp.remove, dp.add, dp.lower_remove, dp.lower_add):
        grid = np.asarray(profile(eps))
        alone = np.array([float(np.asarray(profile(np.float64(e)))) for e in eps])
        assert grid.tobytes() == alone.tobytes()
    delta = gaussian_delta(0.5)
    assert float(delta(np.array(0.3))) == float(delta(np.array([0.3]))[0])


def _plain_segment_limits(
    lo: np.ndarray,
    left: np.ndarray,
    right: np.ndarray,
    mid: tuple[np.ndarray, np.ndarray],
    inc: bool,
) -> tuple[np.ndarray, np.ndarray]:
    a_lo, b_lo = lo[:-1], lo[1:]
    flat = a_lo if inc else b_lo
    best_a, best_b = flat, flat
    best_cost = (a_lo - best_a) + (b_lo - best_b)
    for lim_a, lim_b in [(a_lo, left[1:]), (right[:-1], b_lo), mid]:
        with np.errstate(invalid="ignore"):
            cost = (a_lo - lim_a) + (b_lo - lim_b)
            use = (lim_a >= 0) & (lim_b >= 0) & (cost < best_cost)
        best_a = np.where(use, lim_a, best_a)
        best_b = np.where(use, lim_b, best_b)
        best_cost = np.where(use, cost, best_cost)
    return best_a, best_b


def test_segment_limits_match_plain_choice() -> None:
    rng = np.random.default_rng(5)
    n = 2000
    lo = rng.random(n)
    left, right = lo - 0.1 * rng.random(n), lo - 0.1 * rng.random(n)
    left[:2], right[-2:] = -np.inf, -np.inf
    mid = (lo[:-1] - 0.05 * rng.normal(size=n - 1), lo[1:] - 0.05 * rng.normal(size=n - 1))
    for inc in (True, False):
        got = dom._segment_limits(lo, left, right, mid, increasing=inc)
        want = _plain_segment_limits(lo, left, right, mid, inc)
        assert got[0].tobytes() == want[0].tobytes()
        assert got[1].tobytes() == want[1].tobytes()
