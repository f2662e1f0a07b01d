"""canonical: Poisson sampling at rate 1 is the sampled event itself; random allocation of
every step is that many runs of the step."""

from __future__ import annotations

import math

import mpmath as mp
import pytest

from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.event_trees import canonical
from dpledger.core.events import (
    ComposedEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    RandomAllocationEvent,
    SelfComposedEvent,
)


def test_rate_one_poisson_sampling_is_removed_at_every_depth() -> None:
    inner = SelfComposedEvent(PoissonSampledEvent(1, GaussianEvent(2.0)), 3)
    event = ComposedEvent((inner, PoissonSampledEvent(0.5, LaplaceEvent(1.0))))
    assert canonical(event) == ComposedEvent(
        (SelfComposedEvent(GaussianEvent(2.0), 3), PoissonSampledEvent(0.5, LaplaceEvent(1.0)))
    )


def test_other_rates_are_kept() -> None:
    event = PoissonSampledEvent(0.999, GaussianEvent(2.0))
    assert canonical(event) is event


@pytest.mark.parametrize("relation", ["add_remove", "replace_one"])
def test_rate_one_composition_is_bracketed_exactly(relation: str) -> None:
    """1e6 steps of sigma 2 at rate 1 (delta 1e-15): the exact Gaussian value, 128969.68 under
    add/remove, where the lower bound was 0 before."""
    adjacency = Adjacency(relation=relation)
    event = SelfComposedEvent(PoissonSampledEvent(1.0, GaussianEvent(2.0)), 10**6)
    bound = account(event, adjacency, delta=1e-15).bound
    mu = adjacency.sensitivity_factor * math.sqrt(10**6) / 2.0

    with mp.workdps(60):  # Balle-Wang's profile in the epsilon domain, at 60 digits
        m = mp.mpf(mu)
        exact = mp.findroot(
            lambda e: mp.ncdf(m / 2 - e / m) - mp.exp(e) * mp.ncdf(-m / 2 - e / m) - mp.mpf(1e-15),
            (m * m / 2, m * m / 2 + 20 * m),
            solver="bisect",
        )
    assert bound.epsilon_lower <= exact * (1 + 1e-9) and exact * (1 - 1e-9) <= bound.epsilon
    assert (bound.epsilon - bound.epsilon_lower) / exact < 1e-9


def test_allocation_of_every_step_is_that_many_runs() -> None:
    """k of k steps: the unit is in every step, so the epoch is k runs of the step's event;
    fewer than k steps per unit stay allocation."""
    step = ComposedEvent((GaussianEvent(1.0), PoissonSampledEvent(1, LaplaceEvent(2.0))))
    assert canonical(RandomAllocationEvent(3, step, 3)) == SelfComposedEvent(
        ComposedEvent((GaussianEvent(1.0), LaplaceEvent(2.0))), 3
    )
    kept = RandomAllocationEvent(3, GaussianEvent(1.0), 2)
    assert canonical(kept) is kept


@pytest.mark.parametrize("delta", [1e-5, 1e-25])
def test_allocation_of_every_step_is_bracketed_exactly(delta: float) -> None:
    """2 of 2 steps of a Gaussian: two releases, mu = sqrt(2) (the closed form, exact at any
    delta; the PLD route read infinity at 1e-25), under either relation."""
    for relation, mu in (("add_remove", math.sqrt(2)), ("replace_one", 2 * math.sqrt(2))):
        bound = account(
            RandomAllocationEvent(2, GaussianEvent(1.0), 2),
            Adjacency(relation=relation),
            delta=delta,
        ).bound
        mp.mp.dps = 60
        exact = mp.ncdf(-bound.epsilon / mu + mu / 2) - mp.exp(bound.epsilon) * mp.ncdf(
            -bound.epsilon / mu - mu / 2
        )
        assert float(exact) <= delta * (1 + 1e-9)
        assert bound.epsilon - bound.epsilon_lower <= 1e-9 * bound.epsilon
