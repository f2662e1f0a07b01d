"""Immutable, validated mechanism events.

An event describes *what a release does*, not which accountant analyses it. Noise is always
stated relative to the per-record (per-unit) contribution bound ``C`` of the query: a
:class:`GaussianEvent` with ``noise_multiplier = s`` adds ``N(0, (s*C)^2)`` noise to a query in
which adding or removing one record moves the output by at most ``C`` in L2 norm. The factor
that a replace-one relation or a user-level lift adds is carried by the adjacency (see
:mod:`dpledger.core.adjacency`), never by the caller.

Semantics are stable: an event class is never redefined, only new ones are added.

This module defines the core event classes and is the place to import every event name from.
It re-exports the kind registry (:mod:`~dpledger.core.event_kinds`), the parser
(:mod:`~dpledger.core.event_parser`), the checks of tabulated curves
(:mod:`~dpledger.core.event_curves`), the nesting limit (:mod:`~dpledger.core.event_nesting`)
and the operations on event trees (:mod:`~dpledger.core.event_trees`, which needs the classes
and is imported on first use).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, cast

import attrs

from dpledger.core.errors import InvalidParameterError
from dpledger.core.event_curves import (
    MAX_PROFILE_POINTS,
    MAX_TIGHT_LOSS,
    PROFILE_DELTA,
    pair_curve,
    rdp_curve_problem,
    tight_pair_problem,
)
from dpledger.core.event_curves import float_tuple as _float_tuple
from dpledger.core.event_curves import optional_numbers as _optional_numbers
from dpledger.core.event_curves import profile_table_validator as _table_validator
from dpledger.core.event_curves import rdp_table_validator as _rdp_table_validator
from dpledger.core.event_kinds import EVENT_KINDS, EventKinds
from dpledger.core.event_nesting import MAX_NESTING, check_nesting, nesting_depth
from dpledger.core.event_parser import INT_EVENT_FIELDS, event_from_dict, short_repr
from dpledger.core.partition_selection import check_selection
from dpledger.core.validation import (
    delta_closed_open,
    nonnegative_finite,
    nonnegative_int,
    one_of,
    positive_finite,
    positive_int,
    probability,
    to_float,
)

if TYPE_CHECKING:
    from dpledger.core.event_trees import (
        canonical,
        coarsen_tabulated,
        flatten,
        is_pure,
        map_children,
        pure_epsilon,
    )

__all__ = [
    "ALLOCATION_NEEDS_ADD_REMOVE",
    "CORE_EVENT_KINDS",
    "EVENT_KINDS",
    "INT_EVENT_FIELDS",
    "MAX_NESTING",
    "MAX_PROFILE_POINTS",
    "MAX_TIGHT_LOSS",
    "PROFILE_DELTA",
    "SHUFFLED_NEEDS_REPLACE_ONE",
    "ApproxDPEvent",
    "ComposedEvent",
    "Event",
    "EventKinds",
    "ExponentialMechanismEvent",
    "GaussianEvent",
    "LaplaceEvent",
    "NoOpEvent",
    "NonPrivateEvent",
    "PartitionSelectionEvent",
    "PoissonSampledEvent",
    "PureDPEvent",
    "RandomAllocationEvent",
    "RandomizedResponseEvent",
    "ReportNoisyMaxEvent",
    "SampledWithoutReplacementEvent",
    "SelfComposedEvent",
    "ShuffledBatchesEvent",
    "TabulatedProfileEvent",
    "TabulatedRDPEvent",
    "canonical",
    "coarsen_tabulated",
    "event_from_dict",
    "flatten",
    "is_pure",
    "map_children",
    "nesting_depth",
    "pair_curve",
    "pure_epsilon",
    "rdp_curve_problem",
    "short_repr",
    "tight_pair_problem",
]

#: the names :mod:`dpledger.core.event_trees` defines, looked up there on first use
_TREE_OPERATIONS = frozenset(
    {"canonical", "coarsen_tabulated", "flatten", "is_pure", "map_children", "pure_epsilon"}
)


@attrs.frozen
class Event:
    """Base class of all mechanism events.

    The core event classes compute their hash once per object and keep it (an accountant
    looks its leaves up many times); pickling and copying drop the kept hash."""

    kind: ClassVar[str] = "event"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "kind" in cls.__dict__:
            EVENT_KINDS._register(cls, Event)

    def children(self) -> tuple[Event, ...]:
        """Direct sub-events (empty for leaves)."""
        return ()

    def walk(self) -> Iterator[Event]:
        """This event and all nested sub-events, depth first (a shared sub-event once)."""
        seen: set[int] = set()
        stack: list[Event] = [self]
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            yield node
            stack.extend(reversed(node.children()))

    def covers(self, executed: Event) -> bool:
        """Whether this declared leaf step covers ``executed``, a step of the same class.

        The ledger asks this of plugin event classes (core kinds have their own rules in
        :mod:`dpledger.runtime.coverage`). The default is equality; a plugin may override it with
        a monotonicity it has proven (e.g. more noise never costs more privacy)."""
        return self == executed

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict with a ``kind`` tag; inverse of :func:`event_from_dict`."""
        out: dict[str, Any] = {"kind": self.kind}
        for field in attrs.fields(type(self)):
            value = getattr(self, field.name)
            if isinstance(value, Event):
                out[field.name] = value.to_dict()
            elif isinstance(value, tuple):
                out[field.name] = [v.to_dict() if isinstance(v, Event) else v for v in value]
            else:
                out[field.name] = value
        return out

    def describe(self) -> str:
        """A short human-readable description."""
        params = ", ".join(
            f"{f.name}={getattr(self, f.name)!r}"
            for f in attrs.fields(type(self))
            if not isinstance(getattr(self, f.name), Event | tuple)
        )
        inner = ", ".join(c.describe() for c in self.children())
        sep = ", " if params and inner else ""
        return f"{self.kind}({params}{sep}{inner})"


