"""Epochs bounded without amplification: what an epoch costs at most when no backend analyses
its amplification (a noise beyond the PLD grid, a step mechanism without a proven dominating
pair, more distinct epochs than PLD composes).

Each record is in exactly one batch of a shuffled epoch (replace-one: the neighbours differ in
one record's value, the shuffle is independent of the data), and in ``k`` of the ``t`` steps of
a random allocation (each record's steps are drawn independently of the data and of the other
records, under either relation). Conditioned on where the differing record lands, the epoch is
the composition of the releases that see it, the other releases having the same law under
both neighbours (also when later steps are chosen from earlier outputs: composition is
adaptive). The hockey-stick divergence is jointly convex, so the epoch's curve is at most that
of its batch's event once (shuffled) or its step's event ``k`` times (allocated): an upper
bound only, amplification makes the epoch's curve smaller
(``proofs_checks/no_amplification/proof.md``).
"""

from __future__ import annotations

from collections.abc import Callable

from dpledger.accountant.allocation_cells import is_cell_shuffled
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    ComposedEvent,
    Event,
    RandomAllocationEvent,
    SelfComposedEvent,
    ShuffledBatchesEvent,
    flatten,
)

__all__ = ["epoch_cost", "has_lower_construction", "split_epochs"]


def epoch_cost(event: Event, adjacency: Adjacency) -> Event | None:
    """The event a shuffled or allocated epoch costs at most without amplification under
    ``adjacency`` (None: not such an epoch, or a shuffled epoch under add/remove, whose batches
    are not fixed by the other records)."""
    if isinstance(event, ShuffledBatchesEvent):
        return event.event if adjacency.relation == "replace_one" else None
    if isinstance(event, RandomAllocationEvent):
        k = event.num_selected
        return event.event if k == 1 else SelfComposedEvent(event.event, k)
    return None


def has_lower_construction(event: Event) -> bool:
    """Whether the PLD backend bounds ``event`` from below by more than the identical pair: not
    a shuffled epoch whose batches run something other than Gaussians or one Laplace release
    (those it bounds by their batch's event above and nothing below, so replacing them loses
    nothing)."""
    return not isinstance(event, ShuffledBatchesEvent) or is_cell_shuffled(event)


def split_epochs(
    event: Event, adjacency: Adjacency, keep: Callable[[Event], bool]
) -> tuple[Event, Event | None, int] | None:
    """(the event with every epoch not kept replaced by :func:`epoch_cost`, the event without
    those epochs or None when nothing else remains, how many distinct epochs were replaced);
    None when no epoch is replaced. The first dominates ``event`` (an upper bound); the second
    is a marginal of its outputs (a lower bound)."""
    upper: list[Event] = []
    rest: list[Event] = []
    replaced = 0
    for leaf, count in flatten(event):
        cost = None if keep(leaf) else epoch_cost(leaf, adjacency)
        if cost is None:
            upper.append(_times(leaf, count))
            rest.append(upper[-1])
            continue
        replaced += 1
        upper.append(_times(cost, count))
    if not replaced:
        return None
    return ComposedEvent(upper), (ComposedEvent(rest) if rest else None), replaced


def _times(event: Event, count: int) -> Event:
    return event if count == 1 else SelfComposedEvent(event, count)
