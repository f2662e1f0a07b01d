"""Sampling without replacement under replace-one, Gaussian base: the bracket against
independent references.

One step: the leaf's upper and lower curves against the attained pair's hockey-stick curve in
closed form at 60 digits, and against the exact output laws of the subsampled Gaussian sum on
concrete neighbouring datasets (every batch enumerated). Composed: the accountant's bracket
against dp-accounting's composition of the same two pairs (the attained pair for the lower
bound, the tight one-step dominating pair for the upper bound), each rounded both ways.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as dpa_pld

from dpledger.accountant.leaves import leaf_profiles
from dpledger.accountant.pld_discrete import LOWER_DEFLATION
from dpledger.accountant.profiles import DirectedProfiles, Profile, poisson_gaussian_replace_one
from dpledger.accountant.select import account
from dpledger.core.adjacency import ROW_REPLACE_ONE
from dpledger.core.events import (
    ComposedEvent,
    Event,
    GaussianEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
)

from .wor_reference import (
    attained_pair_delta,
    attained_pair_pld,
    join_pair_pld,
    mixture_hockey_stick,
)

PairPLD = Callable[..., dpa_pld.PrivacyLossDistribution]

EPSILONS = [-2.0, -0.5, -0.1, 0.0, 0.1, 0.5, 1.0, 3.0]


def _profiles(n: int, b: int, sigma: float) -> DirectedProfiles:
    event = SampledWithoutReplacementEvent(n, b, GaussianEvent(sigma))
    return leaf_profiles(event, ROW_REPLACE_ONE)


def _at(curve: Profile, eps: float) -> float:
    return float(curve(np.array([eps]))[0])


def _batch_sums(values: list[float], b: int) -> list[float]:
    """The clipped sum of every batch of ``b`` records (each batch equally likely)."""
    return [
        sum(values[i] for i in batch) for batch in itertools.combinations(range(len(values)), b)
    ]


@pytest.mark.parametrize(("n", "b", "sigma"), [(6, 2, 1.0), (1000, 100, 0.7), (60_000, 256, 1.0)])
def test_one_step_curves_are_the_attained_pairs_at_60_digits(n: int, b: int, sigma: float) -> None:
    """Upper curve = the larger attained direction (to its relative margin); each lower curve
    is one attained direction and never above it (after the engine's deflation)."""
    prof, q = _profiles(n, b, sigma), b / n
    for eps in EPSILONS:
        forward = attained_pair_delta(sigma, q, eps)
        reverse = attained_pair_delta(sigma, q, eps, reverse=True)
        top = max(forward, reverse)
        for upper in (prof.remove, prof.add):
            assert top <= _at(upper, eps) <= top * (1 + 3e-10) + 1e-300
        low_add = _at(prof.lower_add, eps) / (1 + LOWER_DEFLATION)
        low_remove = _at(prof.lower_remove, eps) / (1 + LOWER_DEFLATION)
        assert low_add <= forward and low_remove <= reverse
        assert max(low_add, low_remove) >= top * (1 - 2 * LOWER_DEFLATION)


@pytest.mark.parametrize(("n", "b"), [(6, 2), (7, 3)])
def test_lower_curves_are_attained_by_concrete_neighbouring_datasets(n: int, b: int) -> None:
    """Every other record contributes -C, the replaced one +C in D and -C in D' (C = 1): the
    exact output laws of the noisy batch sum, every batch enumerated, attain the lower curves."""
    sigma = 1.0
    prof = _profiles(n, b, sigma)
    d = [-1.0] * (n - 1) + [1.0]
    d_prime = [-1.0] * n
    sums, sums_prime = _batch_sums(d, b), _batch_sums(d_prime, b)
    for eps in EPSILONS:
        forward = mixture_hockey_stick(np.array(sums), np.array(sums_prime), sigma, eps)
        reverse = mixture_hockey_stick(np.array(sums_prime), np.array(sums), sigma, eps)
        low_add = _at(prof.lower_add, eps) / (1 + LOWER_DEFLATION)
        low_remove = _at(prof.lower_remove, eps) / (1 + LOWER_DEFLATION)
        assert low_add <= forward <= _at(prof.remove, eps)
        assert low_remove <= reverse <= _at(prof.add, eps)
        assert low_add >= forward * (1 - 2 * LOWER_DEFLATION) - 1e-15
        assert low_remove >= reverse * (1 - 2 * LOWER_DEFLATION) - 1e-15


def test_random_neighbouring_datasets_stay_below_the_upper_curve() -> None:
    """Adversarial: random contributions in [-C, C] and a random replaced record, both orders."""
    rng = np.random.default_rng(38)
    sigma = 0.8
    for _ in range(3):
        n = int(rng.integers(3, 8))
        b = int(rng.integers(1, n))
        d = list(rng.choice([-1.0, 1.0, *rng.uniform(-1, 1, 3)], size=n))
        d_prime = [*d[:-1], float(rng.uniform(-1, 1))]
        sums, sums_prime = np.array(_batch_sums(d, b)), np.array(_batch_sums(d_prime, b))
        prof = _profiles(n, b, sigma)
        for eps in (-0.5, 0.7):
            assert mixture_hockey_stick(sums, sums_prime, sigma, eps) <= _at(prof.remove, eps)
            assert mixture_hockey_stick(sums_prime, sums, sigma, eps) <= _at(prof.add, eps)


def test_the_symmetric_mixture_pair_is_not_an_upper_bound_without_replacement() -> None:
    """(1-q)N(0)+qN(C) vs (1-q)N(0)+qN(-C) (all other records contribute 0) is attained, but
    the configuration whose other records equal the replacing record is worse: that pair (the
    Poisson replace-one curve) would under-report sampling without replacement."""
    n, b, sigma, eps = 6, 2, 1.0, 0.5
    symmetric = poisson_gaussian_replace_one(1.0 / sigma, b / n)
    zeros = np.array(_batch_sums([0.0] * (n - 1) + [1.0], b))
    zeros_prime = np.array(_batch_sums([0.0] * (n - 1) + [-1.0], b))
    attained_symmetric = mixture_hockey_stick(zeros, zeros_prime, sigma, eps)
    assert _at(symmetric, eps) == pytest.approx(attained_symmetric, rel=1e-8)
    worst = mixture_hockey_stick(
        np.array(_batch_sums([-1.0] * (n - 1) + [1.0], b)),
        np.array(_batch_sums([-1.0] * n, b)),
        sigma,
        eps,
    )
    assert worst > 1.2 * attained_symmetric
    assert worst <= _at(_profiles(n, b, sigma).remove, eps)


def _bracket(event: Event, delta: float) -> tuple[float, float]:
    bound = account(event, ROW_REPLACE_ONE, delta=delta).bound
    return bound.epsilon_lower, bound.epsilon


@pytest.mark.parametrize("steps", [pytest.param(3, marks=pytest.mark.slow), 10])
def test_few_steps_bracket_the_compositions_of_the_two_pairs(steps: int) -> None:
    """Lower: within the attained pair's composition (dp-accounting, rounded both ways); upper:
    within the composition of the one-step dominating pair."""
    sigma, n, b, delta, h = 1.0, 1000, 100, 1e-5, 2e-4
    lower, upper = _bracket(
        SelfComposedEvent(SampledWithoutReplacementEvent(n, b, GaussianEvent(sigma)), steps), delta
    )

    def ref(pair: PairPLD, pessimistic: bool) -> float:
        pld = pair(sigma, b / n, h, pessimistic=pessimistic).self_compose(steps)
        return float(pld.get_epsilon_for_delta(delta))

    assert ref(attained_pair_pld, False) * (1 - 5e-3) <= lower <= ref(attained_pair_pld, True)
    assert ref(join_pair_pld, False) <= upper <= ref(join_pair_pld, True) * (1 + 1e-4)


def test_thousand_steps_of_256_of_60000_bracket_the_two_compositions() -> None:
    """The reproduction of 1000 steps at sigma = 1: the lower bound is at most the attained
    pair's composition, the upper bound within 0.03 % of the one-step dominating pair's (the
    bracket's width is the distance between those two compositions)."""
    sigma, n, b, steps, delta, h = 1.0, 60_000, 256, 1000, 1e-5, 2e-4
    lower, upper = _bracket(
        SelfComposedEvent(SampledWithoutReplacementEvent(n, b, GaussianEvent(sigma)), steps), delta
    )
    q = b / n
    attained = attained_pair_pld(sigma, q, h, pessimistic=True).self_compose(steps)
    assert lower <= attained.get_epsilon_for_delta(delta)
    join_low = join_pair_pld(sigma, q, h, pessimistic=False).self_compose(steps)
    join_high = join_pair_pld(sigma, q, h, pessimistic=True).self_compose(steps)
    assert join_low.get_epsilon_for_delta(delta) <= upper
    assert upper <= join_high.get_epsilon_for_delta(delta) * (1 + 1e-4)
    assert lower <= upper


@pytest.mark.slow
def test_257_distinct_sizes_bracket_the_extreme_compositions() -> None:
    """257 distinct 600-of-(60000 + i) steps: the lower bound is at most the attained pair at
    the largest rate composed 257 times, the upper bound at least the dominating pair at the
    smallest rate composed 257 times (both curves grow with the rate)."""
    sigma, delta, h, steps = 1.0, 1e-5, 1e-4, 257
    event = ComposedEvent(
        [
            SampledWithoutReplacementEvent(60_000 + i, 600, GaussianEvent(sigma))
            for i in range(steps)
        ]
    )
    lower, upper = _bracket(event, delta)
    q_max, q_min = 600 / 60_000, 600 / (60_000 + steps - 1)
    attained = attained_pair_pld(sigma, q_max, h, pessimistic=True).self_compose(steps)
    join = join_pair_pld(sigma, q_min, h, pessimistic=False).self_compose(steps)
    assert lower <= attained.get_epsilon_for_delta(delta)
    assert join.get_epsilon_for_delta(delta) <= upper
