"""The blocked convolution of nonnegative arrays: every entry within its stated relative bound
of the exact sum (math.fsum of the products, exactly rounded), at every shape."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dpledger.accountant.nonnegative_convolution import DIRECT_BELOW, nonnegative_convolve


def _exact(a: np.ndarray, b: np.ndarray, k: int) -> float:
    lo, hi = max(0, k - b.size + 1), min(k, a.size - 1)
    return math.fsum(float(a[i]) * float(b[k - i]) for i in range(lo, hi + 1))


@settings(max_examples=8, deadline=None)
@example(na=DIRECT_BELOW + 17, nb=2 * DIRECT_BELOW + 5, seed=1, swap=False)
@given(
    na=st.integers(1, 3 * DIRECT_BELOW),
    nb=st.integers(DIRECT_BELOW, 3 * DIRECT_BELOW),
    seed=st.integers(0, 2**32 - 1),
    swap=st.booleans(),
)
def test_entries_within_the_bound_of_the_exact_sum(na: int, nb: int, seed: int, swap: bool) -> None:
    rng = np.random.default_rng(seed)
    a = rng.random(na) * np.exp(-rng.random(na) * 300)
    b = rng.random(nb) * np.exp(-rng.random(nb) * 30)
    a[rng.random(na) < 0.2] = 0.0
    if swap:
        a, b = b, a
    got, rel = nonnegative_convolve(a, b)
    assert got.shape == (a.size + b.size - 1,)
    for k in [*rng.integers(0, got.size, 60).tolist(), 0, got.size - 1]:
        exact = _exact(a, b, k)
        assert abs(got[k] - exact) <= rel * exact * (1 + 1e-9)


def test_the_bound_is_no_tighter_than_the_direct_sums() -> None:
    a, b = np.ones(DIRECT_BELOW + 3), np.ones(5 * DIRECT_BELOW)
    _, rel = nonnegative_convolve(a, b)
    assert rel >= a.size * 2.0**-53
    full, _ = nonnegative_convolve(a, b)
    assert full[DIRECT_BELOW] == pytest.approx(DIRECT_BELOW + 1, rel=1e-12)
