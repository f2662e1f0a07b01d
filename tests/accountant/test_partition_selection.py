"""Private partition selection accounted: the certified bound against the budget, against the
exact privacy curve of the selection (summed over every outcome), against a simulation, and
against PipelineDP's strategies (Google's differential-privacy library) on the same budget."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.accountant.partition_selection import (
    partition_selection_threshold,
    selection_epsilon,
    selection_release_probability,
)
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError, UnsupportedEventError
from dpledger.core.events import ComposedEvent, GaussianEvent, PartitionSelectionEvent
from dpledger.core.partition_events import partitioned_noise_event

MECHANISMS = ("laplace", "gaussian", "truncated_geometric")


SLOW = pytest.mark.slow


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize(
    ("eps", "delta", "k"),
    [
        (1.0, 1e-5, 5),
        pytest.param(1.0, 1e-5, 1, marks=SLOW),
        pytest.param(0.3, 1e-7, 2, marks=SLOW),
    ],
)
def test_the_certified_epsilon_is_the_budget(
    mechanism: str, eps: float, delta: float, k: int
) -> None:
    bound = selection_epsilon(mechanism, eps, delta, k, delta)
    # the loss grid's discretisation is charged: a few parts in 1e4 at most above the budget
    assert bound.epsilon <= eps * (1 + 5e-4)
    assert bound.epsilon >= eps * 0.5  # the selection really spends its budget
    assert bound.epsilon_lower == 0.0  # the dominating events bound it from above only


def _pair_delta(p: list[float], q: list[float], eps: float) -> float:
    """The exact hockey-stick divergence of two products of Bernoulli laws (release or not,
    per key), summed over every outcome."""
    total = 0.0
    for outcome in itertools.product((0, 1), repeat=len(p)):
        pp = math.prod(a if o else 1 - a for a, o in zip(p, outcome, strict=True))
        qq = math.prod(b if o else 1 - b for b, o in zip(q, outcome, strict=True))
        total += max(0.0, pp - math.exp(eps) * qq)
    return total


@pytest.mark.parametrize(
    "mechanism",
    [
        # the default tier runs the truncated geometric case in proofs_checks/partition_selection
        pytest.param("truncated_geometric", marks=SLOW),
        pytest.param("laplace", marks=SLOW),
        pytest.param("gaussian", marks=SLOW),
    ],
)
def test_the_certified_curve_is_above_the_exact_curve_of_every_configuration(
    mechanism: str,
) -> None:
    eps, delta, k = 1.0, 0.02, 2
    pi = [selection_release_probability(mechanism, eps, delta, k, n) for n in range(16)]
    event = PartitionSelectionEvent(mechanism, eps, delta, k)
    for at in (0.0, 1.0, 1.5):
        certified = account(event, Adjacency(), epsilon=at).bound.delta
        worst = 0.0
        for counts in itertools.product(range(1, 16), repeat=k):  # the user's keys' counts
            with_user = [pi[n] for n in counts]
            without = [pi[n - 1] for n in counts]
            worst = max(
                worst, _pair_delta(with_user, without, at), _pair_delta(without, with_user, at)
            )
        assert worst <= certified
        if at == eps and mechanism == "truncated_geometric":
            # the optimal rule spends its per-key delta at epsilon / k exactly: the curve at
            # epsilon is within a factor k of delta
            assert worst >= delta / (2 * k)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_key_held_by_one_user_is_released_at_the_certified_rate(mechanism: str) -> None:
    eps, delta, k = 1.0, 0.02, 1
    rng = np.random.default_rng(7)
    draws = 200_000
    scale, threshold = partition_selection_threshold(mechanism, eps, delta, k)
    if mechanism == "laplace":
        released = 1 + rng.laplace(0.0, scale, draws) >= threshold
    elif mechanism == "gaussian":
        released = 1 + rng.normal(0.0, scale, draws) >= threshold
    else:
        released = rng.random(draws) < selection_release_probability(mechanism, eps, delta, k, 1)
    p = selection_release_probability(mechanism, eps, delta, k, 1)
    sd = math.sqrt(p * (1 - p) / draws)
    assert abs(released.mean() - p) <= 5 * sd
    share = delta / 2 if mechanism == "gaussian" else delta
    assert p <= share  # the release probability of a one-user key is the threshold's delta


@SLOW
def test_selection_composes_with_other_releases() -> None:
    sel = PartitionSelectionEvent("gaussian", 1.0, 1e-6, 3)
    both = account(ComposedEvent((sel, GaussianEvent(3.0))), Adjacency(), delta=1e-5).bound
    alone = [account(e, Adjacency(), delta=1e-5).bound.epsilon for e in (sel, GaussianEvent(3.0))]
    halves = [account(e, Adjacency(), delta=5e-6).bound.epsilon for e in (sel, GaussianEvent(3.0))]
    assert max(alone) < both.epsilon <= sum(halves)


def test_replace_one_is_refused() -> None:
    sel = PartitionSelectionEvent("laplace", 1.0, 1e-5, 2)
    with pytest.raises(UnsupportedEventError, match="add_remove"):
        account(sel, Adjacency(relation="replace_one"), delta=1e-5)


def test_bad_selection_parameters_name_the_field() -> None:
    with pytest.raises(InvalidParameterError) as info:
        partition_selection_threshold("laplace", 1.0, 1e-5, 0)
    assert info.value.field == "max_partitions"
    with pytest.raises(InvalidParameterError) as info:
        selection_release_probability("gaussian", 1.0, 1.5, 1, 3)
    assert info.value.field == "delta"


def test_per_key_laplace_accounting_beats_the_l1_sensitivity() -> None:
    """L0 = 5 keys, Linf = 2 rows, C = 1, Laplace scale 20: the L1 bound is pure
    epsilon 5 * 2 / 20 = 0.5; composing the 5 per-key releases certifies less at delta > 0."""
    per_key = partitioned_noise_event("laplace", 20.0, 5, 2, 1.0)
    eps = account(per_key, Adjacency(), delta=1e-5).bound.epsilon
    assert eps < 0.5
    assert eps > 0.5 / math.sqrt(5)  # no better than the composition's Gaussian-like rate
    gauss = account(partitioned_noise_event("gaussian", 8.0, 4, 2, 1.0), Adjacency(), delta=1e-5)
    joint = account(GaussianEvent(8.0 / (math.sqrt(4) * 2)), Adjacency(), delta=1e-5)
    assert gauss.bound.epsilon == pytest.approx(joint.bound.epsilon, rel=1e-4)


# -- PipelineDP (Google's library) on the same budget ------------------------------------------


def _strategy(mechanism: str, eps: float, delta: float, k: int):  # type: ignore[no-untyped-def]
    pipeline_dp = pytest.importorskip("pipeline_dp")
    from pipeline_dp import partition_selection

    names = {
        "laplace": pipeline_dp.PartitionSelectionStrategy.LAPLACE_THRESHOLDING,
        "gaussian": pipeline_dp.PartitionSelectionStrategy.GAUSSIAN_THRESHOLDING,
        "truncated_geometric": pipeline_dp.PartitionSelectionStrategy.TRUNCATED_GEOMETRIC,
    }
    return partition_selection.create_partition_selection_strategy(names[mechanism], eps, delta, k)


CROSS = [
    pytest.param(1.0, 1e-5, 3, marks=SLOW),
    pytest.param(1.0, 1e-5, 1, marks=SLOW),
    pytest.param(0.5, 1e-8, 10, marks=SLOW),
    pytest.param(3.0, 1e-3, 2, marks=SLOW),
]


@pytest.mark.parametrize("mechanism", ["laplace", "truncated_geometric"])
@pytest.mark.parametrize(("eps", "delta", "k"), CROSS)
def test_release_probabilities_match_pipeline_dp(
    mechanism: str, eps: float, delta: float, k: int
) -> None:
    strategy = _strategy(mechanism, eps, delta, k)
    for n in (1, 2, 5, 20, 60):
        ours = selection_release_probability(mechanism, eps, delta, k, n)
        theirs = strategy.probability_of_keep(n)
        # ours is calibrated one part in 1e6 inside the budget (the truncated geometric rule
        # also 4e-15 (1 + e^eps) inside, for its rounding), and never above theirs
        assert ours == pytest.approx(theirs, rel=2e-5, abs=1e-15)
        assert ours <= theirs * (1 + 1e-12)
    if mechanism == "laplace":
        _, threshold = partition_selection_threshold(mechanism, eps, delta, k)
        assert threshold == pytest.approx(strategy.threshold, rel=1e-6)


@pytest.mark.parametrize(("eps", "delta", "k"), [(1.0, 1e-5, 3), *CROSS[1:]])
def test_gaussian_noise_is_no_larger_than_pipeline_dps(eps: float, delta: float, k: int) -> None:
    from statistics import NormalDist

    strategy = _strategy("gaussian", eps, delta, k)
    sigma, threshold = partition_selection_threshold("gaussian", eps, delta, k)
    # both put the one-user release probability at 1 - (1 - delta/2)^(1/k): T = 1 + sigma z
    d_k = -math.expm1(math.log1p(-delta / 2) / k)
    z = NormalDist().inv_cdf(1 - d_k)
    their_sigma = (strategy.threshold - 1) / z
    assert sigma <= their_sigma * (1 + 1e-6)
    assert sigma >= their_sigma * 0.99  # the same calibration, ours to the last bits
    assert threshold <= strategy.threshold * (1 + 1e-6)
    assert selection_epsilon("gaussian", eps, delta, k, delta).epsilon <= eps * (1 + 5e-5)


@SLOW
@settings(max_examples=12, deadline=None)
@given(
    st.sampled_from(MECHANISMS),
    st.floats(0.1, 4.0),
    st.floats(1e-8, 1e-3),
    st.integers(1, 12),
)
def test_any_budget_is_certified_at_its_delta(
    mechanism: str, eps: float, delta: float, k: int
) -> None:
    bound = selection_epsilon(mechanism, eps, delta, k, delta)
    assert bound.epsilon <= eps * (1 + 5e-4)
    # and the bound at half the delta is larger (the curve at eps is spent)
    assert selection_epsilon(mechanism, eps, delta, k, delta / 2).epsilon > bound.epsilon
