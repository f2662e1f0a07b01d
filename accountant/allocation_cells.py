"""Many distinct epochs of a Gaussian step (or a Laplace batch) as a few cells: random
allocations and shuffled epochs are sorted into cells of a geometric grid in (number of
steps, noise multiplier), those of another kind or number of steps per record apart, and each
cell is composed as one epoch, its count the cell's total, at the fewest steps and least noise
of its members (upper bounds) or the most steps and most noise (lower bounds).

Why both bounds stay certified (``proofs_checks/allocation_cells/proof.md``): for k-of-t'
allocation with t' <= t, appending t - t' steps that see no record of the unit and permuting
all t steps uniformly maps the dominating pair of k-of-t' onto that of k-of-t (the record's k
steps become a uniform k-subset of t), and adding independent Gaussian noise to every step maps
noise s' onto any s >= s'; neither reads data. So within a cell the upper representative
(fewest steps, least noise) dominates every member, and every member's pair, which its
mechanism attains, dominates the lower representative's; composition keeps dominance. The
upper bound groups 1-of-t allocations only: a k-of-t allocation (k > 1) enters it as its k
epochs of 1-of-t/k (:func:`~dpledger.accountant.random_allocation.allocation_parts`). A
shuffled epoch's upper curve is its batch's release alone (no amplification is claimed), so the
upper bound composes those Gaussians exactly, and Laplace releases in cells of their noise
taken at the least (a Laplace release of more noise is one of less plus independent noise);
its lower curve is that of the random-allocation pair of its batches (the max-of-batch-sums
attack), grouped as above: Laplace noise b' <= b becomes b by adding, independently, 0 with
probability (b'/b)^2 and else a Laplace draw of scale b (the characteristic functions agree).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable

from dpledger.accountant.leaves import leaf_profiles
from dpledger.accountant.pld_components import _allocation_reduced
from dpledger.accountant.profiles import DirectedProfiles
from dpledger.accountant.profiles_shuffled import shuffled_base
from dpledger.accountant.random_allocation import allocation_side_profiles
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    ALLOCATION_NEEDS_ADD_REMOVE,
    SHUFFLED_NEEDS_REPLACE_ONE,
    Event,
    GaussianEvent,
    LaplaceEvent,
    RandomAllocationEvent,
    ShuffledBatchesEvent,
    flatten,
)

__all__ = [
    "ALLOCATION_CELLS",
    "ALLOCATION_LIMIT",
    "CELL_GROWTH",
    "CELL_STEP",
    "LAPLACE_CELLS",
    "allocation_cells",
    "cell_sides",
    "epoch_components",
    "epoch_reason",
    "grouped_epochs",
    "is_cell_allocation",
    "is_cell_epoch",
    "is_cell_shuffled",
    "is_laplace_shuffled",
    "joined",
    "plain",
    "shuffled_cells",
]

#: where more than MAX_DISTINCT_COMPONENTS distinct leaves remain and more than this many are
#: allocations of a Gaussian step (or shuffled epochs, Gaussian or Laplace), those are
#: grouped into cells ...
ALLOCATION_LIMIT = 16
#: ... at most this many cells of each kind (an allocation cell costs one allocation table,
#: the costliest component)
ALLOCATION_CELLS = 16
#: at most this many cells of the Laplace releases of many shuffled epochs (the upper bound's
#: components: one release each, no table)
LAPLACE_CELLS = 64
#: relative step of the finest cell grid, and the growth of each coarser one
CELL_STEP = 1e-3
CELL_GROWTH = 1.25

#: a member: (the epoch, its count)
Member = tuple[Event, int]


def is_cell_allocation(event: Event) -> bool:
    """Whether ``event`` is an allocation of a Gaussian step (the kind grouped into cells)."""
    return isinstance(event, RandomAllocationEvent) and type(event.event) is GaussianEvent


def is_cell_shuffled(event: Event) -> bool:
    """Whether ``event`` is a shuffled epoch whose batches run Gaussians only, or one Laplace
    release each (:func:`is_laplace_shuffled`)."""
    return is_laplace_shuffled(event) or (
        isinstance(event, ShuffledBatchesEvent)
        and all(type(leaf) is GaussianEvent for leaf, _ in flatten(event.event))
    )


def is_laplace_shuffled(event: Event) -> bool:
    """Whether ``event`` is a shuffled epoch of one Laplace release per batch."""
    if not isinstance(event, ShuffledBatchesEvent):
        return False
    leaves = flatten(event.event)
    return len(leaves) == 1 and type(leaves[0][0]) is LaplaceEvent and leaves[0][1] == 1


def is_cell_epoch(event: Event) -> bool:
    """Whether ``event`` is grouped into cells: :func:`is_cell_allocation` or
    :func:`is_cell_shuffled`."""
    return is_cell_allocation(event) or is_cell_shuffled(event)


def epoch_components(epochs: Iterable[Event]) -> int:
    """The most components that distinct ``epochs`` (of :func:`is_cell_epoch`) compose as
    beside many other leaves: each kind's own count up to ALLOCATION_LIMIT, else its cells."""
    allocations, shuffled, laplace = 0, 0, 0
    for event in epochs:
        allocations += is_cell_allocation(event)
        shuffled += is_cell_shuffled(event)
        laplace += is_laplace_shuffled(event)
    total = allocations if allocations <= ALLOCATION_LIMIT else ALLOCATION_CELLS
    if shuffled <= ALLOCATION_LIMIT:
        return total + shuffled
    # grouped: the lower cells (one more where both kinds of batch are present), and the
    # Laplace releases' cells of the upper bound
    return total + ALLOCATION_CELLS + (0 < laplace < shuffled) + min(laplace, LAPLACE_CELLS)


