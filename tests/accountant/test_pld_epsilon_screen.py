"""Epsilon queries of many components screen a direction on a window of SCREEN_LEAST_POINTS
points (their passes hold MIN_POINTS), and the bracket stays the one of the full screen."""

from __future__ import annotations

import pytest

from dpledger.accountant import pld_compositions
from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.pld_compositions import MIN_POINTS, Compositions
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import ComposedEvent, GaussianEvent, PoissonSampledEvent

EVENT = ComposedEvent(
    [PoissonSampledEvent(1e-3 * (1 + i * 1e-3), GaussianEvent(1.0)) for i in range(20)]
)


def _bracket(monkeypatch: pytest.MonkeyPatch, least: int) -> tuple[tuple[float, float], set[int]]:
    """(bracket at 1e-5, the least_points values the compositions were made with)."""
    seen: set[int] = set()
    original = Compositions.composed

    def recording(self: Compositions, *args: object, **kwargs: object) -> object:
        seen.add(self.least_points)
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Compositions, "composed", recording)
    monkeypatch.setattr(pld_compositions, "SCREEN_LEAST_POINTS", least)
    acc = PLDAccountant(Adjacency())
    acc.compose(EVENT, 1)
    bound = acc.get_epsilon(1e-5)
    return (bound.epsilon_lower, bound.epsilon), seen


def test_screens_of_many_components_use_the_smaller_window(monkeypatch: pytest.MonkeyPatch):
    fast, seen = _bracket(monkeypatch, pld_compositions.SCREEN_LEAST_POINTS)
    assert pld_compositions.SCREEN_LEAST_POINTS in seen and MIN_POINTS in seen
    full, seen_full = _bracket(monkeypatch, MIN_POINTS)
    assert seen_full == {MIN_POINTS}
    # each bracket is certified: they overlap, and the screen leaves the bracket as narrow
    assert fast[0] <= full[1] and full[0] <= fast[1]
    assert fast[1] - fast[0] <= (full[1] - full[0]) * 1.01
