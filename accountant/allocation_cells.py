"""Many distinct random allocations of a Gaussian step as a few cells: allocations are sorted
into cells of a geometric grid in (number of steps, noise multiplier), those of one number of
steps per record apart, and each cell is composed as one allocation, its count the cell's
total, at the fewest steps and least noise of its members (upper bounds) or the most steps and
most noise (lower bounds).

Why both bounds stay certified (``proofs_checks/allocation_cells/proof.md``): for k-of-t'
allocation with t' <= t, appending t - t' steps that see no record of the unit and permuting
all t steps uniformly maps the dominating pair of k-of-t' onto that of k-of-t (the record's k
steps become a uniform k-subset of t), and adding independent Gaussian noise to every step maps
noise s' onto any s >= s'; neither reads data. So within a cell the upper representative
(fewest steps, least noise) dominates every member, and every member's pair, which its
mechanism attains, dominates the lower representative's; composition keeps dominance. The
upper bound groups 1-of-t allocations only: a k-of-t allocation (k > 1) enters it as its k
epochs of 1-of-t/k (:func:`~dpledger.accountant.random_allocation.allocation_parts`).
"""

from __future__ import annotations

import math

from dpledger.accountant.pld_components import _allocation_reduced
from dpledger.accountant.profiles import DirectedProfiles
from dpledger.accountant.random_allocation import allocation_side_profiles
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import Event, GaussianEvent, RandomAllocationEvent

__all__ = [
    "ALLOCATION_CELLS",
    "ALLOCATION_LIMIT",
    "CELL_GROWTH",
    "CELL_STEP",
    "allocation_cells",
    "cell_sides",
    "grouped_allocations",
    "is_cell_allocation",
    "joined",
    "plain",
]

#: where more than MAX_DISTINCT_COMPONENTS distinct leaves remain and more than this many are
#: allocations of a Gaussian step, those are grouped into cells ...
ALLOCATION_LIMIT = 16
#: ... at most this many cells (each costs one allocation table, the costliest component)
ALLOCATION_CELLS = 16
#: relative step of the finest cell grid, and the growth of each coarser one
CELL_STEP = 1e-3
CELL_GROWTH = 1.25


def is_cell_allocation(event: Event) -> bool:
    """Whether ``event`` is an allocation of a Gaussian step (the kind grouped into cells)."""
    return isinstance(event, RandomAllocationEvent) and type(event.event) is GaussianEvent


def _cell(
    event: RandomAllocationEvent, step: float, least: tuple[int, float]
) -> tuple[int, int, int]:
    """The cell of an allocation on the grid of relative ``step`` from the members' ``least``
    (number of steps, noise multiplier), those of another number of steps per record apart."""
    sigma = event.event.noise_multiplier  # type: ignore[attr-defined]
    scale = math.log1p(step)
    t_cell = math.floor(math.log(event.num_steps / least[0]) / scale)
    return event.num_selected, t_cell, math.floor(math.log(sigma / least[1]) / scale)


def _grouped(
    members: list[tuple[RandomAllocationEvent, int]], cells: int
) -> tuple[dict[tuple[int, int, int], list[tuple[RandomAllocationEvent, int]]], float]:
    """The members by cell on the finest grid with at most ``cells`` non-empty cells (the
    members hold at most ``cells`` distinct numbers of steps per record)."""
    least = (
        min((e.num_steps for e, _ in members), default=1),
        min((e.event.noise_multiplier for e, _ in members), default=1.0),  # type: ignore[attr-defined]
    )
    step = CELL_STEP
    while True:
        by_cell: dict[tuple[int, int, int], list[tuple[RandomAllocationEvent, int]]] = {}
        for event, count in members:
            by_cell.setdefault(_cell(event, step, least), []).append((event, count))
        if len(by_cell) <= cells:
            return by_cell, step
        step = (1.0 + step) ** CELL_GROWTH - 1.0


def _representative(
    members: list[tuple[RandomAllocationEvent, int]], costly: bool
) -> RandomAllocationEvent:
    """The cell's representative: fewest steps and least noise when ``costly``, else most."""
    pick = min if costly else max
    steps = pick(e.num_steps for e, _ in members)
    sigma = pick(e.event.noise_multiplier for e, _ in members)  # type: ignore[attr-defined]
    return RandomAllocationEvent(steps, GaussianEvent(sigma), members[0][0].num_selected)


