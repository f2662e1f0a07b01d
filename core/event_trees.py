"""Operations on trees of core events: flattening a composition into its leaves (remembered
per event object within :func:`flatten_memo`), the pure-DP epsilon of a pure tree, the
coarsening of tabulated profiles, rewriting sub-events."""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections import Counter
from collections.abc import Callable, Iterator
from fractions import Fraction
from typing import Any

import attrs

from dpledger.core.basic_composition import basic_composition_epsilon
from dpledger.core.errors import InvalidParameterError, UnsupportedEventError
from dpledger.core.events import (
    ApproxDPEvent,
    ComposedEvent,
    Event,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    NoOpEvent,
    PartitionSelectionEvent,
    PoissonSampledEvent,
    PureDPEvent,
    RandomAllocationEvent,
    RandomizedResponseEvent,
    ReportNoisyMaxEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    TabulatedProfileEvent,
    TabulatedRDPEvent,
)

__all__ = [
    "canonical",
    "coarsen_tabulated",
    "flatten",
    "is_pure",
    "map_children",
    "pure_epsilon",
]


def canonical(event: Event) -> Event:
    """Rewrite derived core events into the base events the accountants characterise (every
    accountant and the lifting rules call this first): a
    :class:`PartitionSelectionEvent` becomes the events that dominate it
    (:func:`dpledger.core.partition_events.dominating_event`). Plugin events are lowered by
    the plugin host instead. Poisson sampling at rate 1 puts the unit in every batch: it is
    the sampled event itself, under either relation, and is rewritten to it; so is random
    allocation of every step (``num_selected == num_steps``): the unit is in all ``t`` steps,
    which are ``t`` runs of the step's event."""
    if not any_node(event, _rewritten, _NEVER_REWRITTEN):
        return event
    from dpledger.core.partition_events import dominating_event

    memo: dict[int, Event] = {}

    def rewrite(e: Event) -> Event:
        if id(e) not in memo:
            if isinstance(e, PartitionSelectionEvent):
                memo[id(e)] = dominating_event(e)
            elif isinstance(e, PoissonSampledEvent) and e.sampling_probability == 1:
                memo[id(e)] = rewrite(e.event)
            elif isinstance(e, RandomAllocationEvent) and e.num_selected == e.num_steps:
                memo[id(e)] = SelfComposedEvent(rewrite(e.event), e.num_steps)
            else:
                memo[id(e)] = map_children(e, rewrite)
        return memo[id(e)]

    return rewrite(event)


#: the core leaf classes: no sub-events (plugin subclasses, which may have some, are other types)
CORE_LEAVES: frozenset[type[Event]] = frozenset(
    {
        ApproxDPEvent,
        ExponentialMechanismEvent,
        GaussianEvent,
        LaplaceEvent,
        NoOpEvent,
        NonPrivateEvent,
        PartitionSelectionEvent,
        PureDPEvent,
        RandomizedResponseEvent,
        ReportNoisyMaxEvent,
        TabulatedProfileEvent,
        TabulatedRDPEvent,
    }
)


def any_node(
    event: Event, test: Callable[[Event], bool], skipped: frozenset[type[Event]] = frozenset()
) -> bool:
    """``any(test(e) for e in event.walk())`` (a shared sub-event tested once), without testing
    the nodes whose exact class is a core leaf class in ``skipped`` (``test`` must be False
    there): a wide composition of such leaves is passed over in bulk."""
    skip = skipped & CORE_LEAVES
    seen: set[int] = set()
    stack: list[Event] = [event]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if type(node) in skip:
            continue
        if test(node):
            return True
        kids = node.children()
        stack.extend([k for k in kids if type(k) not in skip] if skip and len(kids) > 1 else kids)
    return False


#: the core leaf classes that :func:`canonical` leaves as they are
_NEVER_REWRITTEN = CORE_LEAVES - {PartitionSelectionEvent}


