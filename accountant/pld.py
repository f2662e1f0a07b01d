"""Tight, certified privacy-loss-distribution accountant.

Each leaf event becomes an upper-bound privacy curve per neighbouring direction
(:mod:`dpledger.accountant.profiles`), discretised by connect-the-dots and composed by FFT
(:mod:`dpledger.accountant.pld_engine`). Both directions are composed separately and the worse is
reported. Truncated tails and FFT round-off are charged to delta; pure-DP compositions are capped
by basic composition.

:class:`PLDAccountant` keeps the ledger and runs the adaptive passes (coarse grids first); its
parts are the components (:mod:`~dpledger.accountant.pld_components`), their preparation
(:mod:`~dpledger.accountant.pld_prepared`), the cache of compositions
(:mod:`~dpledger.accountant.pld_compositions`), the epsilon and delta searches at one grid
(:mod:`~dpledger.accountant.pld_epsilon`, :mod:`~dpledger.accountant.pld_delta`), single
releases (:mod:`~dpledger.accountant.pld_single`) and what the backend covers
(:mod:`~dpledger.accountant.pld_support`).
"""

from __future__ import annotations

import math
from collections.abc import Hashable

from dpledger.accountant.allocation_cells import (
    cell_sides,
    epoch_reason,
    grouped_epochs,
    is_cell_epoch,
    joined,
    plain,
)
from dpledger.accountant.base import (
    Accountant,
    DeltaBound,
    EpsilonBound,
    identical_delta,
    infinite_epsilon,
    narrower_delta,
    narrower_epsilon,
)
from dpledger.accountant.br_blocks import range_blocks
from dpledger.accountant.epsilon_cells import cell_components
from dpledger.accountant.leaves import leaf_profiles
from dpledger.accountant.pld_blocks import block_components, is_cell_block
from dpledger.accountant.pld_components import (
    MAX_DISTINCT_COMPONENTS,
    REPRESENTATIVE_STEP,
    _allocation_reduced,
    _exact_pure_cap,
    _merge_gaussians,
    ledger_leaves,
    rounded_components,
)
from dpledger.accountant.pld_compositions import (
    EXTENDED_WINDOW_POINTS,
    FLOOR_PASS_POINTS,
    FULL_RESOLUTION_COMPONENTS,
    GROWTH_POWER,
    MAX_COMPONENT_POINTS,
    MAX_FLOOR_GROWTH,
    MAX_POINTS,
    MAX_TILT_RANGE,
    MIN_POINTS,
    UNTILTED_DELTA,
    UPPER_KINDS,
    UPPER_WINDOW_POINTS,
    WINDOW_TAIL_REL,
    Compositions,
    _resolution,
)
from dpledger.accountant.pld_delta import (
    DELTA_BRACKET_GOAL,
    SPLIT_DROPPED_SHARE,
    SPLIT_LEVEL_PASSES,
    DeltaSearch,
)
from dpledger.accountant.pld_discrete import MAX_FFT_LEN
from dpledger.accountant.pld_epsilon import (
    _UPPER_ONLY,
    BRACKET_GOAL,
    BRACKET_TARGET,
    MIN_SCREEN_POINTS,
    SCREEN_FACTORS,
    SCREEN_RETRY,
    EpsilonSearch,
    upper_only,
)
from dpledger.accountant.pld_fft import ComposedPLD
from dpledger.accountant.pld_hits import HitCount, hit_count
from dpledger.accountant.pld_leaf_check import shapes_in_range
from dpledger.accountant.pld_prepared import (
    COARSE_MAX_POINTS,
    TAIL_MASS,
    Prepared,
    _next_up,
    prepare,
)
from dpledger.accountant.pld_single import ROOT_STEPS, single_delta, single_epsilon
from dpledger.accountant.pld_support import (
    MAX_BUCKETS,
    MAX_COMPONENTS,
    MAX_COMPOSITIONS,
    MAX_NOISE,
    MAX_PURE_EPSILON,
    MIN_NOISE,
    _extent_reason,
    _parameter_reason,
)
from dpledger.accountant.profiles_base import DirectedProfiles
from dpledger.accountant.representatives import split
from dpledger.accountant.tabulated_cells import grouped_tabulated
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import BoundUnavailable, UnsupportedEventError
from dpledger.core.events import (
    Event,
    NonPrivateEvent,
    flatten,
)

