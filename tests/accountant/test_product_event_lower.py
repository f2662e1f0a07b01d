"""Lower bounds from one product event of constant loss (accountant/product_event_lower.py)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.accountant.base import DeltaBound, EpsilonBound
from dpledger.accountant.product_event_lower import (
    constant_loss_events,
    product_epsilon_lower,
    raise_product_lower,
)
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import BackendInconsistencyError
from dpledger.core.events import (
    ComposedEvent,
    Event,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PureDPEvent,
    RandomAllocationEvent,
    RandomizedResponseEvent,
    SelfComposedEvent,
)

ADD = Adjacency()
REPLACE = Adjacency(relation="replace_one")


def test_epoch_of_epsilon_1000_steps_is_bracketed_from_both_sides() -> None:
    """Steps of epsilon 1000: the loss grid cannot hold them (the lower bound read 0); the
    product event (every output at most 0) gives 1000 + log(1 - 2^7 delta)."""
    bound = account(RandomAllocationEvent(7, LaplaceEvent(1e-3)), ADD, delta=1e-5).bound
    assert isinstance(bound, EpsilonBound)
    attack = 1000.0 + math.log1p(-(2.0**7) * 1e-5)
    assert bound.epsilon_lower == pytest.approx(attack, rel=1e-9)
    assert bound.epsilon_lower <= bound.epsilon <= 1000.0 * (1 + 1e-9)
    assert bound.details["lower"].startswith("product_event")


def test_delta_lower_of_an_epoch_near_its_cap() -> None:
    """delta(999.99) of the same epoch is at least 2^-7 (1 - e^-0.01)."""
    bound = account(RandomAllocationEvent(7, LaplaceEvent(1e-3)), ADD, epsilon=999.99).bound
    assert isinstance(bound, DeltaBound)
    # the margin on L (1e-12 of 1000) against a gap L - eps of 0.01: 1e-7 relative
    assert bound.delta_lower == pytest.approx(2.0**-7 * -math.expm1(-0.01), rel=1e-6)
    assert bound.delta_lower <= bound.delta


def test_composed_epochs_sit_at_the_basic_composition_cap() -> None:
    """Two epochs (1/b = 10 and 100, 12 steps in all): [110 + log(1 - 2^12 delta), 110]; the
    max-of-outputs lower bound gave 106.44."""
    ledger = ComposedEvent(
        [RandomAllocationEvent(7, LaplaceEvent(0.1)), RandomAllocationEvent(5, LaplaceEvent(0.01))]
    )
    bound = account(ledger, ADD, delta=1e-5).bound
    assert isinstance(bound, EpsilonBound)
    attack = 110.0 + math.log1p(-(2.0**12) * 1e-5)
    assert bound.epsilon_lower == pytest.approx(attack, rel=1e-9)
    assert bound.epsilon <= 110.0 * (1 + 1e-9)
    assert (bound.epsilon - bound.epsilon_lower) / bound.epsilon < 5e-4


def test_parts_are_the_leaves_with_a_constant_loss_event() -> None:
    """Allocations of Laplace steps and Laplace releases count; pure releases (which group
    privacy also makes, as bounds), Gaussian and sampled leaves do not."""
    ledger = ComposedEvent(
        [
            SelfComposedEvent(RandomAllocationEvent(4, LaplaceEvent(0.5), 2), 3),
            LaplaceEvent(2.0),
            PureDPEvent(0.3),
            ExponentialMechanismEvent(1.0),
            RandomizedResponseEvent(0.2, 2),
            GaussianEvent(1.0),
            PoissonSampledEvent(0.1, LaplaceEvent(1.0)),
        ]
    )
    log2 = math.log(2.0)
    assert constant_loss_events(ledger) == [(4.0, -4 * log2, 3), (0.5, -log2, 1)]
    # a user's 10 rows of randomized response at 1 lifted to PureDPEvent(10) beside a Laplace
    # release at 1000 read 1009.98 at delta 0.01, above the pair's upper bound 1009.55
    lifted = ComposedEvent([LaplaceEvent(1e-3), PureDPEvent(10.0)])
    rows = ComposedEvent([LaplaceEvent(1e-3), SelfComposedEvent(RandomizedResponseEvent(1.0), 10)])
    truth_at_most = account(rows, ADD, delta=0.01).bound.epsilon  # type: ignore[union-attr]
    assert product_epsilon_lower(lifted, ADD, 0.01) <= truth_at_most


def test_other_ledgers_are_left_alone() -> None:
    """A Gaussian ledger has no product event: its bound is unchanged."""
    assert product_epsilon_lower(SelfComposedEvent(GaussianEvent(1.0), 10), ADD, 1e-5) == 0.0
    bound = EpsilonBound(2.0, 1.0, 1e-5, "pld")
    assert raise_product_lower(bound, SelfComposedEvent(GaussianEvent(1.0), 10), ADD) is bound


def test_tight_brackets_are_left_alone_and_wrong_uppers_are_refused() -> None:
    epoch = RandomAllocationEvent(7, LaplaceEvent(0.1))
    tight = EpsilonBound(10.0, 9.99999, 1e-5, "pld")
    assert raise_product_lower(tight, epoch, ADD) is tight
    wrong = EpsilonBound(9.0, 0.0, 1e-5, "pld")  # the epoch costs at least 9.9987
    with pytest.raises(BackendInconsistencyError, match="product-event lower bound"):
        raise_product_lower(wrong, epoch, ADD)
    wrong_delta = DeltaBound(1e-6, 0.0, 5.0, "pld")  # delta(5) >= 2^-7 (1 - e^-5)
    with pytest.raises(BackendInconsistencyError):
        raise_product_lower(wrong_delta, epoch, ADD)


_leaf = st.one_of(
    st.builds(
        lambda t, k, b: RandomAllocationEvent(t, LaplaceEvent(b), min(k, t)),
        st.integers(1, 8),
        st.integers(1, 3),
        st.floats(0.05, 5.0),
    ),
    st.builds(LaplaceEvent, st.floats(0.05, 5.0)),
    st.builds(PureDPEvent, st.floats(0.01, 3.0)),
    st.builds(GaussianEvent, st.floats(0.5, 3.0)),
)


@settings(max_examples=25, deadline=None)
@given(
    leaves=st.lists(st.tuples(_leaf, st.integers(1, 4)), min_size=1, max_size=3),
    replace_one=st.booleans(),
    log_delta=st.floats(-12.0, -2.0),
    epsilon=st.floats(0.1, 30.0),
)
def test_lower_bounds_never_pass_the_certified_upper_bounds(
    leaves: list[tuple[Event, int]], replace_one: bool, log_delta: float, epsilon: float
) -> None:
    """Random ledgers of allocations, Laplace, pure and Gaussian releases, both adjacencies,
    both queries: the accountant reports a bracket (an upper bound below the product event's
    lower one would raise), its lower end at least the product event's."""
    ledger = ComposedEvent([SelfComposedEvent(leaf, n) for leaf, n in leaves])
    adjacency = REPLACE if replace_one else ADD
    delta = 10.0**log_delta
    bound = account(ledger, adjacency, delta=delta).bound
    assert isinstance(bound, EpsilonBound)
    assert bound.epsilon_lower <= bound.epsilon
    if bound.epsilon > 1.0001 * bound.epsilon_lower:
        # (the order of the leaves, hence of the sums, may differ between calls: a few ulps)
        assert bound.epsilon_lower >= product_epsilon_lower(ledger, adjacency, delta) * (1 - 1e-12)
    at = account(ledger, adjacency, epsilon=epsilon).bound
    assert isinstance(at, DeltaBound)
    assert at.delta_lower <= at.delta