@attrs.frozen(cache_hash=True)
class NoOpEvent(Event):
    """A step that touches no private data."""

    kind: ClassVar[str] = "noop"


@attrs.frozen(cache_hash=True)
class NonPrivateEvent(Event):
    """A release with no privacy guarantee (epsilon = infinity)."""

    kind: ClassVar[str] = "non_private"


@attrs.frozen(cache_hash=True)
class GaussianEvent(Event):
    """Gaussian noise of std ``noise_multiplier * C`` on a query of L2 contribution bound ``C``."""

    kind: ClassVar[str] = "gaussian"
    noise_multiplier: float = attrs.field(validator=positive_finite, converter=to_float)


@attrs.frozen(cache_hash=True)
class LaplaceEvent(Event):
    """Laplace noise of scale ``noise_multiplier * C`` on a query of L1 contribution bound ``C``."""

    kind: ClassVar[str] = "laplace"
    noise_multiplier: float = attrs.field(validator=positive_finite, converter=to_float)


@attrs.frozen(cache_hash=True)
class PureDPEvent(Event):
    """A black-box epsilon-DP release (w.r.t. the source's row-level relation)."""

    kind: ClassVar[str] = "pure_dp"
    epsilon: float = attrs.field(validator=nonnegative_finite, converter=to_float)


