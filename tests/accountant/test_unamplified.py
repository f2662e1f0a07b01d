"""Epochs bounded without amplification where PLD declines (accountant/unamplified.py and the
fallback of accountant/select.py)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.accountant.select import account
from dpledger.accountant.unamplified import epoch_cost, split_epochs
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import UnsupportedEventError
from dpledger.core.events import (
    ComposedEvent,
    GaussianEvent,
    LaplaceEvent,
    PureDPEvent,
    RandomAllocationEvent,
    RandomizedResponseEvent,
    SelfComposedEvent,
    ShuffledBatchesEvent,
)

ADD = Adjacency()
REPLACE = Adjacency(relation="replace_one")


def test_what_an_epoch_costs_without_amplification() -> None:
    step = LaplaceEvent(2.0)
    assert epoch_cost(RandomAllocationEvent(10, step), ADD) == step
    assert epoch_cost(RandomAllocationEvent(10, step, 3), REPLACE) == SelfComposedEvent(step, 3)
    assert epoch_cost(ShuffledBatchesEvent(1000, 10, step), REPLACE) == step
    # under add/remove the other records' batches are not fixed: no bound is claimed
    assert epoch_cost(ShuffledBatchesEvent(1000, 10, step), ADD) is None
    assert epoch_cost(step, ADD) is None


def test_split_keeps_what_it_is_told_and_the_rest_is_a_marginal() -> None:
    gauss_epoch = RandomAllocationEvent(100, GaussianEvent(1.0))
    laplace_epoch = RandomAllocationEvent(10, LaplaceEvent(1.0), 2)
    event = ComposedEvent([gauss_epoch, SelfComposedEvent(laplace_epoch, 3), PureDPEvent(0.1)])
    parts = split_epochs(event, ADD, lambda leaf: leaf == gauss_epoch)
    assert parts is not None
    upper, rest, replaced = parts
    assert replaced == 1
    assert rest == ComposedEvent([gauss_epoch, PureDPEvent(0.1)])
    assert set(upper.children()) == {
        gauss_epoch,
        SelfComposedEvent(SelfComposedEvent(LaplaceEvent(1.0), 2), 3),
        PureDPEvent(0.1),
    }
    assert split_epochs(PureDPEvent(0.1), ADD, lambda leaf: False) is None
    only = split_epochs(laplace_epoch, ADD, lambda leaf: False)
    assert only is not None and only[1] is None


@pytest.mark.parametrize("sigma", [2e4, 5e-5])
def test_an_allocation_beyond_the_pld_grid_is_bounded_by_its_release(sigma: float) -> None:
    # before: refused by every backend (PLD: noise out of range; the others: no analysis)
    epoch = RandomAllocationEvent(10, GaussianEvent(sigma))
    bound = account(epoch, ADD, delta=1e-5).bound
    release = account(GaussianEvent(sigma), ADD, delta=1e-5).bound
    assert bound.method == "closed_form (no amplification)"
    assert bound.epsilon == release.epsilon and bound.epsilon_lower == 0.0
    assert "1 distinct epoch bounded" in bound.details["no_amplification"]


def test_a_pure_dp_allocation_beside_a_gaussian_one_keeps_the_gaussian_amplification() -> None:
    gauss_epoch = RandomAllocationEvent(100, GaussianEvent(1.0))
    event = ComposedEvent([gauss_epoch, RandomAllocationEvent(10, PureDPEvent(0.25))])
    bound = account(event, ADD, delta=1e-5).bound
    replaced = account(ComposedEvent([gauss_epoch, PureDPEvent(0.25)]), ADD, delta=1e-5).bound
    alone = account(gauss_epoch, ADD, delta=1e-5).bound
    assert bound.method == "pld (no amplification)"
    assert bound.epsilon == replaced.epsilon
    # the lower bound is the Gaussian allocation's own (a marginal of the outputs)
    assert alone.epsilon_lower <= bound.epsilon_lower <= alone.epsilon
    # every allocation unamplified costs far more: the Gaussian one kept its amplification
    unamplified = account(ComposedEvent([GaussianEvent(1.0), PureDPEvent(0.25)]), ADD, delta=1e-5)
    assert bound.epsilon < 0.6 * unamplified.bound.epsilon


def test_delta_queries_fall_back_too() -> None:
    epoch = SelfComposedEvent(RandomAllocationEvent(10, PureDPEvent(0.5), 2), 5)
    bound = account(epoch, ADD, epsilon=3.0).bound
    release = account(SelfComposedEvent(PureDPEvent(0.5), 10), ADD, epsilon=3.0).bound
    assert "no amplification" in bound.method
    assert bound.delta == release.delta and bound.delta_lower == 0.0


def test_a_shuffled_epoch_under_add_remove_stays_refused_in_one_line() -> None:
    with pytest.raises(UnsupportedEventError) as info:
        account(ShuffledBatchesEvent(1000, 10, GaussianEvent(1.0)), ADD, delta=1e-5)
    assert "\n" not in str(info.value) and "no amplification" in str(info.value)


def test_named_backends_get_no_fallback() -> None:
    with pytest.raises(UnsupportedEventError):
        account(RandomAllocationEvent(10, PureDPEvent(1.0)), ADD, delta=1e-5, backends=["pld"])


@settings(max_examples=15, deadline=None)
@given(
    steps=st.integers(2, 400),
    selected=st.integers(1, 3),
    sigma=st.floats(0.5, 5.0),
    epochs=st.integers(1, 50),
    relation=st.sampled_from(["add_remove", "replace_one"]),
)
def test_the_replacement_is_never_below_the_epochs_certified_lower_bound(
    steps: int, selected: int, sigma: float, epochs: int, relation: str
) -> None:
    # a replacement that forgot a step or the replace-one factor would fall below the lower
    # bound PLD certifies for the amplified epochs (add/remove: the allocation's own
    # analysis; replace-one: the shuffled epochs' max-of-batch-sums attack)
    adjacency = Adjacency(relation=relation)
    if relation == "add_remove":
        epoch = RandomAllocationEvent(steps, GaussianEvent(sigma), min(selected, steps - 1))
    else:
        epoch = ShuffledBatchesEvent(steps * 10, 10, GaussianEvent(sigma))
    event = SelfComposedEvent(epoch, epochs)
    parts = split_epochs(event, adjacency, lambda leaf: False)
    assert parts is not None
    upper = account(parts[0], adjacency, delta=1e-6).bound
    amplified = account(event, adjacency, delta=1e-6).bound
    assert math.isfinite(upper.epsilon)
    assert upper.epsilon >= amplified.epsilon_lower


def test_epochs_bounded_below_by_nothing_are_replaced_before_the_others() -> None:
    # beyond 256 distinct leaves, shuffled randomized-response epochs are refused by PLD (they
    # are not grouped); replacing them by their releases loses nothing (PLD bounds them below
    # by nothing), so the shuffled Gaussian epochs keep their max-of-batch-sums lower bound
    rr = [
        ShuffledBatchesEvent(1000 + i, 10, RandomizedResponseEvent(0.01 + 1e-5 * i, 3))
        for i in range(260)
    ]
    gauss = [ShuffledBatchesEvent(200 + 10 * i, 10, GaussianEvent(2.0)) for i in range(3)]
    bound = account(ComposedEvent(rr + gauss), REPLACE, delta=1e-5).bound
    alone = account(ComposedEvent(gauss), REPLACE, delta=1e-5).bound
    assert bound.method == "pld (no amplification)"
    assert bound.epsilon_lower >= alone.epsilon_lower > 0.0
    releases = ComposedEvent([e.event for e in rr + gauss])
    assert bound.epsilon <= account(releases, REPLACE, delta=1e-5).bound.epsilon * (1 + 1e-9)