__all__ = [
    "ADAPTIVE_START_POINTS",
    "BLOCK_BUDGET_SHARE",
    "BRACKET_ABSOLUTE",
    "BRACKET_GOAL",
    "BRACKET_TARGET",
    "COARSE_CELL_GROWTH",
    "COARSE_MAX_POINTS",
    "DELTA_ABSOLUTE",
    "DELTA_BRACKET_GOAL",
    "EXTENDED_WINDOW_POINTS",
    "FINE_ROUNDING",
    "FIRST_PASS_WINDOW",
    "FULL_RESOLUTION_COMPONENTS",
    "GROWTH_POWER",
    "INFINITE_GROWTH",
    "MAX_BUCKETS",
    "MAX_COMPONENTS",
    "MAX_COMPONENT_POINTS",
    "MAX_COMPOSITIONS",
    "MAX_DISTINCT_COMPONENTS",
    "MAX_FFT_LEN",
    "MAX_NOISE",
    "MAX_POINTS",
    "MAX_PURE_EPSILON",
    "MAX_TILT_RANGE",
    "MIN_NOISE",
    "MIN_POINTS",
    "MIN_SCREEN_POINTS",
    "MIN_START_POINTS",
    "PASS_TARGET",
    "REPRESENTATIVE_STEP",
    "ROOT_STEPS",
    "SCREEN_FACTORS",
    "SCREEN_RETRY",
    "SPLIT_DROPPED_SHARE",
    "SPLIT_LEVEL_PASSES",
    "SPLIT_PASS_MARGIN",
    "STALLED_GAP",
    "TAIL_MASS",
    "TARGET_POINTS",
    "UNDOMINATED_GROWTH",
    "UNTILTED_DELTA",
    "UPPER_KINDS",
    "UPPER_WINDOW_POINTS",
    "WINDOW_TAIL_REL",
    "PLDAccountant",
    # a proof record and tests name these two by their old path
    "_allocation_reduced",
    "_exact_pure_cap",
    "upper_only",
]

