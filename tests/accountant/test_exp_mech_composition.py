"""Exponential-mechanism releases in the default call: the exact curve of one release as both
bounds, and the attained optimal non-adaptive composition (Dong, Durfee & Rogers 2020) as the
lower bound of several, against 30-digit references."""

from __future__ import annotations

import math

import pytest

from dpledger.accountant.base import DeltaBound, EpsilonBound
from dpledger.accountant.closed_form import ClosedFormAccountant
from dpledger.accountant.exp_mech_composition import (
    br_composed_delta_lower,
    br_composed_epsilon_lower,
)
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    ApproxDPEvent,
    ComposedEvent,
    Event,
    ExponentialMechanismEvent,
    PureDPEvent,
    SelfComposedEvent,
)

EM = ExponentialMechanismEvent


def _eps(event: Event, delta: float) -> EpsilonBound:
    bound = account(event, delta=delta).bound
    assert isinstance(bound, EpsilonBound)
    return bound


def _closed_form(event: Event, delta: float) -> EpsilonBound:
    acc = ClosedFormAccountant(Adjacency())
    acc.compose(event)
    return acc.get_epsilon(delta)


# (eps0, delta, exact epsilon at 60 digits of (e^{eps0/2} - e^{eps/2})^2 / (e^{eps0} - 1) = delta,
#  the bracket before: randomized response at eps0/2 below, the PLD curve above)
SINGLE = [
    (1.0, 1e-5, 0.99496526660881177773, (0.4999791377285973, 0.994965268428625)),
    (0.1, 1e-6, 0.099382936157491037799, (0.04999723224852211, 0.09938293657707203)),
]


@pytest.mark.parametrize(("eps0", "delta", "exact", "before"), SINGLE)
def test_one_release_is_exact_on_both_sides(
    eps0: float, delta: float, exact: float, before: tuple[float, float]
) -> None:
    bound = _closed_form(EM(eps0), delta)
    assert bound.epsilon_lower <= exact * (1 + 1e-13) and bound.epsilon >= exact * (1 - 1e-13)
    assert bound.epsilon - bound.epsilon_lower <= 1e-12 * exact
    # no reference value moves down; the upper moves down by less than the old bracket's width
    assert bound.epsilon_lower >= before[0]
    assert before[1] - (before[1] - before[0]) < bound.epsilon <= before[1]


def test_one_release_is_reported_by_the_closed_form() -> None:
    bound = _eps(EM(0.1), 1e-6)
    assert bound.method == "closed_form"
    assert bound.epsilon - bound.epsilon_lower <= 1e-12 * bound.epsilon


def test_one_release_delta_is_exact_on_both_sides() -> None:
    eps0, eps = 2.0, 0.5
    exact = (math.exp(eps0 / 2) - math.exp(eps / 2)) ** 2 / math.expm1(eps0)
    acc = ClosedFormAccountant(Adjacency())
    acc.compose(EM(eps0))
    bound = acc.get_delta(eps)
    assert bound.delta_lower <= exact * (1 + 1e-12) and bound.delta >= exact * (1 - 1e-12)
    assert bound.delta - bound.delta_lower <= 1e-11 * exact


# (eps0, count, delta, the optimal non-adaptive composition by a 30-digit maximisation over the
#  pair's position, the reported bracket before)
COMPOSED = [
    (0.1, 10, 1e-6, 0.628636838773222, (0.49909981322051655, 0.6521623177275747)),
    (1.0, 10, 1e-5, 7.10496782881753, (4.998658545929699, 7.244731006200538)),
    (0.1, 100, 1e-6, 2.24602621245618, (2.203465980751806, 2.400202542986813)),
    (0.01, 1000, 1e-6, 0.647923637356328, (0.646253203201828, 0.6997599261670469)),
]


@pytest.mark.parametrize(("eps0", "count", "delta", "optimum", "before"), COMPOSED)
def test_composed_lower_is_the_non_adaptive_optimum(
    eps0: float, count: int, delta: float, optimum: float, before: tuple[float, float]
) -> None:
    # the search over the position is a heuristic (each value is certified): within 1e-4
    found = br_composed_epsilon_lower(delta, eps0, count)
    assert optimum * (1 - 1e-4) <= found <= optimum * (1 + 1e-4)
    # the reported lower bound is at least that; one epsilon's releases also have their
    # adaptive optimum bracketed (br_adaptive.py), which may lie above it
    low = _closed_form(SelfComposedEvent(EM(eps0), count), delta).epsilon_lower
    assert optimum * (1 - 1e-4) <= low
    assert before[0] <= low <= before[1]  # above the old lower, below the reported upper