def _rewritten(event: Event) -> bool:
    """Whether :func:`canonical` rewrites ``event`` itself."""
    if isinstance(event, PoissonSampledEvent):
        return event.sampling_probability == 1
    if isinstance(event, RandomAllocationEvent):
        return event.num_selected == event.num_steps
    return isinstance(event, PartitionSelectionEvent)


def coarsen_tabulated(event: Event, relation: str | None = None) -> Event:
    """``event`` with every :class:`TabulatedProfileEvent` replaced by its (eps, delta)
    coarsening (for accountants that do not compose privacy curves). A table tabulated under
    another relation than ``relation`` (when given) is refused: it holds only under its own."""
    memo: dict[int, Event] = {}

    def rewrite(e: Event) -> Event:
        if id(e) not in memo:
            if isinstance(e, TabulatedProfileEvent):
                if relation is not None and e.relation != relation:
                    raise UnsupportedEventError(
                        f"{e.describe()} was tabulated under {e.relation}, not {relation}; "
                        "tabulate it under the relation of the source"
                    )
                memo[id(e)] = e.coarsened()
            else:
                memo[id(e)] = map_children(e, rewrite)
        return memo[id(e)]

    return rewrite(event)


def map_children(event: Event, fn: Callable[[Event], Event]) -> Event:
    """``event`` with ``fn`` applied to each direct sub-event (leaves are returned as they are)."""
    if not event.children():
        return event
    changes: dict[str, Any] = {}
    for field in attrs.fields(type(event)):
        value = getattr(event, field.name)
        if isinstance(value, Event):
            changes[field.name] = fn(value)
        elif isinstance(value, tuple) and value and all(isinstance(v, Event) for v in value):
            changes[field.name] = tuple(fn(v) for v in value)
    return attrs.evolve(event, **changes)


_Flat = tuple[tuple[Event, int], ...]
#: within :func:`flatten_memo`: id(event) -> (event, its flattening); the event is held so
#: that its id is not reused while the memo lives
_FLATTENED: contextvars.ContextVar[dict[int, tuple[Event, _Flat]] | None] = contextvars.ContextVar(
    "flattened", default=None
)


@contextlib.contextmanager
def flatten_memo() -> Iterator[None]:
    """Within the block, :func:`flatten` walks each event object once and returns copies of
    its answer after that (events are immutable; one accounting call flattens the same tree in
    each backend). Nested blocks share the outermost memo, which ends with its block."""
    if _FLATTENED.get() is not None:
        yield
        return
    token = _FLATTENED.set({})
    try:
        yield
    finally:
        _FLATTENED.reset(token)


def flatten(event: Event) -> list[tuple[Event, int]]:
    """Expand composition into ``(leaf_or_sampled_event, count)`` pairs (a new list; within
    :func:`flatten_memo`, the tree is walked once per event object)."""
    memo = _FLATTENED.get()
    if memo is None:
        return _flatten(event)
    hit = memo.get(id(event))
    if hit is None or hit[0] is not event:
        hit = (event, tuple(_flatten(event)))
        memo[id(event)] = hit
    return list(hit[1])


def _flatten(event: Event) -> list[tuple[Event, int]]:
    """Expand composition into ``(leaf_or_sampled_event, count)`` pairs.

    Sampled events are kept whole (sampling does not distribute over composition).
    Counts of zero, no-ops and sampling at rate zero are dropped. The walk is iterative and
    visits a shared sub-event once (repeats of the same leaf object are merged, adding their
    counts), so neither deep nor shared trees can exhaust the stack or the clock.
    """
    flat = _flat_composition(event)
    if flat is not None:
        return flat
    # post-order over distinct nodes: each node maps to {id(leaf): [leaf, count]}, in order
    done: dict[int, dict[int, list[Any]]] = {}
    stack: list[tuple[Event, bool]] = [(event, False)]
    while stack:
        node, expanded = stack.pop()
        if id(node) in done:
            continue
        if isinstance(node, ComposedEvent | SelfComposedEvent):
            kids = node.children()
            if not expanded:
                stack.append((node, True))
                stack.extend((k, False) for k in reversed(kids) if id(k) not in done)
                continue
            mult = node.count if isinstance(node, SelfComposedEvent) else 1
            merged: dict[int, list[Any]] = {}
            if mult:
                for kid in kids:
                    for key, (leaf, k) in done[id(kid)].items():
                        if key in merged:
                            merged[key][1] += k * mult
                        else:
                            merged[key] = [leaf, k * mult]
            done[id(node)] = merged
        elif isinstance(node, NoOpEvent) or (
            isinstance(node, PoissonSampledEvent | SampledWithoutReplacementEvent)
            and node.sampling_probability == 0
        ):
            done[id(node)] = {}  # a batch that never contains the unit touches none of its data
        else:
            done[id(node)] = {id(node): [node, 1]}
    return [(leaf, k) for leaf, k in done[id(event)].values() if k]


