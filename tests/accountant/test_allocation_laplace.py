"""Random allocation of Laplace steps (accountant/allocation_laplace.py): no-amplification upper
curve, max-of-step-outputs lower curve."""

from __future__ import annotations

import math

import pytest

from dpledger.accountant.allocation_laplace import (
    is_laplace_allocation,
    laplace_allocation_profiles,
)
from dpledger.accountant.base import DeltaBound, EpsilonBound
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import UnsupportedEventError
from dpledger.core.events import (
    GaussianEvent,
    LaplaceEvent,
    RandomAllocationEvent,
    SelfComposedEvent,
)
from dpledger.proofs_checks.no_amplification.check_no_amplification import (
    allocation_delta,
    laplace_delta,
)

ADD = Adjacency()


def test_only_one_laplace_release_per_step_is_this_kind() -> None:
    assert is_laplace_allocation(RandomAllocationEvent(10, LaplaceEvent(1.0), 2))
    assert not is_laplace_allocation(RandomAllocationEvent(10, GaussianEvent(1.0)))
    assert not is_laplace_allocation(
        RandomAllocationEvent(10, SelfComposedEvent(LaplaceEvent(1.0), 2))
    )
    with pytest.raises(UnsupportedEventError):
        laplace_allocation_profiles(
            RandomAllocationEvent(10, LaplaceEvent(1.0)), Adjacency(relation="replace_one")
        )


@pytest.mark.parametrize("epsilon", [0.0, 0.2, 0.5, 0.8])
def test_two_steps_bracket_the_exact_curve(epsilon: float) -> None:
    bound = account(RandomAllocationEvent(2, LaplaceEvent(1.0)), ADD, epsilon=epsilon).bound
    assert isinstance(bound, DeltaBound) and bound.method == "pld"
    exact = max(allocation_delta(epsilon, d) for d in ("remove", "add"))
    assert bound.delta_lower <= exact * (1 + 1e-4) and exact <= bound.delta
    assert bound.delta == pytest.approx(laplace_delta(epsilon), rel=1e-6)  # no amplification
    assert bound.delta_lower >= 0.98 * exact  # the max of the two outputs loses little


@pytest.mark.parametrize("steps", [3, 10, 30])
def test_all_steps_small_reveals_absence(steps: int) -> None:
    # add direction: every step output at most 0 has probability 2^-t without the record and
    # e^-1 times that with it (Laplace scale 1: its left tail is exactly e times heavier at 0
    # than at 1), so delta(eps) >= 2^-t (1 - e^(eps - 1)): at small delta the epoch costs
    # nearly one release, and the lower bound must see it
    epoch = RandomAllocationEvent(steps, LaplaceEvent(1.0))
    delta = 1e-3 * 2.0**-steps
    bound = account(epoch, ADD, delta=delta).bound
    assert isinstance(bound, EpsilonBound)
    attack = 1.0 + math.log1p(-delta / 2.0**-steps)  # where 2^-t (1 - e^(eps - 1)) = delta
    assert bound.epsilon_lower >= attack - 1e-3
    assert bound.epsilon_lower <= bound.epsilon <= 1.0


def test_k_of_t_is_bounded_by_k_releases() -> None:
    epoch = RandomAllocationEvent(10, LaplaceEvent(2.0), 2)
    bound = account(SelfComposedEvent(epoch, 5), ADD, delta=1e-6).bound
    releases = account(SelfComposedEvent(LaplaceEvent(2.0), 10), ADD, delta=1e-6).bound
    assert bound.method == "pld"
    assert bound.epsilon == pytest.approx(releases.epsilon, rel=1e-3)
    assert 0.5 * releases.epsilon < bound.epsilon_lower <= bound.epsilon


def test_replace_one_falls_back_to_the_releases() -> None:
    """The upper bound is one release's; the lower one the product event of values 1 and -1:
    every output at most -1 (2/b + log(1 - delta / m), m = 2^-10 e^(-9/b))."""
    replace = Adjacency(relation="replace_one")
    bound = account(RandomAllocationEvent(10, LaplaceEvent(2.0)), replace, delta=1e-6).bound
    release = account(LaplaceEvent(2.0), replace, delta=1e-6).bound
    assert bound.method == "closed_form (no amplification)"
    assert bound.epsilon == release.epsilon
    attack = 1.0 + math.log1p(-1e-6 * 2.0**10 * math.exp(9 / 2.0))
    assert bound.epsilon_lower == pytest.approx(attack, rel=1e-9)


@pytest.mark.parametrize("scale", [1e-3, 1.5e-3])
def test_huge_step_epsilon_is_capped_by_one_release(scale: float) -> None:
    """Steps of epsilon 1/scale = 1000 or 667: the composed grid cannot hold the losses (the
    upper bound read infinity), but one Laplace release bounds the epoch, and it is pure: the
    upper bound is at most its epsilon (rounded up), at least its epsilon at delta, and delta
    is 0 at its epsilon."""
    epoch = RandomAllocationEvent(7, LaplaceEvent(scale))
    bound = account(epoch, ADD, delta=1e-5).bound
    assert isinstance(bound, EpsilonBound)
    release = 1.0 / scale + 2.0 * math.log1p(-1e-5)  # one release: 1 - e^((eps - eps0) / 2)
    assert release - 1e-9 <= bound.epsilon <= (1.0 / scale) * (1 + 1e-9)
    assert bound.epsilon_lower <= bound.epsilon
    at_cap = account(epoch, ADD, epsilon=(1.0 / scale) * (1 + 1e-9)).bound
    assert isinstance(at_cap, DeltaBound) and at_cap.delta == 0.0


def test_gaussian_steps_are_never_pure() -> None:
    """An allocation of Gaussian steps has no pure cap (its curve underflows to 0 at the top of
    the grid, which is no bound): delta stays positive far out."""
    epoch = RandomAllocationEvent(7, GaussianEvent(0.5))
    far = account(epoch, ADD, epsilon=30.0).bound
    assert isinstance(far, DeltaBound)
    assert "pure_cap" not in far.details and far.delta > 0.0


def test_huge_step_epsilon_lower_bound_is_the_max_attack() -> None:
    """At epsilon 1/scale = 667 per step, the largest step output identifies the record's step:
    the lower bound reads eps0 - log t (it stopped near 92 while Q's far tail was lost to an
    absolute error on its log CDF)."""
    scale, steps = 1.5e-3, 7
    bound = account(RandomAllocationEvent(steps, LaplaceEvent(scale)), ADD, delta=1e-5).bound
    assert isinstance(bound, EpsilonBound)
    attack = 1.0 / scale - math.log(steps)
    assert attack - 1e-3 <= bound.epsilon_lower <= bound.epsilon
