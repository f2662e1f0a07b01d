"""delta(epsilon) brackets of a prepared ledger at one grid size (:class:`DeltaSearch`).

Each direction is composed plainly (tilted for the Chernoff level of delta), composed again
tilted for the delta found when that is far lower, then its lower-bound compositions are made
and, while the bracket stays wide, the compositions split by heavy-tail steps. A direction
after the first is screened on coarser grids and skipped when it cannot decide the bracket;
a long run's level is screened on a coarse grid when the Chernoff level says untilted but the
plain FFT's round-off would swamp delta. Within ``upper_only`` only the plain compositions are
made. Every composition certifies its own bound, so the best over all of them is read.
"""

from __future__ import annotations

import math

from dpledger.accountant.pld_compositions import (
    SCREEN_LEAST_POINTS,
    UNTILTED_DELTA,
    Compositions,
)
from dpledger.accountant.pld_epsilon import (
    _UPPER_ONLY,
    FFT_NOISE_PER_STEP,
    MIN_SCREEN_POINTS,
    SCREEN_FACTORS,
    tilt_level,
)
from dpledger.accountant.pld_prepared import Prepared
from dpledger.accountant.pld_read import delta_at, lower_shift
from dpledger.accountant.pld_tilt import chernoff_level, tilt_for_epsilon
from dpledger.core.errors import BoundUnavailable

__all__ = [
    "CHORD_ETA",
    "CHORD_REACH_MARGIN",
    "DELTA_BRACKET_GOAL",
    "DELTA_SCREEN_RETRY",
    "LOWER_LEVEL_POINTS",
    "LOWER_LEVEL_SHARE",
    "RECUT_SHARE",
    "SCREEN_LEAST_POINTS",
    "SPLIT_DROPPED_SHARE",
    "SPLIT_LEVEL_PASSES",
    "DeltaSearch",
]

#: delta queries compose dominated pairs while upper > lower * DELTA_BRACKET_GOAL
DELTA_BRACKET_GOAL = 1.01
#: delta queries cut the tails again at most this many times, while the dropped terms exceed
#: SPLIT_DROPPED_SHARE of the bound
SPLIT_LEVEL_PASSES = 3
SPLIT_DROPPED_SHARE = 1e-2
#: a direction screened on a coarse grid is screened again on the finer one only when its
#: upper bound came within this factor of the other direction's lower bound
DELTA_SCREEN_RETRY = 4.0
#: the chord's lower bound of delta is taken to reach at most this many times the upper
#: composition's delta at epsilon plus the chord's shift (:meth:`DeltaSearch._chord_reach`;
#: measured: the chord reached 0.49 to 1.000 times that on the benchmark's cases, 1.000 where
#: the lower pairs are the upper ones and the chord is the upper composition read lower)
CHORD_REACH_MARGIN = 1.1
#: the probability the chord's shift loses, as a delta lower bound reads it
CHORD_ETA = 1e-12
#: a delta query whose tails were cut for a level above the delta found composes again, cut
#: for the delta found, when the mass at +infinity (which holds the cut mass) exceeds this
#: share of that delta
RECUT_SHARE = 1e-4
#: a direction makes no lower-bound composition when the Chernoff bound on its lower pairs
#: (:meth:`DeltaSearch._lower_level`) is below this share of another direction's lower bound
LOWER_LEVEL_SHARE = 1e-6
#: ... read only from coarse lower pairs of at most this many points in all
LOWER_LEVEL_POINTS = 1 << 20


