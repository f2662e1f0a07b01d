"""The reduction of a composition graph to one cost per source.

Reduction (per source). Every release below the source is lifted to the source's unit
(:mod:`dpledger.core.lifting`) and the releases compose sequentially, except below a
``partition`` node whose cells are disjoint *for the privacy unit*:

* unit ``row``: a row falls in exactly one cell, so every partition is disjoint;
* unit ``user``: only a partition by the user key (``key == unit_key``) is disjoint; any other
  partition (e.g. by time) gives no parallelism, because a user can appear in every cell;
* relation ``replace_one``: a replaced unit may move to another cell, so a partition is disjoint
  only when it is declared ``public_key = true`` (neighbouring datasets agree on each unit's key,
  e.g. fixed observation times); otherwise its cells compose sequentially.

A disjoint partition composes in parallel: a unit is in exactly one cell, so its loss is that
cell's composition. The reduction therefore returns *alternatives*, one event per possible cell
combination, and the certified answer is the maximum over them (see
:func:`dpledger.accountant.graph_account.account_graph`).
A partition with ``cells = n`` runs its sub-graph identically in each of ``n`` cells (parallel:
one cell's cost; sequential: the cost ``n`` times); without ``cells`` each direct child of the
partition is one cell. A partition with ``max_cells_per_unit = L0`` also runs its sub-graph
identically in every cell (``cells`` may then be omitted: the number of keys need not be
known), and the data pipeline keeps each unit in at most ``L0`` cells: where the cells are not
disjoint for the unit, they compose sequentially over ``L0`` cells (``2 L0`` under replace-one,
where a replaced unit leaves its cells and the new one enters others; at most ``cells``).
Alternatives that are sub-multisets of another are dropped (composing
more never costs less); beyond :data:`MAX_ALTERNATIVES` they are merged into one event that
dominates all of them (sound, possibly looser).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dpledger.accountant.alternatives import (
    MAX_ALTERNATIVES,
    Alt,
    ReleaseReduction,
    SourceReduction,
    alt_event,
    par,
    rep,
    seq,
    union,
)
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import Event, SampledWithoutReplacementEvent, flatten
from dpledger.core.lifting import lift_release
from dpledger.runtime.graph_validation import validate

if TYPE_CHECKING:
    from dpledger.runtime.graph import CompositionGraph

#: why a bracket stays open for fixed-size batches under replace-one (see the wor_subsampling proof)
WOR_COMPOSITION_NOTE = (
    "sampling without replacement under replace-one: the upper bound composes the tight one-step "
    "dominating pair (Balle, Barthe & Gaboardi 2018, Thm 9; Zhu, Dong & Wang 2022, Prop. 30); "
    "the worst case under adaptive composition has no known exact analysis, so the true epsilon "
    "lies between the reported lower bound and the upper bound"
)


def reduce(
    graph: CompositionGraph, adjacencies: Mapping[str, Adjacency] | None = None
) -> dict[str, SourceReduction]:
    """Per source, the alternatives whose maximum bounds the unit's loss (O(nodes))."""
    validate(graph)
    out: dict[str, SourceReduction] = {}
    for source in graph.nodes_of("source"):
        adj = (adjacencies or {}).get(source, graph.g.nodes[source]["adjacency"])
        out[source] = _reduce_source(graph, source, adj)
    return out


def _parallel(d: Mapping[str, Any], adj: Adjacency) -> bool:
    disjoint = adj.unit == "row" or d["key"] == adj.unit_key
    return bool(disjoint and (adj.relation == "add_remove" or d["public_key"]))


