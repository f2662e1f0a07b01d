"""The composition graph: sources, transforms, releases and post-processing, reduced to events.

Nodes are string ids in a :class:`networkx.DiGraph`; every payload (an event, an adjacency) is a
node attribute, so two releases with equal events stay two nodes. Edges carry data flow.

Node kinds:

* ``source``: a protected dataset with its :class:`~dpledger.core.adjacency.Adjacency`.
* ``transform``: ``partition`` (split rows into cells by ``key``), ``cell`` (the rows of one
  cell of the partition it reads; groups several releases of that cell) or
  ``contribution_bound`` (keep at most ``max_contributions`` rows per user). Exactly one data
  input.
* ``release``: a private release (its :class:`~dpledger.core.events.Event`, repeated ``count``
  times), declared at ``row`` level (w.r.t. one row) or ``user`` level (already per user).
  Exactly one data input (a source or transform); other inputs may be earlier releases or
  post-processing nodes (adaptive side information, which costs nothing extra).
* ``postprocess``: a function of releases only; it costs nothing.

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
combination, and the certified answer is the maximum over them (see ``account_graph``).
A partition with ``cells = n`` runs its sub-graph identically in each of ``n`` cells (parallel:
one cell's cost; sequential: the cost ``n`` times); without ``cells`` each direct child of the
partition is one cell. Alternatives that are sub-multisets of another are dropped (composing
more never costs less); beyond :data:`MAX_ALTERNATIVES` they are merged into one event that
dominates all of them (sound, possibly looser).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeAlias

import attrs
import networkx as nx

from dpledger.accountant.base import DeltaBound, EpsilonBound
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import GraphError
from dpledger.core.events import (
    ComposedEvent,
    Event,
    NoOpEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    flatten,
)
from dpledger.core.lifting import lift_release

NODE_KINDS: tuple[str, ...] = ("source", "transform", "release", "postprocess")
TRANSFORM_KINDS: tuple[str, ...] = ("partition", "cell", "contribution_bound")
DATA_KINDS: tuple[str, ...] = ("source", "transform")
DECLARED_UNITS: tuple[str, ...] = ("row", "user")

#: more alternatives than this are merged into one dominating event
MAX_ALTERNATIVES = 256
#: why a bracket stays open for fixed-size batches under replace-one (see the wor_subsampling proof)
WOR_COMPOSITION_NOTE = (
    "sampling without replacement under replace-one: the upper bound composes the tight one-step "
    "dominating pair (Balle, Barthe & Gaboardi 2018, Thm 9; Zhu, Dong & Wang 2022, Prop. 30); "
    "the worst case under adaptive composition has no known exact analysis, so the true epsilon "
    "lies between the reported lower bound and the upper bound"
)

#: one alternative: release id -> number of repetitions
_Alt = dict[str, int]


@attrs.frozen
class ReleaseReduction:
    """One release after lifting: what it declared, what it costs the unit, and why."""

    release_id: str
    source: str
    event: Event
    lifted: Event
    rules: tuple[str, ...]
    count: int
    declared_unit: str
    max_contributions: int
    path: tuple[str, ...]
    plugin: str | None = None
    method: str | None = None

    @property
    def lifted_total(self) -> Event:
        """The lifted event repeated ``count`` times."""
        return self.lifted if self.count == 1 else SelfComposedEvent(self.lifted, self.count)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.release_id,
            "source": self.source,
            "event": self.event.describe(),
            "lifted_event": self.lifted.describe(),
            "lift_rules": list(self.rules),
            "count": self.count,
            "declared_unit": self.declared_unit,
            "max_contributions": self.max_contributions,
            "path": list(self.path),
            "plugin": self.plugin,
            "method": self.method,
        }


@attrs.frozen
class SourceReduction:
    """A source's privacy cost: the unit's loss is at most the worst of ``alternatives``.

    ``multisets[i]`` lists the ``(release id, repetitions)`` that make up ``alternatives[i]``.
    """

    source: str
    adjacency: Adjacency
    alternatives: tuple[Event, ...]
    multisets: tuple[tuple[tuple[str, int], ...], ...]
    releases: tuple[ReleaseReduction, ...]
    notes: tuple[str, ...] = ()

    @property
    def unit_adjacency(self) -> Adjacency:
        """The relation under which the lifted events are stated (one unit)."""
        return Adjacency(relation=self.adjacency.relation)

    @property
    def event(self) -> Event:
        """One event that dominates every alternative (the union of their multisets)."""
        if len(self.alternatives) == 1:
            return self.alternatives[0]
        lifted = {r.release_id: r.lifted for r in self.releases}
        return _alt_event(_union(dict(m) for m in self.multisets), lifted)


def _merge_into(target: _Alt, other: _Alt) -> _Alt:
    for rid, m in other.items():
        target[rid] = target.get(rid, 0) + m
    return target


def _union(alts: Iterable[_Alt]) -> _Alt:
    out: _Alt = {}
    for alt in alts:
        for rid, m in alt.items():
            if m > out.get(rid, 0):
                out[rid] = m
    return out


def _dominated(a: _Alt, b: _Alt) -> bool:
    """True when ``a`` is a sub-multiset of ``b`` (so ``a`` never costs more)."""
    return len(a) <= len(b) and all(m <= b.get(rid, 0) for rid, m in a.items())


def _seq(costs: list[list[_Alt]]) -> list[_Alt]:
    acc: list[_Alt] = [{}]
    for cost in costs:
        if not cost:
            continue
        if len(acc) * len(cost) > MAX_ALTERNATIVES:
            acc, cost = [_union(acc)], [_union(cost)]
        if len(acc) == 1 and len(cost) == 1:
            a, b = acc[0], cost[0]
            acc = [_merge_into(a, b) if len(a) >= len(b) else _merge_into(b, a)]
        else:
            acc = [_merge_into(dict(a), b) for a in acc for b in cost]
    return acc


def _par(costs: list[list[_Alt]]) -> list[_Alt]:
    alts = [alt for cost in costs for alt in cost]
    if not alts:
        return [{}]
    if len(alts) > MAX_ALTERNATIVES:
        return [_union(alts)]
    unique: list[_Alt] = []
    seen: set[frozenset[tuple[str, int]]] = set()
    for alt in alts:
        key = frozenset(alt.items())
        if key not in seen:
            seen.add(key)
            unique.append(alt)
    keep = [
        a
        for i, a in enumerate(unique)
        if not any(j != i and _dominated(a, b) and (a != b) for j, b in enumerate(unique))
    ]
    return keep or unique[:1]


def _rep(cost: list[_Alt], times: int) -> list[_Alt]:
    return [{rid: m * times for rid, m in alt.items()} for alt in cost]


def _alt_event(alt: _Alt, lifted: Mapping[str, Event]) -> Event:
    terms: list[Event] = []
    for rid in sorted(alt):
        m = alt[rid]
        if m == 0:
            continue
        terms.append(lifted[rid] if m == 1 else SelfComposedEvent(lifted[rid], m))
    if not terms:
        return NoOpEvent()
    return terms[0] if len(terms) == 1 else ComposedEvent(tuple(terms))


class NodeError(GraphError):
    """A :class:`GraphError` about one node (its id is in ``node``)."""

    def __init__(self, node: str, problem: str, fix: str) -> None:
        self.node = node
        super().__init__(f"node {node!r}: {problem}. Fix: {fix}")


def _fail(node: str, problem: str, fix: str) -> NodeError:
    return NodeError(node, problem, fix)


class CompositionGraph:
    """A DAG of sources, transforms, releases and post-processing steps."""

    def __init__(self, *, disjoint_sources: bool = False) -> None:
        self.g: nx.DiGraph[str] = nx.DiGraph()
        #: True when no individual appears in two sources (then sources are not composed)
        self.disjoint_sources = disjoint_sources

    # -- building ----------------------------------------------------------------------
    def _add(self, node_id: str, kind: str, **attrs_: Any) -> None:
        if not isinstance(node_id, str) or not node_id:
            raise GraphError(
                f"node id {node_id!r}: ids must be non-empty strings. Fix: pass e.g. 'train'"
            )
        if self.g.has_node(node_id) and "node_kind" in self.g.nodes[node_id]:
            raise _fail(node_id, "is defined twice", "give every node a unique id")
        self.g.add_node(node_id, node_kind=kind, **attrs_)

    def _connect(self, inputs: str | Iterable[str] | None, node_id: str) -> None:
        if inputs is None:
            return
        for src in [inputs] if isinstance(inputs, str) else list(inputs):
            self.add_edge(src, node_id)

    def add_source(self, node_id: str, adjacency: Adjacency | None = None) -> None:
        """A protected dataset."""
        self._add(node_id, "source", adjacency=adjacency or Adjacency())

    def add_transform(
        self,
        node_id: str,
        kind: str,
        input: str | None = None,
        *,
        key: str | None = None,
        cells: int | None = None,
        public_key: bool = False,
        max_contributions: int | None = None,
    ) -> None:
        """``partition`` (``key``, ``cells``, ``public_key``), ``cell``, ``contribution_bound``."""
        self._add(
            node_id,
            "transform",
            transform=kind,
            key=key,
            cells=cells,
            public_key=public_key,
            max_contributions=max_contributions,
        )
        self._connect(input, node_id)

    def add_release(
        self,
        node_id: str,
        event: Event,
        input: str | Iterable[str] | None = None,
        *,
        count: int = 1,
        declared_unit: str = "row",
        plugin: str | None = None,
        method: str | None = None,
    ) -> None:
        """A private release of ``event`` repeated ``count`` times."""
        self._add(
            node_id,
            "release",
            event=event,
            count=count,
            declared_unit=declared_unit,
            plugin=plugin,
            method=method,
        )
        self._connect(input, node_id)

    def add_postprocess(self, node_id: str, inputs: str | Iterable[str] | None = None) -> None:
        """A function of earlier releases (free by post-processing)."""
        self._add(node_id, "postprocess")
        self._connect(inputs, node_id)

    def add_edge(self, u: str, v: str) -> None:
        """Data flows from ``u`` to ``v`` (nodes may be defined later; ``validate`` checks)."""
        for n in (u, v):
            if not isinstance(n, str) or not n:
                raise GraphError(
                    f"edge {u!r} -> {v!r}: ids must be non-empty strings. Fix: use string ids"
                )
        self.g.add_edge(u, v)

    # -- inspection --------------------------------------------------------------------
    def kind(self, node: str) -> str:
        return str(self.g.nodes[node]["node_kind"])

    def nodes_of(self, kind: str) -> list[str]:
        return sorted(n for n, d in self.g.nodes(data=True) if d.get("node_kind") == kind)

    def _data_input(self, node: str) -> list[str]:
        nodes = self.g.nodes
        return [p for p in self.g.predecessors(node) if nodes[p].get("node_kind") in DATA_KINDS]

    def _data_children(self, node: str) -> list[str]:
        return sorted(
            s
            for s in self.g.successors(node)
            if self.g.nodes[s].get("node_kind") in ("transform", "release")
            and self._data_input(s) == [node]
        )

    # -- validation --------------------------------------------------------------------
    def validate(self) -> None:
        """Raise :class:`GraphError` naming the first offending node and the fix."""
        for n in sorted(self.g.nodes):
            if "node_kind" not in self.g.nodes[n]:
                users = sorted(set(self.g.predecessors(n)) | set(self.g.successors(n)))
                raise _fail(
                    n,
                    f"is referenced by an edge (from/to {users}) but never defined",
                    "define the node or remove the edge",
                )
        if not nx.is_directed_acyclic_graph(self.g):
            cycle = [u for u, _ in nx.find_cycle(self.g)]
            raise _fail(
                cycle[0],
                f"is on a cycle {' -> '.join([*cycle, cycle[0]])}",
                "data must flow one way; remove one of these edges",
            )
        for n in sorted(self.g.nodes):
            self._validate_node(n)
        source_of = self.source_map()
        for n in self.nodes_of("release"):
            d = self.g.nodes[n]
            adj: Adjacency = self.g.nodes[source_of[n]]["adjacency"]
            if d["declared_unit"] == "user" and adj.unit != "user":
                raise _fail(
                    n,
                    f"is declared at user level but source {source_of[n]!r} protects rows",
                    "declare it at row level, or make the source's adjacency user level",
                )

    def _validate_node(self, n: str) -> None:
        d = self.g.nodes[n]
        kind = d["node_kind"]
        preds = sorted(self.g.predecessors(n))
        data_in = self._data_input(n)
        if kind == "source":
            if preds:
                raise _fail(n, f"a source cannot have inputs (has {preds})", "remove those edges")
            if not isinstance(d["adjacency"], Adjacency):
                raise _fail(n, "adjacency is not an Adjacency", "pass an Adjacency object")
            return
        if kind == "postprocess":
            bad = [p for p in preds if self.kind(p) in DATA_KINDS]
            if bad:
                raise _fail(
                    n,
                    f"post-processing reads private data directly from {bad}",
                    "feed it releases only, or model the access as a release",
                )
            if not preds:
                raise _fail(n, "post-processing has no input", "connect it to a release")
            return
        if len(data_in) != 1:
            if not data_in:
                raise _fail(n, f"{kind} has no data input", "connect it to a source or transform")
            raise _fail(
                n,
                f"{kind} is reachable from several data paths {data_in}, so its privacy unit is "
                "ambiguous",
                "give it exactly one source or transform as input (one path per source)",
            )
        if kind == "transform":
            self._validate_transform(n, d, preds)
        else:
            self._validate_release(n, d)

    def _validate_transform(self, n: str, d: Mapping[str, Any], preds: list[str]) -> None:
        if len(preds) != 1:
            raise _fail(n, f"a transform reads exactly one input, got {preds}", "keep one input")
        t = d["transform"]
        if t == "partition":
            if not isinstance(d["key"], str) or not d["key"]:
                raise _fail(n, "partition needs a key", "set key, e.g. 'time'")
            cells = d["cells"]
            bad_cells = isinstance(cells, bool) or not isinstance(cells, int) or cells < 1
            if cells is not None and bad_cells:
                raise _fail(n, f"cells must be an integer >= 1, got {cells!r}", "pass e.g. 10")
            if not isinstance(d["public_key"], bool):
                raise _fail(n, "public_key must be true or false", "pass a boolean")
        elif t == "cell":
            if self.g.nodes[preds[0]].get("transform") != "partition":
                raise _fail(n, f"a cell must read a partition, not {preds[0]!r}", "fix its input")
            if self.g.nodes[preds[0]]["cells"] is not None:
                raise _fail(
                    n,
                    f"partition {preds[0]!r} declares cells = n (identical cells), so it has no "
                    "named cells",
                    "drop cells from the partition, or connect the releases to it directly",
                )
        elif t == "contribution_bound":
            k = d["max_contributions"]
            if isinstance(k, bool) or not isinstance(k, int) or k < 1:
                raise _fail(
                    n, f"max_contributions must be an integer >= 1, got {k!r}", "pass e.g. 1"
                )
        else:
            raise _fail(n, f"unknown transform {t!r}", f"use one of {list(TRANSFORM_KINDS)}")

    def _validate_release(self, n: str, d: Mapping[str, Any]) -> None:
        if not isinstance(d["event"], Event):
            raise _fail(n, f"event is not an Event ({type(d['event']).__name__})", "pass an event")
        count = d["count"]
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise _fail(n, f"count must be an integer >= 0, got {count!r}", "pass e.g. 1")
        if d["declared_unit"] not in DECLARED_UNITS:
            raise _fail(
                n, f"unknown declared_unit {d['declared_unit']!r}", f"use {list(DECLARED_UNITS)}"
            )

    def source_map(self) -> dict[str, str]:
        """For every data node and release, the source it reads (graph must be acyclic)."""
        out: dict[str, str] = {}
        for n in nx.topological_sort(self.g):
            kind = self.g.nodes[n].get("node_kind")
            if kind == "source":
                out[n] = n
            elif kind in ("transform", "release"):
                data_in = self._data_input(n)
                if len(data_in) == 1 and data_in[0] in out:
                    out[n] = out[data_in[0]]
        return out

    # -- reduction ---------------------------------------------------------------------
    def reduce(
        self, adjacencies: Mapping[str, Adjacency] | None = None
    ) -> dict[str, SourceReduction]:
        """Per source, the alternatives whose maximum bounds the unit's loss (O(nodes))."""
        self.validate()
        out: dict[str, SourceReduction] = {}
        for source in self.nodes_of("source"):
            adj = (adjacencies or {}).get(source, self.g.nodes[source]["adjacency"])
            out[source] = self._reduce_source(source, adj)
        return out

    def _parallel(self, d: Mapping[str, Any], adj: Adjacency) -> bool:
        disjoint = adj.unit == "row" or d["key"] == adj.unit_key
        return bool(disjoint and (adj.relation == "add_remove" or d["public_key"]))

    def _reduce_source(self, source: str, adj: Adjacency) -> SourceReduction:
        k0 = adj.max_contributions if adj.unit == "user" else 1
        releases: list[ReleaseReduction] = []
        lifted: dict[str, Event] = {}
        notes: list[str] = []
        cost: dict[str, list[_Alt]] = {}
        # iterative post-order over the data tree; state: (node, k, path)
        stack: list[tuple[str, int, tuple[str, ...], bool]] = [(source, k0, (), False)]
        while stack:
            node, k, path, done = stack.pop()
            d = self.g.nodes[node]
            kind = d["node_kind"]
            if kind == "release":
                rel = self._reduce_release(node, d, source, adj, k, path)
                releases.append(rel)
                lifted[node] = rel.lifted
                cost[node] = [{node: rel.count}] if rel.count else [{}]
                continue
            children = self._data_children(node)
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
                cost[node] = self._partition_cost(node, d, adj, child_costs, notes)
            else:
                cost[node] = _seq(child_costs)
        if adj.relation == "replace_one" and any(
            isinstance(leaf, SampledWithoutReplacementEvent)
            for rel in releases
            for leaf, _ in flatten(rel.lifted)
        ):
            notes.append(WOR_COMPOSITION_NOTE)
        alts = cost.pop(source)
        if len(alts) > MAX_ALTERNATIVES:
            alts = [_union(alts)]
        releases.sort(key=lambda r: r.release_id)
        return SourceReduction(
            source=source,
            adjacency=adj,
            alternatives=tuple(_alt_event(a, lifted) for a in alts),
            multisets=tuple(tuple(sorted((r, m) for r, m in a.items() if m)) for a in alts),
            releases=tuple(releases),
            notes=tuple(notes),
        )

    def _partition_cost(
        self,
        node: str,
        d: Mapping[str, Any],
        adj: Adjacency,
        child_costs: list[list[_Alt]],
        notes: list[str],
    ) -> list[_Alt]:
        parallel = self._parallel(d, adj)
        cells = d["cells"]
        how = "parallel (disjoint for the unit)" if parallel else "sequential (not disjoint)"
        notes.append(f"partition {node!r} by {d['key']!r}: cells compose {how}")
        if cells is not None:
            per_cell = _seq(child_costs)
            return per_cell if parallel else _rep(per_cell, cells)
        return _par(child_costs) if parallel else _seq(child_costs)

    def _reduce_release(
        self,
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


# -- accounting ----------------------------------------------------------------------------
Bound: TypeAlias = EpsilonBound | DeltaBound


@attrs.frozen
class SourceAccount:
    """A source's certified bound: the worst over its alternatives."""

    reduction: SourceReduction
    bound: Bound
    alternative_bounds: tuple[Bound, ...]
    unavailable: tuple[tuple[str, str], ...]

    def to_dict(self) -> dict[str, Any]:
        red = self.reduction
        return {
            "source": red.source,
            **self.bound.to_dict(),
            "adjacency": red.adjacency.to_dict(),
            "adjacency_description": red.adjacency.describe(),
            "alternatives": [
                {"event": e.describe(), **b.to_dict()}
                for e, b in zip(red.alternatives, self.alternative_bounds, strict=True)
            ],
            "releases": [r.release_id for r in red.releases],
            "notes": list(red.notes),
            "unavailable": [list(u) for u in self.unavailable],
        }


@attrs.frozen
class GraphAccount:
    """The pipeline's certified bound, per source and per release."""

    bound: Bound
    sources: tuple[SourceAccount, ...]
    releases: tuple[ReleaseReduction, ...]
    release_bounds: Mapping[str, Bound] = attrs.field(factory=dict)
    combined: str = "single source"

    @property
    def method(self) -> str:
        return str(self.bound.method)

    def adjacency_description(self) -> str:
        descs = sorted({s.reduction.adjacency.describe() for s in self.sources})
        return "; ".join(descs) if descs else "none"

    def to_dict(self) -> dict[str, Any]:
        adjs = [s.reduction.adjacency.to_dict() for s in self.sources]
        releases = []
        for r in self.releases:
            entry = r.to_dict()
            if r.release_id in self.release_bounds:
                entry["bound"] = self.release_bounds[r.release_id].to_dict()
            releases.append(entry)
        return {
            **self.bound.to_dict(),
            "adjacency": adjs[0] if len(adjs) == 1 else adjs,
            "adjacency_description": self.adjacency_description(),
            "combined": self.combined,
            "sources": [s.to_dict() for s in self.sources],
            "releases": releases,
        }


def _worst(bounds: list[Bound]) -> Bound:
    """Max upper bound and max lower bound (the unit's loss is the max over alternatives)."""
    if len(bounds) == 1:
        return bounds[0]
    eps = [b for b in bounds if isinstance(b, EpsilonBound)]
    if len(eps) == len(bounds):
        top = max(eps, key=lambda b: b.epsilon)
        return attrs.evolve(top, epsilon_lower=max(b.epsilon_lower for b in eps))
    deltas = [b for b in bounds if isinstance(b, DeltaBound)]
    assert len(deltas) == len(bounds), "bounds of one query are all of one kind"
    worst = max(deltas, key=lambda b: b.delta)
    return attrs.evolve(worst, delta_lower=max(b.delta_lower for b in deltas))


def _account_alternatives(
    alternatives: Iterable[Event],
    adjacency: Adjacency,
    delta: float | None,
    epsilon: float | None,
    backends: Iterable[str] | None,
) -> tuple[list[Bound], list[tuple[str, str]]]:
    names = list(backends) if backends is not None else None
    bounds: list[Bound] = []
    unavailable: list[tuple[str, str]] = []
    for alt in alternatives:
        sel = account(alt, adjacency, delta=delta, epsilon=epsilon, backends=names)
        bounds.append(sel.bound)
        unavailable.extend(u for u in sel.unavailable if u not in unavailable)
    return bounds, unavailable


def account_graph(
    graph: CompositionGraph,
    *,
    delta: float | None = None,
    epsilon: float | None = None,
    backends: Iterable[str] | None = None,
    per_release: bool = False,
) -> GraphAccount:
    """Certified epsilon at ``delta`` (or delta at ``epsilon``) per source and overall.

    Each source's bound is the maximum over its alternatives (parallel composition). Sources
    are composed with each other unless the graph declares ``disjoint_sources`` (no individual
    in two sources), in which case the overall bound is the worst source. ``per_release`` adds
    each release's stand-alone bound (one accountant call per release).
    """
    if (delta is None) == (epsilon is None):
        raise GraphError("delta: give exactly one of delta or epsilon. Fix: pass delta=1e-5")
    backend_list = list(backends) if backends is not None else None
    reductions = graph.reduce()
    if not reductions:
        raise GraphError("graph: has no source. Fix: add a source with its adjacency")
    sources: list[SourceAccount] = []
    for red in reductions.values():
        bounds, unavailable = _account_alternatives(
            red.alternatives, red.unit_adjacency, delta, epsilon, backend_list
        )
        sources.append(SourceAccount(red, _worst(bounds), tuple(bounds), tuple(unavailable)))
    if len(sources) == 1:
        overall, combined = sources[0].bound, "single source"
    elif graph.disjoint_sources:
        overall, combined = _worst([s.bound for s in sources]), "worst source (disjoint sources)"
    else:
        overall, combined = _compose_sources(sources, delta, epsilon, backend_list)
    releases = tuple(r for s in sources for r in s.reduction.releases)
    release_bounds: dict[str, Bound] = {}
    if per_release:
        for s in sources:
            for r in s.reduction.releases:
                bs, _ = _account_alternatives(
                    [r.lifted_total], s.reduction.unit_adjacency, delta, epsilon, backend_list
                )
                release_bounds[r.release_id] = bs[0]
    return GraphAccount(overall, tuple(sources), releases, release_bounds, combined)


def _compose_sources(
    sources: list[SourceAccount],
    delta: float | None,
    epsilon: float | None,
    backends: list[str] | None,
) -> tuple[Bound, str]:
    relations = {s.reduction.adjacency.relation for s in sources}
    if len(relations) != 1:
        raise GraphError(
            f"sources: mix relations {sorted(relations)}, so they cannot be composed for one "
            "individual. Fix: use one relation for every source, or set disjoint_sources = true "
            "if no individual appears in two sources"
        )
    costs = [[dict(m) for m in s.reduction.multisets] for s in sources]
    # release ids are unique across the graph, so the per-source multisets combine directly
    alts = _seq([[{r: m for r, m in a.items()} for a in c] for c in costs])
    lifted = {r.release_id: r.lifted for s in sources for r in s.reduction.releases}
    adjacency = Adjacency(relation=relations.pop())
    events = [_alt_event(a, lifted) for a in alts]
    bounds, _ = _account_alternatives(events, adjacency, delta, epsilon, backends)
    return _worst(bounds), "sources composed (an individual may appear in every source)"
