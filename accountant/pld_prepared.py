"""A ledger's PLD components prepared for composition (:class:`Prepared`): the directions to
compose, the coarse grid that guides windows and tilts, the untilted window widths, the lower
pairs' own coarse grid and the pure-DP cap; and the same components with their far tails cut
(:func:`cut_tails`), for many components queried at a known level of delta."""

from __future__ import annotations

import math
from typing import Generic, TypeVar

import attrs
import numpy as np

from dpledger.accountant.pld_components import _exact_pure_cap, gaussian_inside
from dpledger.accountant.pld_discrete import (
    MAX_LOSS,
    MAX_UPPER_LOSS,
    Array,
    DiscretePLD,
    discretise,
)
from dpledger.accountant.pld_tilt import tilted_window
from dpledger.accountant.profiles_base import DirectedProfiles, Profile
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import BoundUnavailable
from dpledger.core.events import Event

__all__ = [
    "COARSE_MAX_POINTS",
    "CUT_COMPONENTS",
    "CUT_MIN_SAVING",
    "CUT_POINTS",
    "TAIL_MASS",
    "ByCurve",
    "Prepared",
    "cut_tails",
    "prepare",
    "pure_cap",
    "reach_tails",
]

#: most grid points per component on the coarse grid that guides windows and tilts
COARSE_MAX_POINTS = 1 << 16
#: truncation mass of the composed window (charged to delta)
TAIL_MASS = 1e-18
#: above this many distinct components, compositions queried at a known delta may use the
#: components cut at their far tails (:func:`cut_tails`)
CUT_COMPONENTS = 16
#: points at which a curve is read to find where its tail falls below the cut level
CUT_POINTS = 256
#: a curve is cut only where that shortens its loss range by at least this fraction
CUT_MIN_SAVING = 0.1
#: the components' ranges are widened (:func:`reach_tails`) once the mass their
#: discretisations charge at +infinity exceeds this share of the delta of interest
REACH_SHARE = 1e-3


@attrs.frozen
class Prepared:
    """The components of the ledger, their coarse discretisations and the pure-DP cap."""

    comps: list[tuple[DirectedProfiles, int]]
    lower_comps: list[tuple[DirectedProfiles, int]]
    names: tuple[str, ...]  # directions to compose ("remove" only when symmetric)
    coarse: dict[str, list[tuple[DiscretePLD, int]]]
    #: the lower pairs on the coarse grid (guides for their own tails), when they differ;
    #: each direction's discretised when first read (estimates and upper-only queries never
    #: read them)
    coarse_lower: dict[str, list[tuple[DiscretePLD, int]]] | None
    h0: float
    pure_cap: float  # basic-composition epsilon if all parts are pure, else inf
    keep_lower: bool
    span: float
    width0: dict[str, float]  # width of the untilted window per direction (read on demand)
    #: the budget of P-mass the components' cut tails hold at most (0: nothing cut)
    cut: float = 0.0
    #: the preparations of the same components cut for a budget (:func:`cut_tails`)
    cuts: dict[float, Prepared | None] = attrs.field(factory=dict, eq=False, repr=False)
    #: each curve's values at the losses its cut reads (:func:`_cut_profile`), by the id of
    #: the curve: the losses depend on the curve alone, so every budget reads the same values
    readings: ByCurve[Array] = attrs.field(factory=lambda: ByCurve(), eq=False, repr=False)


def prepare(
    comps: list[tuple[DirectedProfiles, int]],
    lower_comps: list[tuple[DirectedProfiles, int]],
    upper_events: dict[Event, int],
    adjacency: Adjacency,
) -> Prepared:
    """The upper and lower components (not empty) prepared; ``upper_events`` are the leaves the
    upper components come from (they decide the pure-DP cap)."""
    return _build(comps, lower_comps, pure_cap(comps, upper_events, adjacency))