@attrs.frozen(cache_hash=True)
class TabulatedProfileEvent(Event):
    """A mechanism known by its certified privacy profile, tabulated on an epsilon grid.

    ``deltas[i]`` bounds ``delta(epsilons[i])`` of one instance from above (the hockey-stick
    divergence of ``(M(D), M(D'))``); ``deltas_add`` bounds the swapped pair, or is None when
    the bound holds for both. The table holds under ``relation`` and is never rescaled.
    The hockey-stick curve is convex in ``e^eps``, so chords between tabulated points are
    certified upper bounds too, and the PLD accountant composes the table as a privacy-loss
    distribution (connect-the-dots); other accountants use :meth:`coarsened`.

    ``tight_losses``, ``tight_masses`` and ``tight_inf_mass``, when given, are a discrete pair
    (P-masses at finite privacy losses, P's mass at +infinity; a pair of probability laws) that
    ``tight_claim`` claims is the mechanism's exact pair: for each direction of the relation,
    some neighbouring datasets give output laws with exactly its curve. Its curve must lie
    under the table. Only the PLD accountant's lower bound uses it, and that lower bound is as
    certain as the claim; upper bounds never do.
    """

    kind: ClassVar[str] = "tabulated_profile"
    epsilons: tuple[float, ...] = attrs.field(converter=_float_tuple, validator=_table_validator)
    deltas: tuple[float, ...] = attrs.field(converter=_float_tuple, validator=_table_validator)
    deltas_add: tuple[float, ...] | None = attrs.field(
        default=None, converter=_float_tuple, validator=_table_validator
    )
    relation: str = attrs.field(default="add_remove", validator=one_of("add_remove", "replace_one"))
    name: str = attrs.field(default="", validator=attrs.validators.instance_of(str))
    tight_losses: tuple[float, ...] | None = attrs.field(
        default=None, converter=_float_tuple, validator=_optional_numbers
    )
    tight_masses: tuple[float, ...] | None = attrs.field(
        default=None, converter=_float_tuple, validator=_optional_numbers
    )
    tight_inf_mass: float = attrs.field(default=0.0, converter=to_float, validator=probability)
    tight_claim: str = attrs.field(default="", validator=attrs.validators.instance_of(str))

    def __attrs_post_init__(self) -> None:
        problem = tight_pair_problem(self)
        if problem is not None:
            raise InvalidParameterError(
                "tight_losses", problem, "give the mechanism's exact pair, or leave it out"
            )

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        if self.tight_losses is None:  # a table without a claimed pair is written as before
            for key in ("tight_losses", "tight_masses", "tight_inf_mass", "tight_claim"):
                out.pop(key)
        return out

    def worst(self) -> tuple[float, ...]:
        """The larger of the two directions' deltas at every tabulated epsilon."""
        if self.deltas_add is None:
            return self.deltas
        return tuple(max(a, b) for a, b in zip(self.deltas, self.deltas_add, strict=True))

    def coarsened(self) -> Event:
        """The (eps, delta) guarantee read off the table: the smallest tabulated epsilon >= 0
        whose delta is at most :data:`PROFILE_DELTA` (pure DP where it is 0), else the
        tabulated point with the smallest delta. Loose next to the whole curve, never
        optimistic."""
        points = [(e, d) for e, d in zip(self.epsilons, self.worst(), strict=True) if e >= 0]
        if not points:
            return NonPrivateEvent()
        for eps, delta in points:
            if delta == 0.0:
                return PureDPEvent(eps)
            if delta <= PROFILE_DELTA:
                return ApproxDPEvent(eps, delta)
        eps, delta = min(points, key=lambda p: p[1])
        return ApproxDPEvent(eps, delta) if delta < 1.0 else NonPrivateEvent()

    def describe(self) -> str:
        label = f"{self.name}, " if self.name else ""
        return (
            f"{self.kind}({label}{len(self.epsilons)} points, eps {self.epsilons[0]:g} to "
            f"{self.epsilons[-1]:g}, {self.relation})"
        )


