"""Many distinct leaves rounded to representatives: the upper bound stays above the truth, the
lower below it, and the bracket stays close to independent references."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpledger.accountant.pld as pld_module
from dpledger.accountant import select
from dpledger.accountant.base import EpsilonBound
from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.pld_support import _extent_reason
from dpledger.accountant.representatives import REPRESENTATIVE_STEP, Table, build, split
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    ApproxDPEvent,
    ComposedEvent,
    Event,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PureDPEvent,
    RandomizedResponseEvent,
    ReportNoisyMaxEvent,
    SampledWithoutReplacementEvent,
    ShuffledBatchesEvent,
)

from .representatives_reference import two_point_bracket

REPLACE = Adjacency(relation="replace_one")
EXAMPLES: list[Event] = [
    GaussianEvent(1.5),
    LaplaceEvent(2.0),
    PureDPEvent(0.5),
    ReportNoisyMaxEvent(0.5),
    ExponentialMechanismEvent(0.5),
    RandomizedResponseEvent(0.5, 4),
    ApproxDPEvent(0.5, 1e-6),
    PoissonSampledEvent(0.01, GaussianEvent(1.0)),
    SampledWithoutReplacementEvent(1000, 10, LaplaceEvent(1.0)),
]


@pytest.mark.parametrize("event", EXAMPLES, ids=lambda e: e.kind)
def test_split_and_build_are_inverse(event: Event) -> None:
    found = split(event)
    assert found is not None
    assert build(found[0], found[1]) == event


def _one_cell(events: list[Event], up: bool) -> tuple[Event, int]:
    """The single representative of ``events`` (each counted twice) on a grid so coarse that
    they share one cell."""
    grouped = Table(dict.fromkeys(events, 2)).grouped(1e300, up=up)
    assert len(grouped) == 1
    return next(iter(grouped.items()))


def test_representatives_take_the_members_extreme_parameters() -> None:
    members: list[Event] = [ApproxDPEvent(0.3, 1e-5), ApproxDPEvent(0.5, 1e-7)]
    assert _one_cell(members, up=True) == (ApproxDPEvent(0.5, 1e-5), 4)
    assert _one_cell(members, up=False) == (ApproxDPEvent(0.3, 1e-7), 4)
    noisy: list[Event] = [PoissonSampledEvent(0.02, LaplaceEvent(s)) for s in (1.0, 3.0)]
    noisy.append(PoissonSampledEvent(0.01, LaplaceEvent(2.0)))
    assert _one_cell(noisy, up=True)[0] == PoissonSampledEvent(0.02, LaplaceEvent(1.0))
    assert _one_cell(noisy, up=False)[0] == PoissonSampledEvent(0.01, LaplaceEvent(3.0))
    # randomized response with another number of buckets is another shape: never merged
    mixed = Table({RandomizedResponseEvent(0.5, 2): 1, RandomizedResponseEvent(0.5, 3): 1})
    assert len(mixed.grouped(1e300, up=True)) == 2


def test_without_replacement_keeps_a_members_size_and_compares_rates_exactly() -> None:
    # the two rates are the same double, but (10^17 / 3, rounded down) / 10^17 < 1/3
    small = SampledWithoutReplacementEvent(10**17, 10**17 // 3, PureDPEvent(1.0))
    large = SampledWithoutReplacementEvent(3, 1, PureDPEvent(1.0))
    assert small.sampling_probability == large.sampling_probability
    assert Fraction(10**17 // 3, 10**17) < Fraction(1, 3)
    assert _one_cell([small, large], up=True)[0] == large
    assert _one_cell([large, small], up=False)[0] == small


def test_the_step_is_the_finest_that_leaves_the_limit() -> None:
    merged: dict[Event, int] = {PureDPEvent(0.01 * (1 + i / 1000)): 1 for i in range(1000)}
    table = Table(merged)
    assert table.step(2000) == REPRESENTATIVE_STEP
    step = table.step(64)
    assert table.count(step) <= 64 < table.count(step / 1.25)
    # the epsilons span a factor 2: about log(2) / log1p(step) cells
    assert table.count(step) >= math.log(1.999) / math.log1p(step) - 1
    # a zero epsilon keeps a cell of its own
    assert Table({PureDPEvent(0.0): 1, PureDPEvent(1e-300): 1}).count(1e6) == 2


def test_many_kinds_that_are_not_rounded_are_refused_in_one_line() -> None:
    # shuffled epochs of Gaussian or Laplace batches are grouped into cells; of pure-DP ones not
    leaves = [(ShuffledBatchesEvent(1000 + i, 10, PureDPEvent(1.0)), 1) for i in range(300)]
    why = _extent_reason(leaves, [])
    assert why is not None and "\n" not in why and len(why) < 300
    assert "300 distinct shuffled_batches" in why


def _bound(upper: float, lower: float, method: str) -> EpsilonBound:
    return EpsilonBound(upper, lower, 1e-5, method)


def test_rdp_runs_by_default_when_the_pld_bracket_is_loose() -> None:
    many = ComposedEvent([PureDPEvent(0.01 * (1 + i / 100)) for i in range(100)])
    tight = [_bound(1.0, 0.995, "pld")]
    loose = [_bound(1.0, 0.9, "pld")]
    assert select._expensive("rdp", many, tight) is not None
    assert select._expensive("rdp", many, loose) is None
    assert select._expensive("rdp", many, [_bound(2.0, 0.5, "closed_form")]) is None


def _pld(event: Event, limit: int) -> EpsilonBound:
    """The PLD bracket with leaves rounded to representatives beyond ``limit`` distinct."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pld_module, "MAX_DISTINCT_COMPONENTS", limit)
        return PLDAccountant(target_points=1 << 14).compose(event).get_epsilon(1e-5)