#: the classes whose nodes :func:`_flatten` expands or drops (by class or by their fields)
_EXPANDED = (
    ComposedEvent,
    SelfComposedEvent,
    NoOpEvent,
    PoissonSampledEvent,
    SampledWithoutReplacementEvent,
)


def _flat_composition(event: Event) -> list[tuple[Event, int]] | None:
    """:func:`_flatten` of a composition whose sub-events are all kept whole, in bulk: each
    distinct sub-event object in the order of its first occurrence, with its number of
    occurrences; None for any other event."""
    if type(event) is not ComposedEvent:
        return None
    kids = event.events
    for kind in set(map(type, kids)):
        if issubclass(kind, _EXPANDED):
            if kind is not PoissonSampledEvent:
                return None
            # a sampling at rate zero is dropped
            if not all(k.sampling_probability != 0 for k in kids if type(k) is kind):
                return None
    counts = Counter(map(id, kids))
    if len(counts) == len(kids):
        return [(k, 1) for k in kids]
    objects = {id(k): k for k in kids}
    return [(objects[i], n) for i, n in counts.items()]


def is_pure(event: Event) -> bool:
    """True when the event is (a composition of) pure-DP events and samplings of them."""
    return all(
        isinstance(
            e,
            PureDPEvent
            | LaplaceEvent
            | RandomizedResponseEvent
            | ExponentialMechanismEvent
            | ReportNoisyMaxEvent
            | NoOpEvent
            | ComposedEvent
            | SelfComposedEvent
            | PoissonSampledEvent
            | SampledWithoutReplacementEvent,
        )
        for e in event.walk()
    )


def pure_epsilon(event: Event) -> float:
    """The basic-composition epsilon of a pure event (used as a cap and by group privacy),
    rounded up: sums are exact (:func:`~dpledger.core.basic_composition.
    basic_composition_epsilon`)."""
    if isinstance(event, NoOpEvent):
        return 0.0
    if isinstance(
        event,
        PureDPEvent | ExponentialMechanismEvent | ReportNoisyMaxEvent,
    ):
        return event.epsilon
    if isinstance(event, RandomizedResponseEvent):
        return event.epsilon
    if isinstance(event, LaplaceEvent):
        return basic_composition_epsilon([(1, 1 / Fraction(event.noise_multiplier))])
    if isinstance(event, ComposedEvent):
        return basic_composition_epsilon((1, pure_epsilon(e)) for e in event.events)
    if isinstance(event, SelfComposedEvent):
        return basic_composition_epsilon([(event.count, pure_epsilon(event.event))])
    if isinstance(event, PoissonSampledEvent | SampledWithoutReplacementEvent):
        q = event.sampling_probability
        e0 = pure_epsilon(event.event)
        if q == 0:
            return 0.0
        # log1p(q expm1(e0)) errs by a few units of roundoff: rounded up past them
        return math.nextafter(math.log1p(q * math.expm1(e0)) * (1 + 16 * 2.0**-53), math.inf)
    raise InvalidParameterError(
        "event", f"{event.kind} is not a pure-DP event", "use an accountant"
    )
