"""The compositions an accountant makes of one prepared ledger (:class:`Compositions`): each
direction at a tilt, a grid size and a kind (connect-the-dots upper bound, shifted-chord or
dominated-pair lower bound, or split by heavy-tail steps), cached, with the window and grid
spacing each is made on and the delta brackets read off them. Many components queried at a
known delta are composed with their far tails cut (:func:`~dpledger.accountant.pld_prepared.
cut_tails`) at a budget far below that delta."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from dpledger.accountant.pld_discrete import MAX_FFT_LEN, DiscretePLD, discretise
from dpledger.accountant.pld_dominated import discretise_lower
from dpledger.accountant.pld_fft import ComposedPLD, compose
from dpledger.accountant.pld_prepared import TAIL_MASS, Prepared, cut_tails, reach_tails
from dpledger.accountant.pld_read import delta_at
from dpledger.accountant.pld_split import compose_split
from dpledger.accountant.pld_tilt import (
    chernoff_level,
    tilt_for_delta,
    tilt_for_epsilon,
    tilted_window,
)
from dpledger.core.errors import BoundUnavailable

if TYPE_CHECKING:
    from dpledger.accountant.pld import PLDAccountant

__all__ = [
    "CUT_SHARE",
    "EXTENDED_WINDOW_POINTS",
    "FLOOR_PASS_POINTS",
    "FULL_RESOLUTION_COMPONENTS",
    "GROWTH_POWER",
    "MAX_COMPONENT_POINTS",
    "MAX_FLOOR_GROWTH",
    "MAX_POINTS",
    "MAX_TILT_RANGE",
    "MIN_POINTS",
    "PROFILE_DROPPED_SHARE",
    "PROFILE_POINTS",
    "PROFILE_RECUTS",
    "SCREEN_LEAST_POINTS",
    "UNTILTED_DELTA",
    "UPPER_KINDS",
    "UPPER_WINDOW_POINTS",
    "WINDOW_TAIL_REL",
    "Compositions",
    "read_profile",
]

#: most grid points of one composed window (before the FFT-length cap)
MAX_POINTS = 1 << 20
#: largest number of grid points one component may use
MAX_COMPONENT_POINTS = 1 << 22
#: largest tilt times the untilted window width
MAX_TILT_RANGE = 200.0
#: at deltas of interest at least this large the composition is not tilted
UNTILTED_DELTA = 1e-7
#: grid points up to which the window is extended over a heavy tilted tail
EXTENDED_WINDOW_POINTS = 1 << 19
#: the same for an upper composition that no lower bound reads
UPPER_WINDOW_POINTS = 1 << 17
#: the window keeps untilted tails down to this fraction of the queried delta
WINDOW_TAIL_REL = 1e-9
#: up to this many distinct components the window gets TARGET_POINTS grid points ...
FULL_RESOLUTION_COMPONENTS = 16
#: the window's points grow like (sqrt(compositions) / 32) ** GROWTH_POWER
GROWTH_POWER = 1.0
#: ... beyond, the FFT budget is shared, down to this many points
MIN_POINTS = 1 << 15
#: passes of more points than this raise the floor of many components' windows with them:
#: a pass of ``p`` points holds at least ``least * p / FLOOR_PASS_POINTS``, at most
#: :attr:`Compositions.floor_growth` times ``least`` (the first pass, which starts here
#: (``pld.ADAPTIVE_START_POINTS``) or lower, holds ``least``). A bracket still wider than the
#: goal then refines on finer grids (200 distinct Poisson-subsampled Gaussians composed 250
#: times each, delta = 1e-5: 2.3 % at MIN_POINTS, 0.44 % at twice, 0.10 % at four times)
FLOOR_PASS_POINTS = 1 << 14
#: the most a pass raises that floor: ``floor_growth`` where the accountant allows it
MAX_FLOOR_GROWTH = 2
#: the fewest points of a screen's window of many components (their passes hold at least
#: MIN_POINTS; a coarser screen's upper bound is loose at the deltas it must reach)
SCREEN_LEAST_POINTS = MIN_POINTS // 4
#: grid points of the compositions a whole privacy profile is read from (a figure's)
PROFILE_POINTS = 1 << 15
#: a profile's deepest split is cut again, at most this many times, while its dropped terms
#: exceed PROFILE_DROPPED_SHARE of the delta read (as the delta search does)
PROFILE_RECUTS = 3
PROFILE_DROPPED_SHARE = 1e-2
#: kinds of compositions that certify upper bounds (the others certify lower bounds)
UPPER_KINDS = frozenset({"upper"})
#: components' tails are cut at a budget of at most this share of the delta of interest (the
#: budget a power of 100, so that nearby levels share their cut components): a delta query's
#: level of interest is a Chernoff estimate, which may be far above the delta it finds
CUT_SHARE = 1e-5


#: a composition made, with the preparation it was made of
_Made = tuple[Prepared, ComposedPLD | None]


def _resolution(
    target_points: int, components: int, total: int = 1, least: int = MIN_POINTS
) -> int:
    """Grid points for the composed window: ``target_points`` grown with the number of
    compositions (the lower bound's Hoeffding shift grows like h sqrt(total)), up to
    MAX_POINTS; for many distinct components a fixed FFT budget is shared among them
    (never below ``least``, MIN_POINTS unless a screen lowers it).

    Upper bounds (connect-the-dots) are insensitive to the grid; only the lower bound's
    shift grows with the spacing, so many-component pipelines trade lower-bound tightness
    for time.
    """
    grow = min(MAX_POINTS / target_points, max(1.0, math.sqrt(total) / 32.0) ** GROWTH_POWER)
    points = int(target_points * grow)
    if components <= FULL_RESOLUTION_COMPONENTS:
        return points
    return max(least, points * FULL_RESOLUTION_COMPONENTS // components)


class Compositions:
    """The compositions made of one prepared ledger, cached by (direction, tilt, grid points,
    kind), and what the queries learned from them. ``points`` is the grid size of the
    compositions being made; the queries set it pass by pass."""

    def __init__(self, points: int) -> None:
        self.states: dict[tuple[str, float, int, str], ComposedPLD | None] = {}
        #: grid points of the compositions being made (adaptive epsilon queries start coarse)
        self.points = points
        #: whether a composition of the current pass had its spacing held at the floor
        self.floored = False
        #: (direction, epsilon) -> the delta level a delta query found (guides finer passes)
        self.levels: dict[tuple[str, float], float] = {}
        #: ("epsilon", direction, delta) and ("delta", direction, epsilon) queries that needed
        #: the split compositions on a coarser grid
        self.split_first: set[tuple[str, str, float]] = set()
        #: delta(epsilon) read from each composition made (compositions never change)
        self.read: dict[tuple[tuple[str, float, int, str], float], float] = {}
        #: whether many components are composed with their tails cut (:meth:`cut`)
        self.cutting = True
        #: the least level the tails are cut for: a delta query's lower bound so far (a
        #: direction whose level of interest is far below it cannot decide the bracket, and
        #: cutting or widening its tails for that level would only cost time)
        self.cut_floor = 0.0
        #: the fewest points of a window of many components (a screen on a coarse grid lowers
        #: it below MIN_POINTS; its compositions are keyed apart)
        self.least_points = MIN_POINTS
        #: how many times ``least_points`` a finer pass's window may hold (:meth:`_least`): 1
        #: where the bracket is mostly the rounding of leaves to representatives, which finer
        #: grids cannot narrow (the accountant sets it per ledger)
        self.floor_growth = 1
        #: the compositions of :meth:`composed`, by (preparation, direction, tilt, spacing,
        #: window, kind): passes whose grids coincide (the fixed budget of many components, a
        #: screen on the full grid) share them
        self.made: dict[tuple[int, str, float, float, tuple[float, float], str], _Made] = {}

    @contextlib.contextmanager
    def screening(self) -> Iterator[None]:
        """Windows of many components held at SCREEN_LEAST_POINTS (a screen's coarse grids),
        at MIN_POINTS again afterwards; their compositions are keyed apart."""
        self.least_points = SCREEN_LEAST_POINTS
        try:
            yield
        finally:
            self.least_points = MIN_POINTS

    def clear(self) -> None:
        """Forget every composition and what was learned from them (the ledger changed)."""
        self.states = {}
        self.levels = {}
        self.split_first = set()
        self.read = {}
        self.made = {}

    def window(
        self, prep: Prepared, name: str, tilt: float, delta: float, extend: int
    ) -> tuple[float, tuple[float, float]]:
        """(grid spacing, composition window) of one direction at one tilt; ``delta`` is the
        level of interest (the window drops untilted tails far below it), ``extend`` the grid
        points up to which the window extends over a heavy tilted tail."""
        coarse = prep.coarse[name]
        total = sum(k for _, k in prep.comps)
        pad = 2 * prep.h0 * total**0.5 + 4 * prep.h0
        a, b_full = tilted_window(coarse, tilt, TAIL_MASS)
        b = b_full
        untilted = min(TAIL_MASS, delta * WINDOW_TAIL_REL)
        if tilt > 0 and untilted > 0.0:  # (a subnormal level's share underflows: no lowering)
            # the grid resolves the part that matters (untilted tails far below delta) ...
            b = tilted_window(coarse, tilt, TAIL_MASS, untilted)[1]
        a, b, b_full = a - pad, b + pad, b_full + pad
        width = b - a
        points = self.resolution(prep, self.points)
        h = width / points
        floor = max(prep.span / MAX_COMPONENT_POINTS, 2.0 * width / MAX_FFT_LEN, 1e-9)
        # a finer pass cannot refine a grid held at its floor or at the most points
        capped = self.resolution(prep, 2 * self.points) <= points
        self.floored = self.floored or capped or h <= 1.2 * floor
        h = max(h, floor)
        # ... and the FFT window extends over the heavy tilted tail where that is affordable,
        # so that little tilted mass wraps around (which would loosen lower bounds)
        b = max(b, min(b_full, a + extend * h))
        return h, (a, b)

    def _least(self, points: int) -> int:
        """The fewest points of a window of many components at a pass of ``points`` points:
        ``least_points``, raised with the passes beyond FLOOR_PASS_POINTS."""
        return self.least_points * min(self.floor_growth, max(1, points // FLOOR_PASS_POINTS))

    def resolution(self, prep: Prepared, points: int) -> int:
        """Grid points of ``prep``'s windows at a pass of ``points`` points (:func:`_resolution`
        with the floor of :meth:`_least`)."""
        total = sum(k for _, k in prep.comps)
        return _resolution(points, len(prep.comps), total, self._least(points))

    def composed(
        self, prep: Prepared, name: str, tilt: float, delta: float, kind: str = "upper"
    ) -> ComposedPLD | None:
        """One direction's composition at one tilt (cached): ``"upper"`` (connect-the-dots),
        ``"chord"`` (the lower pairs' chords, read with a shift; the upper composition itself
        when the lower pairs are the upper ones) or ``"dominated"`` (dominated pairs; None when
        one cannot be certified). A window the FFT cannot hold is retried at twice the
        spacing. Many components are composed with their tails cut for ``delta``
        (:meth:`cut`)."""
        tag, prep = self.cut(prep, delta)
        if self.least_points != MIN_POINTS and len(prep.comps) > FULL_RESOLUTION_COMPONENTS:
            tag += f"|least={self.least_points}"
        key = (name + tag, tilt, self.points, kind)
        if key in self.states:
            return self.states[key]
        if kind == "chord" and self.same_lower(prep, name):
            result: ComposedPLD | None = self.composed(prep, name, tilt, delta)
        else:
            h, win = self.window(prep, name, tilt, delta, self.extend(prep, name, kind))
            result = self._made_at(prep, name, tilt, h, win, kind)
        self.states[key] = result
        return result

    def _made_at(
        self, prep: Prepared, name: str, tilt: float, h: float, win: tuple[float, float], kind: str
    ) -> ComposedPLD | None:
        """:meth:`compose_at`, retried at twice the spacing while the FFT cannot hold the
        window; made once per grid and window (it depends on nothing else), so passes whose
        grids coincide share it."""
        key = (id(prep), name, tilt, h, win, kind)
        found = self.made.get(key)
        if found is not None and found[0] is prep:
            return found[1]
        while True:
            try:
                result = self.compose_at(prep, name, tilt, h, win, kind)
                break
            except BoundUnavailable:
                h *= 2.0
                if h > 1.0:
                    raise
        self.made[key] = (prep, result)
        return result

    def cut(self, prep: Prepared, delta: float) -> tuple[str, Prepared]:
        """(tag of the cache key, preparation) to compose at the level ``delta``: the
        components cut at the power of 100 at most CUT_SHARE times ``delta``
        (:func:`~dpledger.accountant.pld_prepared.cut_tails`) where that cuts any, after
        widening their ranges where the mass those leave out would matter at ``delta``
        (:func:`~dpledger.accountant.pld_prepared.reach_tails`), else ``prep`` itself (tag
        ""); whole components while ``cutting`` is off (whole profiles). ``delta`` is raised
        to ``cut_floor``."""
        if prep.cut > 0.0:
            return f"|cut={prep.cut:.0e}", prep
        if not (self.cutting and delta > 0.0 and math.isfinite(delta)):
            return "", prep
        delta = max(delta, self.cut_floor)
        if CUT_SHARE * delta < 1e-300:  # a level near the subnormal range: cut nothing
            return "", prep
        budget = 10.0 ** (2 * math.floor(math.log10(CUT_SHARE * delta) / 2))
        tag = ""
        # at a delta below the tails the components' ranges leave out, their ranges widened
        reached = reach_tails(prep, delta, budget)
        if reached is not None:
            tag, prep = f"|reach={budget:.0e}", reached
        found = cut_tails(prep, budget)
        if found is None:
            return tag, prep
        return f"{tag}|cut={budget:.0e}", found

    def extend(self, prep: Prepared, name: str, kind: str) -> int:
        """Grid points up to which a composition's window extends over the heavy tilted tail:
        far for lower bounds (wrapped mass is subtracted from them), less for an upper
        composition that no lower bound reads (wrapped mass only adds to it)."""
        if kind == "upper" and not self.same_lower(prep, name):
            return UPPER_WINDOW_POINTS
        return EXTENDED_WINDOW_POINTS

    @staticmethod
    def same_lower(prep: Prepared, name: str) -> bool:
        """Whether the lower bound's pairs of this direction are the upper bound's."""
        low_name = "lower_" + name
        return prep.lower_comps is prep.comps and all(
            getattr(d, low_name) is getattr(d, name) for d, _ in prep.comps
        )

    def compose_at(
        self,
        prep: Prepared,
        name: str,
        tilt: float,
        h: float,
        win: tuple[float, float],
        kind: str,
    ) -> ComposedPLD | None:
        coarse = prep.coarse[name]
        if kind == "upper":
            chords = [(discretise(getattr(d, name), h), k) for d, k in prep.comps]
            return compose(chords, win, tilt, coarse)
        # a lower pair of its own (another mechanism than the upper one) guides the Chernoff
        # tilts of its own tails and wrap-around: the upper pair's can make them vacuous
        low_name = "lower_" + name
        guide = coarse if self.same_lower(prep, name) else (prep.coarse_lower or {}).get(name)
        if kind == "chord":
            chords = [(discretise(getattr(d, low_name), h), k) for d, k in prep.lower_comps]
            return compose(chords, win, tilt, guide)
        pairs = []
        for d, k in prep.lower_comps:
            pair = discretise_lower(getattr(d, low_name), h)
            if pair is None:
                return None
            pairs.append((pair, k))
        return compose(pairs, win, tilt, guide)

    def split(
        self, prep: Prepared, name: str, delta: float, kind: str, epsilon: float | None = None
    ) -> ComposedPLD | None:
        """One direction's composition split by heavy-tail steps (cached): ``"upper"``
        (connect-the-dots) or ``"dominated"`` (dominated pairs), cut for the level ``delta``
        and tilted for it (or for the tail above ``epsilon``); None where no split applies.
        Many components are composed with their tails cut for ``delta`` (:meth:`cut`)."""
        tag, prep = self.cut(prep, delta)
        key = (name + tag, -1.0, self.points, f"split-{kind}@{delta!r}/{epsilon!r}")
        if key in self.states:
            return self.states[key]

        def tilt_for(guide: Sequence[tuple[DiscretePLD, int]]) -> float:
            if epsilon is None:
                return self.tilts(prep, name, tilt_for_delta(guide, delta), delta)[0]
            return self.tilts(prep, name, tilt_for_epsilon(guide, epsilon), delta)[0]

        extend = UPPER_WINDOW_POINTS if kind == "upper" else EXTENDED_WINDOW_POINTS
        h, win = self.window(prep, name, tilt_for(prep.coarse[name]), delta, extend)

        result: ComposedPLD | None = None
        if kind == "upper":
            plds = [(discretise(getattr(d, name), h), k) for d, k in prep.comps]
            result = compose_split(plds, win, tilt_for, prep.coarse[name], delta, upper=True)
        else:
            guide = prep.coarse[name] if self.same_lower(prep, name) else None
            guide = guide or (prep.coarse_lower or {}).get(name)
            pairs = [
                (discretise_lower(getattr(d, "lower_" + name), h), k) for d, k in prep.lower_comps
            ]
            if guide is not None and all(p is not None for p, _ in pairs):
                complete = [(p, k) for p, k in pairs if p is not None]
                result = compose_split(complete, win, tilt_for, guide, delta, upper=False)
        self.states[key] = result
        return result

    def profile(
        self, prep: Prepared, epsilons: Sequence[float], points: int = PROFILE_POINTS
    ) -> list[float]:
        """Certified upper bounds on delta at every epsilon of ``epsilons``, read from the
        compositions made once per direction for the whole curve, on a grid of ``points``:
        the untilted one, and one for the largest epsilon (split by heavy-tail steps, cut and
        tilted for the Chernoff level of delta there; tilted plainly where no split applies),
        read where the untilted one falls below UNTILTED_DELTA. Every composition certifies
        delta at every epsilon, so each reading is a bound; the worse direction is returned."""
        out = [0.0] * len(epsilons)
        top = max(epsilons, default=0.0)
        kept = self.points
        self.points = points
        # every reading of the curve is made of the whole components (no cut tails)
        self.cutting = False
        try:
            for name in prep.names:
                plain = self.composed(prep, name, 0.0, UNTILTED_DELTA)
                assert plain is not None
                deep = self._deepest(prep, name, top)
                for i, epsilon in enumerate(epsilons):
                    read = delta_at(plain, epsilon, upper=True)
                    if deep is not None and read < UNTILTED_DELTA:
                        read = min(read, delta_at(deep, epsilon, upper=True))
                    out[i] = max(out[i], read)
        finally:
            self.points = kept
            self.cutting = True
        return out

    def _deepest(self, prep: Prepared, name: str, epsilon: float) -> ComposedPLD | None:
        """The composition that reads delta(epsilon) far below UNTILTED_DELTA: split by
        heavy-tail steps, or else tilted (None when delta there is not that small)."""
        level = chernoff_level(prep.coarse[name], epsilon)
        if level >= UNTILTED_DELTA:
            return None
        for _ in range(PROFILE_RECUTS):
            deep = self.split(prep, name, level, "upper", epsilon)
            if deep is None:
                tilt = self.tilts(prep, name, tilt_for_epsilon(prep.coarse[name], epsilon), level)
                return self.composed(prep, name, tilt[0], level)
            # the Chernoff level can be far above delta: cut again against the delta found
            value = delta_at(deep, epsilon, upper=True)
            if deep.dropped <= PROFILE_DROPPED_SHARE * value:
                break
            level = max(value - deep.dropped, level * 1e-6)
        return deep

    @staticmethod
    def snap(tilt: float) -> float:
        """The tilt rounded down to the grid 2^(j/4) (0 stays 0)."""
        if tilt <= 0:
            return 0.0
        return float(2.0 ** (math.floor(4 * math.log2(tilt)) / 4))

    def tilts(self, prep: Prepared, name: str, tilt: float, level: float) -> list[float]:
        """The tilt to use (snapped to a grid so that nearby queries share compositions),
        and 0 as a fallback; no tilt when the delta of interest (``level``) is large enough for
        the plain FFT's round-off."""
        if tilt <= 0 or level >= UNTILTED_DELTA:
            return [0.0]
        # beyond e^MAX_TILT_RANGE across the plain window the tilt buys nothing (bounded losses
        # push the Chernoff tilt to infinity) and only narrows the window below the grid
        tilt = min(tilt, MAX_TILT_RANGE / prep.width0[name])
        return [self.snap(tilt), 0.0]

    def known_deltas(self, name: str, epsilon: float) -> tuple[float, float]:
        """The best certified delta(epsilon) bracket of one direction over every composition
        made so far (each certifies its own bound)."""
        best_up, best_lo = 1.0, 0.0
        for key, composed in self.states.items():
            state_name, _tilt, _points, of = key
            if state_name.partition("|")[0] != name or composed is None:
                continue
            upper = of in UPPER_KINDS or of.startswith("split-upper")
            value = self.read.get((key, epsilon))
            if value is None:
                value = self.read[(key, epsilon)] = delta_at(composed, epsilon, upper=upper)
            if upper:
                best_up = min(best_up, value)
            else:
                best_lo = max(best_lo, value)
        return best_up, best_lo


def read_profile(accountant: PLDAccountant, epsilons: Sequence[float]) -> list[float] | None:
    """Certified upper bounds on delta at ``epsilons`` from compositions made once
    (:meth:`Compositions.profile`), instead of a search per point; None where the accountant
    answers otherwise (nothing composed, a non-private or single-release ledger: ask
    ``get_delta``). Epsilons at or above the pure-DP cap get 0, as ``get_delta`` gives."""
    prep = accountant._prepared()
    if prep is None or accountant._non_private:
        return None
    if len(prep.comps) == 1 and prep.comps[0][1] == 1:
        return None
    below = [e for e in epsilons if e < prep.pure_cap]
    read = iter(accountant._cache.profile(prep, below) if below else [])
    return [next(read) if e < prep.pure_cap else 0.0 for e in epsilons]