def test_forty_distinct_randomized_responses_in_few_cells_bracket_the_truth() -> None:
    epsilons = [0.05 * (1 + i / 40) for i in range(40)]
    below, above = two_point_bracket(epsilons, 1e-5, 1e-4)
    got = _pld(ComposedEvent([RandomizedResponseEvent(e) for e in epsilons]), 8)
    assert got.details["representative_step"] > REPRESENTATIVE_STEP
    assert got.epsilon_lower <= below <= above <= got.epsilon
    assert got.epsilon <= above * 1.02 and got.epsilon_lower >= below * 0.97


_LEAVES = st.one_of(
    st.floats(0.05, 0.5).map(PureDPEvent),
    st.floats(0.05, 0.5).map(lambda e: RandomizedResponseEvent(e, 3)),
    st.floats(0.05, 0.5).map(ExponentialMechanismEvent),
    st.floats(0.05, 0.5).map(lambda e: ApproxDPEvent(e, 1e-7)),
    st.floats(2.0, 8.0).map(LaplaceEvent),
    st.floats(0.01, 0.1).map(lambda q: PoissonSampledEvent(q, GaussianEvent(1.0 + 10 * q))),
)


def _compare(leaves: list[Event]) -> None:
    event = ComposedEvent(leaves)
    exact = _pld(event, 1000)
    rounded = _pld(event, 3)
    slack = 1e-9
    assert rounded.epsilon >= exact.epsilon_lower * (1 - slack)
    assert rounded.epsilon_lower <= exact.epsilon * (1 + slack)


@settings(max_examples=4, deadline=None)
@given(leaves=st.lists(_LEAVES, min_size=8, max_size=16, unique=True))
def test_rounded_bounds_never_cross_the_unrounded_ones(leaves: list[Event]) -> None:
    _compare(leaves)


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(leaves=st.lists(_LEAVES, min_size=8, max_size=40, unique=True))
def test_rounded_bounds_never_cross_the_unrounded_ones_wide(leaves: list[Event]) -> None:
    _compare(leaves)


# -- the reproductions, at full size ---------------------------------------------------------


def _account(event: Event, adjacency: Adjacency | None = None) -> EpsilonBound:
    bound = select.account(event, adjacency, delta=1e-5).bound
    assert isinstance(bound, EpsilonBound)
    return bound


