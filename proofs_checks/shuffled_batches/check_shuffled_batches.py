"""Numeric checks of the shuffled-batches lower bound (see proof.md)."""

from __future__ import annotations

import itertools

import numpy as np

from dpledger.accountant.profiles import (
    gaussian_delta,
    lower_pair_profiles,
    max_of_batches_pair,
    shuffled_profiles,
)
from dpledger.core.adjacency import ROW_REPLACE_ONE
from dpledger.core.events import GaussianEvent, ShuffledBatchesEvent

EPS = np.array([-2.0, -0.5, 0.0, 0.5, 1.0, 2.0, 4.0])


def test_one_batch_is_the_gaussian_pair_from_below() -> None:
    """T = 1: the binned max is a binned N(2, s^2) vs N(0, s^2); below the exact curve, close."""
    for s in (0.5, 1.0, 3.0):
        forward, backward = lower_pair_profiles(max_of_batches_pair(1, s, 2.0, 0.0), "t1")
        exact = gaussian_delta(2.0 / s)(EPS)
        for curve in (forward, backward):  # the Gaussian pair is symmetric
            low = curve.delta(EPS)
            assert np.all(low <= exact * (1 + 1e-12) + 1e-300)
            assert np.all(low >= exact - 2e-3)


def test_profiles_bracket_and_the_upper_curve_is_the_gaussian() -> None:
    d = shuffled_profiles(ShuffledBatchesEvent(1000, 10, GaussianEvent(1.0)), ROW_REPLACE_ONE)
    assert np.array_equal(d.remove(EPS), d.add(EPS))
    assert np.allclose(d.remove.delta(EPS), gaussian_delta(2.0)(EPS))
    for low in (d.lower_remove, d.lower_add):
        assert np.all(low.delta(EPS) <= d.remove.delta(EPS))
        assert low.exact


def test_lower_bound_grows_with_fewer_batches() -> None:
    curves = [
        lower_pair_profiles(max_of_batches_pair(t, 1.0, 2.0, 0.0), "t")[0].delta(np.array([1.0]))
        for t in (1, 10, 100, 1000)
    ]
    assert all(a >= b for a, b in itertools.pairwise(curves))
