"""Checks of a pipeline file's releases against the source they read: the adjacency above a
node, the relations a batching or a partition selection admits, and the unit a partition
selection is stated in."""

from __future__ import annotations

from collections.abc import Callable

import attrs

from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    Event,
    PartitionSelectionEvent,
    RandomAllocationEvent,
    ShuffledBatchesEvent,
)
from dpledger.runtime.graph import CompositionGraph

__all__ = ["check_relation", "check_selection_release", "source_adjacency"]

#: ``fail(field, problem, fix)``: the one-line error of the file being read
Fail = Callable[[str, str, str], Exception]


def source_adjacency(graph: CompositionGraph, node: str) -> Adjacency | None:
    """The adjacency of the source above ``node``, with the tightest contribution bound on
    the way; None if the chain does not reach a source."""
    bound: int | None = None
    seen: set[str] = set()
    while graph.g.has_node(node) and node not in seen:
        seen.add(node)
        data = graph.g.nodes[node]
        if data.get("node_kind") == "source":
            adjacency: Adjacency = data["adjacency"]
            if bound is not None and adjacency.unit == "user":
                k = min(bound, adjacency.max_contributions)
                adjacency = attrs.evolve(adjacency, max_contributions=k)
            return adjacency
        if data.get("transform") == "contribution_bound" and data.get("max_contributions"):
            k = int(data["max_contributions"])
            bound = k if bound is None else min(bound, k)
        parents = list(graph.g.predecessors(node))
        if len(parents) != 1:
            return None
        node = parents[0]
    return None


#: events analysed under one relation only: (class, name, relation, why, the alternative)
_ONE_RELATION = (
    (
        ShuffledBatchesEvent,
        "shuffled batches",
        "replace_one",
        "the dataset size fixes the partition",
        "or use poisson_sampled or random_allocation under add_remove",
    ),
    (
        RandomAllocationEvent,
        "random allocation",
        "add_remove",
        "the dominating pair is proven for adding or removing one record",
        "or use shuffled_batches or sampled_without_replacement under replace_one",
    ),
    (
        PartitionSelectionEvent,
        "a partition selection",
        "add_remove",
        "a key held by one user is present on one side only",
        "or use public partition keys instead of a selection",
    ),
)


def check_relation(fail: Fail, event: Event, adjacency: Adjacency | None, field: str) -> None:
    """Refuse an event the source's relation does not admit, naming the release's event."""
    if adjacency is None:
        return  # the graph's validation names the broken input
    for cls, name, relation, why, other in _ONE_RELATION:
        if adjacency.relation != relation and any(isinstance(e, cls) for e in event.walk()):
            raise fail(
                field,
                f"holds {name}, analysed under {relation} adjacency only ({why}), but its "
                f"source's relation is {adjacency.relation}",
                f'declare relation = "{relation}" in the source\'s adjacency, {other}',
            )


def check_selection_release(
    fail: Fail, event: Event, adjacency: Adjacency | None, unit: str, path: str
) -> None:
    """A partition selection counts units: on a user-level source its release is stated per
    user (``declared_unit = "user"``), never lifted from rows."""
    if adjacency is None or adjacency.unit != "user" or unit == "user":
        return
    if any(isinstance(e, PartitionSelectionEvent) for e in event.walk()):
        raise fail(
            f"{path}.declared_unit",
            "is 'row', but a partition selection counts the users of each key, each user "
            "holding at most max_partitions keys",
            'declare declared_unit = "user"',
        )
