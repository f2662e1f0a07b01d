"""Fuzzing the accountant: random valid events give a bound (never NaN) or a dpledger error.

Events of every core kind with extreme parameters (noise from 1e-300 to 1e300, epsilons up to
1e4, counts up to 2^200, nesting) are accounted at random deltas or epsilons under both
relations. The only acceptable failure is a :class:`DPLedgerError`; a bound is never NaN, its
upper end lies in its range and its lower end below it.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import DPLedgerError
from dpledger.core.events import (
    ApproxDPEvent,
    ComposedEvent,
    Event,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    NoOpEvent,
    PoissonSampledEvent,
    PureDPEvent,
    RandomizedResponseEvent,
    ReportNoisyMaxEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
)

pytestmark = [
    pytest.mark.filterwarnings("ignore:Generating overly large repr"),
    # the replace-one Poisson profile overflows harmlessly (inf -> clamped) at small noise
    pytest.mark.filterwarnings(
        "ignore:overflow encountered:RuntimeWarning:dpledger.accountant.profiles"
    ),
]


def _log_uniform(lo: float, hi: float) -> st.SearchStrategy[float]:
    return st.floats(min_value=math.log10(lo), max_value=math.log10(hi)).map(lambda x: 10.0**x)


noise = st.one_of(_log_uniform(1e-300, 1e300), st.sampled_from([1e-300, 0.05, 0.5, 1.0, 1e300]))
epsilons = st.one_of(
    st.just(0.0), _log_uniform(1e-300, 1e4), st.sampled_from([1e-12, 0.1, 1.0, 709.0, 710.0, 1e4])
)
rates = st.one_of(st.sampled_from([0.0, 1e-300, 1e-6, 0.5, 1.0]), st.floats(0.0, 1.0))
counts = st.one_of(st.integers(0, 5), st.sampled_from([10, 10_000, 10_001, 10**7, 10**30, 2**200]))

leaves = st.one_of(
    st.builds(GaussianEvent, noise),
    st.builds(LaplaceEvent, noise),
    st.builds(PureDPEvent, epsilons),
    st.builds(ApproxDPEvent, epsilons, st.sampled_from([0.0, 1e-300, 1e-6, 0.5])),
    st.builds(
        RandomizedResponseEvent,
        epsilons.filter(lambda e: e > 0),
        st.sampled_from([2, 3, 1000, 2**60]),
    ),
    st.builds(ExponentialMechanismEvent, epsilons),
    st.builds(ReportNoisyMaxEvent, epsilons),
    st.just(NoOpEvent()),
    st.just(NonPrivateEvent()).filter(lambda _: True),
)


def _wor(inner: Event, n: int, m: int) -> Event:
    return SampledWithoutReplacementEvent(n, min(m, n), inner)


def _extend(inner: st.SearchStrategy[Event]) -> st.SearchStrategy[Event]:
    return st.one_of(
        st.builds(PoissonSampledEvent, rates, inner),
        st.builds(_wor, inner, st.integers(1, 10**6), st.integers(0, 10**6)),
        st.builds(SelfComposedEvent, inner, counts),
        st.lists(inner, min_size=0, max_size=4).map(ComposedEvent),
    )


events = st.recursive(leaves, _extend, max_leaves=6)
queries = st.one_of(
    st.fixed_dictionaries(
        {"delta": st.one_of(_log_uniform(1e-300, 0.999), st.sampled_from([1e-5, 0.5, 0.999999]))}
    ),
    st.fixed_dictionaries(
        {"epsilon": st.one_of(st.floats(-1e3, 1e3), st.sampled_from([-5.0, 0.0, 1000.0, 1e300]))}
    ),
)
adjacencies = st.sampled_from([Adjacency(), Adjacency(relation="replace_one")])


def _check(
    event: Event, adjacency: Adjacency, query: dict[str, float], backends: Any = None
) -> None:
    try:
        selection = account(event, adjacency, backends=backends, **query)
    except DPLedgerError as exc:
        assert "\n" not in str(exc)
        return
    for b in selection.candidates:
        d: dict[str, Any] = b.to_dict()
        if "epsilon_lower" in d:
            hi, lo = d["epsilon"], d["epsilon_lower"]
            assert 0.0 <= lo <= hi, d  # NaN fails every comparison
        else:
            hi, lo = d["delta"], d["delta_lower"]
            assert 0.0 <= lo <= hi <= 1.0, d
            if query["epsilon"] <= 0:  # delta(eps) >= 1 - e^eps for every pair
                assert hi >= -math.expm1(query["epsilon"]) * (1 - 1e-9), d


@settings(
    max_examples=30,
    deadline=30_000,  # a hang shows as a deadline error; PLD compositions take a few seconds
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(events, adjacencies, queries)
@example(GaussianEvent(1e300), Adjacency(), {"delta": 1e-5})
@example(GaussianEvent(1e-300), Adjacency(), {"delta": 1e-5})
@example(PoissonSampledEvent(0.01, GaussianEvent(1e300)), Adjacency(), {"delta": 1e-5})
@example(PureDPEvent(710.0), Adjacency(), {"delta": 1e-5})
@example(PureDPEvent(1.0), Adjacency(), {"epsilon": 1000.0})
@example(SelfComposedEvent(PureDPEvent(1.0), 10**30), Adjacency(), {"delta": 1e-5})
@example(
    SelfComposedEvent(SelfComposedEvent(PureDPEvent(1.0), 2**50), 2**50),
    Adjacency(),
    {"delta": 1e-5},
)
@example(SelfComposedEvent(PureDPEvent(1e-300), 10**300), Adjacency(), {"delta": 1e-5})
@example(RandomizedResponseEvent(1.0), Adjacency(), {"epsilon": -5.0})
@example(ComposedEvent([]), Adjacency(), {"epsilon": -9.664222626980194e-131})
@example(GaussianEvent(1e-300), Adjacency(), {"epsilon": 1e300})
@example(SelfComposedEvent(LaplaceEvent(1e-17), 2), Adjacency(), {"delta": 0.1})
@example(
    PoissonSampledEvent(1e-300, GaussianEvent(1.0)),
    Adjacency(relation="replace_one"),
    {"delta": 0.1},
)
def test_account_gives_a_bound_or_a_dpledger_error(
    event: Event, adjacency: Adjacency, query: dict[str, float]
) -> None:
    _check(event, adjacency, query)


@pytest.mark.slow
@settings(max_examples=400, deadline=120_000, suppress_health_check=list(HealthCheck))
@given(events, adjacencies, queries)
def test_account_fuzz_long(event: Event, adjacency: Adjacency, query: dict[str, float]) -> None:
    _check(event, adjacency, query)