def epoch_reason(event: Event, adjacency: Adjacency) -> str | None:
    """Why an epoch of :func:`is_cell_epoch` (its noise in range) has no curves under
    ``adjacency``, without making them: allocations are analysed under add/remove, shuffled
    epochs under replace-one; None when it has them."""
    if is_cell_allocation(event):
        return None if adjacency.relation == "add_remove" else ALLOCATION_NEEDS_ADD_REMOVE
    return None if adjacency.relation == "replace_one" else SHUFFLED_NEEDS_REPLACE_ONE


def _params(event: Event) -> tuple[Hashable, int, float]:
    """(shape, number of steps, noise multiplier) of an epoch: an allocation's steps per record
    and a shuffled epoch's kind make its shape; a shuffled epoch's noise is that of its batch's
    release (Gaussians merged, the multiplier rounded up as its lower curve takes it)."""
    if isinstance(event, RandomAllocationEvent):
        noise = event.event.noise_multiplier  # type: ignore[attr-defined]
        return ("random_allocation", event.num_selected), event.num_steps, noise
    assert isinstance(event, ShuffledBatchesEvent)
    release = shuffled_base(event)[1]
    assert isinstance(release, GaussianEvent | LaplaceEvent)
    return ("shuffled_batches", release.kind), event.num_batches, release.noise_multiplier


def _grouped(
    members: list[Member], cells: int
) -> tuple[dict[tuple[Hashable, int, int], list[Member]], float]:
    """The members by cell on the finest grid, relative to their least number of steps and
    noise, with at most ``cells`` non-empty cells (the members hold at most ``cells``
    shapes)."""
    params = {event: _params(event) for event, _ in members}
    least_t = min((p[1] for p in params.values()), default=1)
    least_s = min((p[2] for p in params.values()), default=1.0)
    step = CELL_STEP
    while True:
        scale = math.log1p(step)
        by_cell: dict[tuple[Hashable, int, int], list[Member]] = {}
        for event, count in members:
            shape, t, s = params[event]
            key = (
                shape,
                math.floor(math.log(t / least_t) / scale),
                math.floor(math.log(s / least_s) / scale),
            )
            by_cell.setdefault(key, []).append((event, count))
        if len(by_cell) <= cells:
            return by_cell, step
        step = (1.0 + step) ** CELL_GROWTH - 1.0


def _representative(members: list[Member], costly: bool) -> Event:
    """The cell's representative: fewest steps and least noise when ``costly``, else most."""
    pick = min if costly else max
    found = [_params(e) for e, _ in members]
    steps, noise = pick(p[1] for p in found), pick(p[2] for p in found)
    first = members[0][0]
    if isinstance(first, RandomAllocationEvent):
        return RandomAllocationEvent(steps, GaussianEvent(noise), first.num_selected)
    # a shuffled epoch's lower curves read its number of batches and release only
    release = shuffled_base(first)[1]  # type: ignore[arg-type]
    kind = LaplaceEvent if isinstance(release, LaplaceEvent) else GaussianEvent
    return ShuffledBatchesEvent(steps, 1, kind(noise))