@attrs.frozen(cache_hash=True)
class TabulatedRDPEvent(Event):
    """A mechanism known by a Renyi-DP curve, tabulated at orders above 1.

    ``rdp[i]`` bounds the Renyi divergence of order ``orders[i]`` between the outputs on any
    two neighbouring datasets under ``relation`` (both orders of the pair), from above; +inf
    states no bound at that order. The table holds under ``relation`` and is never rescaled.
    The RDP accountant composes it; at an order between tabulated ones it uses the next
    tabulated order above (the curve is non-decreasing), beyond the last one +inf. The other
    accountants decline it.
    """

    kind: ClassVar[str] = "tabulated_rdp"
    orders: tuple[float, ...] = attrs.field(converter=_float_tuple, validator=_rdp_table_validator)
    rdp: tuple[float, ...] = attrs.field(converter=_float_tuple, validator=_rdp_table_validator)
    relation: str = attrs.field(default="add_remove", validator=one_of("add_remove", "replace_one"))
    name: str = attrs.field(default="", validator=attrs.validators.instance_of(str))

    def describe(self) -> str:
        label = f"{self.name}, " if self.name else ""
        return (
            f"{self.kind}({label}{len(self.orders)} orders, {self.orders[0]:g} to "
            f"{self.orders[-1]:g}, {self.relation})"
        )


@attrs.frozen(cache_hash=True)
class ApproxDPEvent(Event):
    """A black-box (epsilon, delta)-DP release (w.r.t. the source's row-level relation)."""

    kind: ClassVar[str] = "approx_dp"
    epsilon: float = attrs.field(validator=nonnegative_finite, converter=to_float)
    delta: float = attrs.field(validator=delta_closed_open, converter=to_float)


@attrs.frozen(cache_hash=True)
class RandomizedResponseEvent(Event):
    """k-ary randomized response: report the true bucket w.p. e^eps/(e^eps + k - 1)."""

    kind: ClassVar[str] = "randomized_response"
    epsilon: float = attrs.field(validator=positive_finite, converter=to_float)
    num_buckets: int = attrs.field(default=2, validator=positive_int)

    def __attrs_post_init__(self) -> None:
        if self.num_buckets < 2:
            raise InvalidParameterError(
                "num_buckets", f"must be >= 2, got {self.num_buckets}", "use at least two buckets"
            )


@attrs.frozen(cache_hash=True)
class ExponentialMechanismEvent(Event):
    """An exponential-mechanism release whose privacy loss spans at most ``epsilon`` under the
    source's relation (``epsilon``-bounded range, Durfee and Rogers 2019; it implies
    ``epsilon``-DP, and the accountant uses the tighter curve it gives).

    Sampling an index with probability proportional to ``exp(e * s_i / (2 * sensitivity))``
    (or ``exp(e * s_i / sensitivity)`` for scores that move in one direction) has this
    property at ``e``. The ledger books such a run as ``e`` under add/remove and ``2e`` under
    replace-one (a replaced record can move a score by twice its sensitivity); declarations
    state it the same way. A selection that is only known to be ``epsilon``-DP is a
    :class:`PureDPEvent` or :class:`ReportNoisyMaxEvent`."""

    kind: ClassVar[str] = "exponential_mechanism"
    epsilon: float = attrs.field(validator=nonnegative_finite, converter=to_float)


@attrs.frozen(cache_hash=True)
class ReportNoisyMaxEvent(Event):
    """Report-noisy-max (Gumbel or Laplace noise), ``epsilon``-DP under the source's relation
    (booked like :class:`ExponentialMechanismEvent`)."""

    kind: ClassVar[str] = "report_noisy_max"
    epsilon: float = attrs.field(validator=nonnegative_finite, converter=to_float)


@attrs.frozen(cache_hash=True)
class PartitionSelectionEvent(Event):
    """The release of the partition keys whose user count passes a noisy threshold, each user
    holding at most ``max_partitions`` keys; ``(epsilon, delta)`` is the budget of the whole
    selection per user, under add/remove of a user. ``mechanism`` is ``laplace``,
    ``gaussian`` or ``truncated_geometric``; the rules, and the events that bound them, are in
    :mod:`dpledger.core.partition_selection`."""

    kind: ClassVar[str] = "partition_selection"
    mechanism: str = attrs.field(validator=attrs.validators.instance_of(str))
    epsilon: float = attrs.field(validator=positive_finite, converter=to_float)
    delta: float = attrs.field(validator=probability, converter=to_float)
    max_partitions: int = attrs.field(default=1, validator=positive_int)

    def __attrs_post_init__(self) -> None:
        check_selection(self.mechanism, self.epsilon, self.delta, self.max_partitions)


