"""Delta queries of the PLD accountant (:mod:`dpledger.accountant.pld_delta`): upper-only mode
and the default call's delta queries where the closed form is exact."""

from __future__ import annotations

import time

import pytest

from dpledger.accountant.base import DeltaBound
from dpledger.accountant.pld import PLDAccountant, upper_only
from dpledger.accountant.pld_delta import CHORD_REACH_MARGIN
from dpledger.accountant.pld_read import delta_at
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    ExponentialMechanismEvent,
    GaussianEvent,
    PoissonSampledEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
)


def _dp_sgd(sigma: float, q: float, steps: int) -> SelfComposedEvent:
    return SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(sigma)), steps)


def test_upper_only_delta_is_one_pass_and_sound() -> None:
    event = _dp_sgd(1.0, 0.01, 200)
    full = PLDAccountant()
    full.compose(event)
    both = full.get_delta(1.0)
    quick = PLDAccountant()
    quick.compose(event)
    with upper_only():
        top = quick.get_delta(1.0)
    # certified: never below the full query's certified lower bound
    assert top.delta >= both.delta_lower
    assert top.delta_lower <= top.delta
    # one pass at the start grid, plain compositions only
    kinds = {key[3] for key in quick._states}
    assert kinds <= {"upper"}
    assert len({key[2] for key in quick._states}) == 1


def test_exact_zero_delta_runs_the_others_upper_only() -> None:
    # the closed form certifies delta 0 at the mechanism's epsilon: the PLD cross-check makes
    # its upper bound only (it took seconds of passes for a bound that cannot narrow [0, 0])
    start = time.perf_counter()
    chosen = account(ExponentialMechanismEvent(300.0), epsilon=300.0)
    assert time.perf_counter() - start < 5.0
    assert chosen.bound.delta == 0.0 and chosen.bound.delta_lower == 0.0
    pld = [c for c in chosen.candidates if c.method == "pld"]
    assert pld and pld[0].delta_lower == 0.0 and pld[0].delta >= 0.0


def test_exact_delta_bracket_keeps_the_closed_form() -> None:
    event = SelfComposedEvent(GaussianEvent(2.0), 1000)
    chosen = account(event, epsilon=130.0)
    assert chosen.bound.method == "closed_form"
    for c in chosen.candidates:
        assert c.delta >= chosen.bound.delta_lower


def test_delta_passes_stop_once_a_finer_grid_barely_narrows() -> None:
    # a bracket set by something other than the grid (representatives, tails): the second
    # pass narrowed it by under 10 %, so no third pass is made
    acc = PLDAccountant()
    passes: list[int] = []

    def at(prep: object, epsilon: float) -> DeltaBound:
        passes.append(acc._cache.points)
        lower = 5.5e-6 if len(passes) == 1 else 5.6e-6
        return DeltaBound(1e-5, lower, epsilon, "pld")

    acc._delta_at = at  # type: ignore[method-assign,assignment]
    bound = acc._adaptive_delta(object(), 8.0)  # type: ignore[arg-type]
    assert len(passes) == 2 and passes[1] > passes[0]
    assert bound.delta_lower == 5.6e-6
    # a pass that narrowed it well is followed by a finer one
    passes.clear()
    widths = iter([4e-6, 1e-6, 5e-8])

    def narrowing(prep: object, epsilon: float) -> DeltaBound:
        passes.append(acc._cache.points)
        return DeltaBound(1e-5, 1e-5 - next(widths), epsilon, "pld")

    acc._delta_at = narrowing  # type: ignore[method-assign,assignment]
    acc._adaptive_delta(object(), 8.0)  # type: ignore[arg-type]
    assert len(passes) == 3


def test_long_run_level_screened_instead_of_untilted_compositions() -> None:
    # 1e7 steps at delta ~ 9e-6: the Chernoff level (~1e-3) says untilted, but the plain
    # FFT's round-off (~1e-11 per step) would swamp delta; a coarse tilted screen finds the
    # level, and the certified bound it leads to is a certified upper bound of the same delta
    acc = PLDAccountant()
    acc.compose(_dp_sgd(1.0, 1e-4, 10_000_000))
    prep = acc._prepared()
    assert prep is not None
    search = acc._deltas
    level = search._screened_level(prep, "remove", 1.63, 1e-3)
    assert 1e-7 <= level < 1e-4
    assert level >= 8.9e-6  # an upper bound: the certified delta is about 9.05e-6
    assert not acc._states  # the screen is not kept
    # kept as the level found, which finer passes start from (no second screen)
    assert acc._cache.levels[("remove", 1.63)] == level
    assert search._screened_level(prep, "remove", 1.63, level) == level


