"""Which compositions an epsilon query makes: the passes' goals and the split's order."""

from __future__ import annotations

import pytest

from dpledger.accountant.pld import ADAPTIVE_START_POINTS, PASS_TARGET, PLDAccountant
from dpledger.accountant.pld_epsilon import BRACKET_GOAL
from dpledger.core.events import GaussianEvent, PoissonSampledEvent, SelfComposedEvent


def _dp_sgd(q: float, steps: int) -> PLDAccountant:
    acc = PLDAccountant()
    acc.compose(SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(1.0)), steps))
    return acc


def test_a_coarse_pass_aims_at_the_pass_target_and_a_finer_one_at_the_goal() -> None:
    # q = 1e-4, 1e5 steps, delta = 1e-10: the coarse pass brackets within 0.82 %, so a finer
    # pass is made, which aims at BRACKET_GOAL; the search's goal is restored afterwards
    acc = _dp_sgd(1e-4, 100_000)
    bound = acc.get_epsilon(1e-10)
    points = {points for (name, _tilt, points, _kind) in acc._states if name == "remove"}
    assert points == {ADAPTIVE_START_POINTS, 2 * ADAPTIVE_START_POINTS}
    assert acc._epsilons.goal == BRACKET_GOAL
    assert bound.epsilon - bound.epsilon_lower <= PASS_TARGET * bound.epsilon
    assert bound.epsilon <= bound.epsilon_lower * BRACKET_GOAL
    # the bracket made before the coarse pass had a goal of its own; tighter than
    # dp-accounting's PLD at h = 1e-4 (0.246894)
    assert bound.epsilon_lower == pytest.approx(0.2349578473813532, rel=1e-9)
    assert bound.epsilon == pytest.approx(0.23551425823211777, rel=1e-9)
    assert bound.epsilon <= 0.246894


def test_a_far_plain_lower_bound_makes_the_split_before_gentler_tilts() -> None:
    # q = 1e-5, 1e4 steps, delta = 1e-15: the plain tilted lower bound is 4x below the upper
    # (one heavy step carries delta); the split compositions come first, and a gentler tilt
    # that does not raise their lower bound ends the try
    acc = _dp_sgd(1e-5, 10_000)
    bound = acc.get_epsilon(1e-15)
    coarse = [
        (tilt, kind)
        for (name, tilt, points, kind) in acc._states
        if name == "remove" and points == ADAPTIVE_START_POINTS
    ]
    first_split = next(i for i, (_, kind) in enumerate(coarse) if kind.startswith("split"))
    main = coarse[0][0]
    gentler = [i for i, (tilt, kind) in enumerate(coarse) if kind == "dominated" and tilt < main]
    assert gentler and min(gentler) > first_split and len(gentler) == 1
    # the bracket is the one made before the reordering
    assert bound.epsilon_lower == pytest.approx(0.026060033434236993, rel=1e-9)
    assert bound.epsilon == pytest.approx(0.026092254739366966, rel=1e-9)
