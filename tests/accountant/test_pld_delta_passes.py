"""Which compositions a delta query makes: its passes' grid points and split compositions."""

from __future__ import annotations

import math

import pytest

from dpledger.accountant.pld import (
    ADAPTIVE_START_POINTS,
    SPLIT_PASS_MARGIN,
    PLDAccountant,
    _finer_points,
)
from dpledger.accountant.pld_delta import DELTA_BRACKET_GOAL
from dpledger.core.events import GaussianEvent, PoissonSampledEvent, SelfComposedEvent


def _dp_sgd(q: float, steps: int) -> PLDAccountant:
    acc = PLDAccountant()
    acc.compose(SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(1.0)), steps))
    return acc


def test_finer_points_grow_by_the_margin_times_the_root_of_the_ratio() -> None:
    assert _finer_points(1000, 10**6, 16.0, least=2.0, most=16.0) == 6000
    assert _finer_points(1000, 10**6, 16.0, least=2.0, most=16.0, margin=1.1) == 4400
    assert _finer_points(1000, 10**6, 1.0, least=4.0, most=16.0, margin=1.1) == 4000
    assert _finer_points(1000, 10**6, 1e6, least=4.0, most=16.0, margin=1.1) == 16000
    assert _finer_points(1000, 3000, 16.0, least=2.0, most=16.0, margin=1.1) == 3000


def test_a_split_delta_query_refines_by_the_split_margin() -> None:
    # q = 1e-4, 1e5 steps, epsilon = 0.236: the coarse pass makes the plain and the split
    # compositions; the finer pass (split first) grows by SPLIT_PASS_MARGIN sqrt(ratio), kept at
    # four times the points, and makes the split ones alone
    acc = _dp_sgd(1e-4, 100_000)
    bound = acc.get_delta(0.236)
    made = {(points, kind) for (name, _tilt, points, kind) in acc._states if name == "remove"}
    fine = 4 * ADAPTIVE_START_POINTS
    assert {points for points, _ in made} == {ADAPTIVE_START_POINTS, fine}
    coarse = {k.split("@")[0] for p, k in made if p == ADAPTIVE_START_POINTS}
    assert {"upper", "dominated", "split-upper", "split-dominated"} <= coarse
    assert {k.split("@")[0] for p, k in made if p == fine} == {"split-upper", "split-dominated"}
    assert bound.delta <= bound.delta_lower * DELTA_BRACKET_GOAL
    assert bound.delta_lower == pytest.approx(9.253675996380957e-11, rel=1e-9)
    assert bound.delta == pytest.approx(9.30861209771918e-11, rel=1e-9)
    # sound against the bracket of the finer pass made before (1.5 sqrt(ratio): 86993 points)
    assert bound.delta_lower <= 9.301169577189815e-11 and bound.delta >= 9.270664245906347e-11
    assert SPLIT_PASS_MARGIN < 1.5 and math.ceil(ADAPTIVE_START_POINTS * 1.5 * 12.53**0.5) > fine


def test_a_split_delta_query_within_the_goal_makes_one_pass() -> None:
    # q = 1e-4, 1e4 steps, epsilon = 0.305 (delta about 1e-15): the split upper bound is far
    # below the plain one, its dominated pairs give the lower bound, and one pass suffices
    acc = _dp_sgd(1e-4, 10_000)
    bound = acc.get_delta(0.305)
    made = {
        (points, kind.split("@")[0]) for (name, _t, points, kind) in acc._states if name == "remove"
    }
    assert {points for points, _ in made} == {ADAPTIVE_START_POINTS}
    assert {"split-upper", "split-dominated"} <= {kind for _, kind in made}
    assert bound.delta_lower == pytest.approx(9.718816958442628e-16, rel=1e-9)
    assert bound.delta == pytest.approx(9.802708254237085e-16, rel=1e-9)