def _build(
    comps: list[tuple[DirectedProfiles, int]],
    lower_comps: list[tuple[DirectedProfiles, int]],
    cap: float,
    cut: float = 0.0,
    h0: float | None = None,
    known: ByCurve[DiscretePLD] | None = None,
) -> Prepared:
    """The components prepared, with the pure-DP cap ``cap`` (of the uncut components), on the
    coarse grid of spacing ``h0`` when given; ``known`` holds curves already discretised on
    that grid, by the id of the curve (a discretisation depends on the curve and the spacing
    only, so reusing one, and the log-MGFs it memoises, changes nothing)."""
    known = ByCurve() if known is None else known
    span = max(p.loss_hi - p.loss_lo for d, _ in comps for p in (d.remove, d.add))
    symmetric = all(d.remove is d.add for d, _ in comps) and all(
        d.lower_remove is d.lower_add for d, _ in lower_comps
    )
    names = ("remove",) if symmetric else ("remove", "add")
    h0, coarse = _coarse_grid(comps, names, span, h0, known)
    for name in names:
        for (d, _), (pld, _) in zip(comps, coarse[name], strict=True):
            known.keep_first(getattr(d, name), pld)
    # lumped losses keep lower bounds sound: above the grid they go to +infinity, which
    # lower bounds drop; below -MAX_LOSS they carry P-mass at most e^-MAX_LOSS, inside the
    # BELOW_RANGE_MASS charged per component (and dominated pairs are 1 - e^eps, resp. 0,
    # beyond their first and last points, below any curve)
    lower_exact = all(d.lower_remove.exact and d.lower_add.exact for d, _ in lower_comps)
    width0 = _Widths(coarse)
    distinct = lower_comps is not comps or any(
        getattr(d, "lower_" + name) is not getattr(d, name) for d, _ in comps for name in names
    )
    coarse_lower = _LowerGuides(lower_comps, names, h0, known) if distinct and lower_exact else None
    return Prepared(
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
        cut,
    )


def cut_tails(prep: Prepared, budget: float) -> Prepared | None:
    """The preparation with every curve cut at the first loss where it is at most ``budget``
    over the total count (cached in ``prep``); None when no curve would be cut.

    A cut curve ends its loss range there: the connect-the-dots discretisation lumps the
    curve's value at its top grid point at +infinity (charged to every delta read, at most
    ``budget`` for the whole composition), and a dominated pair's curve is 0 beyond its last
    point, below the mechanism's, so both bounds stay certified whatever the cut; the budget
    only keeps the charge negligible at the delta queried. Cut ranges shorten the window of
    many components with long, thin tails (Poisson-sampled Gaussians), and so refine its
    grid at the same number of points."""
    if prep.cut > 0.0 or len(prep.comps) <= CUT_COMPONENTS:
        return None
    if budget in prep.cuts:
        return prep.cuts[budget]
    total = max(sum(k for _, k in prep.comps), sum(k for _, k in prep.lower_comps))
    level = budget / total
    made: dict[int, Profile] = {}

    def cut(profile: Profile) -> Profile:
        found = made.get(id(profile))
        if found is None:
            found = made[id(profile)] = _cut_profile(profile, level, prep.readings)
        return found

    def cut_all(comps: list[tuple[DirectedProfiles, int]]) -> list[tuple[DirectedProfiles, int]]:
        return [
            (DirectedProfiles(cut(d.remove), cut(d.add), cut(d.lower_remove), cut(d.lower_add)), k)
            for d, k in comps
        ]

    comps = cut_all(prep.comps)
    lower = comps if prep.lower_comps is prep.comps else cut_all(prep.lower_comps)
    changed = any(made[key] is not p for key, p in _profiles(prep))
    # the coarse grid of the whole components guides the windows well enough (a finer one
    # would only cost more)
    result = _build(comps, lower, prep.pure_cap, budget, prep.h0, _known(prep)) if changed else None
    prep.cuts[budget] = result
    return result


def reach_tails(prep: Prepared, delta: float, budget: float) -> Prepared | None:
    """The preparation with every curve's loss range widened (:meth:`Profile.reaching`) until
    its value at the top, which the discretisation charges at +infinity, is at most ``budget``
    over the total count (cached in ``prep``); None when the charges of the whole components
    sum to at most REACH_SHARE times ``delta`` (nothing moves at such deltas) or no curve
    widens. Any range keeps both bounds certified; the widened one keeps the charge
    negligible at a delta far below the tails of the Gaussian-type curves' default ranges."""
    if prep.cut > 0.0:
        return None
    key = -budget  # beside the cut preparations, by a key no budget takes
    if key in prep.cuts:
        return prep.cuts[key]
    charge = sum(k * max(_top_value(d.remove), _top_value(d.add)) for d, k in prep.comps)
    result = None
    if charge > REACH_SHARE * delta:
        total = max(sum(k for _, k in prep.comps), sum(k for _, k in prep.lower_comps))
        made: dict[int, Profile] = {}

        def wide(profile: Profile) -> Profile:
            found = made.get(id(profile))
            if found is None:
                found = made[id(profile)] = profile.reaching(budget / total)
            return found

        def wide_all(
            comps: list[tuple[DirectedProfiles, int]],
        ) -> list[tuple[DirectedProfiles, int]]:
            return [
                (
                    DirectedProfiles(
                        wide(d.remove), wide(d.add), wide(d.lower_remove), wide(d.lower_add)
                    ),
                    k,
                )
                for d, k in comps
            ]

        comps = wide_all(prep.comps)
        lower = comps if prep.lower_comps is prep.comps else wide_all(prep.lower_comps)
        if any(made[i] is not p for i, p in _profiles(prep)):
            result = _build(comps, lower, prep.pure_cap, 0.0, prep.h0, _known(prep))
    prep.cuts[key] = result
    return result