def _reduce_source(graph: CompositionGraph, source: str, adj: Adjacency) -> SourceReduction:
    k0 = adj.max_contributions if adj.unit == "user" else 1
    releases: list[ReleaseReduction] = []
    lifted: dict[str, Event] = {}
    notes: list[str] = []
    cost: dict[str, list[Alt]] = {}
    # iterative post-order over the data tree; state: (node, k, path)
    stack: list[tuple[str, int, tuple[str, ...], bool]] = [(source, k0, (), False)]
    while stack:
        node, k, path, done = stack.pop()
        d = graph.g.nodes[node]
        kind = d["node_kind"]
        if kind == "release":
            rel = _reduce_release(node, d, source, adj, k, path)
            releases.append(rel)
            lifted[node] = rel.lifted
            cost[node] = [{node: rel.count}] if rel.count else [{}]
            continue
        children = graph.data_children(node)
        if not done:
            child_k, child_path = k, path
            if kind == "transform":
                child_path = (*path, node)
                if d["transform"] == "contribution_bound" and adj.unit == "user":
                    child_k = min(k, d["max_contributions"])
            stack.append((node, k, path, True))
            stack.extend((c, child_k, child_path, False) for c in reversed(children))
            continue
        child_costs = [cost.pop(c) for c in children]
        if kind == "transform" and d["transform"] == "partition":
            cost[node] = _partition_cost(node, d, adj, child_costs, notes)
        else:
            cost[node] = seq(child_costs)
    if adj.relation == "replace_one" and any(
        isinstance(leaf, SampledWithoutReplacementEvent)
        for rel in releases
        for leaf, _ in flatten(rel.lifted)
    ):
        notes.append(WOR_COMPOSITION_NOTE)
    alts = cost.pop(source)
    if len(alts) > MAX_ALTERNATIVES:
        alts = [union(alts)]
    releases.sort(key=lambda r: r.release_id)
    return SourceReduction(
        source=source,
        adjacency=adj,
        alternatives=tuple(alt_event(a, lifted) for a in alts),
        multisets=tuple(tuple(sorted((r, m) for r, m in a.items() if m)) for a in alts),
        releases=tuple(releases),
        notes=tuple(notes),
    )


def _partition_cost(
    node: str,
    d: Mapping[str, Any],
    adj: Adjacency,
    child_costs: list[list[Alt]],
    notes: list[str],
) -> list[Alt]:
    parallel = _parallel(d, adj)
    cells = d["cells"]
    per_unit = d.get("max_cells_per_unit")
    if per_unit is not None and not parallel:
        # a unit holds at most per_unit cells; a replaced one leaves its cells for others
        touched = per_unit if adj.relation == "add_remove" else 2 * per_unit
        if cells is not None:
            touched = min(touched, cells)
        notes.append(
            f"partition {node!r} by {d['key']!r}: a unit is in at most {per_unit} cells "
            f"(max_cells_per_unit); {touched} cells compose sequentially"
        )
        per_cell = seq(child_costs)
        # each cell may take another of the per-cell alternatives (seq merges copies in place)
        return seq([[dict(alt) for alt in per_cell] for _ in range(touched)])
    how = "parallel (disjoint for the unit)" if parallel else "sequential (not disjoint)"
    notes.append(f"partition {node!r} by {d['key']!r}: cells compose {how}")
    if per_unit is not None:
        return seq(child_costs)  # identical cells, of which a unit is in one
    if cells is not None:
        per_cell = seq(child_costs)
        return per_cell if parallel else rep(per_cell, cells)
    return par(child_costs) if parallel else seq(child_costs)


def _reduce_release(
    node: str,
    d: Mapping[str, Any],
    source: str,
    adj: Adjacency,
    k: int,
    path: tuple[str, ...],
) -> ReleaseReduction:
    lifted, rules = lift_release(
        d["event"],
        adj,
        declared_unit=d["declared_unit"],
        max_contributions=k if adj.unit == "user" else None,
        release=node,
    )
    return ReleaseReduction(
        release_id=node,
        source=source,
        event=d["event"],
        lifted=lifted,
        rules=rules,
        count=d["count"],
        declared_unit=d["declared_unit"],
        max_contributions=k,
        path=path,
        plugin=d.get("plugin"),
        method=d.get("method"),
    )