def allocation_cells(
    allocations: dict[Event, int], cells: int = ALLOCATION_CELLS
) -> tuple[dict[Event, int], dict[Event, int], float]:
    """(upper components, lower components, the cells' relative step) of ``allocations``
    (allocations of a Gaussian step, :func:`is_cell_allocation`, with their counts), each
    grouped into at most ``cells`` cells: the upper bound's of their 1-of-t parts (a k-of-t
    allocation as its k epochs of 1-of-t/k), the lower bound's of the allocations themselves
    with the same number of steps per record sharing a cell (beyond ``cells // 2`` such
    numbers, those of the fewest releases are left out)."""
    reduced = _allocation_reduced(allocations)
    up = [(e, k) for e, k in reduced.items() if is_cell_allocation(e)]
    up_cells, step = _grouped(up, cells)  # type: ignore[arg-type]
    # parts of one step are their step's own Gaussian (merged into one)
    upper = {e: k for e, k in reduced.items() if not is_cell_allocation(e)}
    for members in up_cells.values():
        _add(upper, _representative(members, True), sum(k for _, k in members))
    low = _lower_members(allocations, max(1, cells // 2))
    low_cells, low_step = _grouped(low, cells)
    lower: dict[Event, int] = {}
    for members in low_cells.values():
        _add(lower, _representative(members, False), sum(k for _, k in members))
    return upper, lower, max(step, low_step)


def _lower_members(
    allocations: dict[Event, int], most: int
) -> list[tuple[RandomAllocationEvent, int]]:
    """The allocations the lower bound composes: those of the ``most`` numbers of steps per
    record with the most releases (leaving a release out only lowers the composed curve)."""
    members = [(e, k) for e, k in allocations.items() if isinstance(e, RandomAllocationEvent)]
    releases: dict[int, int] = {}
    for event, count in members:
        releases[event.num_selected] = releases.get(event.num_selected, 0) + count
    kept = set(sorted(releases, key=lambda k: (-releases[k], k))[:most])
    return [(e, k) for e, k in members if e.num_selected in kept]


def grouped_allocations(
    merged: dict[Event, int], distinct: int
) -> tuple[dict[Event, int], dict[Event, int], dict[Event, int], float | None]:
    """(the other leaves, upper cells, lower cells, the cells' step) of a ledger's leaves
    ``merged``: its allocations of a Gaussian step grouped into ALLOCATION_CELLS cells
    (:func:`allocation_cells`) when it holds more than ``distinct`` distinct leaves and more
    than ALLOCATION_LIMIT of them are such allocations; else ``merged``, no cells and None."""
    allocations = {e: k for e, k in merged.items() if is_cell_allocation(e)}
    if len(merged) <= distinct or len(allocations) <= ALLOCATION_LIMIT:
        return merged, {}, {}, None
    upper, lower, step = allocation_cells(allocations, ALLOCATION_CELLS)
    return {e: k for e, k in merged.items() if e not in allocations}, upper, lower, step


def joined(events: dict[Event, int], more: dict[Event, int]) -> dict[Event, int]:
    """``events`` with ``more`` added (counts of the same leaf summed)."""
    out = dict(events)
    for event, count in more.items():
        _add(out, event, count)
    return out


def plain(cells: dict[Event, int]) -> dict[Event, int]:
    """The leaves of ``cells`` other than allocations (the Gaussians of 1-of-1 parts)."""
    return {e: k for e, k in cells.items() if not is_cell_allocation(e)}


def cell_sides(
    cells: dict[Event, int], adjacency: Adjacency, upper: bool
) -> list[tuple[DirectedProfiles, int]]:
    """The components of the allocation cells of one bound: each representative's curves of
    that side only (:func:`~dpledger.accountant.random_allocation.allocation_side_profiles`;
    the other bound's cells are other representatives)."""
    return [
        (allocation_side_profiles(e, adjacency, upper), k)  # type: ignore[arg-type]
        for e, k in cells.items()
        if is_cell_allocation(e)
    ]


def _add(events: dict[Event, int], event: Event, count: int) -> None:
    events[event] = events.get(event, 0) + count
