"""Many distinct tabulated profiles as a few cells: each cell composes as one tabulated
profile, its count the cell's total, whose table lies above every member's curve (upper bounds)
or below every member's lower curve (lower bounds).

Tables have no order among them, so the members are sorted by a scalar summary of their curves
(the mean logarithm of their upper curves at a few epsilons) and cut into runs of neighbours.
Why both bounds stay certified (``proofs_checks/tabulated_cells/proof.md``): on ``x = e^eps >=
1`` every member's curve is piecewise linear in ``x`` with its corners at its own tabulated
epsilons (a claimed pair's at its losses), so on the union of those epsilons, with 0 added,
each member is linear between neighbouring points. The upper representative tabulates the
greatest member value at each point: its chords lie above every member. The lower one takes the
least member value at each point (the least of linear functions is concave between points, so
above the chord of its end values) and then the greatest convex minorant of those values (the
chord interpolation of a table is then convex, a curve some pair has): its chords lie below
every member's lower curve. Both directions are handled alike (each direction's table bounds
its own curve and, through ``delta(eps) = 1 - e^eps + e^eps delta_swapped(-eps)``, the other
direction's below epsilon 0), so the upper representative dominates every member and every
member's lower pair dominates the lower one's; composition keeps both.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

import numpy as np

from dpledger.accountant.leaves import leaf_profiles
from dpledger.accountant.profiles_base import Array, DirectedProfiles, Profile
from dpledger.accountant.profiles_tabulated import (
    claimed_pair_profile,
    tabulated_delta,
    tabulated_profiles,
)
from dpledger.core.adjacency import Adjacency
from dpledger.core.event_curves import MAX_PROFILE_POINTS
from dpledger.core.events import Event, TabulatedProfileEvent

__all__ = [
    "TABULATED_CELLS",
    "TABULATED_LIMIT",
    "groupable",
    "grouped_tabulated",
    "lower_profiles",
    "tabulated_components",
    "upper_table",
]

#: where more than MAX_DISTINCT_COMPONENTS distinct leaves remain and more than this many are
#: tabulated profiles, those are grouped ...
TABULATED_LIMIT = 64
#: ... into about this many cells (fewer where members are few; more only where the union of a
#: run's epsilons would exceed MAX_PROFILE_POINTS)
TABULATED_CELLS = 64

#: tables reaching beyond this epsilon are not grouped (their corners' e^eps would overflow)
MAX_TABLE_EPSILON = 700.0

U = 2.0**-53
#: relative rounding charged to every value read off a member's curve (np.interp and the
#: curve's own arithmetic: a few units)
_SLACK = 16 * U
#: the epsilons at which members are summarised for sorting
_PROBES = np.array([0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0])


def tabulated_components(events: Iterable[Event]) -> int:
    """The components the distinct groupable tabulated profiles among ``events`` compose as:
    their own number up to TABULATED_LIMIT, else TABULATED_CELLS."""
    n = sum(groupable(e) for e in events)
    return n if n <= TABULATED_LIMIT else TABULATED_CELLS


def grouped_tabulated(
    merged: dict[Event, int], distinct: int, adjacency: Adjacency
) -> tuple[dict[Event, int], dict[Event, int], list[tuple[DirectedProfiles, int]]]:
    """(the other leaves, upper cells, lower components): where ``merged`` holds more than
    ``distinct`` distinct leaves and more than TABULATED_LIMIT of them are tabulated profiles,
    those grouped into cells, each a tabulated profile with the cell's total count for the
    upper bound and, where every member claims its pair, curves below them all for the lower
    bound; else ``merged`` and no cells."""
    members = {
        e: k for e, k in merged.items() if isinstance(e, TabulatedProfileEvent) and groupable(e)
    }
    if len(merged) <= distinct or len(members) <= TABULATED_LIMIT:
        return merged, {}, []
    rest = {e: k for e, k in merged.items() if e not in members}
    upper: dict[Event, int] = {}
    lower: list[tuple[DirectedProfiles, int]] = []
    for cell in _cells(members, TABULATED_CELLS):
        total = sum(members[e] for e in cell)
        up = upper_table(cell)
        upper[up] = upper.get(up, 0) + total
        if len(cell) == 1 and cell[0].tight_losses is not None:
            lower.append((leaf_profiles(cell[0], adjacency), total))
            continue
        low = lower_profiles(cell, up, adjacency)
        if low is not None:  # else the cell is left out of the lower bound (a sub-composition)
            lower.append((low, total))
    return rest, upper, lower


def groupable(event: Event) -> bool:
    """A tabulated profile whose epsilons stay below MAX_TABLE_EPSILON (``e^eps`` finite)."""
    return isinstance(event, TabulatedProfileEvent) and event.epsilons[-1] <= MAX_TABLE_EPSILON


def _summary(event: TabulatedProfileEvent) -> float:
    """The mean logarithm of the member's upper curve at the probes (its sorting key)."""
    values = tabulated_delta(np.asarray(event.epsilons), np.asarray(event.deltas))(_PROBES)
    return float(np.mean(np.log(np.maximum(values, 1e-300))))


