"""A source's privacy cost as *alternatives*: multisets of releases, and their algebra.

The reduction of a composition graph (:mod:`dpledger.runtime.reduction`) states what one privacy
unit can lose as a list of alternatives, each a multiset ``release id -> repetitions``: the
unit's loss is at most the worst alternative. Sequential composition merges multisets (every
combination of the parts' alternatives), parallel composition (a disjoint partition) keeps the
parts' alternatives side by side, dropping those that are sub-multisets of another (composing
more never costs less). Beyond :data:`MAX_ALTERNATIVES` alternatives are merged into one
multiset that dominates all of them (sound, possibly looser). :class:`SourceReduction` is what
the accountant (:mod:`dpledger.accountant.graph_account`) bounds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeAlias

import attrs

from dpledger.core.adjacency import Adjacency
from dpledger.core.events import ComposedEvent, Event, NoOpEvent, SelfComposedEvent

#: more alternatives than this are merged into one dominating event
MAX_ALTERNATIVES = 256

#: one alternative: release id -> number of repetitions
Alt: TypeAlias = dict[str, int]


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
            # the same events as structured JSON (kind and parameters, nested)
            "event_data": self.event.to_dict(),
            "lifted_event_data": self.lifted.to_dict(),
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
        return alt_event(union(dict(m) for m in self.multisets), lifted)


def merge_into(target: Alt, other: Alt) -> Alt:
    for rid, m in other.items():
        target[rid] = target.get(rid, 0) + m
    return target


def union(alts: Iterable[Alt]) -> Alt:
    out: Alt = {}
    for alt in alts:
        for rid, m in alt.items():
            if m > out.get(rid, 0):
                out[rid] = m
    return out


def dominated(a: Alt, b: Alt) -> bool:
    """True when ``a`` is a sub-multiset of ``b`` (so ``a`` never costs more)."""
    return len(a) <= len(b) and all(m <= b.get(rid, 0) for rid, m in a.items())


def seq(costs: list[list[Alt]]) -> list[Alt]:
    acc: list[Alt] = [{}]
    for cost in costs:
        if not cost:
            continue
        if len(acc) * len(cost) > MAX_ALTERNATIVES:
            acc, cost = [union(acc)], [union(cost)]
        if len(acc) == 1 and len(cost) == 1:
            a, b = acc[0], cost[0]
            acc = [merge_into(a, b) if len(a) >= len(b) else merge_into(b, a)]
        else:
            acc = [merge_into(dict(a), b) for a in acc for b in cost]
    return acc


def par(costs: list[list[Alt]]) -> list[Alt]:
    alts = [alt for cost in costs for alt in cost]
    if not alts:
        return [{}]
    if len(alts) > MAX_ALTERNATIVES:
        return [union(alts)]
    unique: list[Alt] = []
    seen: set[frozenset[tuple[str, int]]] = set()
    for alt in alts:
        key = frozenset(alt.items())
        if key not in seen:
            seen.add(key)
            unique.append(alt)
    keep = [
        a
        for i, a in enumerate(unique)
        if not any(j != i and dominated(a, b) and (a != b) for j, b in enumerate(unique))
    ]
    return keep or unique[:1]


def rep(cost: list[Alt], times: int) -> list[Alt]:
    return [{rid: m * times for rid, m in alt.items()} for alt in cost]


def alt_event(alt: Alt, lifted: Mapping[str, Event]) -> Event:
    terms: list[Event] = []
    for rid in sorted(alt):
        m = alt[rid]
        if m == 0:
            continue
        terms.append(lifted[rid] if m == 1 else SelfComposedEvent(lifted[rid], m))
    if not terms:
        return NoOpEvent()
    return terms[0] if len(terms) == 1 else ComposedEvent(tuple(terms))
