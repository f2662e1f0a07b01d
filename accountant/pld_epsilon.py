"""epsilon(delta) brackets of a prepared ledger at one grid size (:class:`EpsilonSearch`).

Each direction is composed at the Chernoff tilt for delta (and untilted as a fallback); its
lower bound is the shifted chord's or the dominated pairs', whichever can reach the goal, with
gentler tilts tried while the bracket is wide, then the compositions split by heavy-tail steps.
A direction that cannot decide the bracket is screened on coarser grids and skipped.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Iterator

import numpy as np

from dpledger.accountant.pld_compositions import (
    SCREEN_LEAST_POINTS,
    UNTILTED_DELTA,
    Compositions,
)
from dpledger.accountant.pld_prepared import Prepared
from dpledger.accountant.pld_read import epsilon_for, lower_eta, lower_shift
from dpledger.accountant.pld_split import cuts_tails
from dpledger.accountant.pld_tilt import THETAS, chernoff_epsilon, log_mgf_total, tilt_for_delta

__all__ = [
    "BRACKET_GOAL",
    "BRACKET_TARGET",
    "EARLY_SPLIT_RATIO",
    "FFT_NOISE_PER_STEP",
    "MIN_SCREEN_POINTS",
    "SCREEN_FACTORS",
    "SCREEN_LEAST_POINTS",
    "SCREEN_RETRY",
    "SHORT_WRAP_SHARE",
    "EpsilonSearch",
    "tilt_level",
    "upper_only",
]

#: adaptive epsilon queries refine until the bracket is narrower than BRACKET_TARGET (relative)
BRACKET_TARGET = 0.008
#: gentler tilts (and dominated pairs) are tried while upper > lower * BRACKET_GOAL (a coarse
#: pass that may end the query stops at its own goal, :attr:`EpsilonSearch.goal`)
BRACKET_GOAL = 1.005
#: a plain tilted bracket wider than this ratio makes the split compositions before gentler
#: tilts (they move the lower bound by a few percent at most)
EARLY_SPLIT_RATIO = 1.05
#: a direction is screened on grids this many times coarser than the current one (at least
#: MIN_SCREEN_POINTS points) before it is composed in full; the finer screen only when the
#: coarser one came within a factor SCREEN_RETRY of the lower bound
SCREEN_FACTORS = (16, 4)
MIN_SCREEN_POINTS = 1 << 10
SCREEN_RETRY = 1.1
#: the plain FFT's round-off adds about 7e-14 per composed step to delta (it is bounded
#: relative to the whole mass, and grows with the power); a delta of interest below this many
#: times the number of steps is read off a composition tilted for it even above
#: UNTILTED_DELTA, whose round-off is relative to the tilted mass
FFT_NOISE_PER_STEP = 1e-11
#: a tilted lower bound is first composed on the upper composition's window (not extended
#: over the heavy tilted tail), at the steepest tilt up to the upper's whose wrap-around onto
#: the losses read is at most this share of delta by the coarse grid's Chernoff estimate
SHORT_WRAP_SHARE = 1e-4
#: within :func:`upper_only`, epsilon queries stop at the first (coarse) certified bracket
_UPPER_ONLY: contextvars.ContextVar[bool] = contextvars.ContextVar("pld_upper_only", default=False)


@contextlib.contextmanager
def upper_only() -> Iterator[None]:
    """Within the block, epsilon queries return the coarse pass's bracket: its upper bound is
    certified and nearly as tight (the lower bound is looser). For searches such as noise
    calibration, which read upper bounds only."""
    token = _UPPER_ONLY.set(True)
    try:
        yield
    finally:
        _UPPER_ONLY.reset(token)


class EpsilonSearch:
    """epsilon(delta) brackets from the compositions of ``cache``, at its current grid size."""

    def __init__(self, cache: Compositions) -> None:
        self.cache = cache
        #: gentler tilts, dominated pairs and split compositions are made while the upper bound
        #: exceeds the lower one times this goal
        self.goal = BRACKET_GOAL

    def bracket(
        self, prep: Prepared, delta: float, known: dict[str, float]
    ) -> tuple[float, float, float]:
        """(upper, lower, grid spacing) of epsilon(delta) at the current grid. ``known`` holds
        certified upper bounds per direction from coarser passes (and gets this pass's): a
        direction whose upper bound is already below the lower bound of another cannot decide
        the bracket and is skipped."""
        upper, lower, h = 0.0, 0.0, 0.0
        # the direction likely to decide the bracket first (its lower bound can spare the
        # other direction's)
        order = {n: known.get(n, chernoff_epsilon(prep.coarse[n], delta)) for n in prep.names}
        for name in sorted(prep.names, key=lambda n: -order[n]):
            if name not in known and lower > 0:
                # a direction whose upper bound on a coarser grid is below the lower bound found
                # so far, or below the upper one and near the lower one, cannot decide the bracket
                cheap, seen = self._screen(prep, name, delta, lower, upper)
                if cheap is not None:
                    known[name] = cheap
                    upper = max(upper, cheap)
                    continue
                # an unsettled screen still certifies its upper bound (a fine grid's can be
                # looser: its chords' mass at +infinity)
                if math.isfinite(seen):
                    known[name] = seen
            if known.get(name, math.inf) <= lower:
                upper = max(upper, known[name])
                continue
            best_up, best_lo, h = self._direction(prep, name, delta, lower, upper)
            known[name] = min(best_up, known.get(name, math.inf))
            upper = max(upper, known[name])
            lower = max(lower, best_lo)
        return upper, lower, h

    def _screen(
        self, prep: Prepared, name: str, delta: float, lower: float, upper: float
    ) -> tuple[float | None, float]:
        """(settling bound, best bound) of one direction's epsilon(delta): certified upper
        bounds from compositions on grids SCREEN_FACTORS times coarser than the current one;
        the first is the one that settles the direction (at most ``lower``, or at most
        ``upper`` and within BRACKET_TARGET of ``lower``: the bracket found so far), None when
        none does; the second the least of them (inf if none is finite). A finer screen is made
        only when the coarser one came within SCREEN_RETRY of settling, and only on at least
        twice its points (both held at MIN_SCREEN_POINTS or near it, the two grids nearly
        coincide)."""
        points, floored = self.cache.points, self.cache.floored
        made = 0
        best = math.inf
        with self.cache.screening():
            try:
                for factor in SCREEN_FACTORS:
                    screen = max(MIN_SCREEN_POINTS, points // factor)
                    if screen < 2 * made:
                        continue
                    made = self.cache.points = screen
                    tilt = self._tilts(prep, name, delta)[0]
                    up = self.cache.composed(prep, name, tilt, delta)
                    assert up is not None
                    value = epsilon_for(up, delta, upper=True)
                    best = min(best, value)
                    if value <= lower or (value <= upper and value <= lower * (1 + BRACKET_TARGET)):
                        return value, best
                    if not value <= lower * SCREEN_RETRY:
                        return None, best
                return None, best
            finally:
                # (a screen's coarse grid says nothing of whether the pass's can be refined)
                self.cache.points, self.cache.floored = points, floored

    def _direction(
        self, prep: Prepared, name: str, delta: float, floor: float, ceiling: float = 0.0
    ) -> tuple[float, float, float]:
        """(upper, lower, grid spacing) of one direction at the current grid; no lower bound
        when the upper bound is at most ``floor`` (another direction's lower bound), or when it
        is at most ``ceiling`` (another direction's upper bound) and within BRACKET_TARGET of
        ``floor``: this direction's lower bound could not narrow the bracket noticeably.

        In the tilted regime, when the plain tilted compositions leave the bracket wider than
        the goal, the compositions split by heavy-tail steps are made as well; once they were
        needed on a coarser grid, finer grids make them first, and the plain ones only when
        they leave the bracket wider than the goal."""
        if ("epsilon", name, delta) in self.cache.split_first:
            split = self._split_bracket(prep, name, delta, math.inf, 0.0)
            if split[0] <= split[1] * self.goal:
                return split
        want_lower = prep.keep_lower and not _UPPER_ONLY.get()
        tilts = self._tilts(prep, name, delta)
        best_up, best_lo, h = math.inf, 0.0, 0.0
        for tilt in tilts:
            up = self.cache.composed(prep, name, tilt, delta)
            assert up is not None
            h = up.h
            eps_up = epsilon_for(up, delta, upper=True)
            best_up = min(best_up, eps_up)
            settled = best_up <= ceiling and best_up <= floor * (1 + BRACKET_TARGET)
            want_lower = want_lower and best_up > floor and not settled
            if want_lower:
                goal = best_up / self.goal
                best_lo = max(best_lo, self._lower_epsilon(prep, name, tilt, delta, goal))
            # a finite answer inside the tilted window needs no fallback
            if math.isfinite(eps_up) and eps_up > float(up.losses[0]) + up.h:
                break
        # when the plain tilted lower bound is far below (a heavy step's tail), the split
        # compositions come before the gentler tilts (which then run only if the split leaves
        # the bracket wider than the goal)
        early = want_lower and not best_up <= best_lo * EARLY_SPLIT_RATIO
        if early and self._wants_split(tilts[0], best_up, best_lo, floor, ceiling):
            best_up, best_lo, _ = self._split_bracket(prep, name, delta, best_up, best_lo)
            self.cache.split_first.add(("epsilon", name, delta))
        else:
            early = False
        if want_lower:
            # after the split, a gentler tilt that does not raise its lower bound ends the try
            start = best_lo if early else -math.inf
            best_lo = self._gentler_lower(prep, name, delta, tilts[0], (best_up, best_lo), start)
        if not early and self._wants_split(tilts[0], best_up, best_lo, floor, ceiling):
            best_up, best_lo, _ = self._split_bracket(prep, name, delta, best_up, best_lo)
            self.cache.split_first.add(("epsilon", name, delta))
        return best_up, best_lo, h

    def _tilts(self, prep: Prepared, name: str, delta: float) -> list[float]:
        """The tilts to compose one direction at for ``delta`` (:meth:`Compositions.tilts`):
        tilted below UNTILTED_DELTA, and above it too where the plain FFT's round-off would be
        a noticeable share of delta (FFT_NOISE_PER_STEP)."""
        level = tilt_level(prep, delta)
        return self.cache.tilts(prep, name, tilt_for_delta(prep.coarse[name], delta), level)

    def _wants_split(
        self, tilt: float, best_up: float, best_lo: float, floor: float, ceiling: float
    ) -> bool:
        """Whether the split compositions are made: tilted, not settled by another direction
        (see :meth:`_direction`) and the bracket wider than the goal."""
        settled = best_up <= ceiling and best_up <= floor * (1 + BRACKET_TARGET)
        return tilt > 0 and best_up > floor and not settled and not best_up <= best_lo * self.goal

    def _gentler_lower(
        self,
        prep: Prepared,
        name: str,
        delta: float,
        tilt: float,
        bracket: tuple[float, float],
        previous: float,
    ) -> float:
        """The lower bound of ``bracket`` raised by gentler tilts than ``tilt``: a heavy tilted
        tail can wrap around onto the lower bound's range, so gentler tilts (less wrap, more
        round-off) are tried while the bracket is wider than the goal and each raises the lower
        bound above the one before (above ``previous`` for the first)."""
        best_up, best_lo = bracket
        for gentler in _gentler(tilt):
            if best_up <= best_lo * self.goal:
                break
            eps_lo = self._lower_epsilon(prep, name, gentler, delta, None)
            if eps_lo <= previous:
                break
            previous = eps_lo
            best_lo = max(best_lo, eps_lo)
        return best_lo

    def _lower_epsilon(
        self, prep: Prepared, name: str, tilt: float, delta: float, goal: float | None
    ) -> float:
        """The certified lower bound at one tilt: the chord's, and the dominated pairs' when
        the chord's is below ``goal`` (the dominated pairs' first when the chord's shift alone
        keeps it below ``goal``); with no goal, the dominated pairs' alone (the chord's if they
        cannot be certified)."""
        best = 0.0
        chord_first = goal is not None and not self._chord_short(prep, name, tilt, delta, goal)
        if chord_first:
            best = self._chord_epsilon(prep, name, tilt, delta)
            if goal is not None and best >= goal:
                return best
        if goal is not None and tilt > 0:
            best = max(best, self._short_dominated(prep, name, tilt, delta, goal))
            if best >= goal:
                return best
            # far below, where the split compositions apply, they come next: this tilt's
            # plain lower bounds are far below too (a heavy step's tail), and gentler tilts
            # follow if the split leaves the bracket wide
            far = best * EARLY_SPLIT_RATIO < goal * self.goal
            if far and cuts_tails(prep.coarse[name], delta):
                return best
        dominated = self.cache.composed(prep, name, tilt, delta, "dominated")
        if dominated is not None:
            best = max(best, epsilon_for(dominated, delta, upper=False))
            if chord_first or goal is None or best >= goal:
                return best
        if chord_first or (
            goal is not None and self._chord_reach(prep, name, tilt, delta, goal) <= best
        ):
            return best
        return max(best, self._chord_epsilon(prep, name, tilt, delta))

    def _short_dominated(
        self, prep: Prepared, name: str, tilt: float, delta: float, goal: float
    ) -> float:
        """The dominated pairs' lower bound from a composition on the unextended window of a
        tilt up to ``tilt`` (the steepest whose wrap-around is negligible,
        :func:`_short_tilt`), or 0 when none is: a window extended over the heavy tilted tail
        is several times longer, and a gentler tilt's round-off still vanishes at the level
        of delta."""
        key = (name, tilt, self.cache.points, "dominated-short")
        if key not in self.cache.states:
            found = _short_tilt(self.cache, prep, name, tilt, delta, goal)
            composed = None
            if found is not None:
                gentler, h, win = found
                composed = self.cache.compose_at(prep, name, gentler, h, win, "dominated")
            self.cache.states[key] = composed
        composed = self.cache.states[key]
        return 0.0 if composed is None else epsilon_for(composed, delta, upper=False)

    def _chord_epsilon(self, prep: Prepared, name: str, tilt: float, delta: float) -> float:
        chord = self.cache.composed(prep, name, tilt, delta, "chord")
        assert chord is not None
        return epsilon_for(chord, delta, upper=False)

    def _chord_short(
        self, prep: Prepared, name: str, tilt: float, delta: float, goal: float
    ) -> bool:
        """Whether the chord's lower bound cannot reach ``goal``."""
        return self._chord_reach(prep, name, tilt, delta, goal) < goal

    def _chord_reach(
        self, prep: Prepared, name: str, tilt: float, delta: float, goal: float
    ) -> float:
        """About the most the chord's lower bound can reach: the upper bound (``goal`` times
        the search's goal) less the chord's Hoeffding shift, which grows like h sqrt(steps). Only
        which lower-bound compositions are made depends on it."""
        up = self.cache.composed(prep, name, tilt, delta)
        assert up is not None
        return goal * self.goal - lower_shift(up, lower_eta(delta))

    def _split_bracket(
        self, prep: Prepared, name: str, delta: float, best_up: float, best_lo: float
    ) -> tuple[float, float, float]:
        """The bracket improved by the compositions split by heavy-tail steps
        (:mod:`dpledger.accountant.pld_split`) where they can be made, and their spacing."""
        h = 0.0
        up = self.cache.split(prep, name, delta, "upper")
        if up is not None:
            h = up.h
            best_up = min(best_up, epsilon_for(up, delta, upper=True))
        want = prep.keep_lower and not _UPPER_ONLY.get()
        if want and not best_up <= best_lo * self.goal:
            low = self.cache.split(prep, name, delta, "dominated")
            if low is not None:
                best_lo = max(best_lo, epsilon_for(low, delta, upper=False))
        return best_up, best_lo, h


