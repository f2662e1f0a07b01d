"""The closed form's basic-composition cap of Laplace leaves: sensitivity over noise summed
exactly. A noise multiplier of fl(1/3) gives an epsilon 3 + 3.3e-16 that rounds to 3.0; two
such releases exceed 6 with probability 1/4, so delta(6) >= (1 - e^{-(2/b - 6)}) / 4 > 0, where
the cap of the rounded epsilons read delta 0 at epsilon 6 and epsilon 6.0 at delta 5e-17."""

from __future__ import annotations

from fractions import Fraction

import mpmath as mp
import pytest

from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import ComposedEvent, LaplaceEvent, PureDPEvent, SelfComposedEvent

B = 1.0 / 3.0


def _two_far_side(eps: float, factor: int = 1) -> mp.mpf:
    """A lower bound of delta(eps) of two Laplace releases of scale B: both on the far side
    (probability 1/4), where the loss is 2 factor / B exactly."""
    with mp.workdps(60):
        ratio = Fraction(1) / Fraction(B)
        loss = 2 * mp.mpf(factor) * mp.mpf(ratio.numerator) / ratio.denominator
        return (1 - mp.exp(mp.mpf(eps) - loss)) / 4


@pytest.mark.parametrize(("relation", "factor"), [("add_remove", 1), ("replace_one", 2)])
def test_two_laplace_releases_just_above_their_rounded_sum(relation: str, factor: int) -> None:
    adjacency = Adjacency(relation=relation)
    event = SelfComposedEvent(LaplaceEvent(B), 2)
    eps = 6.0 * factor
    truth_below = _two_far_side(eps, factor)
    assert truth_below > 0
    bound = account(event, adjacency, epsilon=eps).bound
    assert bound.delta >= truth_below
    assert bound.delta_lower <= bound.delta


def test_the_epsilon_at_a_delta_below_that_mass_exceeds_the_rounded_sum() -> None:
    bound = account(SelfComposedEvent(LaplaceEvent(B), 2), delta=5e-17).bound
    assert _two_far_side(6.0) > 5e-17
    assert bound.epsilon > 6.0


def test_a_laplace_beside_a_pure_release_is_capped_exactly() -> None:
    # epsilons 3 + 3.3e-16 and 1: at epsilon 4 the Laplace's far side with the pure release's
    # worst output leaves a positive delta; the cap of the rounded sum read 0
    bound = account(ComposedEvent([LaplaceEvent(B), PureDPEvent(1.0)]), epsilon=4.0).bound
    assert bound.delta > 0
