"""Shared checks of the accountant audits: the default call's brackets, and soundness against
an exact curve (the exact delta at the certified upper is at most delta, at the certified
lower at least delta, and the delta query at the upper brackets the exact value)."""

from __future__ import annotations

import math
from collections.abc import Callable

import mpmath as mp

from dpledger.accountant.base import DeltaBound, EpsilonBound
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import Event, ExponentialMechanismEvent, SelfComposedEvent

from . import audit_references as ref

__all__ = [
    "ADD_REMOVE",
    "REPLACE_ONE",
    "SLACK",
    "Curve",
    "assert_br_upper_attained_on_lattice",
    "assert_sound_against_exact",
    "composed",
    "delta_bracket",
    "epsilon_bracket",
]

SLACK = 1e-9
ADD_REMOVE = Adjacency()
REPLACE_ONE = Adjacency(relation="replace_one")
Curve = Callable[[float], mp.mpf]


def epsilon_bracket(event: Event, adjacency: Adjacency, delta: float) -> tuple[float, float]:
    bound = account(event, adjacency, delta=delta).bound
    assert isinstance(bound, EpsilonBound)
    return bound.epsilon_lower, bound.epsilon


def delta_bracket(event: Event, adjacency: Adjacency, epsilon: float) -> tuple[float, float]:
    bound = account(event, adjacency, epsilon=epsilon).bound
    assert isinstance(bound, DeltaBound)
    return bound.delta_lower, bound.delta


def assert_sound_against_exact(
    event: Event, adjacency: Adjacency, delta: float, exact: Curve
) -> tuple[float, float]:
    """The exact curve at our upper is at most ``delta`` and at our lower at least ``delta``;
    the delta query at our upper brackets the exact value there."""
    lower, upper = epsilon_bracket(event, adjacency, delta)
    assert lower <= upper
    if math.isfinite(upper):
        assert exact(upper) <= delta * (1 + SLACK), (lower, upper)
        d_lower, d_upper = delta_bracket(event, adjacency, upper)
        at_upper = exact(upper)
        assert d_upper >= at_upper * (1 - SLACK)
        assert d_lower <= at_upper * (1 + SLACK) + 1e-300
    if lower > 0:
        assert exact(lower) >= delta * (1 - SLACK), (lower, upper)
    return lower, upper


def composed(event: Event, count: int) -> Event:
    return event if count == 1 else SelfComposedEvent(event, count)


def assert_br_upper_attained_on_lattice(eps0: float, count: int, delta: float, points: int) -> None:
    """The optimal adaptive strategy of ``count`` eps0-bounded-range releases with positions on
    a lattice of eps0 / points (an independent recursion) is attained: its delta at the
    certified upper is at most delta."""
    lower, upper = epsilon_bracket(
        SelfComposedEvent(ExponentialMechanismEvent(eps0), count), ADD_REMOVE, delta
    )
    assert ref.lattice_adaptive_br_delta(eps0, count, upper, points) <= delta * (1 + SLACK)
    assert lower <= upper