def _cells(members: list[Member], cells: int, costly: bool) -> tuple[dict[Event, int], float]:
    """The representatives of ``members`` grouped into at most ``cells`` cells, with counts,
    and the grid's step."""
    by_cell, step = _grouped(members, cells)
    out: dict[Event, int] = {}
    for group in by_cell.values():
        _add(out, _representative(group, costly), sum(k for _, k in group))
    return out, step


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
    up_cells, step = _cells(up, cells, costly=True)
    # parts of one step are their step's own Gaussian (merged into one)
    upper = joined(plain(reduced), up_cells)
    lower, low_step = _cells(_lower_members(allocations, max(1, cells // 2)), cells, False)
    return upper, lower, max(step, low_step)


def shuffled_cells(
    shuffled: dict[Event, int], cells: int = ALLOCATION_CELLS
) -> tuple[dict[Event, int], dict[Event, int], float]:
    """(upper components, lower components, the cells' relative step) of shuffled epochs
    (:func:`is_cell_shuffled`, with their counts): the upper bound's are each epoch's
    Gaussian (its upper curve, exactly) and its Laplace release in at most LAPLACE_CELLS cells
    of the noise (at the least noise of each), the lower bound's the epochs grouped into at
    most ``cells`` cells."""
    upper: dict[Event, int] = {}
    releases: list[Member] = []
    for event, count in shuffled.items():
        base = shuffled_base(event)[0]  # type: ignore[arg-type]
        if type(base) is LaplaceEvent:
            # as a 1-step, 1-of-1 member of its own shape: cells of its noise only
            releases.append((ShuffledBatchesEvent(1, 1, base), count))
        else:
            _add(upper, base, count)
    up_step = 0.0
    if releases:
        by_cell, up_step = _grouped(releases, LAPLACE_CELLS)
        for group in by_cell.values():
            least = min(_params(e)[2] for e, _ in group)
            _add(upper, LaplaceEvent(least), sum(k for _, k in group))
    # one cell at least per shape (Gaussian and Laplace batches never share one)
    shapes = len({_params(e)[0] for e in shuffled})
    lower, step = _cells(list(shuffled.items()), max(cells, shapes), costly=False)
    return upper, lower, max(step, up_step)


def _lower_members(allocations: dict[Event, int], most: int) -> list[Member]:
    """The allocations the lower bound composes: those of the ``most`` numbers of steps per
    record with the most releases (leaving a release out only lowers the composed curve)."""
    members = [(e, k) for e, k in allocations.items() if isinstance(e, RandomAllocationEvent)]
    releases: dict[int, int] = {}
    for event, count in members:
        k = event.num_selected
        releases[k] = releases.get(k, 0) + count
    kept = set(sorted(releases, key=lambda k: (-releases[k], k))[:most])
    return [(e, k) for e, k in members if e.num_selected in kept]


def grouped_epochs(
    merged: dict[Event, int], distinct: int
) -> tuple[dict[Event, int], dict[Event, int], dict[Event, int], float | None]:
    """(the other leaves, upper cells, lower cells, the cells' step) of a ledger's leaves
    ``merged``: where it holds more than ``distinct`` distinct leaves, its allocations of a
    Gaussian step and its shuffled epochs of Gaussian or Laplace batches, each kind when more than
    ALLOCATION_LIMIT, grouped into ALLOCATION_CELLS cells (:func:`allocation_cells`,
    :func:`shuffled_cells`); else ``merged``, no cells and None."""
    upper: dict[Event, int] = {}
    lower: dict[Event, int] = {}
    steps: list[float] = []
    if len(merged) <= distinct:
        return merged, upper, lower, None
    for kind, group in ((is_cell_allocation, allocation_cells), (is_cell_shuffled, shuffled_cells)):
        members = {e: k for e, k in merged.items() if kind(e)}
        if len(members) <= ALLOCATION_LIMIT:
            continue
        up, low, step = group(members, ALLOCATION_CELLS)
        upper, lower = joined(upper, up), joined(lower, low)
        steps.append(step)
        merged = {e: k for e, k in merged.items() if e not in members}
    return merged, upper, lower, max(steps, default=None)


def joined(events: dict[Event, int], more: dict[Event, int]) -> dict[Event, int]:
    """``events`` with ``more`` added (counts of the same leaf summed)."""
    out = dict(events)
    for event, count in more.items():
        _add(out, event, count)
    return out


def plain(cells: dict[Event, int]) -> dict[Event, int]:
    """The leaves of ``cells`` other than epochs (the Gaussians of 1-of-1 parts and of
    shuffled epochs' upper curves)."""
    return {e: k for e, k in cells.items() if not is_cell_epoch(e)}


def cell_sides(
    cells: dict[Event, int], adjacency: Adjacency, upper: bool
) -> list[tuple[DirectedProfiles, int]]:
    """The components of the cells of one bound: an allocation representative's curves of
    that side only (:func:`~dpledger.accountant.random_allocation.allocation_side_profiles`;
    the other bound's cells are other representatives), a shuffled one's own curves."""
    out: list[tuple[DirectedProfiles, int]] = []
    for event, count in cells.items():
        if isinstance(event, RandomAllocationEvent):
            out.append((allocation_side_profiles(event, adjacency, upper), count))
        elif is_cell_shuffled(event):
            out.append((leaf_profiles(event, adjacency), count))
    return out


def _add(events: dict[Event, int], event: Event, count: int) -> None:
    events[event] = events.get(event, 0) + count