def test_composed_lower_is_reported() -> None:
    bound = _eps(SelfComposedEvent(EM(1.0), 10), 1e-5)
    assert bound.epsilon_lower == _closed_form(SelfComposedEvent(EM(1.0), 10), 1e-5).epsilon_lower
    assert 4.998658545929699 < bound.epsilon_lower <= bound.epsilon <= 7.244731006200538


@pytest.mark.parametrize(("eps0", "count", "eps", "optimum"), [(1.0, 10, 5.0, 0.00273427413975357)])
def test_composed_delta_lower_is_the_non_adaptive_optimum(
    eps0: float, count: int, eps: float, optimum: float
) -> None:
    found = br_composed_delta_lower(eps, eps0, count)
    assert optimum * (1 - 1e-6) <= found <= optimum * (1 + 1e-9)
    bound = account(SelfComposedEvent(EM(eps0), count), epsilon=eps).bound
    assert isinstance(bound, DeltaBound)
    assert optimum * (1 - 1e-6) <= bound.delta_lower <= bound.delta


@pytest.mark.parametrize(
    "event",
    [
        ComposedEvent((SelfComposedEvent(EM(0.5), 5), SelfComposedEvent(EM(0.3), 7))),
        ComposedEvent((SelfComposedEvent(EM(0.5), 5), SelfComposedEvent(PureDPEvent(0.3), 3))),
        ComposedEvent((SelfComposedEvent(EM(0.5), 5), ApproxDPEvent(0.2, 1e-7))),
        pytest.param(
            ComposedEvent(tuple(EM(0.05 * (1 + i / 20)) for i in range(20))), marks=pytest.mark.slow
        ),
    ],
)
def test_mixed_ledgers_stay_consistent(event: Event) -> None:
    """Every backend's upper bound stays above the new lower bound (select checks it too)."""
    for delta in (1e-3, 1e-7):
        sel = account(event, delta=delta, backends=("closed_form", "rdp"))
        low = _closed_form(event, delta).epsilon_lower
        assert low > 0.0
        for c in sel.candidates:
            assert isinstance(c, EpsilonBound)
            assert low <= c.epsilon * (1 + 1e-12), (c.method, low, c.epsilon)


@pytest.mark.slow
def test_mixed_ledger_against_pld() -> None:
    event = ComposedEvent((SelfComposedEvent(EM(0.5), 5), SelfComposedEvent(EM(0.3), 7)))
    for delta in (1e-3, 1e-7):
        sel = account(event, delta=delta, crosscheck=True)
        low = _closed_form(event, delta).epsilon_lower
        assert sel.bound.epsilon_lower >= low
        assert all(low <= c.epsilon for c in sel.candidates if isinstance(c, EpsilonBound))


def test_many_releases_use_a_sub_composition_quickly() -> None:
    bound = _closed_form(SelfComposedEvent(EM(1e-3), 10**9), 1e-6)
    assert 0.0 < bound.epsilon_lower <= bound.epsilon


@pytest.mark.parametrize("eps0", [1e-320, 1e-150, 699.0, 710.0, 1e300])
def test_extreme_epsilons_stay_consistent(eps0: float) -> None:
    """Tiny epsilons (whose products underflow) and huge ones (whose e^eps0 overflows)."""
    for count in (1, 7):
        for delta in (1e-300, 1e-7, 0.999999):
            bound = _closed_form(SelfComposedEvent(EM(eps0), count), delta)
            assert 0.0 <= bound.epsilon_lower <= bound.epsilon
        if count == 1 and eps0 < 1e-100:
            # the exact value: eps0 + 2 log(1 - sqrt(delta (1 - e^-eps0))) < 0 at delta = 1e-7
            assert _closed_form(EM(eps0), 1e-7).epsilon_lower == 0.0