def _cells(
    members: dict[TabulatedProfileEvent, int], cells: int
) -> list[list[TabulatedProfileEvent]]:
    """Runs of neighbours in (relation, summary) order, about ``len / cells`` members each,
    a run cut early where the union of its epsilons would exceed MAX_PROFILE_POINTS."""
    order = sorted(members, key=lambda e: (e.relation, _summary(e), e.epsilons, e.deltas))
    size = math.ceil(len(order) / cells)
    out: list[list[TabulatedProfileEvent]] = []
    run: list[TabulatedProfileEvent] = []
    points: set[float] = set()
    for event in order:
        more = points | set(_corners(event))
        full = len(run) >= size or len(more) + 1 > MAX_PROFILE_POINTS
        if run and (full or event.relation != run[0].relation):
            out.append(run)
            run, more = [], set(_corners(event))
        run.append(event)
        points = more
    if run:
        out.append(run)
    return out


def _corners(event: TabulatedProfileEvent) -> list[float]:
    """The positive epsilons where the member's upper curves may turn: its tabulated ones."""
    return [e for e in event.epsilons if e > 0.0]


def _grid(cell: list[TabulatedProfileEvent]) -> np.ndarray:
    """0 and every member's corners, sorted."""
    points = {0.0}
    for event in cell:
        points.update(_corners(event))
    return np.array(sorted(points))


def upper_table(cell: list[TabulatedProfileEvent]) -> TabulatedProfileEvent:
    """A tabulated profile above every member's (upper) curves: each direction's greatest
    member value at every corner, rounded up. One member is its own representative."""
    if len(cell) == 1:
        return cell[0]
    grid = _grid(cell)
    remove, add = np.zeros(grid.size), np.zeros(grid.size)
    for event in cell:
        np.maximum(remove, _table_above(event.epsilons, event.deltas, grid), out=remove)
        np.maximum(add, _table_above(event.epsilons, _add(event), grid), out=add)
    up_remove, up_add = _listed(remove), _listed(add)
    return TabulatedProfileEvent(
        _listed(grid),
        up_remove,
        None if up_add == up_remove else up_add,
        relation=cell[0].relation,
        name=f"upper cell of {len(cell)}",
    )


def lower_profiles(
    cell: list[TabulatedProfileEvent], upper: TabulatedProfileEvent, adjacency: Adjacency
) -> DirectedProfiles | None:
    """Curves below every member's lower curve, for a cell whose members all claim their
    exact pair (None otherwise: a table alone is no lower bound, and the cell is left out of
    the lower bound, a sub-composition). The claimed curves are piecewise linear in ``x =
    e^eps`` with corners at their losses; the least of them at every loss of the cell, with
    their least total mass at ``x = 0``, has a greatest convex minorant, which is the lower
    curve (for both directions, as a claim is attained in both), rounded down. Its upper
    curves are ``upper``'s."""
    if any(event.tight_losses is None for event in cell):
        return None
    grid = np.array(sorted({0.0}.union(*(event.tight_losses or () for event in cell))))
    # the curve at x = 0 (eps -> -infinity) is the pair's total P-mass, 1 up to rounding
    least = np.ones(grid.size + 1)
    for event in cell:
        curve = claimed_pair_profile(event).delta(np.concatenate([[-800.0], grid]))
        np.minimum(least, curve, out=least)
    x = np.concatenate([[0.0], np.exp(grid)])
    y = np.maximum(least, 0.0)
    hull = _minorant(x, y)
    values = _lowered_corners(x, y, hull)
    reach = float(np.max(np.abs(grid)))
    name = f"lower cell of {len(cell)} claimed pairs"
    lower = Profile(_chord_curve(x[hull], values), -reach, reach, True, name)
    up = tabulated_profiles(upper, adjacency)
    return DirectedProfiles(up.remove, up.add, lower, lower)


