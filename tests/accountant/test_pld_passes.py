"""Which compositions an epsilon query makes: the passes' goals and the split's order."""

from __future__ import annotations

import pytest

from dpledger.accountant.pld import (
    ADAPTIVE_START_POINTS,
    PASS_TARGET,
    UNDOMINATED_GROWTH,
    PLDAccountant,
)
from dpledger.accountant.pld_epsilon import BRACKET_GOAL
from dpledger.core.events import GaussianEvent, PoissonSampledEvent, SelfComposedEvent


def _dp_sgd(q: float, steps: int) -> PLDAccountant:
    acc = PLDAccountant()
    acc.compose(SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(1.0)), steps))
    return acc


def test_a_coarse_pass_within_the_pass_target_ends_the_query() -> None:
    # q = 1e-4, 1e5 steps, delta = 1e-10: the coarse pass brackets within 0.42 % (below
    # PASS_TARGET), so no finer pass is made; its lower bound is composed on the upper
    # composition's window at a gentler tilt (no window extended over the heavy tail); the
    # search's goal is restored afterwards
    acc = _dp_sgd(1e-4, 100_000)
    bound = acc.get_epsilon(1e-10)
    remove = {(points, kind) for (name, _tilt, points, kind) in acc._states if name == "remove"}
    assert remove == {(ADAPTIVE_START_POINTS, "upper"), (ADAPTIVE_START_POINTS, "dominated-short")}
    assert acc._epsilons.goal == BRACKET_GOAL
    assert bound.epsilon - bound.epsilon_lower <= PASS_TARGET * bound.epsilon
    # inside the bracket of the finer pass made before (0.234957, 0.235514), and tighter than
    # dp-accounting's PLD at h = 1e-4 (0.246894)
    # measured, to 1e-6 relative (the last digits move with numpy's and scipy's versions and
    # with the summation of the log-MGFs that place the window)
    assert bound.epsilon_lower == pytest.approx(0.23470296455694495, rel=1e-6)
    assert bound.epsilon == pytest.approx(0.23568677045594846, rel=1e-6)
    assert bound.epsilon_lower <= 0.234957 and bound.epsilon >= 0.235514
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
    assert bound.epsilon_lower == pytest.approx(0.026065406496372612, rel=1e-9)
    assert bound.epsilon == pytest.approx(0.026092254739366966, rel=1e-9)


def test_many_steps_at_a_moderate_delta_are_composed_tilted() -> None:
    # q = 1e-3, 1e5 steps, delta = 5e-7 (above UNTILTED_DELTA): the plain FFT's round-off grows
    # with the number of steps (about 7e-14 each in delta), so the composition is tilted for
    # delta (and split by heavy-tail steps where its lower bound is far below); the bracket
    # is within the pass target and no untilted composition is made
    acc = _dp_sgd(1e-3, 100_000)
    bound = acc.get_epsilon(5e-7)
    tilts = {
        tilt
        for (name, tilt, _points, kind) in acc._states
        if name == "remove" and not kind.startswith("split")
    }
    assert tilts and min(tilts) > 0
    assert bound.epsilon - bound.epsilon_lower <= PASS_TARGET * bound.epsilon
    # a few steps at the same delta stay untilted
    few = _dp_sgd(1e-3, 1000)
    few.get_epsilon(5e-7)
    assert {tilt for (_n, tilt, _p, _k) in few._states} == {0.0}


def test_a_pass_whose_dominated_pairs_fail_is_followed_by_twice_its_points() -> None:
    # q = 1e-4, 100 steps, delta = 1e-15: on the first grid (h ~ 1e-4, about the curve's bend
    # at log(1 - q)) the dominated pairs cannot be certified and the chord's lower bound is 37 %
    # below. That gap says nothing of the dominated pairs' (second order in h): choosing the
    # next pass from it made 11x the points (187815, a bracket of 8e-6 relative in 2.9 s under
    # load); twice the points certify them and bracket within 4e-5 (0.6 s).
    acc = _dp_sgd(1e-4, 100)
    bound = acc.get_epsilon(1e-15)
    passes = {key[2] for key in acc._states}  # (and a coarser screen of the add direction)
    assert ADAPTIVE_START_POINTS in passes
    assert max(passes) == UNDOMINATED_GROWTH * ADAPTIVE_START_POINTS
    assert bound.epsilon - bound.epsilon_lower <= 1e-4 * bound.epsilon
    # an earlier version's certified bracket [0.1756114, 0.1756129] holds the truth
    assert bound.epsilon_lower <= 0.1756129 and bound.epsilon >= 0.1756114
    # sigma = 0.8, 10 steps, delta = 1e-15: a doubled pass is not held to have stalled against
    # the chord's gap (that had stopped the query at [0.5879, 0.7074]); certified before:
    # [0.7074008, 0.7074067]
    acc = PLDAccountant()
    acc.compose(SelfComposedEvent(PoissonSampledEvent(1e-4, GaussianEvent(0.8)), 10))
    bound = acc.get_epsilon(1e-15)
    assert bound.epsilon - bound.epsilon_lower <= 1e-4 * bound.epsilon
    assert bound.epsilon_lower <= 0.7074067 and bound.epsilon >= 0.7074008


def test_a_long_run_at_a_moderate_delta_starts_on_a_coarser_grid() -> None:
    # the first pass's windows hold at most FIRST_PASS_WINDOW points at delta >= UNTILTED_DELTA
    # (1e7 steps would otherwise get 2^20): one pass brackets within PASS_TARGET
    acc = _dp_sgd(1e-4, 10_000_000)
    assert acc._start_points(ADAPTIVE_START_POINTS, 1e-5) < ADAPTIVE_START_POINTS
    assert acc._start_points(ADAPTIVE_START_POINTS, 1e-15) == ADAPTIVE_START_POINTS
    short = _dp_sgd(1e-4, 100_000)
    assert short._start_points(ADAPTIVE_START_POINTS, 1e-5) == ADAPTIVE_START_POINTS
