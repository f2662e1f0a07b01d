"""Immutable, validated mechanism events.

An event describes *what a release does*, not which accountant analyses it. Noise is always
stated relative to the per-record (per-unit) contribution bound ``C`` of the query: a
:class:`GaussianEvent` with ``noise_multiplier = s`` adds ``N(0, (s*C)^2)`` noise to a query in
which adding or removing one record moves the output by at most ``C`` in L2 norm. The factor
that a replace-one relation or a user-level lift adds is carried by the adjacency (see
:mod:`dpledger.core.adjacency`), never by the caller.

Semantics are stable: an event class is never redefined, only new ones are added.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Callable, Iterator, Mapping
from fractions import Fraction
from types import MappingProxyType
from typing import Any, ClassVar, cast

import attrs

from dpledger.core.basic_composition import basic_composition_epsilon
from dpledger.core.errors import InvalidParameterError, UnsupportedEventError
from dpledger.core.validation import (
    delta_closed_open,
    is_number,
    nonnegative_finite,
    nonnegative_int,
    one_of,
    positive_finite,
    positive_int,
    probability,
    to_float,
)


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _is_bound(cls: type) -> bool:
    """Whether ``cls`` is what its module currently binds at its qualified name."""
    obj: Any = sys.modules.get(cls.__module__)
    for part in cls.__qualname__.split("."):
        obj = getattr(obj, part, None)
    return obj is cls


class EventKinds(Mapping[str, "type[Event]"]):
    """The read-only registry ``kind -> event class`` that event tables are parsed with.

    Only :meth:`Event.__init_subclass__` adds to it. The kinds of the classes defined in this
    module are frozen once it has loaded (:data:`CORE_EVENT_KINDS`): looking up a core kind
    always gives the core class, and a class defined anywhere else can never take one. Other
    kinds are keyed by the defining class's module and qualified name: a class of a taken kind
    is an error naming both classes, unless it is the same definition executed again (the
    class attrs rebuilds with slots, or a fresh import of the same module).
    """

    __slots__ = ("_core", "_frozen", "_plugin")

    def __init__(self) -> None:
        self._core: Mapping[str, type[Event]] = {}
        self._plugin: dict[str, type[Event]] = {}
        self._frozen = False

    def __getitem__(self, kind: str) -> type[Event]:
        cls = self._core.get(kind)
        return cls if cls is not None else self._plugin[kind]

    def __iter__(self) -> Iterator[str]:
        yield from self._core
        yield from self._plugin

    def __len__(self) -> int:
        return len(self._core) + len(self._plugin)

    def __repr__(self) -> str:
        return f"EventKinds({sorted(self)})"

    @property
    def core(self) -> Mapping[str, type[Event]]:
        """The core kinds and their classes."""
        return self._core

    def _register(self, cls: type[Event]) -> None:
        kind = cls.__dict__["kind"]
        where = _qualified(cls)
        if not isinstance(kind, str) or not kind:
            raise InvalidParameterError(
                "kind", f"{where} has kind {kind!r}", "set kind: ClassVar[str] to a non-empty name"
            )
        core = self._core.get(kind)
        if core is not None or kind == Event.kind or self._frozen is not True:
            owner = _qualified(core) if core is not None else _qualified(Event)
            if self._frozen is not False or cls.__module__ != __name__:
                raise InvalidParameterError(
                    "kind",
                    f"event kind {kind!r} is already defined by the core class {owner}; {where} "
                    "cannot take it (core event kinds are frozen)",
                    "choose a new kind name prefixed with your plugin's name",
                )
            assert isinstance(self._core, dict)
            self._core[kind] = cls  # a core class (or its slotted rebuild) while this module loads
            return
        existing = self._plugin.get(kind)
        if (
            existing is not None
            and existing is not cls
            and (_qualified(existing) != where or _is_bound(existing))
        ):
            raise InvalidParameterError(
                "kind",
                f"event kind {kind!r} is already defined by {_qualified(existing)}; {where} "
                "cannot take it",
                "choose a new kind name prefixed with your plugin's name",
            )
        self._plugin[kind] = cls

    def _freeze_core(self) -> None:
        self._core = MappingProxyType(dict(self._core))
        self._frozen = True


#: every event kind: the core ones (frozen) and those of imported plugins
EVENT_KINDS = EventKinds()


@attrs.frozen
class Event:
    """Base class of all mechanism events."""

    kind: ClassVar[str] = "event"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "kind" in cls.__dict__:
            EVENT_KINDS._register(cls)

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


@attrs.frozen
class NoOpEvent(Event):
    """A step that touches no private data."""

    kind: ClassVar[str] = "noop"


@attrs.frozen
class NonPrivateEvent(Event):
    """A release with no privacy guarantee (epsilon = infinity)."""

    kind: ClassVar[str] = "non_private"


@attrs.frozen
class GaussianEvent(Event):
    """Gaussian noise of std ``noise_multiplier * C`` on a query of L2 contribution bound ``C``."""

    kind: ClassVar[str] = "gaussian"
    noise_multiplier: float = attrs.field(validator=positive_finite, converter=to_float)


@attrs.frozen
class LaplaceEvent(Event):
    """Laplace noise of scale ``noise_multiplier * C`` on a query of L1 contribution bound ``C``."""

    kind: ClassVar[str] = "laplace"
    noise_multiplier: float = attrs.field(validator=positive_finite, converter=to_float)


@attrs.frozen
class PureDPEvent(Event):
    """A black-box epsilon-DP release (w.r.t. the source's row-level relation)."""

    kind: ClassVar[str] = "pure_dp"
    epsilon: float = attrs.field(validator=nonnegative_finite, converter=to_float)


def _float_tuple(value: Any) -> Any:
    """attrs converter: a list of numbers becomes a tuple of floats (others left to the
    validator, which names the field)."""
    if isinstance(value, list | tuple) and all(is_number(v) for v in value):
        try:
            return tuple(float(v) for v in value)
        except (OverflowError, ValueError, TypeError):
            return value
    return value


def _check_number_table(name: str, value: Any) -> None:
    """A non-empty tuple of plain floats, at most MAX_PROFILE_POINTS long (a tabulated curve)."""
    if not isinstance(value, tuple) or not value or not all(isinstance(v, float) for v in value):
        raise InvalidParameterError(
            name,
            f"expected a number at every entry of a non-empty list, got {short_repr(value)}",
            "write a list of plain numbers (no quotes, not true/false)",
        )
    if len(value) > MAX_PROFILE_POINTS:
        raise InvalidParameterError(
            name, f"has {len(value)} points", f"tabulate at most {MAX_PROFILE_POINTS}"
        )


def _table_validator(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None and attribute.name == "deltas_add":
        return
    name = attribute.name
    _check_number_table(name, value)
    if name == "epsilons":
        if not all(math.isfinite(v) for v in value) or any(
            b <= a for a, b in itertools.pairwise(value)
        ):
            raise InvalidParameterError(
                name, "must be finite and strictly increasing", "sort the epsilons"
            )
        return
    if not all(0.0 <= v <= 1.0 for v in value):
        raise InvalidParameterError(name, "must lie in [0, 1]", "tabulate deltas in [0, 1]")
    floor = [(e, d) for e, d in zip(instance.epsilons, value, strict=False) if d < -math.expm1(e)]
    if floor:
        raise InvalidParameterError(
            name,
            f"delta({floor[0][0]:g}) = {floor[0][1]:g} is below 1 - e^eps, which no pair has",
            "tabulate certified upper bounds of a hockey-stick curve",
        )
    if len(value) != len(instance.epsilons):
        raise InvalidParameterError(
            name,
            f"has {len(value)} values for {len(instance.epsilons)} epsilons",
            "give one delta per epsilon",
        )


def _optional_numbers(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, tuple) or not all(isinstance(v, float) for v in value):
        raise InvalidParameterError(
            attribute.name,
            f"expected a list of numbers, got {short_repr(value)}",
            "write a list of plain numbers (no quotes, not true/false)",
        )
    if len(value) > MAX_PROFILE_POINTS or not all(math.isfinite(v) for v in value):
        raise InvalidParameterError(
            attribute.name,
            f"must hold at most {MAX_PROFILE_POINTS} finite numbers",
            "give finite losses and masses",
        )


#: largest privacy loss (in absolute value) of a claimed tight pair
MAX_TIGHT_LOSS = 500.0


def tight_pair_problem(table: TabulatedProfileEvent) -> str | None:
    """Why ``table``'s claimed tight pair is no pair of probability laws under the table;
    None if it is one (or if none is claimed)."""
    losses, masses = table.tight_losses, table.tight_masses
    if losses is None:
        if masses is not None or table.tight_inf_mass != 0.0 or table.tight_claim:
            return "tight_masses, tight_inf_mass and tight_claim need tight_losses"
        return None
    if masses is None or len(masses) != len(losses):
        return "needs tight_masses, one per loss"
    if not table.tight_claim.strip():
        return "a tight pair needs tight_claim, naming who claims it and on what proof"
    if any(abs(x) > MAX_TIGHT_LOSS for x in losses) or any(m < 0 for m in masses):
        return f"needs losses within +-{MAX_TIGHT_LOSS:g} and non-negative masses"
    if abs(math.fsum(masses) + table.tight_inf_mass - 1.0) > 1e-9:
        return "P-masses and the mass at infinity must sum to 1 (a pair of probability laws)"
    if math.fsum(m * math.exp(-x) for x, m in zip(losses, masses, strict=True)) > 1.0 + 1e-12:
        return "Q-masses (p e^-loss) sum above 1"
    bounds = table.deltas if table.deltas_add is None else map(min, table.deltas, table.deltas_add)
    curve = pair_curve(losses, masses, table.tight_inf_mass, table.epsilons)
    for eps, bound, exact in zip(table.epsilons, bounds, curve, strict=True):
        if eps >= 0 and exact > bound * (1 + 1e-9) + 1e-15:
            return f"its curve at epsilon {eps:g} ({exact:.6g}) lies above the table ({bound:.6g})"
    return None


def pair_curve(
    losses: tuple[float, ...],
    masses: tuple[float, ...],
    inf_mass: float,
    epsilons: tuple[float, ...],
) -> list[float]:
    """The curve ``inf + sum_{l > eps} p_l (1 - e^(eps - l))`` of a discrete pair at increasing
    ``epsilons``, to within a few units of roundoff times the total mass (running sums over
    the losses from the top, so that a large pair and a large table cost n + m, not n m)."""
    atoms = sorted(zip(losses, masses, strict=True), reverse=True)
    values: list[float] = []
    i, mass, weighted = 0, 0.0, 0.0
    for eps in reversed(epsilons):
        while i < len(atoms) and atoms[i][0] > eps:
            mass += atoms[i][1]
            weighted += atoms[i][1] * math.exp(-atoms[i][0])
            i += 1
        values.append(inf_mass + max(0.0, mass - math.exp(eps) * weighted) if i else inf_mass)
    return values[::-1]


#: most points of a tabulated profile
MAX_PROFILE_POINTS = 10_000
#: the delta a tabulated profile is charged per instance where it is coarsened to (eps, delta)
PROFILE_DELTA = 1e-10


@attrs.frozen
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


def _rdp_table_validator(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    name = attribute.name
    _check_number_table(name, value)
    if name == "orders":
        if not all(math.isfinite(v) and v > 1.0 for v in value) or any(
            b <= a for a, b in itertools.pairwise(value)
        ):
            raise InvalidParameterError(
                name, "must be finite, above 1 and strictly increasing", "sort the orders"
            )
        return
    if len(value) != len(instance.orders):
        raise InvalidParameterError(
            name,
            f"has {len(value)} values for {len(instance.orders)} orders",
            "give one value per order",
        )
    problem = rdp_curve_problem(instance.orders, value)
    if problem is not None:
        raise InvalidParameterError(name, problem, "tabulate an RDP curve of the mechanism")


def rdp_curve_problem(orders: tuple[float, ...], values: tuple[float, ...]) -> str | None:
    """Why ``values`` at ``orders`` (increasing) is no Renyi-DP curve; None if it is one.

    A curve is not NaN, non-negative (+inf: no bound at that order) and non-decreasing in the
    order (Renyi divergences grow with the order: van Erven & Harremoes 2014, Thm 3)."""
    for order, value in zip(orders, values, strict=True):
        if math.isnan(value) or value < 0.0:
            return f"value {value!r} at order {order:g} is not a non-negative number"
    for (a, x), (b, y) in itertools.pairwise(zip(orders, values, strict=True)):
        if y < x:
            return (
                f"decreases from {x!r} at order {a:g} to {y!r} at order {b:g} (an RDP curve is "
                "non-decreasing in the order)"
            )
    return None


@attrs.frozen
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


@attrs.frozen
class ApproxDPEvent(Event):
    """A black-box (epsilon, delta)-DP release (w.r.t. the source's row-level relation)."""

    kind: ClassVar[str] = "approx_dp"
    epsilon: float = attrs.field(validator=nonnegative_finite, converter=to_float)
    delta: float = attrs.field(validator=delta_closed_open, converter=to_float)


@attrs.frozen
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


@attrs.frozen
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


@attrs.frozen
class ReportNoisyMaxEvent(Event):
    """Report-noisy-max (Gumbel or Laplace noise), ``epsilon``-DP under the source's relation
    (booked like :class:`ExponentialMechanismEvent`)."""

    kind: ClassVar[str] = "report_noisy_max"
    epsilon: float = attrs.field(validator=nonnegative_finite, converter=to_float)


#: deepest nesting of sampled/composed events accepted (every tree walk stays far below
#: Python's recursion limit; real pipelines nest a handful of levels)
MAX_NESTING = 100


def nesting_depth(event: Event) -> int:
    """Levels of sub-events below ``event`` (0 for a leaf), computed without recursion."""
    return _depths((event,))


def _depths(roots: tuple[Event, ...]) -> int:
    """The largest nesting depth of ``roots`` (-1 if none); shared sub-events are walked once."""
    depth: dict[int, int] = {}
    stack: list[tuple[Event, bool]] = [(r, False) for r in roots]
    while stack:
        node, done = stack.pop()
        if id(node) in depth:
            continue
        kids = node.children()
        if done:
            depth[id(node)] = 1 + max(depth[id(k)] for k in kids) if kids else 0
            continue
        stack.append((node, True))
        stack.extend((k, False) for k in kids if id(k) not in depth)
    return max((depth[id(r)] for r in roots), default=-1)


def _check_nesting(field: str, children: tuple[Event, ...]) -> None:
    deepest = _depths(children)
    if deepest + 1 > MAX_NESTING:
        raise InvalidParameterError(
            field,
            f"events are nested {deepest + 1} levels deep, more than {MAX_NESTING}",
            "flatten the composition: use one composed event with a list of events, or a count",
        )


def _event_validator(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, Event):
        raise InvalidParameterError(
            attribute.name, f"must be an Event, got {type(value).__name__}", "pass an event object"
        )
    _check_nesting(attribute.name, (value,))


@attrs.frozen
class PoissonSampledEvent(Event):
    """Each record is included independently with probability ``sampling_probability``."""

    kind: ClassVar[str] = "poisson_sampled"
    sampling_probability: float = attrs.field(validator=probability, converter=to_float)
    event: Event = attrs.field(validator=_event_validator)

    def children(self) -> tuple[Event, ...]:
        return (self.event,)


@attrs.frozen
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


@attrs.frozen
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


@attrs.frozen
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


@attrs.frozen
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
    _check_nesting(attribute.name, value)


@attrs.frozen
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


#: integer parameters; JSON Schema counts 10.0 as an integer, so 10.0 is read as 10
INT_EVENT_FIELDS = (
    "count",
    "source_size",
    "sample_size",
    "batch_size",
    "num_buckets",
    "num_steps",
    "num_selected",
)


def short_repr(value: Any) -> str:
    """A value for an error message: its repr, cut to one readable line."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an integer of {len(str(abs(value)))} digits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _integral(key: str, value: Any) -> Any:
    if key in INT_EVENT_FIELDS and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _event_arguments(
    data: Mapping[Any, Any], kind: str, fields: list[str], path: str, depth: int
) -> dict[str, Any]:
    """The constructor arguments of an event table of ``kind`` at ``path`` (its sub-events
    parsed one level deeper); a key that is no parameter of ``kind`` names itself."""

    def at(key: str) -> str:
        return f"{path}.{key}" if path else key

    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if key == "kind":
            continue
        if key not in fields:
            raise InvalidParameterError(
                at(str(key)), f"is not a parameter of {kind}", f"use {fields or 'no parameters'}"
            )
        if key == "event":
            kwargs[key] = event_from_dict(value, path=at("event"), _depth=depth + 1)
        elif key == "events":
            if not isinstance(value, list | tuple):
                raise InvalidParameterError(
                    at("events"),
                    "must be a list of event tables",
                    "write events = [{kind = ...}, ...]",
                )
            kwargs[key] = [
                event_from_dict(v, path=f"{at('events')}[{i}]", _depth=depth + 1)
                for i, v in enumerate(value)
            ]
        else:
            kwargs[key] = _integral(key, value)
    return kwargs


def event_from_dict(data: Any, *, path: str = "", _depth: int = 0) -> Event:
    """The event a table describes: :meth:`Event.to_dict` output, a pipeline file's event
    table, or a JSON record. Errors name the exact field, under ``path`` (e.g.
    ``releases[0].event``) when given."""

    def at(key: str) -> str:
        return f"{path}.{key}" if path else key

    here = path or "event"
    if not isinstance(data, Mapping):
        raise InvalidParameterError(
            here,
            f"expected an event table, got {type(data).__name__}",
            "write an event table with a kind",
        )
    if _depth > MAX_NESTING:
        raise InvalidParameterError(
            here,
            f"events are nested more than {MAX_NESTING} levels deep",
            "flatten the composition: one composed event with a list of events, or a count",
        )
    kind = data.get("kind")
    if kind is None:
        raise InvalidParameterError(
            at("kind"), "is missing", f"add kind = one of {sorted(EVENT_KINDS)}"
        )
    cls = EVENT_KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise InvalidParameterError(
            at("kind"), f"unknown mechanism {short_repr(kind)}", f"use one of {sorted(EVENT_KINDS)}"
        )
    if not path:  # a stand-alone table: name fields after its kind (gaussian.noise_multiplier)
        path = kind
    fields = {f.name: f for f in attrs.fields(cls)}
    kwargs = _event_arguments(data, kind, sorted(fields), path, _depth)
    missing = [n for n, f in fields.items() if f.default is attrs.NOTHING and n not in kwargs]
    if missing:
        raise InvalidParameterError(
            at(missing[0]), f"is missing (required by {kind})", f"add {missing[0]} = ..."
        )
    try:
        return cls(**kwargs)
    except InvalidParameterError as exc:
        field = exc.field.split(".")[-1].split("[")[0]
        raise InvalidParameterError(
            at(field) if field in fields else here, exc.problem, exc.fix
        ) from None
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(
            here, str(exc), f"give the parameters {sorted(fields)}"
        ) from None


def canonical(event: Event) -> Event:
    """Rewrite derived core events into the base events the accountants characterise (every
    accountant and the lifting rules call this first). No core event is derived at present:
    plugin events are lowered by the plugin host instead."""
    return event


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


def flatten(event: Event) -> list[tuple[Event, int]]:
    """Expand composition into ``(leaf_or_sampled_event, count)`` pairs.

    Sampled events are kept whole (sampling does not distribute over composition).
    Counts of zero, no-ops and sampling at rate zero are dropped. The walk is iterative and
    visits a shared sub-event once (repeats of the same leaf object are merged, adding their
    counts), so neither deep nor shared trees can exhaust the stack or the clock.
    """
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
