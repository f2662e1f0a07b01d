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

A graph is checked by :mod:`dpledger.runtime.graph_validation`, reduced to one cost per source
by :mod:`dpledger.runtime.reduction` and accounted by
:func:`dpledger.accountant.graph_account.account_graph`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import networkx as nx

from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import GraphError
from dpledger.core.events import Event
from dpledger.runtime.graph_kinds import (
    DATA_KINDS,
    NodeError,
)
from dpledger.runtime.graph_validation import validate
from dpledger.runtime.reduction import reduce

if TYPE_CHECKING:
    from dpledger.accountant.alternatives import SourceReduction


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
            raise NodeError(node_id, "is defined twice", "give every node a unique id")
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
        max_cells_per_unit: int | None = None,
    ) -> None:
        """``partition`` (``key``, ``cells``, ``public_key``, ``max_cells_per_unit``),
        ``cell``, ``contribution_bound``."""
        self._add(
            node_id,
            "transform",
            transform=kind,
            key=key,
            cells=cells,
            public_key=public_key,
            max_contributions=max_contributions,
            max_cells_per_unit=max_cells_per_unit,
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

    def data_input(self, node: str) -> list[str]:
        nodes = self.g.nodes
        return [p for p in self.g.predecessors(node) if nodes[p].get("node_kind") in DATA_KINDS]

    def data_children(self, node: str) -> list[str]:
        return sorted(
            s
            for s in self.g.successors(node)
            if self.g.nodes[s].get("node_kind") in ("transform", "release")
            and self.data_input(s) == [node]
        )

    # -- checks and reduction (in their own modules) -----------------------------------
    def validate(self) -> None:
        """Raise :class:`GraphError` naming the first offending node and the fix."""
        validate(self)

    def source_map(self) -> dict[str, str]:
        """For every data node and release, the source it reads (graph must be acyclic)."""
        out: dict[str, str] = {}
        for n in nx.topological_sort(self.g):
            kind = self.g.nodes[n].get("node_kind")
            if kind == "source":
                out[n] = n
            elif kind in ("transform", "release"):
                data_in = self.data_input(n)
                if len(data_in) == 1 and data_in[0] in out:
                    out[n] = out[data_in[0]]
        return out

    def reduce(
        self, adjacencies: Mapping[str, Adjacency] | None = None
    ) -> dict[str, SourceReduction]:
        """Per source, the alternatives whose maximum bounds the unit's loss (O(nodes))."""
        return reduce(self, adjacencies)
