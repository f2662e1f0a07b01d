"""dp-accounting interop: DpEvent trees to dpledger events and back, and accounting them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mpmath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.cli import main
from dpledger.core.errors import InvalidParameterError, UnsupportedEventError
from dpledger.core.events import (
    ExponentialMechanismEvent,
    GaussianEvent,
    NonPrivateEvent,
    PureDPEvent,
    RandomizedResponseEvent,
)
from dpledger.integrations.dp_accounting import (
    SUPPORTED,
    from_dp_event,
    named_tuple_json,
    rr_epsilon,
    rr_noise_parameter,
    to_dp_event,
    to_named_tuple_dict,
)

d = pytest.importorskip("dp_accounting.dp_event")

leaves = st.one_of(
    st.just(d.NoOpDpEvent()),
    st.just(d.NonPrivateDpEvent()),
    st.floats(1e-3, 1e3).map(d.GaussianDpEvent),
    st.floats(1e-3, 1e3).map(d.LaplaceDpEvent),
)


def _trees(children: Any) -> Any:
    return st.one_of(
        st.tuples(children, st.integers(0, 10**6)).map(lambda t: d.SelfComposedDpEvent(*t)),
        st.lists(children, max_size=4).map(d.ComposedDpEvent),
        st.tuples(st.floats(0.0, 1.0), children).map(lambda t: d.PoissonSampledDpEvent(*t)),
        st.tuples(st.integers(1, 10**6), st.integers(0, 10**6), children)
        .filter(lambda t: t[1] <= t[0])
        .map(lambda t: d.SampledWithoutReplacementDpEvent(*t)),
    )


EVENTS = st.recursive(leaves, _trees, max_leaves=12)


@settings(max_examples=200, deadline=None)
@given(EVENTS)
def test_round_trip_is_the_identity(event: Any) -> None:
    ours = from_dp_event(event)
    assert to_dp_event(ours) == event
    # the JSON form round-trips too, without dp-accounting in the loop
    text = json.dumps(named_tuple_json(event))
    assert from_dp_event(json.loads(text)) == ours
    assert to_named_tuple_dict(ours) == json.loads(text)


@settings(max_examples=300, deadline=None)
@given(st.floats(1e-9, 1.0 - 1e-9), st.integers(2, 1000))
def test_randomized_response_rounds_to_the_lossy_side(p: float, k: int) -> None:
    eps = rr_epsilon(p, k)
    with mpmath.workdps(60):
        exact = mpmath.log1p(mpmath.mpf(k) * (1 - mpmath.mpf(p)) / mpmath.mpf(p))
        back = rr_noise_parameter(eps, k)
        exact_back = mpmath.mpf(k) / (mpmath.expm1(eps) + k)
    assert eps >= exact  # never below the mechanism's epsilon
    assert eps <= exact * (1 + 1e-13)
    assert back <= exact_back  # the DpEvent is at least as lossy as the dpledger event
    assert back <= p and (p - back) <= 1e-12 * p  # a round trip moves p down by a few ulps
    event = from_dp_event(d.RandomizedResponseDpEvent(p, k))
    assert event == RandomizedResponseEvent(eps, k)


def test_randomized_response_edges() -> None:
    assert from_dp_event(d.RandomizedResponseDpEvent(0.0, 4)) == NonPrivateEvent()
    assert from_dp_event(d.RandomizedResponseDpEvent(1.0, 4)) == PureDPEvent(0.0)


@pytest.mark.parametrize(
    "event",
    [
        d.SampledWithReplacementDpEvent(100, 10, d.GaussianDpEvent(1.0)),
        d.SingleEpochTreeAggregationDpEvent(1.0, [1, 2]),
        d.ZCDpEvent(0.1, 0.0),
        d.DiscreteLaplaceDpEvent(1.0, 1),
        d.UnsupportedDpEvent(),
        d.MixtureOfGaussiansDpEvent(1.0, [1.0], [1.0]),
    ],
)
def test_unsupported_kinds_are_named(event: Any) -> None:
    with pytest.raises(UnsupportedEventError, match=type(event).__name__):
        from_dp_event(d.ComposedDpEvent([d.GaussianDpEvent(1.0), event]))


def test_dpledger_only_kinds_are_named() -> None:
    with pytest.raises(UnsupportedEventError, match="exponential_mechanism"):
        to_dp_event(ExponentialMechanismEvent(1.0))
    assert len(SUPPORTED) == 9


def test_bad_fields_name_their_path() -> None:
    bad = {
        "module_name": "dp_accounting.dp_event",
        "class_name": "ComposedDpEvent",
        "events": [
            {
                "module_name": "dp_accounting.dp_event",
                "class_name": "GaussianDpEvent",
                "noise_multiplier": "1.0",
            }
        ],
    }
    with pytest.raises(InvalidParameterError, match=r"event\.events\[0\]\.noise_multiplier"):
        from_dp_event(bad)
    with pytest.raises(InvalidParameterError, match="named-tuple"):
        from_dp_event({"kind": "gaussian"})


def test_account_reads_a_dp_event_and_agrees_with_dp_accounting(tmp_path: Path, capfd) -> None:  # type: ignore[no-untyped-def]
    from dp_accounting.pld import pld_privacy_accountant

    event = d.SelfComposedDpEvent(
        d.PoissonSampledDpEvent(256 / 60000, d.GaussianDpEvent(1.1)), 1000
    )
    path = tmp_path / "event.json"
    path.write_text(json.dumps(named_tuple_json(event)))
    assert main(["account", str(path), "--json"]) == 0
    ours = json.loads(capfd.readouterr().out)
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    theirs = acc.compose(event).get_epsilon(1e-5)
    assert ours["epsilon"] == pytest.approx(theirs, rel=0.01)
    assert ours["epsilon_lower"] <= theirs * 1.001
    assert from_dp_event(event).event.event == GaussianEvent(1.1)  # type: ignore[attr-defined]


def test_report_reads_a_dp_event_like_account(tmp_path: Path, capfd) -> None:  # type: ignore[no-untyped-def]
    event = d.SelfComposedDpEvent(d.PoissonSampledDpEvent(0.01, d.GaussianDpEvent(1.0)), 100)
    path = tmp_path / "event.json"
    path.write_text(json.dumps(named_tuple_json(event)))
    assert main(["account", str(path), "--json"]) == 0
    ours = json.loads(capfd.readouterr().out)
    assert main(["report", str(path), "--format", "json"]) == 0
    report = json.loads(capfd.readouterr().out)
    assert report["bound"]["epsilon"] == ours["epsilon"]
