"""The SHK event (time-profiled pure DP): its epsilon, its lowering and accounting, lifting and
the runtime ledger."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpledger.accountant.select import account
from dpledger.core.errors import InvalidParameterError, LedgerViolationError
from dpledger.core.events import (
    CORE_EVENT_KINDS,
    ComposedEvent,
    PureDPEvent,
    SelfComposedEvent,
    event_from_dict,
    is_pure,
    pure_epsilon,
)
from dpledger.core.lifting import lift_event
from dpledger.plugins.shk.events import TimeProfiledPureDPEvent
from dpledger.runtime.ledger import PrivacyLedger
from dpledger.runtime.plugin_manager import PluginHost


@pytest.fixture(scope="module")
def host() -> PluginHost:
    return PluginHost.create(allow=["shk"])


@given(
    floor=st.floats(0, 20),
    transient=st.floats(0, 20),
    time=st.floats(0, 50),
    rate=st.floats(0.01, 5),
)
def test_epsilon_is_never_below_the_exact_value(
    floor: float, transient: float, time: float, rate: float
) -> None:
    event = TimeProfiledPureDPEvent(floor, transient, time, rate)
    mpmath.mp.dps = 50
    exact = mpmath.mpf(floor) + mpmath.mpf(transient) * mpmath.exp(-mpmath.mpf(rate) * time)
    assert mpmath.mpf(event.epsilon) >= exact
    assert event.epsilon <= float(exact) * (1 + 1e-13) + 1e-300


def test_paper_d_profile_decays_to_twice_the_potential_sensitivity() -> None:
    # epsilon(t) = 2 * Delta_pot + 2 * B * exp(-t); at t = 0 it is 2 * (Delta_pot + B)
    event0 = TimeProfiledPureDPEvent(2 * 0.1, 2 * 1.5, 0.0)
    assert event0.epsilon == pytest.approx(3.2, rel=1e-15)
    late = TimeProfiledPureDPEvent(0.2, 3.0, 40.0)
    assert late.epsilon == pytest.approx(0.2 + 3.0 * math.exp(-40.0), rel=1e-15)


@pytest.mark.parametrize(
    "field,kwargs",
    [
        ("floor_epsilon", {"floor_epsilon": -1.0}),
        ("transient_epsilon", {"transient_epsilon": math.nan}),
        ("time", {"time": -0.5}),
        ("decay_rate", {"decay_rate": 0.0}),
    ],
)
def test_bad_parameters_name_the_field(field: str, kwargs: dict[str, float]) -> None:
    values = {"floor_epsilon": 0.1, "transient_epsilon": 1.0, "time": 1.0} | kwargs
    with pytest.raises(InvalidParameterError) as info:
        TimeProfiledPureDPEvent(**values)
    assert field in str(info.value)


def test_a_plugin_kind_lowered_to_pure_dp_inside_compositions(host: PluginHost) -> None:
    assert "time_profiled_pure_dp" not in CORE_EVENT_KINDS
    assert host.mechanisms()["time_profiled_pure_dp"].event_class is TimeProfiledPureDPEvent
    event = TimeProfiledPureDPEvent(0.2, 1.0, 2.0)
    tree = ComposedEvent((SelfComposedEvent(event, 3), PureDPEvent(0.5)))
    lowered = host.lower(tree)
    assert lowered == ComposedEvent(
        (SelfComposedEvent(PureDPEvent(event.epsilon), 3), PureDPEvent(0.5))
    )
    assert is_pure(lowered)
    assert pure_epsilon(lowered) == pytest.approx(3 * event.epsilon + 0.5)
    assert event_from_dict(event.to_dict()) == event


def test_accounted_like_the_pure_event_of_its_epsilon(host: PluginHost) -> None:
    event = TimeProfiledPureDPEvent(0.1, 0.8, 3.0)
    k = 5
    got = account(host.lower(SelfComposedEvent(event, k)), delta=1e-6).bound
    want = account(SelfComposedEvent(PureDPEvent(event.epsilon), k), delta=1e-6).bound
    assert got.epsilon == want.epsilon
    # never more than basic composition, and strictly below it thanks to optimal composition
    assert got.epsilon <= k * event.epsilon
    # delta = 0: the pure bound itself
    assert account(host.lower(event), epsilon=event.epsilon).bound.delta == 0.0


def test_user_level_lift_multiplies_epsilon(host: PluginHost) -> None:
    event = TimeProfiledPureDPEvent(0.1, 0.8, 3.0)
    lifted, rules = lift_event(host.lower(event), 3)
    assert isinstance(lifted, PureDPEvent)
    assert lifted.epsilon >= 3 * event.epsilon
    assert lifted.epsilon == pytest.approx(3 * event.epsilon, rel=1e-12)
    assert rules


def test_ledger_books_a_certified_sample_and_refuses_an_earlier_time() -> None:
    declared = TimeProfiledPureDPEvent(0.2, 2.0, 7.0)
    ledger = PrivacyLedger(declared, rng=0)
    value = ledger.sample_certified(
        lambda rng: rng.normal(), declared, step="flow sample", note="grid solver"
    )
    assert np.isfinite(value)
    ledger.verify()
    assert ledger.log[0]["note"] == "grid solver"

    strict = PrivacyLedger(declared, rng=0)
    with pytest.raises(LedgerViolationError, match="too early"):
        strict.sample_certified(
            lambda rng: rng.normal(), TimeProfiledPureDPEvent(0.2, 2.0, 1.0), step="too early"
        )
    # a later time (a smaller epsilon) is covered by the declaration
    later = PrivacyLedger(declared, rng=0)
    later.sample_certified(lambda rng: 0.0, TimeProfiledPureDPEvent(0.2, 2.0, 9.0), step="later")
    later.verify()
