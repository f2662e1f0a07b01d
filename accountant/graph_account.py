"""The certified bound of a composition graph: each source's worst alternative, then the sources.

A graph is reduced (:mod:`dpledger.runtime.reduction`) to one :class:`~dpledger.accountant.
alternatives.SourceReduction` per source; every alternative is accounted by
:func:`dpledger.accountant.select.account` (the bracket over backends). A source's bound is the
worst of its alternatives (parallel composition: a unit is in one cell); sources compose with
each other unless the graph declares them disjoint.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol, TypeAlias

import attrs

from dpledger.accountant.alternatives import ReleaseReduction, SourceReduction, alt_event, seq
from dpledger.accountant.base import DeltaBound, EpsilonBound
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import GraphError
from dpledger.core.events import Event

#: a certified bound: epsilon at a delta, or delta at an epsilon
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
                {"event": e.describe(), "event_data": e.to_dict(), **b.to_dict()}
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


def worst_bound(bounds: list[Bound]) -> Bound:
    """Max upper bound and max lower bound (the unit's loss is the max over alternatives)."""
    if len(bounds) == 1:
        return bounds[0]
    eps = [b for b in bounds if isinstance(b, EpsilonBound)]
    if len(eps) == len(bounds):
        top = max(eps, key=lambda b: b.epsilon)
        return attrs.evolve(top, epsilon_lower=max(b.epsilon_lower for b in eps))
    deltas = [b for b in bounds if isinstance(b, DeltaBound)]
    assert len(deltas) == len(bounds), "bounds of one query are all of one kind"
    top_delta = max(deltas, key=lambda b: b.delta)
    return attrs.evolve(top_delta, delta_lower=max(b.delta_lower for b in deltas))


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


class ReducibleGraph(Protocol):
    """What the accountant needs of a composition graph (:class:`~dpledger.runtime.graph.
    CompositionGraph` is one): its reduction per source, and whether sources are disjoint."""

    disjoint_sources: bool

    def reduce(self) -> Mapping[str, SourceReduction]: ...


def account_graph(
    graph: ReducibleGraph,
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
        sources.append(SourceAccount(red, worst_bound(bounds), tuple(bounds), tuple(unavailable)))
    if len(sources) == 1:
        overall, combined = sources[0].bound, "single source"
    elif graph.disjoint_sources:
        overall, combined = (
            worst_bound([s.bound for s in sources]),
            "worst source (disjoint sources)",
        )
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
    alts = seq([[{r: m for r, m in a.items()} for a in c] for c in costs])
    lifted = {r.release_id: r.lifted for s in sources for r in s.reduction.releases}
    adjacency = Adjacency(relation=relations.pop())
    events = [alt_event(a, lifted) for a in alts]
    bounds, _ = _account_alternatives(events, adjacency, delta, epsilon, backends)
    return worst_bound(bounds), "sources composed (an individual may appear in every source)"