def _add(event: TabulatedProfileEvent) -> tuple[float, ...]:
    """The table of the swapped pair (the same table when it bounds both)."""
    return event.deltas if event.deltas_add is None else event.deltas_add


def _listed(values: np.ndarray) -> tuple[float, ...]:
    return tuple(float(v) for v in values)


def _table_error(
    epsilons: tuple[float, ...], deltas: tuple[float, ...], grid: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(the chord interpolation of a table at ``grid``, a bound on its rounding error): the
    interpolation errs by a few units of the larger end value (the left one: the table is
    made non-increasing), and below the first point the chord from (0, 1) by a few units."""
    eps = np.asarray(epsilons, dtype=float)
    ds = np.maximum.accumulate(np.asarray(deltas, dtype=float)[::-1])[::-1]
    values = np.asarray(tabulated_delta(eps, np.asarray(deltas, dtype=float))(grid), dtype=float)
    left = np.searchsorted(eps, grid, side="right") - 1
    scale = np.where(left >= 0, ds[np.maximum(left, 0)], 1.0)
    return values, _SLACK * (values + scale) + 1e-300


def _table_above(
    epsilons: tuple[float, ...], deltas: tuple[float, ...], grid: np.ndarray
) -> np.ndarray:
    values, err = _table_error(epsilons, deltas, grid)
    above: np.ndarray = np.minimum(values + err, 1.0)
    return above


def _minorant(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The indices of the corners of the greatest convex minorant of the points
    ``(x_i, y_i)``, ``x`` increasing (the lower hull, by a monotone chain)."""
    hull: list[int] = []
    for i in range(x.size):
        while len(hull) >= 2:
            a, b = hull[-2], hull[-1]
            # b on or above the chord from a to i: not a corner of the lower hull
            if (y[b] - y[a]) * (x[i] - x[a]) >= (y[i] - y[a]) * (x[b] - x[a]):
                hull.pop()
            else:
                break
        hull.append(i)
    return np.array(hull)


def _chord_error(xa: Array, xb: Array, va: Array, vb: Array) -> Array:
    """A bound on how far a chord from ``(xa, va)`` to ``(xb, vb)`` read in floating point
    (``np.interp`` at a rounded ``e^eps``, between rounded corners) may lie above the chord
    between the true ``e^eps`` positions: each exponential errs by a unit relative, which moves
    the chord's weight by about ``2u xb / (xb - xa)`` (never by more than the whole drop), and
    the arithmetic rounds by a few units of ``va``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        shift = np.where(xb > xa, 8 * U * xb / (xb - xa), 1.0)
    return (va - vb) * np.minimum(shift, 1.0) + 4 * U * va + 1e-300


def _lowered_corners(x: np.ndarray, y: np.ndarray, hull: np.ndarray) -> np.ndarray:
    """The minorant's corner values, lowered uniformly until its chords, read in floating
    point and less :func:`_chord_error`, lie below every point ``(x_i, y_i)`` (the monotone
    chain's orientation tests round, and the corners' ``e^eps`` are rounded). A uniform
    lowering keeps the values convex and non-increasing."""
    values = y[hull]
    seg = np.clip(np.searchsorted(x[hull], x, side="right") - 1, 0, hull.size - 1)
    nxt = np.minimum(seg + 1, hull.size - 1)
    chord = np.interp(x, x[hull], values)
    err = _chord_error(x[hull][seg], x[hull][nxt], values[seg], values[nxt])
    excess = float(np.max(np.where(np.isin(np.arange(x.size), hull), 0.0, chord + err - y)))
    if excess > 0.0:
        values = values - excess * (1 + _SLACK)
    lowered: np.ndarray = np.maximum(values, 0.0)
    return lowered


def _chord_curve(x: np.ndarray, values: np.ndarray) -> Callable[[Array], Array]:
    """The chord interpolation in ``e^eps`` of the corner ``values`` at ``x`` (from ``x = 0``),
    flat beyond the last corner, rounded down: less :func:`_chord_error`, and never below the
    segment's right end (the curve is non-increasing)."""

    def delta(eps: Array) -> Array:
        at = np.exp(np.minimum(np.asarray(eps, dtype=float), 700.0))
        seg = np.clip(np.searchsorted(x, at, side="right") - 1, 0, x.size - 1)
        nxt = np.minimum(seg + 1, x.size - 1)
        inside = np.interp(at, x, values)
        err = _chord_error(x[seg], x[nxt], values[seg], values[nxt])
        below: Array = np.maximum(np.maximum(inside - err, values[nxt]), 0.0)
        return below

    return delta