class DeltaSearch:
    """delta(epsilon) brackets from the compositions of ``cache``, at its current grid size."""

    def __init__(self, cache: Compositions) -> None:
        self.cache = cache
        #: (direction, epsilon, grid points) of the passes whose level a screen found, with
        #: the levels it went into (the cache's, until the ledger changes)
        self.screened: dict[tuple[str, float, int], dict[tuple[str, float], float]] = {}
        #: (direction, epsilon) whose level was screened, with the levels of that time
        self.tried: dict[tuple[str, float], dict[tuple[str, float], float]] = {}

    def bracket(self, prep: Prepared, epsilon: float) -> tuple[float, float, float]:
        """(upper, lower, grid spacing) of delta(epsilon) at the current grid."""
        upper, lower, h = 0.0, 0.0, 0.0
        if _UPPER_ONLY.get():
            return self._upper_bracket(prep, epsilon)
        # a direction whose upper bound (from a coarser pass, a screen on coarser grids, or
        # else this grid's plain composition) is below another's lower bound cannot decide
        # the bracket; the coarser passes' bounds (else the Chernoff levels) order the
        # directions, the one likely to decide it first
        known = {name: self.cache.known_deltas(name, epsilon) for name in prep.names}
        lower = max(lo for _, lo in known.values())
        order = {name: up for name, (up, _) in known.items()}
        if any(up >= 1.0 for up in order.values()):
            order = {n: chernoff_level(prep.coarse[n], epsilon) for n in prep.names}
        # on a tie (symmetric upper pairs), the direction whose lower pairs can reach further
        # first: its lower bound may spare the other's lower-bound compositions
        ties = len(set(order.values())) < len(order)
        reach = {n: self._lower_level(prep, n, epsilon) if ties else 1.0 for n in prep.names}
        try:
            for name in sorted(prep.names, key=lambda n: (-order[n], -reach[n])):
                # tails are cut for no level below the bracket's lower bound so far (nor below
                # the direction's mass at +infinity, which the Chernoff level leaves out)
                self.cache.cut_floor = max(lower, _infinity_level(prep, name))
                up, lo, spacing = self._direction(prep, name, epsilon, known[name][0], lower)
                upper, lower = max(upper, up), max(lower, lo)
                h = h if spacing is None else spacing
        finally:
            self.cache.cut_floor = 0.0
        return upper, lower, h

    def _direction(
        self, prep: Prepared, name: str, epsilon: float, first: float, lower: float
    ) -> tuple[float, float, float | None]:
        """(upper, lower, grid spacing) of one direction (spacing None when it made no
        composition at this grid): its upper bound alone when that (``first``, a coarser
        pass's, else a screen's or this grid's plain composition) is at most ``lower``, another
        direction's lower bound."""
        if first >= 1.0:
            screened = self._screen(prep, name, epsilon, lower) if lower > 0.0 else 1.0
            first = screened if screened <= lower else self._delta_upper(prep, name, epsilon)[0]
        if first <= lower:
            return first, 0.0, None
        return self._delta_direction(prep, name, epsilon, lower)

    def _screen(self, prep: Prepared, name: str, epsilon: float, lower: float) -> float:
        """A certified upper bound of one direction's delta(epsilon) from its plain tilted
        compositions on grids SCREEN_FACTORS times coarser than the current one (at least
        MIN_SCREEN_POINTS; windows of many components at least SCREEN_LEAST_POINTS), stopping
        at the first at most ``lower`` (another direction's lower bound: this one cannot decide
        the bracket); the finer screen only when the coarser came within DELTA_SCREEN_RETRY of
        it. 1.0 when no screen was made. A coarser grid can certify less here: a fine grid
        lumps a long tail of one step's losses at infinity."""
        points, floored = self.cache.points, self.cache.floored
        full, made = self.cache.resolution(prep, points), 0
        best = 1.0
        # many components hold their windows at MIN_POINTS at least: a screen at
        # SCREEN_LEAST_POINTS (the same grid for both factors then: made once)
        with self.cache.screening():
            try:
                for factor in SCREEN_FACTORS:
                    self.cache.points = max(MIN_SCREEN_POINTS, points // factor)
                    screen = self.cache.resolution(prep, self.cache.points)
                    if screen >= full:
                        break
                    if screen == made:
                        continue
                    made = screen
                    # tilted: a coarse untilted composition cannot resolve a small delta; untilted
                    # when the bound it must reach is itself large enough for the plain FFT
                    level = lower
                    if tilt_level(prep, lower) < UNTILTED_DELTA:
                        level = min(
                            chernoff_level(prep.coarse[name], epsilon),
                            self.cache.levels.get((name, epsilon), 1.0),
                            0.5 * UNTILTED_DELTA,
                        )
                    best = min(best, self._plain_upper(prep, name, epsilon, level)[0])
                    if best <= lower or not best <= lower * DELTA_SCREEN_RETRY:
                        break
            finally:
                self.cache.points, self.cache.floored = points, floored
        return best

    def _upper_bracket(self, prep: Prepared, epsilon: float) -> tuple[float, float, float]:
        """Within :func:`~dpledger.accountant.pld_epsilon.upper_only` (the caller reads upper
        bounds only, or another backend's bracket is exact): each direction's plain
        compositions (cut again for the delta found where the cut mass could matter,
        :meth:`_recut`), and the lower bounds already known."""
        upper, lower, h = 0.0, 0.0, 0.0
        try:
            for name in prep.names:
                # a direction far below the upper bound so far cannot raise it: its tails are
                # cut for no level below that
                self.cache.cut_floor = max(upper, _infinity_level(prep, name))
                up, level, _, tilt, h = self._delta_upper(prep, name, epsilon)
                if up < level and self._recut(prep, name, epsilon, (tilt, level), up):
                    up = self.cache.known_deltas(name, epsilon)[0]
                upper = max(upper, up)
                lower = max(lower, self.cache.known_deltas(name, epsilon)[1])
        finally:
            self.cache.cut_floor = 0.0
        return upper, lower, h

    def _delta_direction(
        self, prep: Prepared, name: str, epsilon: float, floor: float = 0.0
    ) -> tuple[float, float, float]:
        """(upper, lower, grid spacing) of delta(epsilon) in one direction: the plain tilted
        compositions (upper first: no lower bound is made when it is at most ``floor``, another
        direction's lower bound), then the split ones while the bracket is wider than the goal.
        Once a coarser pass needed the split ones, finer passes make them first, and the plain
        ones only when the split bracket is still wider than the goal."""
        # lower pairs whose Chernoff bound is far below ``floor``: no lower bound of this
        # direction could raise the bracket's
        lowers = self._lower_level(prep, name, epsilon) > LOWER_LEVEL_SHARE * floor
        if ("delta", name, epsilon) in self.cache.split_first:
            level = self.cache.levels[(name, epsilon)]
            h = self._split_delta(prep, name, epsilon, level, lowers)
            best_up, best_lo = self.cache.known_deltas(name, epsilon)
            if best_up <= floor or best_lo >= best_up / DELTA_BRACKET_GOAL:
                return best_up, best_lo, h
        _, level, tilts, tilt, h = self._delta_upper(prep, name, epsilon)
        # the Chernoff level can be orders of magnitude above the delta found (one heavy step,
        # or a loose bound): the plain FFT cannot resolve that delta, so compose again, tilted
        # for the level found
        found = min(level, self.cache.known_deltas(name, epsilon)[0])
        self.cache.levels[(name, epsilon)] = found
        # (also above UNTILTED_DELTA where the plain FFT's round-off is a share of it)
        if tilts[0] == 0 and tilt_level(prep, found) < UNTILTED_DELTA:
            retilt = self.cache.tilts(
                prep, name, tilt_for_epsilon(prep.coarse[name], epsilon), tilt_level(prep, found)
            )
            if retilt[0] > 0:
                self.cache.composed(prep, name, retilt[0], found)
                tilt, level = retilt[0], found
        if found < level and self._recut(prep, name, epsilon, (tilt, level), found):
            level = found
        best_up, best_lo = self.cache.known_deltas(name, epsilon)
        if best_up <= floor or (
            lowers and self._delta_lowers(prep, name, epsilon, (tilt, level), floor)
        ):
            return (*self.cache.known_deltas(name, epsilon), h)
        best_up, best_lo = self.cache.known_deltas(name, epsilon)
        found = min(found, best_up)
        # tilted from the start (not for the level this pass's screen found, where the plain
        # compositions were skipped and not a heavy tail, but the untilted round-off, asked
        # for the tilt), or delta found below the untilted range: a heavy step's tail
        screened = self.screened.get((name, epsilon, self.cache.points)) is self.cache.levels
        if (tilts[0] > 0 and not screened) or found < UNTILTED_DELTA:
            self._split_delta(prep, name, epsilon, found, lowers)
            self.cache.split_first.add(("delta", name, epsilon))
        return (*self.cache.known_deltas(name, epsilon), h)

    def _recut(
        self, prep: Prepared, name: str, epsilon: float, at: tuple[float, float], found: float
    ) -> bool:
        """Compose the plain upper bound at ``at`` = (tilt, level) again with the tails cut for
        ``found`` (the delta found) where they were cut for ``level`` (a higher estimate) and
        the composition's mass at +infinity, which holds the cut mass, exceeds RECUT_SHARE of
        ``found``; whether the new composition reads a lower upper bound (then the lower-bound
        compositions follow its cut; else the first cut's, whose shorter windows have a finer
        grid). Tightness only: any cut keeps the bounds certified."""
        tilt, level = at
        cut_tag = self.cache.cut(prep, level)[0]
        if "cut=" not in cut_tag:
            return False
        made = self.cache.composed(prep, name, tilt, level)
        if made is None or made.inf_mass <= RECUT_SHARE * found:
            return False
        if self.cache.cut(prep, found)[0] == cut_tag:
            return False
        again = self.cache.composed(prep, name, tilt, found)
        if again is None:
            return False
        return delta_at(again, epsilon, upper=True) < delta_at(made, epsilon, upper=True)

    def _delta_lowers(
        self, prep: Prepared, name: str, epsilon: float, at: tuple[float, float], floor: float
    ) -> bool:
        """Make the lower-bound compositions at one (tilt, level) until the bracket is within
        the goal; whether it is. The chord's lower bound is shifted by its Hoeffding shift:
        where that keeps it below the goal (:meth:`_chord_reach`) the dominated pairs come
        first, and the chord is made only while it could raise the lower bound (this
        direction's, and ``floor``, another direction's)."""
        if not prep.keep_lower:
            return False
        tilt, level = at
        reach = self._chord_reach(prep, name, epsilon, tilt, level)
        best_up, best_lo = self.cache.known_deltas(name, epsilon)
        kinds = ("chord", "dominated")
        if reach < best_up / DELTA_BRACKET_GOAL:
            kinds = ("dominated", "chord")
        for kind in kinds:
            if kind == "chord" and reach <= max(best_lo, floor):
                continue
            self.cache.composed(prep, name, tilt, level, kind)
            best_up, best_lo = self.cache.known_deltas(name, epsilon)
            if best_lo >= best_up / DELTA_BRACKET_GOAL:
                return True
        return False

    def _lower_level(self, prep: Prepared, name: str, epsilon: float) -> float:
        """A bound on every lower bound of one direction's delta(epsilon): the Chernoff bound
        on its lower pairs' connect-the-dots curves on the coarse grid (they dominate the lower
        pairs, whose composition every lower bound is below); 1.0 where they hold mass at
        +infinity (the Chernoff bound reads finite losses only), have no coarse grid, or
        exceed LOWER_LEVEL_POINTS."""
        if not prep.keep_lower:
            return 1.0
        if self.cache.same_lower(prep, name):
            guide = prep.coarse[name]
        else:
            guide = (prep.coarse_lower or {}).get(name, [])
        size = sum(p.masses.size for p, _ in guide)
        if not guide or size > LOWER_LEVEL_POINTS or any(p.inf_mass > 0 for p, _ in guide):
            return 1.0
        return chernoff_level(guide, epsilon)

    def _chord_reach(
        self, prep: Prepared, name: str, epsilon: float, tilt: float, level: float
    ) -> float:
        """About the most the chord's lower bound of delta(epsilon) can reach, CHORD_REACH_MARGIN
        times over: the upper composition at this tilt read at epsilon plus the chord's
        Hoeffding shift, less the probability that shift loses (the chord composes pairs below
        the upper ones, on the same spacing). Only which lower-bound compositions are made
        depends on it."""
        up = self.cache.composed(prep, name, tilt, level)
        if up is None:
            return 1.0
        shift = lower_shift(up, CHORD_ETA)
        return CHORD_REACH_MARGIN * (delta_at(up, epsilon + shift, upper=True) - CHORD_ETA)

    def _delta_upper(
        self, prep: Prepared, name: str, epsilon: float
    ) -> tuple[float, float, list[float], float, float]:
        """(upper bound, Chernoff level, tilts, tilt used, grid spacing) of delta(epsilon) in
        one direction from the plain compositions (cached)."""
        coarse = prep.coarse[name]
        # a coarser pass may have found delta far below the Chernoff estimate
        level = min(chernoff_level(coarse, epsilon), self.cache.levels.get((name, epsilon), 1.0))
        level = self._screened_level(prep, name, epsilon, level)
        up, tilts, tilt, h = self._plain_upper(prep, name, epsilon, level)
        return up, level, tilts, tilt, h

    def _plain_upper(
        self, prep: Prepared, name: str, epsilon: float, level: float
    ) -> tuple[float, list[float], float, float]:
        """(upper bound, tilts, tilt used, grid spacing) of delta(epsilon) in one direction
        from the plain compositions for ``level`` at the current grid (cached)."""
        tilt, h = 0.0, 0.0
        tilts = self.cache.tilts(
            prep, name, tilt_for_epsilon(prep.coarse[name], epsilon), tilt_level(prep, level)
        )
        for tilt in tilts:
            up = self.cache.composed(prep, name, tilt, level)
            assert up is not None
            h = up.h
            if epsilon >= float(up.losses[0]):
                break
        return self.cache.known_deltas(name, epsilon)[0], tilts, tilt, h

    def _screened_level(self, prep: Prepared, name: str, epsilon: float, level: float) -> float:
        """``level``, or the delta read off a tilted composition on a coarse grid
        (MIN_SCREEN_POINTS) where the plain FFT's round-off would swamp it: a long run (over
        UNTILTED_DELTA / FFT_NOISE_PER_STEP steps) whose Chernoff level is too high to be
        tilted for while the delta found is low enough to be read tilted
        (:func:`~dpledger.accountant.pld_epsilon.tilt_level`). The plain untilted
        compositions, which could not resolve it, are then not made (below UNTILTED_DELTA
        they were made only to find a level for the tilted ones, no better than the
        screen's); at least UNTILTED_DELTA, the pass is marked screened. Once per direction
        and epsilon; the screen only chooses the level (it is not kept)."""
        key = (name, epsilon)
        steps = sum(k for _, k in prep.comps)
        if (
            key in self.cache.levels
            or self.tried.get(key) is self.cache.levels
            or FFT_NOISE_PER_STEP * steps <= UNTILTED_DELTA
            or tilt_level(prep, level) < UNTILTED_DELTA
        ):
            return level
        forced = 0.5 * UNTILTED_DELTA  # a level at which the composition is tilted
        tilt = self.cache.tilts(prep, name, tilt_for_epsilon(prep.coarse[name], epsilon), forced)
        if tilt[0] <= 0:
            return level
        self.tried[key] = self.cache.levels
        points, floored = self.cache.points, self.cache.floored
        # (a window of many components on SCREEN_LEAST_POINTS, as :meth:`_screen`'s)
        with self.cache.screening():
            try:
                self.cache.points = min(points, MIN_SCREEN_POINTS)
                extend = self.cache.extend(prep, name, "upper")
                h, win = self.cache.window(prep, name, tilt[0], forced, extend)
                screen = self.cache.compose_at(prep, name, tilt[0], h, win, "upper")
            except BoundUnavailable:
                return level
            finally:
                self.cache.points, self.cache.floored = points, floored
        found = 1.0 if screen is None else delta_at(screen, epsilon, upper=True)
        if not found < level or tilt_level(prep, found) >= UNTILTED_DELTA:
            return level
        self.cache.levels[key] = found
        if found >= UNTILTED_DELTA:
            self.screened[(name, epsilon, self.cache.points)] = self.cache.levels
        return found

    def _split_delta(
        self, prep: Prepared, name: str, epsilon: float, level: float, lowers: bool = True
    ) -> float:
        """Split compositions for delta(epsilon) (the dominated ones unless ``lowers`` is
        False); their spacing (0 when none applies). Their remainder is budgeted against
        ``level`` (the Chernoff estimate of delta): when delta comes out far lower, the cut is
        made again against it."""
        for _ in range(SPLIT_LEVEL_PASSES):
            up = self.cache.split(prep, name, level, "upper", epsilon)
            if up is None:
                return 0.0
            value = delta_at(up, epsilon, upper=True)
            if up.dropped <= SPLIT_DROPPED_SHARE * value:
                break
            level = max(value - up.dropped, level * 1e-6)
        if prep.keep_lower and lowers:
            self.cache.split(prep, name, level, "dominated", epsilon)
        # finer passes start from the level the tails were last cut against
        self.cache.levels[(name, epsilon)] = level
        return 0.0 if up is None else up.h


def _infinity_level(prep: Prepared, name: str) -> float:
    """The mass at +infinity of one direction's coarse components composed (delta at every
    epsilon is about at least that; a level for cutting tails only)."""
    total = 0.0
    for pld, k in prep.coarse[name]:
        if pld.inf_mass >= 1.0:
            return 1.0
        total += k * math.log1p(-pld.inf_mass)
    return -math.expm1(total)
