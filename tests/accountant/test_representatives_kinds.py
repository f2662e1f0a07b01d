"""Rounding to representatives never crosses the unrounded certified bounds, for every leaf kind
that is rounded, under both relations: random heterogeneous compositions are accounted with
their leaves rounded (PLD: both bounds; RDP: its upper bound) and unrounded (PLD), and the
rounded upper bound is never below the unrounded certified lower bound, the rounded lower bound
never above the unrounded certified upper bound."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import dpledger.accountant.pld as pld_module
from dpledger.accountant import rdp
from dpledger.accountant.base import EpsilonBound
from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.representatives import split
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
)

ADD = Adjacency()
REPLACE = Adjacency(relation="replace_one")
SLACK = 1e-9

#: every kind :func:`split` rounds, unsampled: (make from one parameter, its range)
_MAKERS: list[tuple[Callable[[float], Event], float, float]] = [
    (PureDPEvent, 0.05, 0.5),
    (ReportNoisyMaxEvent, 0.05, 0.5),
    (ExponentialMechanismEvent, 0.05, 0.5),
    (RandomizedResponseEvent, 0.05, 0.5),
    (lambda e: RandomizedResponseEvent(e, 3), 0.05, 0.5),
    (lambda e: ApproxDPEvent(e, 1e-7), 0.05, 0.5),
    (LaplaceEvent, 2.0, 8.0),
    (GaussianEvent, 2.0, 8.0),
]
_PLAIN = st.one_of(*(st.floats(lo, hi).map(make) for make, lo, hi in _MAKERS))
#: the sampled kinds: Poisson (add/remove) ...
_POISSON = st.builds(
    PoissonSampledEvent,
    st.floats(0.01, 0.1),
    st.one_of(st.floats(0.8, 2.0).map(GaussianEvent), st.floats(0.5, 2.0).map(LaplaceEvent)),
)
#: ... and without replacement (replace-one)
_WITHOUT_REPLACEMENT = st.builds(
    SampledWithoutReplacementEvent,
    st.integers(900, 1100),
    st.integers(10, 60),
    st.one_of(st.floats(0.8, 2.0).map(GaussianEvent), st.floats(0.05, 0.5).map(PureDPEvent)),
)
#: the kinds representatives.split rounds (its module docstring lists them)
ROUNDED_KINDS = {
    "pure_dp",
    "report_noisy_max",
    "exponential_mechanism",
    "randomized_response",
    "approx_dp",
    "laplace",
    "gaussian",
    "poisson_sampled",
    "sampled_without_replacement",
}


def _pld(event: Event, adjacency: Adjacency, limit: int) -> EpsilonBound:
    """The PLD bracket with leaves rounded to representatives beyond ``limit`` distinct."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pld_module, "MAX_DISTINCT_COMPONENTS", limit)
        acc = PLDAccountant(adjacency, target_points=1 << 13)
        return acc.compose(event).get_epsilon(1e-5)


def _rdp_rounded(event: Event) -> float:
    """The RDP upper bound with every leaf kind rounded beyond 2 distinct."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(rdp, "MAX_DISTINCT_SAMPLED", 2)
        acc = rdp.RDPAccountant()
        if acc._unsupported_reason(event) is not None:
            return float("inf")
        return acc.compose(event).get_epsilon(1e-5).epsilon


def _compare(leaves: list[Event], adjacency: Adjacency) -> None:
    event = ComposedEvent(leaves)
    exact = _pld(event, adjacency, 1000)
    rounded = _pld(event, adjacency, 3)
    # unsampled Gaussians merge into one first: a draw may leave no more than 3 leaves to round
    assume(rounded.details.get("representative_step") is not None)
    assert rounded.epsilon >= exact.epsilon_lower * (1 - SLACK)
    assert rounded.epsilon_lower <= exact.epsilon * (1 + SLACK)
    if adjacency is ADD:
        assert _rdp_rounded(event) >= exact.epsilon_lower * (1 - SLACK)


def test_the_strategies_draw_every_rounded_kind() -> None:
    drawn = {make(lo).kind for make, lo, _ in _MAKERS}
    drawn |= {PoissonSampledEvent.kind, SampledWithoutReplacementEvent.kind}
    assert drawn == ROUNDED_KINDS
    assert all(split(make(lo)) is not None for make, lo, _ in _MAKERS)


@settings(max_examples=2, deadline=None)
@given(leaves=st.lists(st.one_of(_PLAIN, _POISSON), min_size=6, max_size=10, unique=True))
def test_rounding_never_crosses_the_unrounded_bounds_add_remove(leaves: list[Event]) -> None:
    _compare(leaves, ADD)


@settings(max_examples=2, deadline=None)
@given(
    leaves=st.lists(st.one_of(_PLAIN, _WITHOUT_REPLACEMENT), min_size=6, max_size=10, unique=True)
)
def test_rounding_never_crosses_the_unrounded_bounds_replace_one(leaves: list[Event]) -> None:
    _compare(leaves, REPLACE)


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(
    leaves=st.lists(
        st.one_of(_PLAIN, _POISSON, _WITHOUT_REPLACEMENT), min_size=6, max_size=40, unique=True
    ),
    replace=st.booleans(),
)
def test_rounding_never_crosses_the_unrounded_bounds_wide(
    leaves: list[Event], replace: bool
) -> None:
    # Poisson sampling is analysed under add/remove, sampling without replacement under
    # replace-one
    unsupported = PoissonSampledEvent if replace else SampledWithoutReplacementEvent
    leaves = [e for e in leaves if not isinstance(e, unsupported)]
    if len(leaves) < 4:
        return
    _compare(leaves, REPLACE if replace else ADD)