def tilt_level(prep: Prepared, level: float) -> float:
    """The level to pass :meth:`Compositions.tilts` for a delta of interest ``level``: itself,
    or one below UNTILTED_DELTA where the plain FFT's round-off would be a noticeable share of
    it (FFT_NOISE_PER_STEP times the number of composed steps), so that the composition is
    tilted."""
    steps = sum(k for _, k in prep.comps)
    if UNTILTED_DELTA <= level < FFT_NOISE_PER_STEP * steps:
        return 0.5 * UNTILTED_DELTA
    return level


def _short_tilt(
    cache: Compositions, prep: Prepared, name: str, tilt: float, delta: float, x: float
) -> tuple[float, float, tuple[float, float]] | None:
    """(tilt, grid spacing, window) for a lower bound read at losses above about ``x``: the
    steepest tilt of the snapping grid from ``tilt`` down to a quarter of it whose window
    without extension keeps the wrap-around onto the losses above ``x`` (a Chernoff bound on
    the coarse grid, as :func:`~dpledger.accountant.pld_read.wrap_above` bounds it on the
    composition itself) below SHORT_WRAP_SHARE of delta; None when none does. Only which
    composition is made depends on it."""
    coarse = prep.coarse[name]
    j = round(4 * math.log2(tilt))
    for s in range(9):
        gentler = float(2.0 ** ((j - s) / 4))
        h, (a, b) = cache.window(prep, name, gentler, delta, 0)
        width = b - a + 2 * h
        y = max(x + width, b)
        exponent = log_mgf_total(coarse, gentler + THETAS) - gentler * x - THETAS * y
        if float(np.min(exponent)) <= math.log(SHORT_WRAP_SHARE) + math.log(delta):
            return gentler, h, (a, b)
    return None


def _gentler(tilt: float) -> list[float]:
    """Gentler tilts than ``tilt`` (on the snapping grid 2^(j/4)) for lower bounds: halves of
    its exponent's quarter steps, then no tilt."""
    if tilt <= 0:
        return []
    j = round(4 * math.log2(tilt))
    return [float(2.0 ** ((j - s) / 4)) for s in (2, 4, 8)] + [0.0]
