"""Event constructors: strict types, huge integers and nesting depth are refused by name."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import (
    MAX_NESTING,
    ApproxDPEvent,
    ComposedEvent,
    Event,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PureDPEvent,
    SelfComposedEvent,
    TabulatedProfileEvent,
    event_from_dict,
    nesting_depth,
)


@pytest.mark.parametrize(
    ("make", "field"),
    [
        (lambda v: GaussianEvent(v), "noise_multiplier"),
        (lambda v: LaplaceEvent(v), "noise_multiplier"),
        (lambda v: PureDPEvent(v), "epsilon"),
        (lambda v: ApproxDPEvent(1.0, v), "delta"),
        (lambda v: PoissonSampledEvent(v, GaussianEvent(1.0)), "sampling_probability"),
        (lambda v: TabulatedProfileEvent([0.0, 1.0], [0.5, v]), "deltas"),
    ],
)
@pytest.mark.parametrize("value", ["0.5", True, False, None, [0.5], b"1", np.bool_(True)])
def test_a_string_or_a_bool_is_not_a_number(make: Any, field: str, value: Any) -> None:
    with pytest.raises(InvalidParameterError) as info:
        make(value)
    assert info.value.field == field
    assert "expected a number" in info.value.problem


def test_numbers_of_every_real_type_are_floats() -> None:
    assert GaussianEvent(2).noise_multiplier == 2.0
    assert type(GaussianEvent(2).noise_multiplier) is float
    assert GaussianEvent(np.float32(0.5)).noise_multiplier == 0.5
    assert PoissonSampledEvent(np.int64(1), GaussianEvent(1.0)).sampling_probability == 1.0


def test_integers_beyond_the_double_range_name_the_field() -> None:
    with pytest.raises(InvalidParameterError, match=r"^epsilon: an integer of 401 digits does not"):
        PureDPEvent(10**400)
    # a count is an exact integer: any size is valid
    assert SelfComposedEvent(PureDPEvent(1.0), 10**400).count == 10**400


def _chain(depth: int) -> Event:
    event: Event = PureDPEvent(0.1)
    for _ in range(depth):
        event = ComposedEvent([event])
    return event


def test_nesting_depth_is_bounded() -> None:
    event = _chain(MAX_NESTING)
    assert nesting_depth(event) == MAX_NESTING
    with pytest.raises(InvalidParameterError, match=r"^events: events are nested 101 levels"):
        ComposedEvent([event])
    with pytest.raises(InvalidParameterError, match=r"^event: events are nested 101 levels"):
        SelfComposedEvent(event, 2)
    # a shared sub-tree is walked once
    shared: Event = PureDPEvent(0.1)
    for _ in range(60):
        shared = ComposedEvent([shared, shared])
    assert nesting_depth(shared) == 60


def test_event_from_dict_names_the_field() -> None:
    with pytest.raises(InvalidParameterError, match=r"^gaussian\.noise_multiplier: expected a"):
        event_from_dict({"kind": "gaussian", "noise_multiplier": "one"})
    with pytest.raises(InvalidParameterError, match=r"^composed\.events: must be a list"):
        event_from_dict({"kind": "composed", "events": 3})
    with pytest.raises(InvalidParameterError, match=r"^kind: unknown mechanism"):
        event_from_dict({"kind": ["gaussian"]})
    deep: dict[str, Any] = {"kind": "pure_dp", "epsilon": 1.0}
    for _ in range(5000):
        deep = {"kind": "self_composed", "count": 1, "event": deep}
    with pytest.raises(InvalidParameterError, match=r"nested more than 100 levels"):
        event_from_dict(deep)


def test_tables_reaching_beyond_epsilon_709_construct() -> None:
    """The check that no delta lies below 1 - e^eps applies below epsilon 0 only: e^eps
    overflowed beyond ~709.8 and the table was refused with a traceback."""
    table = TabulatedProfileEvent((0.0, 800.0), (0.5, 0.0))
    assert table.epsilons == (0.0, 800.0)
    with pytest.raises(InvalidParameterError, match="below 1 - e"):
        TabulatedProfileEvent((-1.0, 800.0), (0.1, 0.0))