@pytest.mark.slow
def test_ten_thousand_distinct_randomized_responses() -> None:
    epsilons = [1e-3 * (1 + i * 1e-4) for i in range(10_000)]
    got = _account(ComposedEvent([RandomizedResponseEvent(e, 2) for e in epsilons]))
    below, above = two_point_bracket(epsilons, 1e-5, 1e-5)
    # the reference (lattice 1e-5 both ways) is about [0.5386, 0.5423]
    assert got.epsilon_lower <= above and got.epsilon >= below
    assert got.epsilon <= above * 1.01
    # the lower bound of a PLD of 200+ components is about 3 % under (its grid is shared)
    assert got.epsilon_lower >= below * 0.96


@pytest.mark.slow
def test_a_thousand_distinct_approximate_dp_releases() -> None:
    epsilons = [0.01 * (1 + i / 1000) for i in range(1000)]
    got = _account(ComposedEvent([ApproxDPEvent(e, 1e-9) for e in epsilons]))
    below, above = two_point_bracket(epsilons, 1e-5, 4e-5, deltas=[1e-9] * 1000)
    # the reference is about [1.9236, 1.9283]; the closed form alone gave [1.3232, 2.6044]
    assert got.epsilon_lower <= above and got.epsilon >= below
    assert got.epsilon <= above * 1.01 and got.epsilon_lower >= below * 0.98


@pytest.mark.slow
def test_a_thousand_distinct_exponential_mechanisms(monkeypatch: pytest.MonkeyPatch) -> None:
    from dpledger.accountant import rdp

    event = ComposedEvent([ExponentialMechanismEvent(0.01 * (1 + i / 1000)) for i in range(1000)])
    got = _account(event)
    monkeypatch.setattr(rdp, "MAX_DISTINCT_SAMPLED", 10_000)  # RDP of every leaf, unrounded
    exact_rdp = rdp.RDPAccountant().compose(event).get_epsilon(1e-5).epsilon
    # the closed form alone gave [0, 2.589]; RDP of the unrounded leaves 0.974
    assert got.epsilon <= exact_rdp * 1.01
    assert 0.8 * got.epsilon <= got.epsilon_lower <= got.epsilon


@pytest.mark.slow
def test_257_distinct_without_replacement_samplings_are_accounted() -> None:
    leaves = [
        SampledWithoutReplacementEvent(60_000 + i, 600, GaussianEvent(1.0)) for i in range(257)
    ]
    got = _account(ComposedEvent(leaves), REPLACE)
    # every leaf lies between the homogeneous compositions at the largest and smallest rate
    costly = PLDAccountant(REPLACE).compose(leaves[0], 257).get_epsilon(1e-5)
    cheap = PLDAccountant(REPLACE).compose(leaves[-1], 257).get_epsilon(1e-5)
    assert got.epsilon >= cheap.epsilon_lower and got.epsilon_lower <= costly.epsilon
    assert got.epsilon <= costly.epsilon * 1.01
    assert got.epsilon_lower >= cheap.epsilon_lower * 0.99


@pytest.mark.slow
def test_ten_thousand_distinct_poisson_sampled_gaussians() -> None:
    rates = [1e-3 * (1 + i * 1e-4) for i in range(10_000)]
    got = _account(ComposedEvent([PoissonSampledEvent(q, GaussianEvent(1.0)) for q in rates]))
    # between the homogeneous compositions at the smallest and the largest rate
    low = PLDAccountant().compose(PoissonSampledEvent(rates[0], GaussianEvent(1.0)), 10_000)
    high = PLDAccountant().compose(PoissonSampledEvent(rates[-1], GaussianEvent(1.0)), 10_000)
    assert low.get_epsilon(1e-5).epsilon_lower <= got.epsilon_lower
    assert got.epsilon <= high.get_epsilon(1e-5).epsilon
    assert got.epsilon <= got.epsilon_lower * 1.015
    assert np.isfinite(got.epsilon)
