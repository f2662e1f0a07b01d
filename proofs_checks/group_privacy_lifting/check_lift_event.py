"""lift_event: every lifting rule against its closed form, and the refusals."""

from __future__ import annotations

import math

import pytest

from dpledger.core.errors import DPLedgerError
from dpledger.core.events import (
    ApproxDPEvent,
    ComposedEvent,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    PoissonSampledEvent,
    PureDPEvent,
    RandomizedResponseEvent,
    ReportNoisyMaxEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
)
from dpledger.core.lifting import lift_event


@pytest.mark.parametrize("k", [1, 2, 5])
def test_noise_events_scale_sensitivity_by_k(k: int) -> None:
    lifted, _ = lift_event(GaussianEvent(3.0), k)
    assert isinstance(lifted, GaussianEvent)
    assert lifted.noise_multiplier <= 3.0 / k  # rounded down: never less privacy loss
    assert lifted.noise_multiplier == pytest.approx(3.0 / k, rel=1e-15)
    lifted, _ = lift_event(LaplaceEvent(2.0), k)
    assert isinstance(lifted, LaplaceEvent) and lifted.noise_multiplier <= 2.0 / k


@pytest.mark.parametrize("k", [2, 3])
def test_pure_events_multiply_epsilon(k: int) -> None:
    for ev in (
        PureDPEvent(0.4),
        ExponentialMechanismEvent(0.4),
        ReportNoisyMaxEvent(0.4),
        RandomizedResponseEvent(0.4, 2),
    ):
        lifted, _ = lift_event(ev, k)
        assert lifted.epsilon >= k * 0.4  # type: ignore[attr-defined]
        assert lifted.epsilon == pytest.approx(k * 0.4, rel=1e-15)  # type: ignore[attr-defined]


def test_approx_dp_group_privacy_formula() -> None:
    lifted, _ = lift_event(ApproxDPEvent(0.5, 1e-6), 3)
    assert isinstance(lifted, ApproxDPEvent)
    assert lifted.epsilon >= 1.5
    assert lifted.delta >= 3 * math.exp(2 * 0.5) * 1e-6
    assert lifted.delta == pytest.approx(3 * math.exp(1.0) * 1e-6, rel=1e-12)
    vacuous, _ = lift_event(ApproxDPEvent(2.0, 0.1), 4)  # 4 e^6 0.1 >= 1
    assert isinstance(vacuous, NonPrivateEvent)


def test_compositions_distribute_over_lifting() -> None:
    ev = ComposedEvent([SelfComposedEvent(GaussianEvent(2.0), 3), LaplaceEvent(1.0)])
    lifted, _ = lift_event(ev, 2)
    assert (
        lifted
        == lift_event(
            ComposedEvent([SelfComposedEvent(GaussianEvent(1.0), 3), LaplaceEvent(0.5)]), 1
        )[0]
    )


@pytest.mark.parametrize(
    "ev",
    [
        PoissonSampledEvent(0.1, GaussianEvent(1.0)),
        SampledWithoutReplacementEvent(10, 2, GaussianEvent(1.0)),
    ],
)
def test_row_sampled_events_have_no_lift(ev: object) -> None:
    with pytest.raises(DPLedgerError, match="sample users"):
        lift_event(ev, 2)  # type: ignore[arg-type]


@pytest.mark.parametrize("k", [0, -1, 1.5, True])
def test_contribution_bound_is_validated(k: object) -> None:
    with pytest.raises(DPLedgerError, match="max_contributions"):
        lift_event(GaussianEvent(1.0), k)  # type: ignore[arg-type]