def _top_value(profile: Profile) -> float:
    """The curve at the top of its discretised range (charged at +infinity there)."""
    top = min(profile.loss_hi, profile.accurate_hi, MAX_UPPER_LOSS)
    return float(profile(_arr(top))[0]) if math.isfinite(top) else 0.0


def _profiles(prep: Prepared) -> list[tuple[int, Profile]]:
    """(id, profile) of every curve of the components, upper and lower."""
    return [
        (id(p), p)
        for d, _ in [*prep.comps, *prep.lower_comps]
        for p in (d.remove, d.add, d.lower_remove, d.lower_add)
    ]


def _cut_profile(profile: Profile, level: float, readings: ByCurve[Array] | None = None) -> Profile:
    """The curve with its loss range ended at the first of CUT_POINTS evenly spaced losses
    from max(0, loss_lo) to its top where it is at most ``level``; the curve itself when that
    would shorten the range by less than CUT_MIN_SAVING. ``readings`` keeps the curve's
    values at those losses, by the id of the curve (for other levels)."""
    top = min(profile.loss_hi, profile.accurate_hi, MAX_UPPER_LOSS)
    bottom = max(profile.loss_lo, 0.0)
    if not (math.isfinite(top) and top > bottom):
        return profile
    losses = np.linspace(bottom, top, CUT_POINTS + 1)
    values = None if readings is None else readings.find(profile)
    if values is None:
        values = profile(losses)
        if readings is not None:
            readings.keep_first(profile, values)
    below = np.flatnonzero(values <= level)
    if below.size == 0:
        return profile
    end = float(losses[below[0]])
    if top - end < CUT_MIN_SAVING * (top - profile.loss_lo):
        return profile
    return attrs.evolve(
        profile,
        loss_hi=end,
        accurate_hi=min(profile.accurate_hi, end),
        name=f"{profile.name} cut at {end:.6g}",
    )


def pure_cap(
    comps: list[tuple[DirectedProfiles, int]], upper_events: dict[Event, int], adjacency: Adjacency
) -> float:
    """Basic composition of the components' largest losses when every curve is 0 at its
    top loss (pure composition), rounded up; infinity otherwise."""
    if any(gaussian_inside(event) for event in upper_events):
        # a Gaussian-based curve is 0 at its top loss only by underflow (tiny q): not pure (an
        # epoch of Laplace or pure-DP steps is pure: its upper curves are checked below)
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
        cap = _exact_pure_cap(upper_events, adjacency) or math.nextafter(
            cap * (1 + 16 * 2.0**-53 * (len(comps) + 4)), math.inf
        )
    return cap


def _coarse_grid(
    comps: list[tuple[DirectedProfiles, int]],
    names: tuple[str, ...],
    span: float,
    given: float | None = None,
    known: ByCurve[DiscretePLD] | None = None,
) -> tuple[float, dict[str, list[tuple[DiscretePLD, int]]]]:
    """(spacing, components per direction) of the coarse grid that guides windows and tilts
    (of spacing ``given`` when given, reusing the curves ``known`` on it).

    The coarse grid adds rounding noise of variance ~ total h0^2 / 4 to the sum: it is refined
    until that noise is small against the composed window."""

    def on_grid(h: float, memo: ByCurve[DiscretePLD]) -> dict[str, list[tuple[DiscretePLD, int]]]:
        # a curve in several places (both directions of a symmetric one) is discretised once
        return {
            name: [(_discretised(getattr(d, name), h, memo), k) for d, k in comps] for name in names
        }

    if given is not None:
        return given, on_grid(given, ByCurve() if known is None else known)
    h0 = max(span / 1024.0, 1e-9)
    if h0 > MAX_LOSS / 8:
        # the coarse grid cannot resolve the losses the grid represents (+-MAX_LOSS)
        raise BoundUnavailable("pld", f"privacy losses span {span:g}, beyond the loss grid")
    total = sum(k for _, k in comps)
    coarse = on_grid(h0, ByCurve())
    for _ in range(3):
        a, b = tilted_window(coarse[names[0]], 0.0, TAIL_MASS)
        target = max((b - a) / (40.0 * total**0.5), span / COARSE_MAX_POINTS)
        if target >= h0 / 2:
            break
        h0 = target
        coarse = on_grid(h0, ByCurve())
    return h0, coarse