#: a ledger whose leaves were rounded to representatives (or blocks by cell) at a relative step
#: above this keeps its many components' windows at their floor on finer passes: the bracket
#: is then mostly the rounding's (1e4 heterogeneous leaves, step 2.8 %: 0.95 % in 9.5 s, 0.78 %
#: after two finer passes in 41 s more)
FINE_ROUNDING = 1e-2
#: ... and where epochs were grouped into cells at a step above it, a query's passes hold at
#: most this many times the first pass's points (docs/accountants.md, "Many distinct leaves")
COARSE_CELL_GROWTH = 4
#: grid points targeted for the composed window (accuracy/speed trade-off)
TARGET_POINTS = 1 << 18
#: adaptive epsilon queries start at this many grid points and refine until the bracket is
#: narrower than BRACKET_TARGET (relative) or BRACKET_ABSOLUTE; the passes beyond it raise the
#: floor of many components' windows (the compositions' FLOOR_PASS_POINTS)
ADAPTIVE_START_POINTS = FLOOR_PASS_POINTS
#: at a delta of interest of at least UNTILTED_DELTA the first pass's windows hold at most
#: this many points (its grid points are lowered by quarter octaves, down to
#: MIN_START_POINTS, until they do): with dominated pairs a coarser first pass of a long run
#: usually brackets within PASS_TARGET already
FIRST_PASS_WINDOW = 1 << 19
MIN_START_POINTS = 1 << 10
#: refinement stops when a finer pass left at least this fraction of the bracket's width
STALLED_GAP = 0.9
#: a pass whose dominated pairs could not be certified is followed by one with at most this
#: many times its points (its gap is the chord's, which says nothing of theirs)
UNDOMINATED_GROWTH = 2.0
#: a pass whose upper bound is infinite (its windows cut the composed loss's tail, or the
#: ledger's failure mass exceeds delta) is followed by one with this many times its points
INFINITE_GROWTH = 4
#: ... and once a pass's bracket is narrower than PASS_TARGET (relative; a coarse pass spends
#: on its lower bound only until then)
PASS_TARGET = BRACKET_TARGET
BRACKET_ABSOLUTE = 1e-4
#: a delta query whose split compositions are in use grows its finer pass's points by this
#: many times sqrt(ratio) of its gap to the goal, not 1.5 (:func:`_finer_points`): their gap
#: shrinks with the square of the spacing or faster (q = 1e-4, 1e5 steps at epsilon = 0.236:
#: 12 % at 16384 points, 2.6 % at 32768, 0.59 % at 65536)
SPLIT_PASS_MARGIN = 1.1
#: a delta query stops refining its grid once its bracket is also this narrow in absolute terms
DELTA_ABSOLUTE = 1e-6
#: where leaves are rounded to representatives beside blocks by cell of Laplace leaves
#: (:func:`~dpledger.accountant.pld_blocks.is_cell_block`), this share of the blocks' count is
#: taken from each of the representatives' budgets: a block costs more than a representative
#: (its fine compositions), so 1.5 keeps the time of the composition without the blocks (1e5
#: heterogeneous leaves: bracket 10.3 % at that time; 1.0: 8.9 % and about 1.15 times it)
BLOCK_BUDGET_SHARE = 1.5