def _event_validator(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, Event):
        raise InvalidParameterError(
            attribute.name, f"must be an Event, got {type(value).__name__}", "pass an event object"
        )
    check_nesting(attribute.name, (value,))


@attrs.frozen(cache_hash=True)
class PoissonSampledEvent(Event):
    """Each record is included independently with probability ``sampling_probability``."""

    kind: ClassVar[str] = "poisson_sampled"
    sampling_probability: float = attrs.field(validator=probability, converter=to_float)
    event: Event = attrs.field(validator=_event_validator)

    def children(self) -> tuple[Event, ...]:
        return (self.event,)


@attrs.frozen(cache_hash=True)
class SampledWithoutReplacementEvent(Event):
    """A uniformly random batch of exactly ``sample_size`` of ``source_size`` records."""

    kind: ClassVar[str] = "sampled_without_replacement"
    source_size: int = attrs.field(validator=positive_int)
    sample_size: int = attrs.field(validator=nonnegative_int)
    event: Event = attrs.field(validator=_event_validator)

    def __attrs_post_init__(self) -> None:
        if self.sample_size > self.source_size:
            raise InvalidParameterError(
                "sample_size",
                f"{self.sample_size} exceeds source_size {self.source_size}",
                "use a batch no larger than the dataset",
            )

    @property
    def sampling_probability(self) -> float:
        return self.sample_size / self.source_size

    def children(self) -> tuple[Event, ...]:
        return (self.event,)


#: why accountants refuse shuffled batches under add/remove, with the fix
SHUFFLED_NEEDS_REPLACE_ONE = (
    "shuffled batches are analysed under replace-one adjacency only (the dataset size fixes the "
    "partition); declare relation = 'replace_one'"
)


