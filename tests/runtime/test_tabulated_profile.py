"""Tabulated privacy profiles: strict parameters, a JSON round trip, the coarsening."""

from __future__ import annotations

import math

import pytest

from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import (
    ApproxDPEvent,
    NonPrivateEvent,
    PureDPEvent,
    SelfComposedEvent,
    TabulatedProfileEvent,
    coarsen_tabulated,
    event_from_dict,
)


def test_round_trip_and_description() -> None:
    e = TabulatedProfileEvent([0.0, 0.5, 1.0], [0.3, 0.01, 0.0], [0.2, 0.02, 0.0], name="m")
    assert event_from_dict(e.to_dict()) == e
    assert e.to_dict()["epsilons"] == [0.0, 0.5, 1.0]
    assert e.describe() == "tabulated_profile(m, 3 points, eps 0 to 1, add_remove)"
    assert e.worst() == (0.3, 0.02, 0.0)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"epsilons": [0.0, 1.0], "deltas": [0.5, True]}, "deltas"),
        ({"epsilons": [0.0, "1"], "deltas": [0.5, 0.1]}, "epsilons"),
        ({"epsilons": [1.0, 0.0], "deltas": [0.5, 0.1]}, "epsilons"),
        ({"epsilons": [0.0, math.inf], "deltas": [0.5, 0.1]}, "epsilons"),
        ({"epsilons": [0.0, 1.0], "deltas": [0.5, 1.5]}, "deltas"),
        ({"epsilons": [0.0, 1.0], "deltas": [0.5]}, "deltas"),
        ({"epsilons": [], "deltas": []}, "epsilons"),
        ({"epsilons": [0.0], "deltas": [0.5], "deltas_add": [0.5, 0.1]}, "deltas_add"),
        ({"epsilons": [0.0], "deltas": [0.5], "relation": "swap"}, "relation"),
    ],
)
def test_strict_parameters(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        TabulatedProfileEvent(**kwargs)  # type: ignore[arg-type]
    assert info.value.field == field


def test_coarsening_is_a_tabulated_point() -> None:
    pure = TabulatedProfileEvent([0.0, 1.0, 2.0], [0.5, 1e-3, 0.0])
    assert pure.coarsened() == PureDPEvent(2.0)
    approx = TabulatedProfileEvent([0.0, 1.0, 2.0], [0.5, 1e-11, 1e-12])
    assert approx.coarsened() == ApproxDPEvent(1.0, 1e-11)
    # never below PROFILE_DELTA: the smallest delta tabulated, at its epsilon
    loose = TabulatedProfileEvent([0.0, 1.0, 2.0], [0.5, 0.1, 0.01])
    assert loose.coarsened() == ApproxDPEvent(2.0, 0.01)
    assert TabulatedProfileEvent([-1.0], [0.9]).coarsened() == NonPrivateEvent()
    nested = SelfComposedEvent(pure, 3)
    assert coarsen_tabulated(nested) == SelfComposedEvent(PureDPEvent(2.0), 3)


def test_a_declared_table_covers_a_smaller_one_on_its_grid() -> None:
    from dpledger.runtime.coverage import dominates

    declared = TabulatedProfileEvent([0.0, 1.0], [0.5, 0.1])
    assert dominates(declared, TabulatedProfileEvent([0.0, 1.0], [0.4, 0.1]))
    assert not dominates(declared, TabulatedProfileEvent([0.0, 1.0], [0.5, 0.2]))
    assert not dominates(declared, TabulatedProfileEvent([0.0, 2.0], [0.5, 0.1]))
    assert not dominates(
        declared, TabulatedProfileEvent([0.0, 1.0], [0.5, 0.1], relation="replace_one")
    )
    assert not dominates(declared, TabulatedProfileEvent([0.0, 1.0], [0.5, 0.1], [0.6, 0.1]))
