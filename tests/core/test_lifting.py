"""Lifting row-level releases to user level: rules, rounding, refusals, and monotonicity."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import LiftingError
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
from dpledger.core.lifting import RULES, div_down, exp_up, lift_event, lift_release, mul_up

USER5 = Adjacency(unit="user", unit_key="user_id", max_contributions=5)


def gaussian_delta(mu: float, eps: float) -> float:
    """Exact delta(eps) of a mu-GDP Gaussian (Dong, Roth, Su 2022, Cor. 2.13)."""
    return float(norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2))


def test_gaussian_noise_multiplier_divides_by_k() -> None:
    lifted, rules = lift_event(GaussianEvent(2.0), 4)
    assert lifted == GaussianEvent(0.5)
    assert rules == ("gaussian_l2_sensitivity_xk",)


def test_laplace_noise_multiplier_divides_by_k() -> None:
    lifted, rules = lift_event(LaplaceEvent(3.0), 3)
    assert lifted == LaplaceEvent(1.0)
    assert rules == ("laplace_l1_sensitivity_xk",)


@pytest.mark.parametrize(
    ("event", "expected", "rule"),
    [
        (PureDPEvent(0.25), PureDPEvent(1.0), "pure_group_privacy"),
        (RandomizedResponseEvent(0.5, 3), PureDPEvent(2.0), "pure_group_privacy"),
        (
            ExponentialMechanismEvent(0.125),
            ExponentialMechanismEvent(0.5),
            "exponential_mechanism_sensitivity_xk",
        ),
        (ReportNoisyMaxEvent(0.75), ReportNoisyMaxEvent(3.0), "report_noisy_max_sensitivity_xk"),
    ],
)
def test_pure_mechanisms_pay_k_epsilon(event: Event, expected: Event, rule: str) -> None:
    lifted, rules = lift_event(event, 4)
    assert lifted == expected
    assert rules == (rule,)


def test_approx_dp_group_privacy_formula() -> None:
    lifted, rules = lift_event(ApproxDPEvent(0.5, 1e-6), 3)
    assert isinstance(lifted, ApproxDPEvent)
    assert rules == ("approx_group_privacy",)
    assert lifted.epsilon == 1.5
    exact = 3 * math.exp(2 * 0.5) * 1e-6
    assert exact <= lifted.delta <= exact * (1 + 1e-14)


def test_approx_dp_group_privacy_that_reaches_delta_one_is_non_private() -> None:
    lifted, rules = lift_event(ApproxDPEvent(2.0, 0.01), 5)
    assert lifted == NonPrivateEvent()
    assert rules == ("approx_group_privacy_vacuous",)


def test_gaussian_lift_is_tighter_than_group_privacy_golden_values() -> None:
    # VERIFY V20: mu = 0.5, k = 2: exact delta(1) = 0.1269 <= group privacy 0.1729.
    row_delta = gaussian_delta(0.5, 0.5)
    group, _ = lift_event(ApproxDPEvent(0.5, row_delta), 2)
    assert isinstance(group, ApproxDPEvent)
    assert group.epsilon == 1.0
    assert group.delta == pytest.approx(0.1729, abs=5e-5)
    lifted, _ = lift_event(GaussianEvent(2.0), 2)  # mu = 1/sigma
    assert isinstance(lifted, GaussianEvent)
    exact = gaussian_delta(1.0 / lifted.noise_multiplier, 1.0)
    assert exact == pytest.approx(0.1269, abs=5e-5)
    assert exact <= group.delta
    # k = 4, row eps = 1 (mu = 0.5): at user eps = 4, exact 0.0850 <= group privacy 0.549
    group4, _ = lift_event(ApproxDPEvent(1.0, gaussian_delta(0.5, 1.0)), 4)
    lifted4, _ = lift_event(GaussianEvent(2.0), 4)
    assert isinstance(group4, ApproxDPEvent) and isinstance(lifted4, GaussianEvent)
    assert group4.epsilon == 4.0
    assert group4.delta == pytest.approx(0.549, abs=5e-4)
    exact4 = gaussian_delta(1 / lifted4.noise_multiplier, 4.0)
    assert exact4 == pytest.approx(0.0850, abs=5e-5)
    assert exact4 <= group4.delta


def test_lifting_distributes_over_composition() -> None:
    event = ComposedEvent(
        (SelfComposedEvent(GaussianEvent(3.0), 7), LaplaceEvent(6.0), NoOpEvent())
    )
    lifted, rules = lift_event(event, 3)
    assert lifted == ComposedEvent(
        (SelfComposedEvent(GaussianEvent(1.0), 7), LaplaceEvent(2.0), NoOpEvent())
    )
    assert rules == (
        "compose_distributes",
        "gaussian_l2_sensitivity_xk",
        "laplace_l1_sensitivity_xk",
    )
    assert set(rules) <= set(RULES)


@pytest.mark.parametrize(
    "event",
    [
        PoissonSampledEvent(0.01, GaussianEvent(1.0)),
        SampledWithoutReplacementEvent(100, 10, GaussianEvent(1.0)),
        ComposedEvent((GaussianEvent(1.0), PoissonSampledEvent(0.5, LaplaceEvent(1.0)))),
    ],
)
def test_row_sampled_events_are_refused_with_the_fix(event: Event) -> None:
    with pytest.raises(LiftingError) as info:
        lift_release(event, USER5, release="train/dp_sgd")
    msg = str(info.value)
    assert "'train/dp_sgd'" in msg
    assert "sample users rather than rows" in msg
    assert "declared_unit = 'user'" in msg


def test_k1_and_row_level_are_unchanged() -> None:
    event = PoissonSampledEvent(0.01, GaussianEvent(1.0))
    assert lift_event(event, 1) == (event, ("unchanged_k1",))
    assert lift_release(event, Adjacency()) == (event, ("unchanged_k1",))
    one = Adjacency(unit="user", unit_key="u", max_contributions=1)
    assert lift_release(event, one) == (event, ("unchanged_k1",))


def test_declared_user_level_is_not_lifted() -> None:
    event = PoissonSampledEvent(0.01, GaussianEvent(1.0))
    assert lift_release(event, USER5, declared_unit="user") == (event, ("declared_user_level",))
    with pytest.raises(LiftingError, match="declared at user level but the source protects rows"):
        lift_release(event, Adjacency(), declared_unit="user")


def test_contribution_override_and_bad_k() -> None:
    lifted, _ = lift_release(GaussianEvent(2.0), USER5, max_contributions=2)
    assert lifted == GaussianEvent(1.0)
    with pytest.raises(LiftingError, match="max_contributions"):
        lift_event(GaussianEvent(1.0), 0)


def test_rounding_goes_to_the_safe_side() -> None:
    assert mul_up(3.0, 0.1) >= 0.30000000000000004  # exact 3 * 0.1 is above 0.3
    from fractions import Fraction

    for a, b in [(3.0, 0.1), (7.0, 0.3), (1e-3, 11.0)]:
        assert Fraction(mul_up(a, b)) >= Fraction(a) * Fraction(b)
    for a, k in [(1.0, 3), (2.2, 7), (0.1, 3)]:
        assert Fraction(div_down(a, k)) <= Fraction(a) / k
    assert exp_up(1.0) > math.exp(1.0)


_leaf = st.one_of(
    st.floats(0.3, 20.0).map(GaussianEvent),
    st.floats(0.5, 20.0).map(LaplaceEvent),
    st.floats(0.01, 1.0).map(PureDPEvent),
    st.tuples(st.floats(0.01, 0.5), st.floats(1e-9, 1e-7)).map(lambda t: ApproxDPEvent(*t)),
)
_event = st.one_of(
    _leaf,
    st.tuples(_leaf, st.integers(1, 5)).map(lambda t: SelfComposedEvent(*t)),
    st.lists(_leaf, min_size=2, max_size=3).map(ComposedEvent),
)


@settings(max_examples=25, deadline=None)
@given(event=_event, k=st.integers(1, 6))
def test_user_level_epsilon_is_never_below_row_level(event: Event, k: int) -> None:
    from dpledger.accountant.select import account

    row = account(event, Adjacency(), delta=1e-5).bound
    lifted, _ = lift_event(event, k)
    user = account(lifted, Adjacency(), delta=1e-5).bound
    assert user.epsilon >= row.epsilon_lower - 1e-9
    assert user.epsilon >= row.epsilon * (1 - 1e-6) - 1e-9
    if k == 1:
        assert user.epsilon == row.epsilon