def test_direction_settled_on_a_coarse_grid() -> None:
    # the add direction's upper bound on a coarse screen is below the remove direction's lower
    # bound: it cannot decide the bracket, and is not composed on the pass's grid
    event = _dp_sgd(1.0, 0.01, 200)
    acc = PLDAccountant()
    acc.compose(event)
    bound = acc.get_delta(1.0)
    adds = [key for key in acc._states if key[0] == "add"]
    assert adds and all(key[2] < 16384 for key in adds)
    add_upper = acc._cache.known_deltas("add", 1.0)[0]
    assert add_upper <= bound.delta_lower <= bound.delta
    # the bracket is the remove direction's, as when both are composed in full
    full = PLDAccountant()
    full.compose(event)
    full._deltas._screen = lambda *args: 1.0  # type: ignore[method-assign]
    both = full.get_delta(1.0)
    assert (both.delta_lower, both.delta) == (bound.delta_lower, bound.delta)


def _states(
    event: SelfComposedEvent, epsilon: float
) -> tuple[DeltaBound, list[tuple[str, float, int, str]]]:
    acc = PLDAccountant()
    acc.compose(event)
    bound = acc.get_delta(epsilon)
    return bound, list(acc._states)


def _pinned(lower: float, upper: float) -> object:
    """A bracket measured before, to 1e-7 relative: which passes run is what these tests pin;
    the last digits move with numpy's and scipy's versions and the chord's rounding."""
    return (pytest.approx(lower, rel=1e-7), pytest.approx(upper, rel=1e-7))


def test_no_chord_where_its_shift_keeps_it_below_the_dominated_pairs() -> None:
    # delta ~ 1e-15: the chord's Hoeffding shift (and the 1e-12 it loses) leaves it at 0; the
    # dominated pairs alone reach the goal, with the bracket of both
    bound, states = _states(_dp_sgd(1.0, 0.01, 1000), 4.86)
    assert [key[3] for key in states if key[0] == "remove"] == ["upper", "dominated"]
    assert (bound.delta_lower, bound.delta) == _pinned(9.55073893230763e-16, 9.624821919895439e-16)


def test_the_chord_where_it_can_reach_the_goal() -> None:
    # ten steps: the chord's shift is small, it comes first (the dominated pairs narrow it)
    bound, states = _states(_dp_sgd(1.0, 0.1, 10), 1.0)
    assert [key[3] for key in states if key[0] == "remove"] == ["upper", "chord", "dominated"]
    assert (bound.delta_lower, bound.delta) == _pinned(0.006900444106423571, 0.0069005920167013145)


def test_the_dominated_pairs_alone_where_they_reach_the_goal() -> None:
    # the chord reaches about half of delta here; the dominated pairs reach the goal alone
    bound, states = _states(_dp_sgd(1.1, 0.00427, 500), 0.43)
    assert [key[3] for key in states if key[0] == "remove"] == ["upper", "dominated"]
    assert (bound.delta_lower, bound.delta) == _pinned(9.99331592683561e-06, 1.0075653506343642e-05)
    # the other direction screened untilted: the lower bound it had to reach, ~1e-5, is within
    # the plain FFT's range
    assert [key[1] for key in states if key[0] == "add"] == [0.0]


def test_the_chord_stays_below_its_estimated_reach() -> None:
    # the estimate skips a chord only where it could not raise the lower bound: the chord's
    # lower bound is never above the reach (before the margin), with pairs of their own too
    for event, epsilon in ((_dp_sgd(1.1, 0.00427, 500), 0.43), (_dp_sgd(1.0, 0.1, 10), 1.0)):
        acc = PLDAccountant()
        acc.compose(event)
        acc.get_delta(epsilon)
        prep = acc._prepared()
        assert prep is not None
        search, cache = acc._deltas, acc._cache
        checked = 0
        for name, tilt, points, kind in list(cache.states):
            if kind != "upper" or points < 16384:
                continue
            cache.points = points
            reach = search._chord_reach(prep, name, epsilon, tilt, 1e-5)
            chord = cache.composed(prep, name, tilt, 1e-5, "chord")
            assert chord is not None
            assert 0.0 < delta_at(chord, epsilon, upper=False) <= reach / CHORD_REACH_MARGIN
            checked += 1
        assert checked >= 1


def test_no_lower_bound_of_a_direction_whose_lower_pairs_cannot_reach_the_other() -> None:
    # replace-one without replacement: the remove direction's lower pairs lose little per step
    # (their Chernoff bound at epsilon 6.64 is below 1e-300), the add direction's lower bound
    # is 7.7e-6: the add direction goes first (the upper pairs tie), the remove direction
    # makes its upper compositions only, and the bracket is the one both directions' lower
    # bounds gave
    event = SelfComposedEvent(SampledWithoutReplacementEvent(60000, 600, GaussianEvent(1.0)), 100)
    acc = PLDAccountant(Adjacency(relation="replace_one"))
    acc.compose(event)
    bound = acc.get_delta(6.64)
    states = list(acc._states)
    assert states[0][0] == "add"
    assert {key[3] for key in states if key[0] == "remove"} == {"upper"}
    assert (bound.delta_lower, bound.delta) == _pinned(
        7.706537646962928e-06, 1.0013456934855893e-05
    )
