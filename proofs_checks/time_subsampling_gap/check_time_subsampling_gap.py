"""Prop. 4.2: the largest gap of a random time subset, and the gap in its proof."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpledger.plugins.trajectories.declare import subsample_times


def mean_max_gap(T: int, z: int, reps: int, seed: int = 0) -> float:
    """Monte Carlo E[max gap] for a uniform z-subset of {1..T-1} plus the endpoints 0 and T."""
    rng = np.random.default_rng(seed)
    keys = rng.random((reps, T - 1))
    chosen = np.sort(np.argpartition(keys, z - 1, axis=1)[:, :z] + 1, axis=1)
    full = np.concatenate([np.zeros((reps, 1)), chosen, np.full((reps, 1), T)], axis=1)
    return float(np.diff(full, axis=1).max(axis=1).mean())


def proof_bound(T: int, z: int) -> float:
    """The paper's final bound (T/z) log z + (T/z) / (1 - exp(-z/T))."""
    return T / z * math.log(z) + T / z / -math.expm1(-z / T)


@pytest.mark.parametrize(("T", "z"), [(200, 30), (1000, 48), (1000, 200), (3000, 64)])
def test_the_proposition_holds_with_a_small_constant(T: int, z: int) -> None:
    est = mean_max_gap(T, z, reps=400)
    assert est <= 2.0 * (T / z) * math.log(z)
    assert est >= 0.8 * (T / (z + 1)) * math.log(z + 1)  # the log z factor is real


def test_the_proofs_last_step_is_vacuous_in_the_stated_regime() -> None:
    T = 10_000
    z = math.ceil(math.log(T) ** 2)  # 85: the proposition's z = Omega(log^2 T)
    assert proof_bound(T, z) > T  # worse than the trivial bound max gap <= T
    assert proof_bound(T, z) == pytest.approx(T / z * math.log(z) + (T / z) ** 2, rel=0.02)
    assert mean_max_gap(T, z, reps=100) <= 2.0 * (T / z) * math.log(z)


def test_the_blocks_inequality_of_the_proof() -> None:
    for T, z, t in [(100, 10, 7), (1000, 40, 90), (50, 49, 1)]:
        exact = math.comb(T - t, z) / math.comb(T, z)
        assert exact <= (1 - t / T) ** z <= math.exp(-z * t / T)


def test_the_plugin_draw_matches_uniform_subsets() -> None:
    """subsample_times (0-based, T indices) has the same mean max gap as uniform subsets."""
    T, z = 60, 8
    gaps = [max(np.diff(subsample_times(T, z, seed))) for seed in range(1500)]
    # subsample_times spans 0..T-1 (T-1 steps) with interior 1..T-2: the model with T-1
    assert float(np.mean(gaps)) == pytest.approx(mean_max_gap(T - 1, z, reps=20_000), rel=0.05)
