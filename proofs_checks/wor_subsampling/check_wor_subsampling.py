"""Numeric checks of amplification by sampling without replacement."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dpledger.accountant import select
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError, UnsupportedEventError
from dpledger.core.events import RandomizedResponseEvent, SampledWithoutReplacementEvent


def amplified(eps0: float, n: int, m: int) -> float:
    return math.log1p(m / n * math.expm1(eps0))


@pytest.mark.parametrize(("eps0", "n", "m"), [(1.0, 10, 3), (2.0, 100, 1), (0.5, 7, 7)])
def test_randomized_response_construction_is_tight(eps0: float, n: int, m: int) -> None:
    p = math.exp(eps0) / (1 + math.exp(eps0))
    pr_d = m / n * p + (1 - m / n) * (1 - p)
    pr_d_prime = 1 - p
    assert math.log(pr_d / pr_d_prime) == pytest.approx(amplified(eps0, n, m), rel=1e-12)


def test_exhaustive_enumeration_of_batches() -> None:
    """Laplace sum (eps0 = 1 on batches, values in [0, 1]) over all 2-subsets of 6 records."""
    n, m, eps0 = 6, 2, 1.0
    d = np.array([0.0, 1.0, 0.5, 0.2, 0.9, 0.0])
    d_prime = d.copy()
    d_prime[0] = 1.0  # replace one record
    x = np.linspace(-15, 17, 64_001)

    def density(data: np.ndarray) -> np.ndarray:
        batches = list(itertools.combinations(range(n), m))
        sums = [data[list(b)].sum() for b in batches]
        out: np.ndarray = sum(np.exp(-np.abs(x - s) * eps0) * eps0 / 2 for s in sums) / len(batches)
        return out

    ratio = np.log(density(d_prime) / density(d))
    bound = amplified(eps0, n, m)
    assert np.abs(ratio).max() <= bound + 1e-12
    assert np.abs(ratio).max() >= 0.7 * bound  # not the worst case (that is the RR one)


def test_accountant_is_never_below_the_tight_value() -> None:
    ev = SampledWithoutReplacementEvent(100, 10, RandomizedResponseEvent(1.0))
    try:
        bound = select.account(ev, Adjacency(relation="replace_one"), delta=1e-9).bound
    except UnsupportedEventError as exc:
        pytest.skip(f"no accountant supports the event yet: {exc}")
    # delta lowers epsilon below the pure value by what the top atom of the tight pair
    # (randomized response subsampled at m/n) carries: delta = P_top (1 - e^{eps - eps_max})
    p = math.exp(1.0) / (1 + math.exp(1.0))
    p_top = 0.1 * p + 0.9 * (1 - p)
    tight = amplified(1.0, 100, 10) + math.log1p(-1e-9 / p_top)
    assert bound.epsilon >= tight - 1e-12


def test_precondition_batch_not_larger_than_dataset() -> None:
    with pytest.raises(InvalidParameterError, match="sample_size"):
        SampledWithoutReplacementEvent(5, 6, RandomizedResponseEvent(1.0))
