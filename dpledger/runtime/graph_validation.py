"""Checks of a composition graph before it is reduced: every failure names the node and the fix."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import networkx as nx

from dpledger.core.adjacency import Adjacency
from dpledger.core.events import Event, PartitionSelectionEvent
from dpledger.runtime.graph_kinds import DATA_KINDS, DECLARED_UNITS, TRANSFORM_KINDS, NodeError

if TYPE_CHECKING:
    from dpledger.runtime.graph import CompositionGraph


def validate(graph: CompositionGraph) -> None:
    """Raise a :class:`~dpledger.core.errors.GraphError` naming the first bad node and the fix."""
    for n in sorted(graph.g.nodes):
        if "node_kind" not in graph.g.nodes[n]:
            users = sorted(set(graph.g.predecessors(n)) | set(graph.g.successors(n)))
            raise NodeError(
                n,
                f"is referenced by an edge (from/to {users}) but never defined",
                "define the node or remove the edge",
            )
    if not nx.is_directed_acyclic_graph(graph.g):
        cycle = [u for u, _ in nx.find_cycle(graph.g)]
        raise NodeError(
            cycle[0],
            f"is on a cycle {' -> '.join([*cycle, cycle[0]])}",
            "data must flow one way; remove one of these edges",
        )
    for n in sorted(graph.g.nodes):
        _validate_node(graph, n)
    source_of = graph.source_map()
    for n in graph.nodes_of("release"):
        d = graph.g.nodes[n]
        adj: Adjacency = graph.g.nodes[source_of[n]]["adjacency"]
        if d["declared_unit"] == "user" and adj.unit != "user":
            raise NodeError(
                n,
                f"is declared at user level but source {source_of[n]!r} protects rows",
                "declare it at row level, or make the source's adjacency user level",
            )
    _check_found_keys(graph, source_of)


def _check_found_keys(graph: CompositionGraph, source_of: Mapping[str, str]) -> None:
    """A partition whose keys are found in the data (``max_cells_per_unit`` without ``cells``)
    publishes which keys exist: a partition selection on its source must choose them, for
    units holding at least as many keys as the partition keeps per unit."""
    chosen: dict[str, list[tuple[str, int]]] = {}
    for n in graph.nodes_of("release"):
        for e in graph.g.nodes[n]["event"].walk():
            if isinstance(e, PartitionSelectionEvent):
                chosen.setdefault(source_of[n], []).append((n, e.max_partitions))
    for n in graph.nodes_of("transform"):
        d = graph.g.nodes[n]
        per_unit = d.get("max_cells_per_unit")
        if d["transform"] != "partition" or per_unit is None:
            continue
        selections = chosen.get(source_of[n], [])
        if d["cells"] is None and not selections:
            raise NodeError(
                n,
                "declares max_cells_per_unit without cells: its keys are found in the data, so "
                "which keys appear is private, and no release accounts for it",
                "add a partition_selection release on its source, or declare cells = n when "
                "the keys are known without the data",
            )
        for release, k in selections:
            if k < per_unit:
                raise NodeError(
                    release,
                    f"selects keys for units holding at most max_partitions = {k} keys, but "
                    f"partition {n!r} keeps up to max_cells_per_unit = {per_unit} per unit",
                    f"set max_partitions = {per_unit}",
                )


def _validate_node(graph: CompositionGraph, n: str) -> None:
    d = graph.g.nodes[n]
    kind = d["node_kind"]
    preds = sorted(graph.g.predecessors(n))
    data_in = graph.data_input(n)
    if kind == "source":
        if preds:
            raise NodeError(n, f"a source cannot have inputs (has {preds})", "remove those edges")
        if not isinstance(d["adjacency"], Adjacency):
            raise NodeError(n, "adjacency is not an Adjacency", "pass an Adjacency object")
        return
    if kind == "postprocess":
        bad = [p for p in preds if graph.kind(p) in DATA_KINDS]
        if bad:
            raise NodeError(
                n,
                f"post-processing reads private data directly from {bad}",
                "feed it releases only, or model the access as a release",
            )
        if not preds:
            raise NodeError(n, "post-processing has no input", "connect it to a release")
        return
    if len(data_in) != 1:
        if not data_in:
            raise NodeError(n, f"{kind} has no data input", "connect it to a source or transform")
        raise NodeError(
            n,
            f"{kind} is reachable from several data paths {data_in}, so its privacy unit is "
            "ambiguous",
            "give it exactly one source or transform as input (one path per source)",
        )
    if kind == "transform":
        _validate_transform(graph, n, d, preds)
    else:
        _validate_release(graph, n, d)


def _validate_transform(
    graph: CompositionGraph, n: str, d: Mapping[str, Any], preds: list[str]
) -> None:
    if len(preds) != 1:
        raise NodeError(n, f"a transform reads exactly one input, got {preds}", "keep one input")
    t = d["transform"]
    if t == "partition":
        if not isinstance(d["key"], str) or not d["key"]:
            raise NodeError(n, "partition needs a key", "set key, e.g. 'time'")
        cells = d["cells"]
        bad_cells = isinstance(cells, bool) or not isinstance(cells, int) or cells < 1
        if cells is not None and bad_cells:
            raise NodeError(n, f"cells must be an integer >= 1, got {cells!r}", "pass e.g. 10")
        if not isinstance(d["public_key"], bool):
            raise NodeError(n, "public_key must be true or false", "pass a boolean")
        per_unit = d.get("max_cells_per_unit")
        bad_bound = isinstance(per_unit, bool) or not isinstance(per_unit, int) or per_unit < 1
        if per_unit is not None and bad_bound:
            raise NodeError(
                n, f"max_cells_per_unit must be an integer >= 1, got {per_unit!r}", "pass e.g. 5"
            )
    elif t == "cell":
        parent = graph.g.nodes[preds[0]]
        if parent.get("transform") != "partition":
            raise NodeError(n, f"a cell must read a partition, not {preds[0]!r}", "fix its input")
        if parent["cells"] is not None or parent.get("max_cells_per_unit") is not None:
            field = "cells = n" if parent["cells"] is not None else "max_cells_per_unit"
            raise NodeError(
                n,
                f"partition {preds[0]!r} declares {field} (identical cells), so it has no "
                "named cells",
                f"drop {field.split()[0]} from the partition, or connect the releases to it "
                "directly",
            )
    elif t == "contribution_bound":
        k = d["max_contributions"]
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise NodeError(
                n, f"max_contributions must be an integer >= 1, got {k!r}", "pass e.g. 1"
            )
    else:
        raise NodeError(n, f"unknown transform {t!r}", f"use one of {list(TRANSFORM_KINDS)}")


def _validate_release(graph: CompositionGraph, n: str, d: Mapping[str, Any]) -> None:
    if not isinstance(d["event"], Event):
        raise NodeError(n, f"event is not an Event ({type(d['event']).__name__})", "pass an event")
    if any(isinstance(e, PartitionSelectionEvent) for e in d["event"].walk()):
        above = [a for a in nx.ancestors(graph.g, n) if graph.g.nodes[a].get("transform")]
        cut = sorted(a for a in above if graph.g.nodes[a]["transform"] in ("partition", "cell"))
        if cut:
            raise NodeError(
                n,
                f"a partition selection reads partition {cut[0]!r}, so it would run once per "
                "cell; it selects among all the keys at once",
                "connect it to the partition's input (a source or contribution bound)",
            )
    count = d["count"]
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise NodeError(n, f"count must be an integer >= 0, got {count!r}", "pass e.g. 1")
    if d["declared_unit"] not in DECLARED_UNITS:
        raise NodeError(
            n, f"unknown declared_unit {d['declared_unit']!r}", f"use {list(DECLARED_UNITS)}"
        )
