"""Tight, certified privacy-loss-distribution accountant.

Each leaf event becomes an upper-bound privacy curve per neighbouring direction
(:mod:`dpledger.accountant.profiles`), discretised by connect-the-dots and composed by FFT
(:mod:`dpledger.accountant.pld_engine`). Both directions are composed separately and the worse is
reported. Truncated tails and FFT round-off are charged to delta; pure-DP compositions are capped
by basic composition.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Hashable, Iterator, Sequence

import attrs
import numpy as np

from dpledger.accountant.base import (
    Accountant,
    DeltaBound,
    EpsilonBound,
    identical_delta,
    infinite_epsilon,
)
from dpledger.accountant.conversions import merged_gaussian_multiplier
from dpledger.accountant.leaves import leaf_profiles
from dpledger.accountant.pld_engine import (
    LOWER_DEFLATION,
    MAX_CERTIFIED_EPSILON,
    MAX_FFT_LEN,
    MAX_LOSS,
    ComposedPLD,
    DiscretePLD,
    chernoff_epsilon,
    chernoff_level,
    compose,
    delta_at,
    discretise,
    discretise_lower,
    epsilon_for,
    lower_shift,
    tilt_for_delta,
    tilt_for_epsilon,
    tilted_window,
)
from dpledger.accountant.pld_split import compose_split
from dpledger.accountant.profiles import DirectedProfiles, Profile
from dpledger.accountant.random_allocation import allocation_parts
from dpledger.core.adjacency import Adjacency
from dpledger.core.basic_composition import basic_composition_epsilon
from dpledger.core.errors import BoundUnavailable, UnsupportedEventError
from dpledger.core.events import (
    Event,
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    PoissonSampledEvent,
    PureDPEvent,
    RandomAllocationEvent,
    RandomizedResponseEvent,
    SampledWithoutReplacementEvent,
    ShuffledBatchesEvent,
    flatten,
)

#: grid points targeted for the composed window (accuracy/speed trade-off)
TARGET_POINTS = 1 << 18
#: most grid points of one composed window (before the FFT-length cap)
MAX_POINTS = 1 << 20
#: largest number of grid points one component may use
MAX_COMPONENT_POINTS = 1 << 22
#: most grid points per component on the coarse grid that guides windows and tilts
COARSE_MAX_POINTS = 1 << 16
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


#: adaptive epsilon queries start at this many grid points and refine until the bracket is
#: narrower than BRACKET_TARGET (relative) or BRACKET_ABSOLUTE
ADAPTIVE_START_POINTS = 1 << 14
BRACKET_TARGET = 0.008
#: refinement stops when a finer pass left at least this fraction of the bracket's width
STALLED_GAP = 0.9
BRACKET_ABSOLUTE = 1e-4
#: gentler tilts (and dominated pairs) are tried while upper > lower * BRACKET_GOAL
BRACKET_GOAL = 1.005
#: delta queries compose dominated pairs while upper > lower * DELTA_BRACKET_GOAL
DELTA_BRACKET_GOAL = 1.01
#: a delta query stops refining its grid once its bracket is also this narrow in absolute terms
DELTA_ABSOLUTE = 1e-6
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
#: truncation mass of the composed window (charged to delta)
TAIL_MASS = 1e-18
#: above this many distinct leaf events, parameters are rounded to dominating representatives
MAX_DISTINCT_COMPONENTS = 256
#: relative step of the representative grid (noise rounded down, rates and epsilons rounded up)
REPRESENTATIVE_STEP = 1e-3
#: up to this many distinct components the window gets TARGET_POINTS grid points ...
FULL_RESOLUTION_COMPONENTS = 16
#: the window's points grow like (sqrt(compositions) / 32) ** GROWTH_POWER
GROWTH_POWER = 1.0
#: ... beyond, the FFT budget is shared, down to this many points
MIN_POINTS = 1 << 15


def _allocation_reduced(events: dict[Event, int]) -> dict[Event, int]:
    """The upper bound's components with each k-of-t allocation (k > 1) replaced by its k
    epochs of 1-of-t/k allocation (:func:`~dpledger.accountant.random_allocation.
    allocation_parts`); the same dict when there is none. The lower bound keeps the k-of-t
    event (the parts bound it from above only)."""
    if not any(isinstance(e, RandomAllocationEvent) and e.num_selected > 1 for e in events):
        return events
    out: dict[Event, int] = {}
    for leaf, count in events.items():
        parts: Sequence[tuple[Event, int]] = ((leaf, 1),)
        if isinstance(leaf, RandomAllocationEvent):
            parts = allocation_parts(leaf)
        for part, times in parts:
            # 1-of-1 allocation is the step's own mechanism: the closed form composes it
            flat = flatten(part.event) if isinstance(part, RandomAllocationEvent) else ()
            if isinstance(part, RandomAllocationEvent) and part.num_steps == 1:
                for inner, n in flat:
                    out[inner] = out.get(inner, 0) + n * times * count
            else:
                out[part] = out.get(part, 0) + times * count
    return _merge_gaussians(out)


def _merge_gaussians(merged: dict[Event, int]) -> dict[Event, int]:
    """Unsampled Gaussians compose exactly into one Gaussian: 1/s^2 = sum k_i / s_i^2."""
    gaussians = [(e, k) for e, k in merged.items() if isinstance(e, GaussianEvent)]
    if len(gaussians) <= 1:
        return merged
    out = {e: k for e, k in merged.items() if not isinstance(e, GaussianEvent)}
    sigma = merged_gaussian_multiplier((e.noise_multiplier, k) for e, k in gaussians)
    out[GaussianEvent(sigma)] = out.get(GaussianEvent(sigma), 0) + 1
    return out


def _grid_index(x: float, step: float, *, up: bool) -> int:
    """Index of ``x`` (> 0) on the geometric grid ``(1 + step)^i``, rounding up or down."""
    i = math.log(x) / math.log1p(step)
    return math.ceil(i) if up else math.floor(i)


def _round_up(x: float, step: float = REPRESENTATIVE_STEP) -> float:
    if x <= 0:
        return x
    return float(math.exp(_grid_index(x, step, up=True) * math.log1p(step)))


def _round_down(x: float, step: float = REPRESENTATIVE_STEP) -> float:
    return float(math.exp(_grid_index(x, step, up=False) * math.log1p(step)))


def _representative(event: Event, step: float, *, up: bool) -> Event:
    """An event on a geometric parameter grid of ``step``: at least (``up``) or at most as
    privacy-costly as ``event``. Upper bounds use the first, lower bounds the second."""
    cost_up, cost_down = (_round_up, _round_down) if up else (_round_down, _round_up)
    if isinstance(event, GaussianEvent):
        return GaussianEvent(cost_down(event.noise_multiplier, step))
    if isinstance(event, LaplaceEvent):
        return LaplaceEvent(cost_down(event.noise_multiplier, step))
    if isinstance(event, PureDPEvent):
        return PureDPEvent(cost_up(event.epsilon, step))
    if isinstance(event, PoissonSampledEvent):
        q = min(1.0, cost_up(event.sampling_probability, step))
        return PoissonSampledEvent(q, _representative(event.event, step, up=up))
    return event


def _group(merged: dict[Event, int], step: float, *, up: bool) -> dict[Event, int]:
    out: dict[Event, int] = {}
    for event, k in merged.items():
        rep = _representative(event, step, up=up)
        out[rep] = out.get(rep, 0) + k
    return out


def _grid_key(event: Event, step: float) -> Hashable:
    """The cell of ``event`` on the representative grid (cheap: builds no event)."""
    if isinstance(event, GaussianEvent | LaplaceEvent):
        return (event.kind, _grid_index(event.noise_multiplier, step, up=False))
    if isinstance(event, PureDPEvent):
        return (event.kind, _grid_index(event.epsilon, step, up=True) if event.epsilon else None)
    if isinstance(event, PoissonSampledEvent):
        q = _grid_index(event.sampling_probability, step, up=True)
        return (event.kind, q, _grid_key(event.event, step))
    return event


def _representative_step(merged: dict[Event, int]) -> float:
    """The finest grid step (growing from REPRESENTATIVE_STEP to ~3%) leaving few components."""
    step = REPRESENTATIVE_STEP
    while step < 0.025 and len({_grid_key(e, step) for e in merged}) > MAX_DISTINCT_COMPONENTS:
        step *= 1.5
    return step


def _resolution(target_points: int, components: int, total: int = 1) -> int:
    """Grid points for the composed window: ``target_points`` grown with the number of
    compositions (the lower bound's Hoeffding shift grows like h sqrt(total)), up to
    MAX_POINTS; for many distinct components a fixed FFT budget is shared among them
    (never below MIN_POINTS).

    Upper bounds (connect-the-dots) are insensitive to the grid; only the lower bound's
    shift grows with the spacing, so many-component pipelines trade lower-bound tightness
    for time.
    """
    grow = min(MAX_POINTS / target_points, max(1.0, math.sqrt(total) / 32.0) ** GROWTH_POWER)
    points = int(target_points * grow)
    if components <= FULL_RESOLUTION_COMPONENTS:
        return points
    return max(MIN_POINTS, points * FULL_RESOLUTION_COMPONENTS // components)


@attrs.frozen
class _Prepared:
    """The components of the ledger, their coarse discretisations and the pure-DP cap."""

    comps: list[tuple[DirectedProfiles, int]]
    lower_comps: list[tuple[DirectedProfiles, int]]
    names: tuple[str, ...]  # directions to compose ("remove" only when symmetric)
    coarse: dict[str, list[tuple[DiscretePLD, int]]]
    #: the lower pairs on the coarse grid (guides for their own tails), when they differ
    coarse_lower: dict[str, list[tuple[DiscretePLD, int]]] | None
    h0: float
    pure_cap: float  # basic-composition epsilon if all parts are pure, else inf
    keep_lower: bool
    span: float
    width0: dict[str, float]  # width of the untilted window per direction


class PLDAccountant(Accountant):
    """Certified two-sided PLD accountant (connect-the-dots upper, shifted-chord lower)."""

    name = "pld"
    composes_tabulated = True

    def __init__(self, adjacency: Adjacency | None = None, *, target_points: int = TARGET_POINTS):
        super().__init__(adjacency)
        self.target_points = target_points
        self._prep: _Prepared | None = None
        self._upper_events: dict[Event, int] = {}
        self._states: dict[tuple[str, float, int, str], ComposedPLD | None] = {}
        #: grid points of the compositions being made (adaptive epsilon queries start coarse)
        self._points = target_points
        self._non_private = False
        #: whether a composition of the current pass had its spacing held at the floor
        self._floored = False
        #: (direction, epsilon) -> the delta level a delta query found (guides finer passes)
        self._levels: dict[tuple[str, float], float] = {}
        #: ("epsilon", direction, delta) and ("delta", direction, epsilon) queries that needed
        #: the split compositions on a coarser grid
        self._split_first: set[tuple[str, str, float]] = set()
        #: delta(epsilon) read from each composition made (compositions never change)
        self._read: dict[tuple[tuple[str, float, int, str], float], float] = {}

    def _unsupported_reason(self, event: Event) -> str | None:
        leaves = flatten(event)
        reason = _extent_reason(leaves, self._ledger)
        if reason is not None:
            return reason
        for leaf, _count in leaves:
            if isinstance(leaf, NonPrivateEvent):
                continue
            reason = _parameter_reason(leaf, self.adjacency.sensitivity_factor)
            if reason is not None:
                return f"{leaf.describe()}: {reason}"
            try:
                leaf_profiles(leaf, self.adjacency)
            except UnsupportedEventError as exc:
                return f"{leaf.describe()}: {exc}"
        return None

    def _invalidate(self) -> None:
        self._prep = None
        self._states = {}
        self._levels = {}
        self._split_first = set()
        self._read = {}

    # -- composition -------------------------------------------------------------------
    def _components(
        self,
    ) -> tuple[list[tuple[DirectedProfiles, int]], list[tuple[DirectedProfiles, int]]]:
        """(components for the upper bound, components for the lower bound).

        They are the same unless more than MAX_DISTINCT_COMPONENTS distinct leaves remain:
        then the upper bound composes dominating representatives (parameters rounded to the
        costly side) and the lower bound dominated ones (rounded to the cheap side), so that
        both stay certified; or unless a k-of-t allocation (k > 1) is present: the upper bound
        composes its k-of-t reduction, the lower bound the event itself.
        """
        merged: dict[Event, int] = {}
        self._non_private = False
        for event, count in self._ledger:
            for leaf, k in flatten(event):
                if isinstance(leaf, NonPrivateEvent):
                    self._non_private = True
                    continue
                merged[leaf] = merged.get(leaf, 0) + k * count
        merged = _merge_gaussians(merged)
        upper_events = lower_events = merged
        if len(merged) > MAX_DISTINCT_COMPONENTS:
            step = _representative_step(merged)
            upper_events = _group(merged, step, up=True)
            # the lower bound is an informative bracket only: a coarser grid halves its cost
            lower_events = _group(merged, 2 * step, up=False)
        upper_events = _allocation_reduced(upper_events)
        self._upper_events = upper_events
        upper = [(leaf_profiles(leaf, self.adjacency), k) for leaf, k in upper_events.items()]
        if lower_events is upper_events:
            return upper, upper
        lower = [(leaf_profiles(leaf, self.adjacency), k) for leaf, k in lower_events.items()]
        return upper, lower

    def _prepared(self) -> _Prepared | None:
        if self._prep is not None:
            return self._prep
        comps, lower_comps = self._components()
        if not comps:
            return None
        span = max(p.loss_hi - p.loss_lo for d, _ in comps for p in (d.remove, d.add))
        symmetric = all(d.remove is d.add for d, _ in comps) and all(
            d.lower_remove is d.lower_add for d, _ in lower_comps
        )
        names = ("remove",) if symmetric else ("remove", "add")
        h0, coarse = _coarse_grid(comps, names, span)
        # lumped losses keep lower bounds sound: above the grid they go to +infinity, which
        # lower bounds drop; below -MAX_LOSS they carry P-mass at most e^-MAX_LOSS, inside the
        # BELOW_RANGE_MASS charged per component (and dominated pairs are 1 - e^eps, resp. 0,
        # beyond their first and last points, below any curve)
        lower_exact = all(d.lower_remove.exact and d.lower_add.exact for d, _ in lower_comps)
        width0 = {}
        for name in names:
            a, b = tilted_window(coarse[name], 0.0, TAIL_MASS)
            width0[name] = max(b - a, 1e-9)
        distinct = lower_comps is not comps or any(
            getattr(d, "lower_" + name) is not getattr(d, name) for d, _ in comps for name in names
        )
        coarse_lower = (
            {
                name: [(discretise(getattr(d, "lower_" + name), h0), k) for d, k in lower_comps]
                for name in names
            }
            if distinct and lower_exact
            else None
        )
        cap = self._pure_cap(comps)
        self._prep = _Prepared(
            comps,
            lower_comps,
            names,
            coarse,
            coarse_lower,
            h0,
            cap,
            lower_exact,
            span,
            width0,
        )
        return self._prep

    def _pure_cap(self, comps: list[tuple[DirectedProfiles, int]]) -> float:
        """Basic composition of the components' largest losses when every curve is 0 at its
        top loss (pure composition), rounded up; infinity otherwise."""
        if any(_unbounded_loss(event) for event in self._upper_events):
            # a Gaussian-based curve is 0 at its top loss only by underflow (tiny q): not pure
            return math.inf
        cap = 0.0
        for d, k in comps:
            for p in (d.remove, d.add):
                if not (math.isfinite(p.loss_hi) and float(p(_arr(p.loss_hi))[0]) == 0.0):
                    cap = math.inf
            if math.isfinite(cap):
                cap += k * max(d.remove.loss_hi, d.add.loss_hi)
        # the pure losses (e.g. sensitivity / scale) and their sum are rounded: round the cap up
        # so that delta = 0 is never reported below the true pure epsilon (exactly when the
        # pure epsilons are known exactly)
        if math.isfinite(cap):
            cap = _exact_pure_cap(self._upper_events, self.adjacency) or math.nextafter(
                cap * (1 + 16 * 2.0**-53 * (len(comps) + 4)), math.inf
            )
        return cap

    def _window(
        self, prep: _Prepared, name: str, tilt: float, delta: float, extend: int
    ) -> tuple[float, tuple[float, float]]:
        """(grid spacing, composition window) of one direction at one tilt; ``delta`` is the
        level of interest (the window drops untilted tails far below it), ``extend`` the grid
        points up to which the window extends over a heavy tilted tail."""
        coarse = prep.coarse[name]
        total = sum(k for _, k in prep.comps)
        pad = 2 * prep.h0 * total**0.5 + 4 * prep.h0
        a, b_full = tilted_window(coarse, tilt, TAIL_MASS)
        b = b_full
        if tilt > 0:
            # the grid resolves the part that matters (untilted tails far below delta) ...
            untilted = min(TAIL_MASS, delta * WINDOW_TAIL_REL)
            b = tilted_window(coarse, tilt, TAIL_MASS, untilted)[1]
        a, b, b_full = a - pad, b + pad, b_full + pad
        width = b - a
        points = _resolution(self._points, len(prep.comps), total)
        h = width / points
        floor = max(prep.span / MAX_COMPONENT_POINTS, 2.0 * width / MAX_FFT_LEN, 1e-9)
        # a finer pass cannot refine a grid held at its floor or at the most points
        capped = _resolution(2 * self._points, len(prep.comps), total) <= points
        self._floored = self._floored or capped or h <= 1.2 * floor
        h = max(h, floor)
        # ... and the FFT window extends over the heavy tilted tail where that is affordable,
        # so that little tilted mass wraps around (which would loosen lower bounds)
        b = max(b, min(b_full, a + extend * h))
        return h, (a, b)

    def _composed(
        self, prep: _Prepared, name: str, tilt: float, delta: float, kind: str = "upper"
    ) -> ComposedPLD | None:
        """One direction's composition at one tilt (cached): ``"upper"`` (connect-the-dots),
        ``"chord"`` (the lower pairs' chords, read with a shift; the upper composition itself
        when the lower pairs are the upper ones) or ``"dominated"`` (dominated pairs; None when
        one cannot be certified). A window the FFT cannot hold is retried at twice the
        spacing."""
        key = (name, tilt, self._points, kind)
        if key in self._states:
            return self._states[key]
        if kind == "chord" and self._same_lower(prep, name):
            result: ComposedPLD | None = self._composed(prep, name, tilt, delta)
        else:
            h, win = self._window(prep, name, tilt, delta, self._extend(prep, name, kind))
            while True:
                try:
                    result = self._compose_at(prep, name, tilt, h, win, kind)
                    break
                except BoundUnavailable:
                    h *= 2.0
                    if h > 1.0:
                        raise
        self._states[key] = result
        return result

    def _extend(self, prep: _Prepared, name: str, kind: str) -> int:
        """Grid points up to which a composition's window extends over the heavy tilted tail:
        far for lower bounds (wrapped mass is subtracted from them), less for an upper
        composition that no lower bound reads (wrapped mass only adds to it)."""
        if kind == "upper" and not self._same_lower(prep, name):
            return UPPER_WINDOW_POINTS
        return EXTENDED_WINDOW_POINTS

    @staticmethod
    def _same_lower(prep: _Prepared, name: str) -> bool:
        """Whether the lower bound's pairs of this direction are the upper bound's."""
        low_name = "lower_" + name
        return prep.lower_comps is prep.comps and all(
            getattr(d, low_name) is getattr(d, name) for d, _ in prep.comps
        )

    def _compose_at(
        self,
        prep: _Prepared,
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
        guide = coarse if self._same_lower(prep, name) else (prep.coarse_lower or {}).get(name)
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

    def _lower_epsilon(
        self, prep: _Prepared, name: str, tilt: float, delta: float, goal: float | None
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
        dominated = self._composed(prep, name, tilt, delta, "dominated")
        if dominated is not None:
            best = max(best, epsilon_for(dominated, delta, upper=False))
            if chord_first or goal is None or best >= goal:
                return best
        if chord_first or (
            goal is not None and self._chord_reach(prep, name, tilt, delta, goal) <= best
        ):
            return best
        return max(best, self._chord_epsilon(prep, name, tilt, delta))

    def _chord_epsilon(self, prep: _Prepared, name: str, tilt: float, delta: float) -> float:
        chord = self._composed(prep, name, tilt, delta, "chord")
        assert chord is not None
        return epsilon_for(chord, delta, upper=False)

    def _chord_short(
        self, prep: _Prepared, name: str, tilt: float, delta: float, goal: float
    ) -> bool:
        """Whether the chord's lower bound cannot reach ``goal``."""
        return self._chord_reach(prep, name, tilt, delta, goal) < goal

    def _chord_reach(
        self, prep: _Prepared, name: str, tilt: float, delta: float, goal: float
    ) -> float:
        """About the most the chord's lower bound can reach: the upper bound (``goal`` times
        BRACKET_GOAL) less the chord's Hoeffding shift, which grows like h sqrt(steps). Only
        which lower-bound compositions are made depends on it."""
        up = self._composed(prep, name, tilt, delta)
        assert up is not None
        return goal * BRACKET_GOAL - lower_shift(up, delta * 1e-3)

    def _tilts(self, prep: _Prepared, name: str, tilt: float, level: float) -> list[float]:
        """The tilt to use (snapped to a grid so that nearby queries share compositions),
        and 0 as a fallback; no tilt when the delta of interest (``level``) is large enough for
        the plain FFT's round-off."""
        if tilt <= 0 or level >= UNTILTED_DELTA:
            return [0.0]
        # beyond e^MAX_TILT_RANGE across the plain window the tilt buys nothing (bounded losses
        # push the Chernoff tilt to infinity) and only narrows the window below the grid
        tilt = min(tilt, MAX_TILT_RANGE / prep.width0[name])
        return [self._snap(tilt), 0.0]

    def _direction(
        self, prep: _Prepared, name: str, delta: float, floor: float, ceiling: float = 0.0
    ) -> tuple[float, float, float]:
        """(upper, lower, grid spacing) of one direction at the current grid; no lower bound
        when the upper bound is at most ``floor`` (another direction's lower bound), or when it
        is at most ``ceiling`` (another direction's upper bound) and within BRACKET_TARGET of
        ``floor``: this direction's lower bound could not narrow the bracket noticeably.

        In the tilted regime, when the plain tilted compositions leave the bracket wider than
        the goal, the compositions split by heavy-tail steps are made as well; once they were
        needed on a coarser grid, finer grids make them first, and the plain ones only when
        they leave the bracket wider than the goal."""
        if ("epsilon", name, delta) in self._split_first:
            split = self._split_bracket(prep, name, delta, math.inf, 0.0)
            if split[0] <= split[1] * BRACKET_GOAL:
                return split
        want_lower = prep.keep_lower and not _UPPER_ONLY.get()
        tilts = self._tilts(prep, name, tilt_for_delta(prep.coarse[name], delta), delta)
        best_up, best_lo, h = math.inf, 0.0, 0.0
        for tilt in tilts:
            up = self._composed(prep, name, tilt, delta)
            assert up is not None
            h = up.h
            eps_up = epsilon_for(up, delta, upper=True)
            best_up = min(best_up, eps_up)
            settled = best_up <= ceiling and best_up <= floor * (1 + BRACKET_TARGET)
            want_lower = want_lower and best_up > floor and not settled
            if want_lower:
                goal = best_up / BRACKET_GOAL
                best_lo = max(best_lo, self._lower_epsilon(prep, name, tilt, delta, goal))
            # a finite answer inside the tilted window needs no fallback
            if math.isfinite(eps_up) and eps_up > float(up.losses[0]) + up.h:
                break
        # a heavy tilted tail can wrap around onto the lower bound's range: gentler tilts
        # (less wrap, more round-off) are tried for the lower bound while the bracket is
        # wider than the goal and they still raise it
        previous = -math.inf
        for gentler in _gentler(tilts[0]):
            if not want_lower or best_up <= best_lo * BRACKET_GOAL:
                break
            eps_lo = self._lower_epsilon(prep, name, gentler, delta, None)
            if eps_lo <= previous:
                break
            previous = eps_lo
            best_lo = max(best_lo, eps_lo)
        settled = best_up <= ceiling and best_up <= floor * (1 + BRACKET_TARGET)
        if (
            tilts[0] > 0
            and best_up > floor
            and not settled
            and not best_up <= best_lo * BRACKET_GOAL
        ):
            best_up, best_lo, _ = self._split_bracket(prep, name, delta, best_up, best_lo)
            self._split_first.add(("epsilon", name, delta))
        return best_up, best_lo, h

    def _split_bracket(
        self, prep: _Prepared, name: str, delta: float, best_up: float, best_lo: float
    ) -> tuple[float, float, float]:
        """The bracket improved by the compositions split by heavy-tail steps
        (:mod:`dpledger.accountant.pld_split`) where they can be made, and their spacing."""
        h = 0.0
        up = self._split(prep, name, delta, "upper")
        if up is not None:
            h = up.h
            best_up = min(best_up, epsilon_for(up, delta, upper=True))
        if prep.keep_lower and not _UPPER_ONLY.get() and not best_up <= best_lo * BRACKET_GOAL:
            low = self._split(prep, name, delta, "dominated")
            if low is not None:
                best_lo = max(best_lo, epsilon_for(low, delta, upper=False))
        return best_up, best_lo, h

    def _split(
        self, prep: _Prepared, name: str, delta: float, kind: str, epsilon: float | None = None
    ) -> ComposedPLD | None:
        """One direction's composition split by heavy-tail steps (cached): ``"upper"``
        (connect-the-dots) or ``"dominated"`` (dominated pairs), cut for the level ``delta``
        and tilted for it (or for the tail above ``epsilon``); None where no split applies."""
        key = (name, -1.0, self._points, f"split-{kind}@{delta!r}/{epsilon!r}")
        if key in self._states:
            return self._states[key]

        def tilt_for(guide: Sequence[tuple[DiscretePLD, int]]) -> float:
            if epsilon is None:
                return self._tilts(prep, name, tilt_for_delta(guide, delta), delta)[0]
            return self._tilts(prep, name, tilt_for_epsilon(guide, epsilon), delta)[0]

        extend = UPPER_WINDOW_POINTS if kind == "upper" else EXTENDED_WINDOW_POINTS
        h, win = self._window(prep, name, tilt_for(prep.coarse[name]), delta, extend)

        result: ComposedPLD | None = None
        if kind == "upper":
            plds = [(discretise(getattr(d, name), h), k) for d, k in prep.comps]
            result = compose_split(plds, win, tilt_for, prep.coarse[name], delta, upper=True)
        else:
            guide = prep.coarse[name] if self._same_lower(prep, name) else None
            guide = guide or (prep.coarse_lower or {}).get(name)
            pairs = [
                (discretise_lower(getattr(d, "lower_" + name), h), k) for d, k in prep.lower_comps
            ]
            if guide is not None and all(p is not None for p, _ in pairs):
                complete = [(p, k) for p, k in pairs if p is not None]
                result = compose_split(complete, win, tilt_for, guide, delta, upper=False)
        self._states[key] = result
        return result

    @staticmethod
    def _snap(tilt: float) -> float:
        """The tilt rounded down to the grid 2^(j/4) (0 stays 0)."""
        if tilt <= 0:
            return 0.0
        return float(2.0 ** (math.floor(4 * math.log2(tilt)) / 4))

    # -- queries -----------------------------------------------------------------------
    def _epsilon(self, delta: float) -> EpsilonBound:
        """The bracket at the coarsest grid that makes it narrower than BRACKET_TARGET
        (relative, or BRACKET_ABSOLUTE), never finer than ``target_points``.

        Upper bounds barely move with the grid (connect-the-dots); the lower bound's gap shrinks
        about in proportion to the spacing, so the points needed are estimated from a coarse
        pass and one finer pass usually suffices."""
        single = self._single_leaf_epsilon(delta)
        if single is not None:
            return single
        full = self.target_points
        points = min(full, ADAPTIVE_START_POINTS)
        uppers: dict[str, float] = {}  # certified upper bound per direction, coarsest pass
        previous = math.inf
        try:
            while True:
                self._points = points
                self._floored = False
                bound = self._epsilon_at(delta, uppers)
                gap = bound.epsilon - bound.epsilon_lower
                narrow = _UPPER_ONLY.get() or gap <= max(
                    BRACKET_TARGET * bound.epsilon, BRACKET_ABSOLUTE
                )
                # a finer grid that barely narrowed the bracket will not: what is left is not
                # the grid's (tails, tilts, the lower bound's construction)
                stalled = gap > STALLED_GAP * previous
                if (
                    points >= full
                    or narrow
                    or stalled
                    or self._floored
                    or not math.isfinite(bound.epsilon)
                ):
                    return bound
                previous = gap
                ratio = gap / max(0.8 * BRACKET_TARGET * bound.epsilon, BRACKET_ABSOLUTE)
                points = _finer_points(points, full, ratio, least=2.0, most=math.inf)
        finally:
            self._points = full

    def _single_leaf_epsilon(self, delta: float) -> EpsilonBound | None:
        """One leaf released once: its profile is the composition, so epsilon(delta) is the
        root of the profile itself (upper curve for the upper bound, the exact curve deflated
        by LOWER_DEFLATION for the lower one), found by bisection and checked at the end point;
        None when there is more than one release or the root is beyond the certified range."""
        prep = self._prepared()
        if prep is None or self._non_private:
            return None
        single = _single_leaf(prep, self._upper_events)
        if single is None:
            return None
        upper = max(_upper_root(getattr(single, n), delta) for n in prep.names)
        if not math.isfinite(upper):
            return None
        lower = 0.0
        if prep.keep_lower:
            lower = max(_lower_root(getattr(single, "lower_" + n), delta) for n in prep.names)
        upper = min(upper, _next_up(prep.pure_cap))
        return EpsilonBound(upper, min(lower, upper), delta, self.name, {"exact_profile": 1.0})

    def _epsilon_at(self, delta: float, uppers: dict[str, float] | None = None) -> EpsilonBound:
        """The bracket at the current grid. ``uppers`` holds certified upper bounds per
        direction from coarser passes (and gets this pass's): a direction whose upper bound is
        already below the lower bound of another cannot decide the bracket and is skipped."""
        prep = self._prepared()
        if self._non_private:
            return infinite_epsilon(delta, self.name)
        if prep is None:
            return EpsilonBound(0.0, 0.0, delta, self.name)
        known = {} if uppers is None else uppers
        upper, lower, h = 0.0, 0.0, 0.0
        # the direction likely to decide the bracket first (its lower bound can spare the
        # other direction's)
        order = {n: known.get(n, chernoff_epsilon(prep.coarse[n], delta)) for n in prep.names}
        for name in sorted(prep.names, key=lambda n: -order[n]):
            if name not in known and lower > 0:
                # a direction whose upper bound on a coarser grid is below the lower bound found
                # so far, or below the upper one and near the lower one, cannot decide the bracket
                cheap = self._screen(prep, name, delta, lower, upper)
                if cheap is not None:
                    known[name] = cheap
                    upper = max(upper, cheap)
                    continue
            if known.get(name, math.inf) <= lower:
                upper = max(upper, known[name])
                continue
            best_up, best_lo, h = self._direction(prep, name, delta, lower, upper)
            known[name] = min(best_up, known.get(name, math.inf))
            upper = max(upper, known[name])
            lower = max(lower, best_lo)
        upper = min(upper, _next_up(prep.pure_cap))
        lower = min(lower, upper)
        return EpsilonBound(upper, lower, delta, self.name, {"grid_spacing": h})

    def _screen(
        self, prep: _Prepared, name: str, delta: float, lower: float, upper: float
    ) -> float | None:
        """A certified upper bound of one direction's epsilon(delta) from compositions on
        grids SCREEN_FACTORS times coarser than the current one, when it settles the direction:
        at most ``lower``, or at most ``upper`` and within BRACKET_TARGET of ``lower`` (the
        bracket found so far); None otherwise. A finer screen is made only when the coarser
        one came within SCREEN_RETRY of settling."""
        points = self._points
        try:
            for factor in SCREEN_FACTORS:
                self._points = max(MIN_SCREEN_POINTS, points // factor)
                tilt = self._tilts(prep, name, tilt_for_delta(prep.coarse[name], delta), delta)[0]
                up = self._composed(prep, name, tilt, delta)
                assert up is not None
                value = epsilon_for(up, delta, upper=True)
                if value <= lower or (value <= upper and value <= lower * (1 + BRACKET_TARGET)):
                    return value
                if not value <= lower * SCREEN_RETRY:
                    return None
            return None
        finally:
            self._points = points

    def _delta(self, epsilon: float) -> DeltaBound:
        prep = self._prepared()
        if self._non_private:
            return DeltaBound(1.0, 1.0, epsilon, self.name)
        if prep is None:
            return identical_delta(epsilon, self.name)
        if epsilon >= prep.pure_cap:
            return DeltaBound(0.0, 0.0, epsilon, self.name, {"pure_cap": prep.pure_cap})
        single = _single_leaf(prep, self._upper_events)
        if single is not None and epsilon <= _root_limit(single, prep.names):
            at = np.array([float(epsilon)])
            top = max(float(getattr(single, n)(at)[0]) for n in prep.names)
            bottom = 0.0
            if prep.keep_lower:
                bottom = max(
                    _lower_value(getattr(single, "lower_" + n), float(epsilon)) for n in prep.names
                )
            details = {"exact_profile": 1.0}
            return DeltaBound(min(1.0, top), min(bottom, top), epsilon, self.name, details)
        return self._adaptive_delta(prep, epsilon)

    def _adaptive_delta(self, prep: _Prepared, epsilon: float) -> DeltaBound:
        """The delta bracket at the coarsest grid that makes it narrower than
        DELTA_BRACKET_GOAL, never finer than ``target_points`` (every pass's compositions stay
        cached and each certifies its own bound, so the best of them all is read)."""
        full = self.target_points
        points = min(full, ADAPTIVE_START_POINTS)
        try:
            while True:
                self._points = points
                self._floored = False
                bound = self._delta_at(prep, epsilon)
                gap = bound.delta - bound.delta_lower
                goal = min((DELTA_BRACKET_GOAL - 1) * bound.delta_lower, DELTA_ABSOLUTE)
                if gap <= goal or points >= full or self._floored or bound.delta <= 0.0:
                    return bound
                ratio = gap / max(0.8 * goal, 1e-300)
                points = _finer_points(points, full, ratio, least=4.0, most=16.0)
        finally:
            self._points = full

    def _delta_at(self, prep: _Prepared, epsilon: float) -> DeltaBound:
        """The delta bracket at the current grid."""
        upper, lower, h = 0.0, 0.0, 0.0
        # a direction whose upper bound (from a coarser pass, or else this grid's plain
        # composition) is below another's lower bound cannot decide the bracket; the coarser
        # passes' bounds also order the directions
        known = {name: self._known_deltas(name, epsilon) for name in prep.names}
        lower = max(lo for _, lo in known.values())
        first = {
            name: up if up < 1.0 else self._delta_upper(prep, name, epsilon)[0]
            for name, (up, _) in known.items()
        }
        for name in sorted(prep.names, key=lambda n: -first[n]):
            if first[name] <= lower:
                upper = max(upper, first[name])
                continue
            best_up, best_lo, h = self._delta_direction(prep, name, epsilon, lower)
            upper = max(upper, best_up)
            lower = max(lower, best_lo)
        return DeltaBound(upper, min(lower, upper), epsilon, self.name, {"grid_spacing": h})

    def _delta_direction(
        self, prep: _Prepared, name: str, epsilon: float, floor: float = 0.0
    ) -> tuple[float, float, float]:
        """(upper, lower, grid spacing) of delta(epsilon) in one direction: the plain tilted
        compositions (upper first: no lower bound is made when it is at most ``floor``, another
        direction's lower bound), then the split ones while the bracket is wider than the goal.
        Once a coarser pass needed the split ones, finer passes make them first, and the plain
        ones only when the split bracket is still wider than the goal."""
        if ("delta", name, epsilon) in self._split_first:
            h = self._split_delta(prep, name, epsilon, self._levels[(name, epsilon)])
            best_up, best_lo = self._known_deltas(name, epsilon)
            if best_up <= floor or best_lo >= best_up / DELTA_BRACKET_GOAL:
                return best_up, best_lo, h
        _, level, tilts, tilt, h = self._delta_upper(prep, name, epsilon)
        # the Chernoff level can be orders of magnitude above the delta found (one heavy step,
        # or a loose bound): the plain FFT cannot resolve that delta, so compose again, tilted
        # for the level found
        found = min(level, self._known_deltas(name, epsilon)[0])
        self._levels[(name, epsilon)] = found
        if tilts[0] == 0 and found < UNTILTED_DELTA:
            retilt = self._tilts(prep, name, tilt_for_epsilon(prep.coarse[name], epsilon), found)
            if retilt[0] > 0:
                self._composed(prep, name, retilt[0], found)
                tilt, level = retilt[0], found
        best_up, best_lo = self._known_deltas(name, epsilon)
        if best_up <= floor or self._delta_lowers(prep, name, epsilon, tilt, level):
            return (*self._known_deltas(name, epsilon), h)
        best_up, best_lo = self._known_deltas(name, epsilon)
        found = min(found, best_up)
        if tilts[0] > 0 or found < UNTILTED_DELTA:
            self._split_delta(prep, name, epsilon, found)
            self._split_first.add(("delta", name, epsilon))
        return (*self._known_deltas(name, epsilon), h)

    def _delta_lowers(
        self, prep: _Prepared, name: str, epsilon: float, tilt: float, level: float
    ) -> bool:
        """Make the lower-bound compositions at one tilt until the bracket is within the goal;
        whether it is."""
        for kind in ("chord", "dominated") if prep.keep_lower else ():
            self._composed(prep, name, tilt, level, kind)
            best_up, best_lo = self._known_deltas(name, epsilon)
            if best_lo >= best_up / DELTA_BRACKET_GOAL:
                return True
        return False

    def _delta_upper(
        self, prep: _Prepared, name: str, epsilon: float
    ) -> tuple[float, float, list[float], float, float]:
        """(upper bound, Chernoff level, tilts, tilt used, grid spacing) of delta(epsilon) in
        one direction from the plain compositions (cached)."""
        coarse = prep.coarse[name]
        # a coarser pass may have found delta far below the Chernoff estimate
        level = min(chernoff_level(coarse, epsilon), self._levels.get((name, epsilon), 1.0))
        tilt, h = 0.0, 0.0
        tilts = self._tilts(prep, name, tilt_for_epsilon(coarse, epsilon), level)
        for tilt in tilts:
            up = self._composed(prep, name, tilt, level)
            assert up is not None
            h = up.h
            if epsilon >= float(up.losses[0]):
                break
        return self._known_deltas(name, epsilon)[0], level, tilts, tilt, h

    def _known_deltas(self, name: str, epsilon: float) -> tuple[float, float]:
        """The best certified delta(epsilon) bracket of one direction over every composition
        made so far (each certifies its own bound)."""
        best_up, best_lo = 1.0, 0.0
        for key, composed in self._states.items():
            state_name, _tilt, _points, of = key
            if state_name != name or composed is None:
                continue
            upper = of in UPPER_KINDS or of.startswith("split-upper")
            value = self._read.get((key, epsilon))
            if value is None:
                value = self._read[(key, epsilon)] = delta_at(composed, epsilon, upper=upper)
            if upper:
                best_up = min(best_up, value)
            else:
                best_lo = max(best_lo, value)
        return best_up, best_lo

    def _split_delta(self, prep: _Prepared, name: str, epsilon: float, level: float) -> float:
        """Split compositions for delta(epsilon); their spacing (0 when none applies). Their
        remainder is budgeted against ``level`` (the Chernoff estimate of delta): when delta
        comes out far lower, the cut is made again against it."""
        for _ in range(SPLIT_LEVEL_PASSES):
            up = self._split(prep, name, level, "upper", epsilon)
            if up is None:
                return 0.0
            value = delta_at(up, epsilon, upper=True)
            if up.dropped <= SPLIT_DROPPED_SHARE * value:
                break
            level = max(value - up.dropped, level * 1e-6)
        if prep.keep_lower:
            self._split(prep, name, level, "dominated", epsilon)
        # finer passes start from the level the tails were last cut against
        self._levels[(name, epsilon)] = level
        return 0.0 if up is None else up.h


#: a direction is screened on grids this many times coarser than the current one (at least
#: MIN_SCREEN_POINTS points) before it is composed in full; the finer screen only when the
#: coarser one came within a factor SCREEN_RETRY of the lower bound
SCREEN_FACTORS = (16, 4)
MIN_SCREEN_POINTS = 1 << 10
SCREEN_RETRY = 1.1
#: kinds of compositions that certify upper bounds (the others certify lower bounds)
UPPER_KINDS = frozenset({"upper"})
#: delta queries cut the tails again at most this many times, while the dropped terms exceed
#: SPLIT_DROPPED_SHARE of the bound
SPLIT_LEVEL_PASSES = 3
SPLIT_DROPPED_SHARE = 1e-2


def _finer_points(points: int, full: int, ratio: float, least: float, most: float) -> int:
    """Points of the next pass when the bracket is ``ratio`` times wider than wanted: the
    dominated pairs' gap shrinks about with the square of the spacing, so the points grow by
    1.5 sqrt(ratio), kept within [least, most] times, and never beyond ``full``."""
    return min(full, math.ceil(points * min(most, max(least, 1.5 * math.sqrt(ratio)))))


def _coarse_grid(
    comps: list[tuple[DirectedProfiles, int]], names: tuple[str, ...], span: float
) -> tuple[float, dict[str, list[tuple[DiscretePLD, int]]]]:
    """(spacing, components per direction) of the coarse grid that guides windows and tilts.

    The coarse grid adds rounding noise of variance ~ total h0^2 / 4 to the sum: it is refined
    until that noise is small against the composed window."""
    h0 = max(span / 1024.0, 1e-9)
    if h0 > MAX_LOSS / 8:
        # the coarse grid cannot resolve the losses the grid represents (+-MAX_LOSS)
        raise BoundUnavailable("pld", f"privacy losses span {span:g}, beyond the loss grid")
    total = sum(k for _, k in comps)
    coarse = {name: [(discretise(getattr(d, name), h0), k) for d, k in comps] for name in names}
    for _ in range(3):
        a, b = tilted_window(coarse[names[0]], 0.0, TAIL_MASS)
        target = max((b - a) / (40.0 * total**0.5), span / COARSE_MAX_POINTS)
        if target >= h0 / 2:
            break
        h0 = target
        coarse = {name: [(discretise(getattr(d, name), h0), k) for d, k in comps] for name in names}
    return h0, coarse


def _single_leaf(prep: _Prepared, events: dict[Event, int]) -> DirectedProfiles | None:
    """The profiles of the one leaf released once, when that is the whole composition (unsampled
    pure leaves keep the exact rational cap of the composition path, and an unsampled Gaussian
    is the closed-form backend's; a sampled pure leaf's root is capped by the same cap)."""
    if len(prep.comps) != 1 or prep.comps[0][1] != 1 or prep.lower_comps is not prep.comps:
        return None
    if len(events) != 1:
        return None
    leaf = next(iter(events))
    if isinstance(leaf, GaussianEvent) or (math.isfinite(prep.pure_cap) and not leaf.children()):
        return None
    return prep.comps[0][0]


#: bisection steps of the single-leaf roots (the bracket halves each step)
ROOT_STEPS = 200


def _root_limit(single: DirectedProfiles, names: tuple[str, ...]) -> float:
    """Largest epsilon at which every curve of the single release is read accurately."""
    kinds = list(names) + ["lower_" + n for n in names]
    curves: list[Profile] = [getattr(single, k) for k in kinds]
    return min([MAX_CERTIFIED_EPSILON] + [c.accurate_hi for c in curves])


def _upper_root(profile: Profile, delta: float) -> float:
    """A certified upper bound of epsilon(delta) for an upper curve: a point where the curve is
    at most delta (inf when none is found in the curve's accurate range, at most
    MAX_CERTIFIED_EPSILON)."""

    def value(e: float) -> float:
        return float(profile(np.array([e]))[0])

    if value(0.0) <= delta:
        return 0.0
    limit = min(MAX_CERTIFIED_EPSILON, profile.accurate_hi)
    hi = max(1.0, min(profile.loss_hi, limit))
    while not value(hi) <= delta:
        if hi >= limit:
            return math.inf
        hi = min(2 * hi, limit)
    lo = 0.0
    for _ in range(ROOT_STEPS):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if value(mid) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


def _lower_value(profile: Profile, epsilon: float) -> float:
    """A certified lower bound of an exact curve at ``epsilon``."""
    return float(profile(np.array([epsilon]))[0]) / (1 + LOWER_DEFLATION) * (1 - 1e-15)


def _lower_root(profile: Profile, delta: float) -> float:
    """A certified lower bound of epsilon(delta) for an exact curve: a point where the curve
    (deflated) still exceeds delta; the true curve is non-increasing, so it exceeds delta at
    every smaller epsilon."""
    if not _lower_value(profile, 0.0) > delta:
        return 0.0
    lo, hi = 0.0, max(1.0, min(profile.loss_hi, MAX_CERTIFIED_EPSILON, profile.accurate_hi))
    if _lower_value(profile, hi) > delta:
        return hi
    for _ in range(ROOT_STEPS):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if _lower_value(profile, mid) > delta:
            lo = mid
        else:
            hi = mid
    return lo


def _gentler(tilt: float) -> list[float]:
    """Gentler tilts than ``tilt`` (on the snapping grid 2^(j/4)) for lower bounds: halves of
    its exponent's quarter steps, then no tilt."""
    if tilt <= 0:
        return []
    j = round(4 * math.log2(tilt))
    return [float(2.0 ** ((j - s) / 4)) for s in (2, 4, 8)] + [0.0]


def _unbounded_loss(event: Event) -> bool:
    """Whether the leaf's privacy loss is unbounded (a Gaussian inside, however sampled)."""
    inner = event
    while isinstance(inner, PoissonSampledEvent | SampledWithoutReplacementEvent):
        inner = inner.event
    return isinstance(inner, GaussianEvent | ShuffledBatchesEvent | RandomAllocationEvent)


def _exact_pure_cap(events: dict[Event, int], adjacency: Adjacency) -> float | None:
    """The basic-composition epsilon, rounded up from its exact rational value, when every
    leaf is unsampled Laplace or pure DP; None otherwise."""
    from fractions import Fraction

    terms: list[tuple[int, float | Fraction]] = []
    for event, k in events.items():
        if isinstance(event, LaplaceEvent):
            s = Fraction(adjacency.sensitivity_factor)
            terms.append((k, s / Fraction(event.noise_multiplier)))
        elif isinstance(event, PureDPEvent):
            terms.append((k, event.epsilon))
        else:
            return None
    return basic_composition_epsilon(terms)


#: noise multipliers (per sensitivity) outside this range put the privacy loss beyond the loss
#: grid or below its resolution, or (above MAX_NOISE: mu < 1e-4) the Gaussian curve's tail
#: beyond its 1e-10 relative accuracy; the closed-form and RDP backends cover them
MIN_NOISE = 1e-4
MAX_NOISE = 1e4
#: pure epsilons above this exceed the loss grid (e^eps overflows near 709.8)
MAX_PURE_EPSILON = 500.0
#: at most this many randomized-response buckets (beyond, the masses lose all precision)
MAX_BUCKETS = 2**53
#: at most this many compositions in total (the Chernoff window and FFT powers lose precision)
MAX_COMPOSITIONS = 10**12
#: at most this many components after rounding to representatives (each costs one FFT)
MAX_COMPONENTS = 256


def _parameter_reason(leaf: Event, factor: float) -> str | None:
    """Why a leaf's parameters lie outside the range the PLD grid represents; None if inside."""
    inner = (
        leaf.event
        if isinstance(
            leaf,
            PoissonSampledEvent
            | SampledWithoutReplacementEvent
            | ShuffledBatchesEvent
            | RandomAllocationEvent,
        )
        else leaf
    )
    nodes = [inner] if not inner.children() else [e for e, _ in flatten(inner)]
    for node in nodes:
        if isinstance(node, GaussianEvent | LaplaceEvent):
            sigma = node.noise_multiplier / factor
            if not MIN_NOISE <= sigma <= MAX_NOISE:
                return (
                    f"noise multiplier {node.noise_multiplier:g} outside "
                    f"[{MIN_NOISE:g}, {MAX_NOISE:g}] (times the sensitivity factor): the privacy "
                    "loss leaves the PLD grid; the closed-form and RDP backends cover it"
                )
        epsilon = getattr(node, "epsilon", None)
        if isinstance(epsilon, float) and epsilon > MAX_PURE_EPSILON:
            return (
                f"epsilon {epsilon:g} above {MAX_PURE_EPSILON:g} leaves the PLD grid; the "
                "closed-form backend covers it"
            )
        if isinstance(node, RandomizedResponseEvent) and node.num_buckets > MAX_BUCKETS:
            return f"more than {MAX_BUCKETS} buckets; the closed-form backend covers it"
    return None


def _extent_reason(
    leaves: list[tuple[Event, int]], ledger: Sequence[tuple[Event, int]]
) -> str | None:
    """Why the whole composition (this event and the ledger) is too large to compose."""
    everything = list(leaves) + [(e, k * m) for ev, m in ledger for e, k in flatten(ev)]
    total = sum(k for _, k in everything)
    if total > MAX_COMPOSITIONS:
        return (
            f"{_count_text(total)} compositions (more than {MAX_COMPOSITIONS:.0e}): beyond the PLD "
            "grid's precision; the closed-form and RDP backends cover them"
        )
    distinct = {e for e, _ in everything if not isinstance(e, GaussianEvent | NonPrivateEvent)}
    if len(distinct) > MAX_DISTINCT_COMPONENTS:
        coarsest = {_grid_key(e, 0.0256) for e in distinct}
        if len(coarsest) > MAX_COMPONENTS:
            return (
                f"{len(coarsest)} distinct components remain after rounding to representatives "
                f"(more than {MAX_COMPONENTS}); each costs one FFT. Group identical releases "
                "with a count, or use the RDP backend"
            )
    return None


def _arr(x: float):  # type: ignore[no-untyped-def]

    return np.array([x])


def _next_up(x: float) -> float:
    return x if not math.isfinite(x) else math.nextafter(x * (1 + 1e-12), math.inf)


__all__ = ["MAX_FFT_LEN", "PLDAccountant"]


def _count_text(n: int) -> str:
    """A composition count for a message (an integer of any size)."""
    return f"{n:.3g}" if n.bit_length() <= 1000 else f"an integer of {len(str(n))} digits"
