"""The PLD backend's support check in one pass (:mod:`dpledger.accountant.pld_leaf_check`)
decides as the leaf-by-leaf check: the same reason (or None) for mixtures of kinds, leaves
outside the grid's range and kinds it does not cover."""

from __future__ import annotations

import pytest

import dpledger.accountant.pld as pld_module
from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.representatives import is_rounded, split
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    ApproxDPEvent,
    ComposedEvent,
    Event,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    PoissonSampledEvent,
    PureDPEvent,
    RandomizedResponseEvent,
    SampledWithoutReplacementEvent,
)


def _leaves(extra: list[Event]) -> list[Event]:
    base: list[Event] = (
        [GaussianEvent(1.0 + i / 100) for i in range(5)]
        + [PoissonSampledEvent(0.01 * (1 + i), GaussianEvent(0.9 + i / 50)) for i in range(5)]
        + [LaplaceEvent(500.0 + i) for i in range(5)]
        + [RandomizedResponseEvent(0.1 * (1 + i), 2 + i % 2) for i in range(4)]
        + [PureDPEvent(0.2), ApproxDPEvent(0.3, 1e-7)]
    )
    return base + extra


CASES: list[list[Event]] = [
    [],
    [NonPrivateEvent()],
    [GaussianEvent(1e-5)],
    [PoissonSampledEvent(0.1, LaplaceEvent(2e5))],
    [PureDPEvent(600.0)],
    [RandomizedResponseEvent(800.0, 3)],
    [ExponentialMechanismEvent(0.3)],
    [SampledWithoutReplacementEvent(1000, 10, GaussianEvent(1.0))],
    [PoissonSampledEvent(0.1, ApproxDPEvent(0.5, 1e-6))],
    [PoissonSampledEvent(0.1, PureDPEvent(0.5))],
]


@pytest.mark.parametrize("extra", CASES)
@pytest.mark.parametrize("relation", ["add_remove", "replace_one"])
def test_one_pass_decides_as_leaf_by_leaf(
    extra: list[Event], relation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    event = ComposedEvent(tuple(_leaves(extra)))
    adjacency = Adjacency(relation=relation)
    fast = PLDAccountant(adjacency)._unsupported_reason(event)
    monkeypatch.setattr(pld_module, "shapes_in_range", lambda leaves, factor: None)
    assert PLDAccountant(adjacency)._unsupported_reason(event) == fast


def test_is_rounded_is_split_not_none() -> None:
    events: list[Event] = [*_leaves([]), *(e for case in CASES for e in case)]
    for event in events:
        assert is_rounded(event) == (split(event) is not None)
