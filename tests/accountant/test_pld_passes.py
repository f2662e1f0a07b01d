"""Which compositions an epsilon query makes: the coarse pass's target and the split's order."""

from __future__ import annotations

import pytest

from dpledger.accountant.pld import ADAPTIVE_START_POINTS, PASS_TARGET, PLDAccountant
from dpledger.accountant.pld_epsilon import BRACKET_TARGET
from dpledger.core.events import GaussianEvent, PoissonSampledEvent, SelfComposedEvent


def _dp_sgd(q: float, steps: int) -> PLDAccountant:
    acc = PLDAccountant()
    acc.compose(SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(1.0)), steps))
    return acc


def test_a_coarse_bracket_within_the_pass_target_ends_the_query() -> None:
    # q = 1e-4, 1e5 steps, delta = 1e-10: the coarse pass brackets within 0.83 %, above the
    # 0.8 % target, below PASS_TARGET; a finer pass (twice the work) is not made
    assert BRACKET_TARGET < PASS_TARGET < 0.01
    acc = _dp_sgd(1e-4, 100_000)
    bound = acc.get_epsilon(1e-10)
    made = [(points, kind) for (name, _tilt, points, kind) in acc._states if name == "remove"]
    assert {points for points, _ in made} == {ADAPTIVE_START_POINTS}
    # the plain tilted pair settles the bracket: no gentler tilt, no split composition
    assert sorted(kind for _, kind in made) == ["dominated", "upper"]
    assert bound.epsilon - bound.epsilon_lower <= PASS_TARGET * bound.epsilon
    # sound against the finer grid's certified bracket [0.234957, 0.235514], and tighter
    # than dp-accounting's PLD at h = 1e-4 (0.246894)
    assert bound.epsilon_lower <= 0.235514 and bound.epsilon >= 0.234957
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
    assert bound.epsilon_lower == pytest.approx(0.026059938396442568, rel=1e-9)
    assert bound.epsilon == pytest.approx(0.026092254739366966, rel=1e-9)
