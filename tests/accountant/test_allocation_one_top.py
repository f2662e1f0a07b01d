"""One large output resolved in random allocation's lower bound (allocation_one_top.py)."""

from __future__ import annotations

from dpledger.accountant.allocation_one_top import MIN_TOP_STEPS, one_top_matters
from dpledger.accountant.base import EpsilonBound
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import GaussianEvent, RandomAllocationEvent, SelfComposedEvent


def test_made_only_where_mass_lies_above_the_top_edge() -> None:
    assert one_top_matters(1 / 0.7, 10_000)  # about 1e-2 above the edge
    assert one_top_matters(1.0, 1000)  # about 2.7e-9
    assert not one_top_matters(1.0, 300)  # about 6e-11
    assert not one_top_matters(1 / 0.6, MIN_TOP_STEPS - 1)  # few steps: the max resolves it


def test_many_steps_little_noise_bracket_narrows() -> None:
    """10,000 steps of noise 0.7 at delta 1e-5: the lower end was 0.0797 (27 % below the upper
    bound 0.10103); Poisson sampling at rate 1e-4 gives 0.0997 for comparison."""
    bound = account(RandomAllocationEvent(10_000, GaussianEvent(0.7)), Adjacency(), delta=1e-5)
    b = bound.bound
    assert isinstance(b, EpsilonBound)
    assert 0.094 < b.epsilon_lower <= b.epsilon < 0.1011
    assert (b.epsilon - b.epsilon_lower) / b.epsilon < 0.07


def test_ten_epochs_bracket_within_one_percent() -> None:
    """Ten epochs of 1000 steps at noise 0.8: [0.75045, 0.76202] (1.5 %) before, now within 1 %."""
    epochs = SelfComposedEvent(RandomAllocationEvent(1000, GaussianEvent(0.8)), 10)
    b = account(epochs, Adjacency(), delta=1e-5).bound
    assert isinstance(b, EpsilonBound)
    assert b.epsilon_lower <= b.epsilon < 0.7621
    assert (b.epsilon - b.epsilon_lower) / b.epsilon < 0.01


def test_lattice_too_coarse_for_cells_is_left_alone() -> None:
    """Where the sum's lattice step leaves no matched cell (the cells end at -infinity) the
    one-top pair is not made: building it failed, and the epoch fell back to its release
    without amplification (1-of-100,000 at noise 0.7: 6.65 instead of 0.0400)."""
    assert not one_top_matters(4.0, 1000)
    assert not one_top_matters(1 / 0.7, 100_000)
    for steps, sigma, before in [(100_000, 0.7, 0.04), (10_000, 0.5, 1.1638), (100, 0.25, 19.778)]:
        epoch = RandomAllocationEvent(steps, GaussianEvent(sigma))
        b = account(epoch, Adjacency(), delta=1e-5).bound
        assert isinstance(b, EpsilonBound) and b.method == "pld"
        assert b.epsilon_lower <= b.epsilon <= before
