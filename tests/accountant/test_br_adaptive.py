"""Exponential-mechanism releases at one epsilon in the default call: the bracket of their
optimal adaptive composition (``accountant/br_adaptive.py``) narrows the Rényi upper bound and
the non-adaptive lower bound, and stays between them."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.accountant.base import DeltaBound, EpsilonBound
from dpledger.accountant.br_adaptive import (
    MAX_SPREAD,
    adaptive_br_delta,
    adaptive_br_epsilon,
    spread_br_delta,
    spread_br_epsilon,
)
from dpledger.accountant.closed_form import ClosedFormAccountant
from dpledger.accountant.exp_mech_composition import br_composed_epsilon_lower
from dpledger.accountant.rdp import RDPAccountant
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    ComposedEvent,
    ExponentialMechanismEvent,
    PureDPEvent,
    SelfComposedEvent,
)

EM = ExponentialMechanismEvent


DOC = Path(__file__).resolve().parents[2] / "docs" / "accountants.md"


@pytest.mark.parametrize(
    ("eps0", "count", "old_lower", "old_upper", "shown"),
    # the default call's bracket before (non-adaptive optimum below, Rényi curve above), and
    # the one docs/accountants.md shows
    [
        (0.1, 100, 1.98863, 2.15173, "[1.99294, 1.99316]"),
        (1.0, 10, 7.10497, 7.24473, "[7.12946, 7.12952]"),
    ],
)
def test_one_epsilon_bracket_within_one_percent_inside_the_old_one(
    eps0: float, count: int, old_lower: float, old_upper: float, shown: str
) -> None:
    bound = account(SelfComposedEvent(EM(eps0), count), delta=1e-5).bound
    assert isinstance(bound, EpsilonBound)
    assert bound.method == "closed_form"
    assert old_lower <= bound.epsilon_lower <= bound.epsilon <= old_upper
    assert bound.epsilon <= 1.01 * bound.epsilon_lower
    assert f"[{bound.epsilon_lower:.5f}, {bound.epsilon:.5f}]" == shown
    assert shown in DOC.read_text(encoding="utf-8")


def test_delta_bracket_agrees_with_the_epsilon_bracket() -> None:
    lo, hi = adaptive_br_epsilon(1e-5, 0.1, 100)  # type: ignore[misc]
    at_hi = adaptive_br_delta(hi, 0.1, 100)
    at_lo = adaptive_br_delta(lo * 0.999, 0.1, 100)
    assert at_hi is not None and at_lo is not None
    assert at_hi[0] <= 1e-5 * (1 + 1e-9)  # the curve is at most delta at the upper epsilon
    assert at_lo[1] >= 1e-5  # and above it just below the lower one
    bound = account(SelfComposedEvent(EM(0.1), 100), epsilon=2.0).bound
    assert isinstance(bound, DeltaBound)
    assert bound.delta <= 1.1 * bound.delta_lower


def test_distinct_epsilons_and_other_events_keep_the_other_bounds() -> None:
    for event in (
        ComposedEvent([EM(0.1), EM(0.2)]),
        ComposedEvent([SelfComposedEvent(EM(0.1), 5), PureDPEvent(0.1)]),
        EM(0.1),
    ):
        acc = ClosedFormAccountant(Adjacency())
        acc.compose(event)
        assert "adaptive_bounded_range" not in acc.get_epsilon(1e-5).details


def test_out_of_range_and_over_budget_give_no_bracket() -> None:
    assert adaptive_br_epsilon(1e-5, 0.1, 1) is None
    assert adaptive_br_epsilon(1e-5, 50.0, 3) is None
    assert adaptive_br_epsilon(1e-5, 3.0, 5000) is None  # beyond the work budget
    assert adaptive_br_delta(-0.1, 0.1, 10) is None
    assert adaptive_br_delta(1.0, 0.1, 10) is None  # at count * eps0 the curve is 0


def test_tiny_and_large_deltas() -> None:
    lo, hi = adaptive_br_epsilon(1e-300, 0.1, 100)  # type: ignore[misc]
    assert 0.0 < lo <= hi <= 10.0 * (1 + 1e-12)
    assert adaptive_br_epsilon(0.5, 0.1, 100) == (0.0, 0.0)


def test_random_settings_are_consistent_with_the_independent_bounds() -> None:
    """Adversarial consistency over random settings: the bracket lies between the attained
    non-adaptive optimum and the Rényi upper bound, and its delta bracket agrees with it."""
    rng = random.Random(11)
    for _ in range(8):
        eps0, count = rng.uniform(0.05, 3.0), rng.randint(2, 40)
        delta = 10 ** rng.uniform(-12, -2)
        found = adaptive_br_epsilon(delta, eps0, count)
        if found is None:
            continue
        lo, hi = found
        rdp = RDPAccountant(Adjacency())
        rdp.compose(SelfComposedEvent(EM(eps0), count))
        assert lo <= rdp.get_epsilon(delta).epsilon * (1 + 1e-12)
        assert br_composed_epsilon_lower(delta, eps0, count) <= hi * (1 + 1e-12)
        at_hi, at_lo = adaptive_br_delta(hi, eps0, count), adaptive_br_delta(lo, eps0, count)
        if at_hi is not None:
            assert at_hi[0] <= delta  # the curve is at most delta at the upper epsilon
        if at_lo is not None and lo > 0.0:
            assert at_lo[1] >= delta  # and at least delta at the lower one


def test_distinct_epsilons_within_the_spread_are_bracketed_within_one_percent() -> None:
    """Releases at distinct epsilons within MAX_SPREAD, in any order: the programme at the
    smallest below and at the largest above, inside the Rényi upper and the non-adaptive
    optimum at the smallest epsilon."""
    event = ComposedEvent([EM(0.5 * (1 + i * 1e-4)) for i in range(20)])
    bound = account(event, delta=1e-5).bound
    assert isinstance(bound, EpsilonBound)
    assert bound.method in ("closed_form", "pld")  # PLD composes the releases in blocks
    assert bound.epsilon <= 1.01 * bound.epsilon_lower
    rdp = RDPAccountant(Adjacency())
    rdp.compose(event)
    assert bound.epsilon <= rdp.get_epsilon(1e-5).epsilon
    assert br_composed_epsilon_lower(1e-5, 0.5, 20) <= bound.epsilon_lower
    lo_min, _ = adaptive_br_epsilon(1e-5, 0.5, 20, upper=False)  # type: ignore[misc]
    _, hi_max = adaptive_br_epsilon(1e-5, 0.5 * (1 + 19e-4), 20, lower=False)  # type: ignore[misc]
    assert (bound.epsilon_lower, bound.epsilon) == (lo_min, hi_max)
    at = account(event, epsilon=bound.epsilon).bound
    assert isinstance(at, DeltaBound)
    assert at.delta_lower <= 1e-5  # the curve is at most delta at the upper epsilon


def test_spread_beyond_the_limit_or_one_release_is_not_bracketed() -> None:
    assert spread_br_epsilon(1e-5, 0.1, 0.1 * MAX_SPREAD * 1.001, 10) is None
    assert spread_br_delta(0.5, 0.1, 0.1 * MAX_SPREAD * 1.001, 10) is None
    assert spread_br_epsilon(1e-5, 0.1, 0.101, 1) is None
    assert spread_br_epsilon(1e-5, 0.1, 0.1, 10) == adaptive_br_epsilon(1e-5, 0.1, 10)


@settings(max_examples=5, deadline=None)
@given(
    eps0=st.floats(0.05, 2.0),
    spread=st.floats(0.0, 0.05),
    count=st.integers(2, 8),
    log_delta=st.floats(-12.0, -2.0),
)
def test_spread_bracket_lies_between_the_one_epsilon_brackets(
    eps0: float, spread: float, count: int, log_delta: float
) -> None:
    """Adversarial: at distinct epsilons in [eps0, eps0 (1 + spread)] the default call's upper
    is never below the one-epsilon lower at the smallest nor above the one-epsilon upper at the
    largest, its lower never above the Rényi upper bound."""
    delta = 10.0**log_delta
    top = eps0 * (1 + spread)
    rng = random.Random(count)
    epsilons = [eps0, top] + [rng.uniform(eps0, top) for _ in range(count - 2)]
    event = ComposedEvent([EM(e) for e in epsilons])
    acc = ClosedFormAccountant(Adjacency())
    acc.compose(event)
    bound = acc.get_epsilon(delta)
    at_min, at_max = adaptive_br_epsilon(delta, eps0, count), adaptive_br_epsilon(delta, top, count)
    if at_min is None or at_max is None:
        return
    assert at_min[0] <= bound.epsilon <= at_max[1]
    # at distinct epsilons the lower side is the programme's alone (its secant through 1)
    one_sided = adaptive_br_epsilon(delta, eps0, count, upper=False) if top > eps0 else at_min
    assert one_sided is not None and one_sided[0] <= at_min[0]
    assert one_sided[0] <= bound.epsilon_lower <= bound.epsilon
    rdp = RDPAccountant(Adjacency())
    rdp.compose(event)
    assert bound.epsilon_lower <= rdp.get_epsilon(delta).epsilon * (1 + 1e-12)


def test_a_thousand_releases_are_bracketed_within_one_percent() -> None:
    """1000 releases at one epsilon fit the work budget: the bracket narrows the Rényi upper
    bound (9 % above the non-adaptive optimum) to within 1 %, between the two."""
    event = SelfComposedEvent(EM(0.01527), 1000)
    bound = account(event, delta=1e-5).bound
    assert isinstance(bound, EpsilonBound)
    assert bound.method in ("closed_form", "pld")  # PLD composes the releases in blocks
    assert bound.epsilon <= 1.01 * bound.epsilon_lower
    rdp = RDPAccountant(Adjacency())
    rdp.compose(event)
    assert bound.epsilon <= rdp.get_epsilon(1e-5).epsilon / 1.08
    assert br_composed_epsilon_lower(1e-5, 0.01527, 1000) <= bound.epsilon * (1 + 1e-12)


def test_one_sided_programmes_are_the_trivial_bound_on_their_other_side() -> None:
    both = adaptive_br_epsilon(1e-5, 0.3, 12)
    lower_only = adaptive_br_epsilon(1e-5, 0.3, 12, upper=False)
    upper_only = adaptive_br_epsilon(1e-5, 0.3, 12, lower=False)
    assert both is not None and lower_only is not None and upper_only is not None
    assert upper_only == (0.0, both[1])
    # the lower side's secant then runs through the trivial upper value 1: never above
    assert lower_only[1] == float("inf") and 0.0 < lower_only[0] <= both[0]
    at = adaptive_br_delta(both[1], 0.3, 12, lower=False)
    assert at is not None and at[0] == 0.0 and at[1] <= 1e-5 * (1 + 1e-9)


def test_upper_bound_never_exceeds_basic_composition() -> None:
    for eps0, count in ((0.1, 100), (0.5, 7)):
        found = adaptive_br_epsilon(1e-300, eps0, count)
        assert found is not None and found[1] <= count * eps0 * (1 + 1e-12)