class _Widths(dict[str, float]):
    """The width of the untilted window per direction, computed when first read (many
    preparations, cut ones among them, never need it)."""

    def __init__(self, coarse: dict[str, list[tuple[DiscretePLD, int]]]) -> None:
        super().__init__()
        self.coarse = coarse

    def __missing__(self, name: str) -> float:
        a, b = tilted_window(self.coarse[name], 0.0, TAIL_MASS)
        width = self[name] = max(b - a, 1e-9)
        return width


class _LowerGuides(dict[str, list[tuple[DiscretePLD, int]]]):
    """The lower pairs of each direction on the coarse grid of spacing ``h0``, discretised
    when first read (reusing the curves ``known`` on that grid: a discretisation depends on
    the curve and the spacing only, so the guides are the same whenever they are made)."""

    def __init__(
        self,
        lower_comps: list[tuple[DirectedProfiles, int]],
        names: tuple[str, ...],
        h0: float,
        known: ByCurve[DiscretePLD],
    ) -> None:
        super().__init__()
        self.lower_comps, self.names, self.h0, self.known = lower_comps, names, h0, known

    def __missing__(self, name: str) -> list[tuple[DiscretePLD, int]]:
        if name not in self.names:
            raise KeyError(name)
        low = "lower_" + name
        found = [
            (_discretised(getattr(d, low), self.h0, self.known), k) for d, k in self.lower_comps
        ]
        self[name] = found
        return found

    def get(  # type: ignore[override]
        self, name: str, default: list[tuple[DiscretePLD, int]] | None = None
    ) -> list[tuple[DiscretePLD, int]] | None:
        return self[name] if name in self.names else default

    def __bool__(self) -> bool:
        return True


def _discretised(profile: Profile, h: float, known: ByCurve[DiscretePLD]) -> DiscretePLD:
    """``discretise(profile, h)``, or the one ``known`` for it (discretised at ``h``); a new
    one is added to ``known``."""
    found = known.find(profile)
    if found is None or found.h != h:
        found = discretise(profile, h)
        known.keep(profile, found)
    return found


def _known(prep: Prepared) -> ByCurve[DiscretePLD]:
    """The curves of ``prep`` discretised on its coarse grid, by the id of the curve (the
    directions' curves, and the lower pairs' where they have a coarse grid of their own)."""
    known: ByCurve[DiscretePLD] = ByCurve()
    for name in prep.names:
        for (d, _), (pld, _) in zip(prep.comps, prep.coarse[name], strict=True):
            known.keep(getattr(d, name), pld)
        if prep.coarse_lower is not None and name in prep.coarse_lower:  # the ones made
            pairs = zip(prep.lower_comps, prep.coarse_lower[name], strict=True)
            for (d, _), (pld, _) in pairs:
                known.keep_first(getattr(d, "lower_" + name), pld)
    return known


V = TypeVar("V")


class ByCurve(Generic[V]):
    """Values kept per curve object: found only for the very object they were kept for (the
    object is held beside its value, so an id reused after a curve is freed cannot match)."""

    def __init__(self) -> None:
        self._items: dict[int, tuple[Profile, V]] = {}

    def find(self, profile: Profile) -> V | None:
        item = self._items.get(id(profile))
        return item[1] if item is not None and item[0] is profile else None

    def keep(self, profile: Profile, value: V) -> None:
        self._items[id(profile)] = (profile, value)

    def keep_first(self, profile: Profile, value: V) -> None:
        if self.find(profile) is None:
            self.keep(profile, value)

    def __len__(self) -> int:
        return len(self._items)


def _arr(x: float):  # type: ignore[no-untyped-def]

    return np.array([x])


def _next_up(x: float) -> float:
    return x if not math.isfinite(x) else math.nextafter(x * (1 + 1e-12), math.inf)