@attrs.frozen(cache_hash=True)
class ShuffledBatchesEvent(Event):
    """One epoch of shuffle-and-partition: the ``source_size`` records are shuffled uniformly
    at random and cut into consecutive batches of ``batch_size`` (the last one holds the
    remainder when ``batch_size`` does not divide ``source_size``), so every record lies in
    exactly one of :attr:`num_batches` batches; ``event`` runs on each batch. ``E`` epochs, each
    reshuffled, are ``SelfComposedEvent(epoch, E)``.

    The source size is public and fixed: the partition is defined for datasets of exactly
    ``source_size`` records, so the event is analysed under replace-one adjacency only (adding
    or removing a record changes the number or the sizes of the batches). No amplification is
    claimed: an epoch costs one run of ``event`` (the record is in one batch). Accountants
    certify a lower bound from the max-of-batch-sums attack of Chua et al. (ICML 2024,
    arXiv 2403.17673; NeurIPS 2024, arXiv 2411.04205).
    """

    kind: ClassVar[str] = "shuffled_batches"
    source_size: int = attrs.field(validator=positive_int)
    batch_size: int = attrs.field(validator=positive_int)
    event: Event = attrs.field(validator=_event_validator)

    def __attrs_post_init__(self) -> None:
        if self.batch_size > self.source_size:
            raise InvalidParameterError(
                "batch_size",
                f"{self.batch_size} exceeds source_size {self.source_size}",
                "use a batch no larger than the dataset",
            )

    @property
    def num_batches(self) -> int:
        """Batches per epoch: ``ceil(source_size / batch_size)``."""
        return -(-self.source_size // self.batch_size)

    def children(self) -> tuple[Event, ...]:
        return (self.event,)


#: why accountants refuse random allocation under replace-one, with the fix
ALLOCATION_NEEDS_ADD_REMOVE = (
    "random allocation is analysed under add/remove adjacency only (the dominating pair is "
    "proven for adding or removing one record); declare relation = 'add_remove'"
)


@attrs.frozen(cache_hash=True)
class RandomAllocationEvent(Event):
    """One epoch of random allocation (balls-in-bins): each record is allocated to
    ``num_selected`` of ``num_steps`` steps chosen uniformly at random, independently of the
    other records, and ``event`` runs at every step on the records allocated to it (the batch
    sizes are random). ``E`` epochs, each re-allocated, are ``SelfComposedEvent(epoch, E)``.

    The analysis holds under add/remove adjacency of one record, with any number of records
    (no source size is fixed), also when later steps are chosen adaptively from earlier
    outputs: for ``num_selected = 1`` and a Gaussian ``event`` the remove direction is dominated
    by ``(1/t) sum_i N(e_i / sigma, I_t)`` vs ``N(0, I_t)`` and the add direction by the swapped
    pair (Chua et al., "Balls-and-bins sampling for DP-SGD", AISTATS 2025; Feldman & Shenfeld,
    "Privacy amplification by random allocation", arXiv 2502.08202). Replace-one is refused by
    the accountants. For ``num_selected = k > 1`` the epoch is bounded by ``k`` epochs of
    1-of-``t/k`` allocation (Feldman & Shenfeld, Lemma 3.2; ``t`` not divisible by ``k``: the
    group sizes ``t // k`` and ``t // k + 1``), never above ``k`` releases.
    """

    kind: ClassVar[str] = "random_allocation"
    num_steps: int = attrs.field(validator=positive_int)
    event: Event = attrs.field(validator=_event_validator)
    num_selected: int = attrs.field(default=1, validator=positive_int)

    def __attrs_post_init__(self) -> None:
        if self.num_selected > self.num_steps:
            raise InvalidParameterError(
                "num_selected",
                f"{self.num_selected} exceeds num_steps {self.num_steps}",
                "allocate each record to at most num_steps steps",
            )

    @property
    def sampling_probability(self) -> float:
        """The probability that a given step holds a given record: ``k / t``."""
        return self.num_selected / self.num_steps

    def children(self) -> tuple[Event, ...]:
        return (self.event,)


@attrs.frozen(cache_hash=True)
class SelfComposedEvent(Event):
    """``count`` independent repetitions of ``event``."""

    kind: ClassVar[str] = "self_composed"
    event: Event = attrs.field(validator=_event_validator)
    count: int = attrs.field(validator=nonnegative_int)

    def children(self) -> tuple[Event, ...]:
        return (self.event,)


def _events_converter(value: Any) -> tuple[Event, ...]:
    if isinstance(value, Event | str | bytes | Mapping):
        return cast(tuple[Event, ...], value)  # not a list of events: the validator says so
    try:
        return tuple(value)
    except TypeError:
        return cast(tuple[Event, ...], value)


def _events_validator(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, tuple):
        raise InvalidParameterError(
            attribute.name,
            f"must be a list of events, got {type(value).__name__}",
            "pass a list of event objects",
        )
    for i, item in enumerate(value):
        if not isinstance(item, Event):
            raise InvalidParameterError(
                f"{attribute.name}[{i}]",
                f"must be an Event, got {type(item).__name__}",
                "pass event objects",
            )
    check_nesting(attribute.name, value)


@attrs.frozen(cache_hash=True)
class ComposedEvent(Event):
    """Sequential (possibly heterogeneous) composition of ``events``."""

    kind: ClassVar[str] = "composed"
    events: tuple[Event, ...] = attrs.field(
        converter=_events_converter, validator=_events_validator
    )

    def children(self) -> tuple[Event, ...]:
        return self.events


EVENT_KINDS._freeze_core()
#: the kinds defined by the core, frozen (plugins may add new kinds to EVENT_KINDS)
CORE_EVENT_KINDS: frozenset[str] = frozenset(EVENT_KINDS.core)


if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        """The operations on event trees, from :mod:`dpledger.core.event_trees` (it imports the
        classes above, so this module cannot import it while it loads)."""
        if name in _TREE_OPERATIONS:
            return getattr(importlib.import_module("dpledger.core.event_trees"), name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
