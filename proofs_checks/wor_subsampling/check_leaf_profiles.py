"""leaf_profiles: the dispatch of every leaf event to its directed profiles."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpledger.accountant.leaves import leaf_profiles
from dpledger.accountant.profiles import (
    gaussian_profile,
    poisson_add,
    poisson_gaussian_replace_one,
    poisson_remove,
)
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import UnsupportedEventError
from dpledger.core.events import (
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PureDPEvent,
    RandomizedResponseEvent,
    SampledWithoutReplacementEvent,
)

ADD_REMOVE = Adjacency()
REPLACE = Adjacency(relation="replace_one")
EPS = np.linspace(-2.0, 4.0, 61)


def amplified(eps0: float, q: float) -> float:
    return math.log1p(q * math.expm1(eps0))


def test_wor_upper_curve_is_the_balle_barthe_gaboardi_bound() -> None:
    n, m, eps0 = 100, 10, 1.0
    dp = leaf_profiles(SampledWithoutReplacementEvent(n, m, PureDPEvent(eps0)), REPLACE)
    tight = amplified(eps0, m / n)
    assert dp.remove(np.array([tight * (1 + 1e-9)]))[0] == 0.0  # (tight, 0)-DP
    assert dp.remove(np.array([tight * (1 - 1e-3)]))[0] > 0.0  # and no less
    assert np.array_equal(dp.remove(EPS), dp.add(EPS))  # the substitution relation is symmetric


def test_wor_lower_curves_are_achievable_and_below_the_upper() -> None:
    """The lower curves come from the achievable pair; they never exceed the upper curve."""
    ev = SampledWithoutReplacementEvent(50, 5, GaussianEvent(1.0))
    dp = leaf_profiles(ev, REPLACE)
    base = gaussian_profile(2.0)  # replace-one: contribution 2C, noise 1 * C
    assert np.allclose(dp.lower_remove(EPS), poisson_add(base, 0.1)(EPS))
    assert np.allclose(dp.lower_add(EPS), poisson_remove(base, 0.1)(EPS))
    assert np.all(dp.lower_remove(EPS) <= dp.remove(EPS) + 1e-15)
    assert np.all(dp.lower_add(EPS) <= dp.add(EPS) + 1e-15)


def test_wor_under_add_remove_is_refused() -> None:
    ev = SampledWithoutReplacementEvent(50, 5, GaussianEvent(1.0))
    with pytest.raises(UnsupportedEventError, match="replace-one"):
        leaf_profiles(ev, ADD_REMOVE)


def test_poisson_add_remove_uses_both_directions() -> None:
    dp = leaf_profiles(PoissonSampledEvent(0.2, GaussianEvent(0.5)), ADD_REMOVE)
    assert np.allclose(dp.remove(EPS), poisson_remove(gaussian_profile(2.0), 0.2)(EPS))
    assert np.allclose(dp.add(EPS), poisson_add(gaussian_profile(2.0), 0.2)(EPS))
    assert not np.allclose(dp.remove(EPS), dp.add(EPS))


def test_poisson_replace_one_gaussian_and_refusal_for_others() -> None:
    dp = leaf_profiles(PoissonSampledEvent(0.3, GaussianEvent(2.0)), REPLACE)
    assert np.allclose(dp.remove(EPS), poisson_gaussian_replace_one(0.5, 0.3)(EPS))
    with pytest.raises(UnsupportedEventError, match="replace-one"):
        leaf_profiles(PoissonSampledEvent(0.3, LaplaceEvent(1.0)), REPLACE)


@pytest.mark.parametrize("adjacency", [ADD_REMOVE, REPLACE])
def test_full_sampling_is_the_base_mechanism(adjacency: Adjacency) -> None:
    factor = adjacency.sensitivity_factor
    dp = leaf_profiles(SampledWithoutReplacementEvent(7, 7, GaussianEvent(1.5)), REPLACE)
    assert np.allclose(dp.remove(EPS), gaussian_profile(2 / 1.5)(EPS))
    dp = leaf_profiles(PoissonSampledEvent(1.0, GaussianEvent(1.5)), adjacency)
    assert np.allclose(dp.remove(EPS), gaussian_profile(factor / 1.5)(EPS))


def test_unsampled_leaves_scale_with_the_relation() -> None:
    g = leaf_profiles(GaussianEvent(1.0), REPLACE)
    assert np.allclose(g.remove(EPS), gaussian_profile(2.0)(EPS))
    lap = leaf_profiles(LaplaceEvent(1.0), REPLACE)
    assert lap.remove(np.array([2.0 * (1 + 1e-12)]))[0] == 0.0  # eps0 = 2C / b
    assert lap.remove(np.array([1.99]))[0] > 0.0
    rr = leaf_profiles(RandomizedResponseEvent(1.0, 3), REPLACE)  # output-level: no factor
    assert rr.remove(np.array([1.0 + 1e-12]))[0] == 0.0