def test_ledgers_with_stand_in_events_get_no_lower_bound() -> None:
    """A partition selection is accounted by Laplace releases and a (0, q) table that dominate
    it, though it releases only keys: neither lower bound may read those releases (the
    pure-plus-one bound read 0.29996 for the selection beside one 0.1-DP release)."""
    from dpledger.core.events import PartitionSelectionEvent

    for ledger in (
        PartitionSelectionEvent("laplace", 1.0, 1e-5, 5),
        ComposedEvent([PartitionSelectionEvent("laplace", 1.0, 1e-5, 5), PureDPEvent(0.1)]),
        ComposedEvent([PartitionSelectionEvent("gaussian", 1.0, 1e-5, 5), PureDPEvent(0.1)]),
    ):
        bound = account(ledger, ADD, delta=1e-5).bound
        assert isinstance(bound, EpsilonBound)
        assert bound.epsilon_lower == 0.0
        assert "lower" not in bound.details


def test_parameters_beyond_floating_point_give_brackets_not_errors() -> None:
    """Losses whose ratio to -log m underflows, sums that overflow: a bracket, never an error,
    and never a lower end of infinity where the truth is finite."""
    from dpledger.core.events import ApproxDPEvent

    assert isinstance(account(PureDPEvent(1e24), ADD, epsilon=1.0).bound, DeltaBound)
    assert isinstance(account(LaplaceEvent(5e-309), ADD, epsilon=1.0).bound, DeltaBound)
    ledger = ComposedEvent([LaplaceEvent(1e-3), ExponentialMechanismEvent(1e300)])
    assert isinstance(account(ledger, ADD, epsilon=999.0).bound, DeltaBound)
    huge = ComposedEvent([PureDPEvent(1.7e308), PureDPEvent(1.6e308)])
    bound = account(huge, ADD, delta=1e-5).bound
    assert isinstance(bound, EpsilonBound) and math.isfinite(bound.epsilon_lower)
    # two steps of epsilon 1538 each (k/scale beyond e^709): the pure curve is built from e^-eps
    epoch = RandomAllocationEvent(4, LaplaceEvent(0.0013), 2)
    at = account(epoch, ADD, delta=1e-5).bound
    assert isinstance(at, EpsilonBound)
    assert 2 / 0.0013 + math.log1p(-(2.0**4) * 1e-5) - 1e-6 <= at.epsilon_lower <= at.epsilon
    assert account(ApproxDPEvent(800.0, 1e-9), ADD, delta=1e-5).bound.epsilon >= 799.0  # type: ignore[union-attr]