class PLDAccountant(Accountant):
    """Certified two-sided PLD accountant (connect-the-dots upper, shifted-chord lower)."""

    name = "pld"
    composes_tabulated = True

    def __init__(self, adjacency: Adjacency | None = None, *, target_points: int = TARGET_POINTS):
        super().__init__(adjacency)
        self.target_points = target_points
        self._prep: Prepared | None = None
        self._upper_events: dict[Event, int] = {}
        self._non_private = False
        #: the step of the representatives' grid when the leaves were rounded to them
        self._step: float | None = None
        #: the relative step of the cells many allocations or shuffled epochs were grouped into
        self._allocation_step: float | None = None
        #: the compositions made (at the grid size of the current pass) and the searches that
        #: read them
        self._cache = Compositions(target_points)
        self._epsilons = EpsilonSearch(self._cache)
        self._deltas = DeltaSearch(self._cache)

    @property
    def _states(self) -> dict[tuple[str, float, int, str], ComposedPLD | None]:
        """The compositions made, by (direction, tilt, grid points, kind)."""
        return self._cache.states

    def _unsupported_reason(self, event: Event) -> str | None:
        leaves = flatten(event)
        reason = _extent_reason(leaves, self._ledger, MAX_DISTINCT_COMPONENTS)
        if reason is not None:
            return reason
        firsts = shapes_in_range(leaves, self.adjacency.sensitivity_factor)
        if firsts is not None and self._have_curves(firsts):
            return None
        # leaf by leaf: the first leaf at fault is named
        shapes: set[Hashable] = set()
        for leaf, _count in leaves:
            if isinstance(leaf, NonPrivateEvent):
                continue
            reason = _parameter_reason(leaf, self.adjacency.sensitivity_factor)
            if reason is not None:
                return f"{leaf.describe()}: {reason}"
            if is_cell_epoch(leaf):  # (its curves are made when composed, not here)
                reason = epoch_reason(leaf, self.adjacency)
                if reason is not None:
                    return f"{leaf.describe()}: {reason}"
                continue
            # whether a rounded kind has curves depends on its shape only: one check per shape
            found = split(leaf)
            shape = leaf if found is None else found[0]
            if shape in shapes:
                continue
            shapes.add(shape)
            try:
                leaf_profiles(leaf, self.adjacency)
            except UnsupportedEventError as exc:
                return f"{leaf.describe()}: {exc}"
        return None

    def _have_curves(self, leaves: list[Event]) -> bool:
        """Whether every one of ``leaves`` has curves under this adjacency."""
        try:
            for leaf in leaves:
                leaf_profiles(leaf, self.adjacency)
        except UnsupportedEventError:
            return False
        return True

    def _invalidate(self) -> None:
        self._prep = None
        self._cache.clear()

    # -- composition -------------------------------------------------------------------
    def _components(
        self,
    ) -> tuple[list[tuple[DirectedProfiles, int]], list[tuple[DirectedProfiles, int]]]:
        """(components for the upper bound, components for the lower bound).

        They are the same unless more than MAX_DISTINCT_COMPONENTS distinct leaves remain:
        then the upper bound composes dominating representatives (parameters rounded to the
        costly side) and the lower bound dominated ones (rounded to the cheap side), so that
        both stay certified (many allocations of a Gaussian step or shuffled epochs, and
        many tabulated profiles, as cells); or unless a k-of-t allocation (k > 1) is
        present: the upper bound composes its k-of-t reduction, the lower bound the event.
        """
        merged, self._non_private = ledger_leaves(self._ledger)
        blocks: list[tuple[DirectedProfiles, int]] = []
        blocked: dict[Event, int] = {}
        if len(merged) > MAX_DISTINCT_COMPONENTS:
            # many distinct Laplace leaves: composed in blocks on fine grids of their own
            rest, blocks = block_components(merged, self.adjacency)
            blocked = {e: k for e, k in merged.items() if e not in rest}
            merged = rest
        self._step = None
        # many distinct allocations of a Gaussian step or shuffled epochs: a few cells
        merged, cells_up, cells_low, self._allocation_step = grouped_epochs(
            merged, MAX_DISTINCT_COMPONENTS
        )
        merged, tab_up, tab_low = grouped_tabulated(merged, MAX_DISTINCT_COMPONENTS, self.adjacency)
        cells_up = joined(cells_up, tab_up)
        upper_events = lower_events = merged
        if merged and len(merged) + len(cells_up) > MAX_DISTINCT_COMPONENTS:
            # blocks by cell and allocation cells take their share of the components' budgets
            reserved = math.floor(BLOCK_BUDGET_SHARE * sum(is_cell_block(d) for d, _ in blocks))
            upper_events, lower_events, self._step = rounded_components(
                merged, MAX_DISTINCT_COMPONENTS, reserved + len(cells_up)
            )
        # the releases of each exponential-mechanism leaf in blocks
        upper_events = range_blocks(_allocation_reduced(upper_events), self.adjacency.relation)
        if cells_up:
            # the cells' 1-of-1 parts (their step's Gaussian) compose with the other Gaussians,
            # tabulated cells with the other leaves
            upper_events = _merge_gaussians(joined(upper_events, plain(cells_up)))
        # the blocks' and cells' leaves as they are (the pure cap reads them)
        kept = {**blocked, **{e: k for e, k in cells_up.items() if is_cell_epoch(e)}}
        self._upper_events = joined(upper_events, kept) if kept else upper_events
        # finer passes refine many components' grids unless the bracket is mostly rounding
        coarse = any(is_cell_block(d) for d, _ in blocks) or any(
            step is not None and step > FINE_ROUNDING
            for step in (self._step, self._allocation_step)
        )
        self._cache.floor_growth = 1 if coarse else MAX_FLOOR_GROWTH
        extra_up = blocks + cell_sides(cells_up, self.adjacency, upper=True)
        extra_low = blocks + cell_sides(cells_low, self.adjacency, upper=False) + tab_low
        return self._profiled(upper_events, lower_events, extra_up, extra_low)

    def _profiled(
        self,
        upper_events: dict[Event, int],
        lower_events: dict[Event, int],
        extra_up: list[tuple[DirectedProfiles, int]],
        extra_low: list[tuple[DirectedProfiles, int]],
    ) -> tuple[list[tuple[DirectedProfiles, int]], list[tuple[DirectedProfiles, int]]]:
        """(upper components, lower components): the leaves' curves (by cell where they were
        rounded to representatives), and ``extra_up`` / ``extra_low`` made elsewhere."""
        if self._step is not None:
            up, low = cell_components(upper_events, lower_events, self.adjacency)
            return up + extra_up, low + extra_low
        upper = [(leaf_profiles(leaf, self.adjacency), k) for leaf, k in upper_events.items()]
        if lower_events is upper_events and not extra_up and not extra_low:
            return upper, upper
        lower = [(leaf_profiles(leaf, self.adjacency), k) for leaf, k in lower_events.items()]
        return upper + extra_up, lower + extra_low

    def _prepared(self) -> Prepared | None:
        if self._prep is not None:
            return self._prep
        comps, lower_comps = self._components()
        if not comps:
            return None
        self._prep = prepare(comps, lower_comps, self._upper_events, self.adjacency)
        return self._prep

    def _extend(self, prep: Prepared, name: str, kind: str) -> int:
        """Grid points up to which a composition's window extends over the heavy tilted tail
        (:meth:`Compositions.extend`)."""
        return self._cache.extend(prep, name, kind)

    # -- queries -----------------------------------------------------------------------
    def _epsilon(self, delta: float) -> EpsilonBound:
        """The bracket at the coarsest grid that makes it narrower than PASS_TARGET (relative,
        or BRACKET_ABSOLUTE), never finer than ``target_points``; a finer pass aims at
        BRACKET_TARGET.

        Upper bounds barely move with the grid (connect-the-dots); the lower bound's gap shrinks
        about in proportion to the spacing, so the points needed are estimated from a coarse
        pass and one finer pass usually suffices."""
        hits = self._hit_count()
        found = None if hits is None else hits.epsilon(delta)
        if found is not None:
            upper, lower = found
            bound = EpsilonBound(upper, lower, delta, self.name, {"hit_count": 1.0})
            if upper - lower <= max(PASS_TARGET * upper, BRACKET_ABSOLUTE):
                return bound
            try:
                return narrower_epsilon(bound, self._grid_epsilon(delta))
            except BoundUnavailable:
                return bound
        return self._grid_epsilon(delta)

    def _hit_count(self) -> HitCount | None:
        """The hit-count bounds (:mod:`~dpledger.accountant.pld_hits`) when the ledger is one
        Poisson-subsampled Gaussian composed under add/remove at least twice, else None (one
        release has its exact profile, which these bounds would only widen)."""
        found = hit_count(self._ledger, self.adjacency)
        return found if found is not None and found.useful and found.steps > 1 else None

    def _grid_epsilon(self, delta: float) -> EpsilonBound:
        """The bracket of the composed loss grid (or of the single release's profile)."""
        single = self._single_leaf_epsilon(delta)
        if single is not None:
            return single
        points = start = self._start_points(min(self.target_points, ADAPTIVE_START_POINTS), delta)
        full = self._finest(start)
        uppers: dict[str, float] = {}  # certified upper bound per direction, coarsest pass
        previous = math.inf
        try:
            while True:
                self._cache.points = points
                self._cache.floored = False
                # a pass that may end the query spends on its lower bound only until the
                # bracket is within PASS_TARGET; the passes after it aim at BRACKET_GOAL
                first = points == start and points < full
                self._epsilons.goal = 1.0 + PASS_TARGET if first else BRACKET_GOAL
                bound = self._epsilon_at(delta, uppers)
                gap = bound.epsilon - bound.epsilon_lower
                # an infinite upper bound is narrow beside an infinite lower one, else refined
                wide = max(PASS_TARGET * bound.epsilon, BRACKET_ABSOLUTE)
                narrow = bound.epsilon_lower == math.inf or (
                    math.isfinite(gap) and (_UPPER_ONLY.get() or gap <= wide)
                )
                # a finer grid that barely narrowed the bracket will not: what is left is not
                # the grid's (tails, tilts, the lower bound's construction)
                stalled = gap > STALLED_GAP * previous
                if points >= full or narrow or stalled or self._cache.floored:
                    return bound
                if not math.isfinite(gap):
                    previous, points = math.inf, min(full, INFINITE_GROWTH * points)
                    continue
                # a grid too coarse for the dominated pairs leaves the chord's lower bound,
                # whose gap says nothing of theirs: the next pass doubles the points (where
                # they usually certify) and is not held to have stalled against this gap
                undominated = self._undominated(points)
                previous = math.inf if undominated else gap
                ratio = gap / max(0.8 * BRACKET_TARGET * bound.epsilon, BRACKET_ABSOLUTE)
                most = UNDOMINATED_GROWTH if undominated else math.inf
                points = _finer_points(points, full, ratio, least=2.0, most=most)
        finally:
            self._cache.points = full
            self._epsilons.goal = BRACKET_GOAL

    def _finest(self, start: int) -> int:
        """The most grid points of a query's passes (epochs in coarse cells: the bracket is
        then mostly their rounding)."""
        coarse = self._allocation_step is not None and self._allocation_step > FINE_ROUNDING
        return min(self.target_points, COARSE_CELL_GROWTH * start) if coarse else self.target_points

    def _start_points(self, points: int, delta: float) -> int:
        """The first pass's grid points: ``points``; at a delta of interest of at least
        UNTILTED_DELTA, lowered by quarter octaves while its windows (grown with the number of
        steps, :func:`~dpledger.accountant.pld_compositions._resolution`) would exceed
        FIRST_PASS_WINDOW points (at smaller deltas a heavy step's tilt needs them)."""
        prep = self._prepared()
        if prep is None or delta < UNTILTED_DELTA:
            return points
        total = sum(k for _, k in prep.comps)
        while points > MIN_START_POINTS and (
            _resolution(points, len(prep.comps), total) > FIRST_PASS_WINDOW
        ):
            points = int(points / 2**0.25)
        return points

    def _undominated(self, points: int) -> bool:
        """Whether a dominated-pair composition of the pass at ``points`` could not be
        certified (the grid is too coarse for the curves' bends)."""
        return any(
            value is None and key[2] == points and key[3] == "dominated"
            for key, value in self._cache.states.items()
        )

    def _single_leaf_epsilon(self, delta: float) -> EpsilonBound | None:
        """One leaf released once: epsilon(delta) is the root of its profile
        (:func:`~dpledger.accountant.pld_single.single_epsilon`); None when there is more than
        one release or the root is beyond the certified range."""
        prep = self._prepared()
        if prep is None or self._non_private:
            return None
        found = single_epsilon(prep, self._upper_events, delta)
        if found is None:
            return None
        upper, lower = found
        return EpsilonBound(upper, lower, delta, self.name, {"exact_profile": 1.0})

    def _epsilon_at(self, delta: float, uppers: dict[str, float] | None = None) -> EpsilonBound:
        """The bracket at the current grid (:meth:`EpsilonSearch.bracket`), capped by the
        pure-DP cap. ``uppers`` holds certified upper bounds per direction from coarser passes
        (and gets this pass's)."""
        prep = self._prepared()
        if self._non_private:
            return infinite_epsilon(delta, self.name)
        if prep is None:
            return EpsilonBound(0.0, 0.0, delta, self.name)
        known = {} if uppers is None else uppers
        upper, lower, h = self._epsilons.bracket(prep, delta, known)
        upper = min(upper, _next_up(prep.pure_cap))
        lower = min(lower, upper)
        return EpsilonBound(upper, lower, delta, self.name, self._details(h))

    def _delta(self, epsilon: float) -> DeltaBound:
        hits = self._hit_count()
        found = None if hits is None else hits.delta(epsilon)
        if found is None:
            return self._grid_delta(epsilon)
        bound = DeltaBound(found[0], found[1], epsilon, self.name, {"hit_count": 1.0})
        if found[0] - found[1] <= min((DELTA_BRACKET_GOAL - 1) * found[1], DELTA_ABSOLUTE):
            return bound
        try:
            return narrower_delta(bound, self._grid_delta(epsilon))
        except BoundUnavailable:
            return bound

    def _grid_delta(self, epsilon: float) -> DeltaBound:
        """The delta bracket of the single release's profile or of the composed loss grid."""
        prep = self._prepared()
        if self._non_private:
            return DeltaBound(1.0, 1.0, epsilon, self.name)
        if prep is None:
            return identical_delta(epsilon, self.name)
        if epsilon >= prep.pure_cap:
            return DeltaBound(0.0, 0.0, epsilon, self.name, {"pure_cap": prep.pure_cap})
        single = single_delta(prep, self._upper_events, epsilon)
        if single is not None:
            top, bottom = single
            details = {"exact_profile": 1.0}
            return DeltaBound(top, bottom, epsilon, self.name, details)
        return self._adaptive_delta(prep, epsilon)

    def _adaptive_delta(self, prep: Prepared, epsilon: float) -> DeltaBound:
        """The delta bracket at the coarsest grid that makes it narrower than
        DELTA_BRACKET_GOAL, never finer than ``target_points`` (every pass's compositions stay
        cached and each certifies its own bound, so the best of them all is read); one pass
        within :func:`upper_only`, and none after a finer grid barely narrowed the bracket."""
        points = min(self.target_points, ADAPTIVE_START_POINTS)
        full = self._finest(points)
        previous = math.inf
        # many components are composed with their tails cut for the level of interest (a
        # Chernoff estimate, then the delta found): the cut mass is charged to every bound
        # read, whatever the level (:meth:`DeltaSearch._recut` keeps it small)
        try:
            while True:
                self._cache.points = points
                self._cache.floored = False
                bound = self._delta_at(prep, epsilon)
                gap = bound.delta - bound.delta_lower
                goal = min((DELTA_BRACKET_GOAL - 1) * bound.delta_lower, DELTA_ABSOLUTE)
                # as for epsilon queries: what a finer grid left is not the grid's
                stalled = gap > STALLED_GAP * previous
                if (
                    gap <= goal
                    or points >= full
                    or self._cache.floored
                    or bound.delta <= 0.0
                    or stalled
                    or _UPPER_ONLY.get()
                ):
                    return bound
                previous = gap
                ratio = gap / max(0.8 * goal, 1e-300)
                # the split compositions' gap shrinks at least with the square of the
                # spacing: a smaller margin suffices for them
                split = any(
                    key[0] == "delta" and key[2] == epsilon for key in self._cache.split_first
                )
                margin = SPLIT_PASS_MARGIN if split else 1.5
                points = _finer_points(points, full, ratio, least=4.0, most=16.0, margin=margin)
        finally:
            self._cache.points = full

    def _delta_at(self, prep: Prepared, epsilon: float) -> DeltaBound:
        """The delta bracket at the current grid (:meth:`DeltaSearch.bracket`)."""
        upper, lower, h = self._deltas.bracket(prep, epsilon)
        return DeltaBound(upper, min(lower, upper), epsilon, self.name, self._details(h))

    def _details(self, h: float) -> dict[str, float]:
        """The grid spacing, and the representatives' (or allocation cells') step when the
        leaves were rounded."""
        details = {"grid_spacing": h}
        if self._step is not None:
            details["representative_step"] = self._step
        if self._allocation_step is not None:
            details["allocation_step"] = self._allocation_step
        return details


def _finer_points(
    points: int, full: int, ratio: float, least: float, most: float, margin: float = 1.5
) -> int:
    """Points of the next pass when the bracket is ``ratio`` times wider than wanted: the
    dominated pairs' gap shrinks about with the square of the spacing, so the points grow by
    ``margin`` sqrt(ratio), kept within [least, most] times, and never beyond ``full``."""
    return min(full, math.ceil(points * min(most, max(least, margin * math.sqrt(ratio)))))
