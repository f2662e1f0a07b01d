"""What plugins register: methods, mechanisms and report sections, each with a proof reference.

Plugins build these specs and hand them to the ``register`` callable of a hook (see
:mod:`dpledger.core.hookspecs`). The host fills in :class:`Provenance` (plugin, distribution,
version, trust tier); a plugin never sets it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import attrs
import numpy as np

from dpledger.core import events as _events
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import Event
from dpledger.core.neighbours import NeighbourRule

if TYPE_CHECKING:
    from dpledger.core.ledger_protocol import Ledger

TrustTier = Literal["vetted", "contrib", "unverified"]
#: ``vetted``: proof reviewed; ``contrib``: proof shipped with dpledger, not yet reviewed;
#: ``unverified``: third-party spec, correct only if its author is (honest-but-curious).
TRUST_TIERS: tuple[str, ...] = ("vetted", "contrib", "unverified")

_NAME = re.compile(r"^[a-z][a-z0-9_.\-]{0,63}$")

#: kinds of the events defined by dpledger itself; a plugin may not reuse them
CORE_EVENT_KINDS: frozenset[str] = _events.CORE_EVENT_KINDS


def _name_validator(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, str) or not _NAME.match(value):
        raise InvalidParameterError(
            attribute.name,
            f"{value!r} is not a valid name",
            "use 1-64 lowercase letters, digits, '_', '-' or '.', starting with a letter",
        )


def _text_validator(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, str) or not value.strip():
        raise InvalidParameterError(attribute.name, "must be a non-empty string", "describe it")


def _callable_validator(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not callable(value):
        raise InvalidParameterError(
            attribute.name, f"must be callable, got {type(value).__name__}", "pass a function"
        )


def _optional_callable(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None:
        _callable_validator(instance, attribute, value)


@attrs.frozen
class ProofRef:
    """Where the privacy claim of a spec is proven.

    ``citation`` names the result (paper and theorem, or a proof document); ``location`` is an
    optional path or URL of the proof text; ``records`` names the code objects (dotted paths)
    whose proof records (:mod:`dpledger.proofs_checks.registry`) the claim rests on: a report
    gives the method the weakest of its own tier and theirs (a stale record is ``unverified``).
    """

    citation: str = attrs.field(validator=_text_validator)
    location: str | None = None
    records: tuple[str, ...] = attrs.field(default=(), converter=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {"citation": self.citation, "location": self.location, "records": list(self.records)}


def _proof_converter(value: Any) -> Any:
    return ProofRef(value) if isinstance(value, str) else value


def _proof_validator(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, ProofRef):
        raise InvalidParameterError(
            attribute.name,
            f"must be a ProofRef or a citation string, got {value!r}",
            "cite the theorem that proves the privacy claim",
        )


@attrs.frozen
class Provenance:
    """Who registered a spec. Set by the plugin host, never by the plugin."""

    plugin: str
    distribution: str | None
    version: str | None
    tier: str

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


def _provenance_validator(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not isinstance(value, Provenance):
        raise InvalidParameterError(attribute.name, "must be a Provenance", "leave it unset")


def _params_class_validator(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not (isinstance(value, type) and attrs.has(value)):
        raise InvalidParameterError(
            attribute.name,
            f"must be an attrs class, got {value!r}",
            "decorate the parameter class with @attrs.frozen and validate its fields",
        )


#: ``declare(params, adjacency) -> Event`` (per row) or a ``Declaration`` naming its unit
DeclareFn = Callable[[Any, Adjacency], Any]
#: ``run(params, data, ledger, rng) -> outputs``
RunFn = Callable[[Any, Any, "Ledger", np.random.Generator], Mapping[str, Any]]
#: ``diagnose(outputs, out) -> numbers``: private diagnostics of a run of an :class:`Example`
DiagnoseFn = Callable[[Mapping[str, Any], Path], Mapping[str, Any]]


@attrs.frozen
class Example:
    """A worked example of a method on data made up for it (see ``MethodSpec.example``).

    ``data`` is the method's ``data`` argument: private like any data a method runs on, it
    reaches the outputs only through the ledger. ``params`` holds the parameter values that
    public facts of how the data was made fix (its domain, its sizes); they are public.
    ``diagnose(outputs, out)``, if given, compares a verified run's outputs with the data (and
    with the truth it was made from): its numbers, and the files it writes into ``out`` (each
    named ``PRIVATE-*``), are private diagnostics, never releases, and must be kept out of
    anything published; ``out`` is the run's private directory (``OUT.private``, beside the
    directory it publishes), never the published one.
    """

    data: Any
    params: Mapping[str, Any] = attrs.field(factory=dict)
    diagnose: DiagnoseFn | None = attrs.field(default=None, validator=_optional_callable)


#: ``example(options) -> Example``: data for a worked example; ``options`` (sizes, a seed)
#: are the method's own, and an empty mapping gives its defaults
ExampleFn = Callable[[Mapping[str, Any]], Example]


@attrs.frozen
class MethodSpec:
    """A private method: its parameters, the privacy event it declares, and how it runs.

    ``declare(params, adjacency)`` returns the event the run is allowed to spend, per row, or a
    :class:`~dpledger.core.declaration.Declaration` naming the unit it protects (user level
    only if the run enforces the unit through the ledger). It is called once per run, must be
    cheap and must not import torch or POT (the accountant runs without them).
    ``run(params, data, ledger, rng)`` draws every bit of noise and every sample through
    ``ledger`` (a :class:`~dpledger.runtime.ledger.PrivacyLedger`) and returns a mapping of
    named outputs; ``rng`` is for non-private randomness only (initialisation, shuffling of
    public data). The host checks the executed steps against the declaration before it
    releases the outputs. ``example(options)`` (optional) makes up data to show the method on
    (:class:`Example`), as ``dpledger demo`` does; it is never used to account anything.
    ``post_processing`` states that the method reads no private data (only public data or
    earlier releases): only then may it declare no privacy cost, and every bound that
    includes it says that this rests on the plugin's word.
    ``neighbours(params, data, adjacency)`` (optional) builds the neighbouring datasets
    ``dpledger audit METHOD`` runs the method on (a
    :class:`~dpledger.core.neighbours.NeighbourPair`); ``None`` means the generic per-record
    canary rule (:func:`~dpledger.runtime.neighbour_rules.per_record`).
    ``protects(params, adjacency)`` (optional) states the unit a method bounds itself at a
    row-level adjacency (e.g. every row of one value of a unit column), or ``None``; the run's
    one line names it instead of the adjacency's unit.
    """

    name: str = attrs.field(validator=_name_validator)
    params: type = attrs.field(validator=_params_class_validator)
    declare: DeclareFn = attrs.field(validator=_callable_validator)
    run: RunFn = attrs.field(validator=_callable_validator)
    description: str = attrs.field(validator=_text_validator)
    proof: ProofRef = attrs.field(converter=_proof_converter, validator=_proof_validator)
    provenance: Provenance | None = attrs.field(
        default=None, validator=_provenance_validator, eq=False
    )
    example: ExampleFn | None = attrs.field(default=None, validator=_optional_callable)
    post_processing: bool = attrs.field(default=False, validator=attrs.validators.instance_of(bool))
    neighbours: NeighbourRule | None = attrs.field(default=None, validator=_optional_callable)
    protects: Callable[[Any, Adjacency], str | None] | None = attrs.field(
        default=None, validator=_optional_callable
    )

    def make_params(self, values: Mapping[str, Any] | None = None) -> Any:
        """Build validated parameters from a plain mapping (a config file table)."""
        values = dict(values or {})
        names = {f.name for f in attrs.fields(self.params) if f.init}
        unknown = sorted(set(values) - names)
        if unknown:
            raise InvalidParameterError(
                f"{self.name}.{unknown[0]}",
                "is not a parameter of this method",
                f"use {sorted(names)}",
            )
        try:
            return self.params(**values)
        except TypeError as exc:
            raise InvalidParameterError(
                self.name, str(exc), f"give the parameters {sorted(names)}"
            ) from None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "params": [f.name for f in attrs.fields(self.params) if f.init],
            "proof": self.proof.to_dict(),
            "provenance": self.provenance.to_dict() if self.provenance else None,
            "post_processing": self.post_processing,
        }


#: maps a plugin event onto core events that are at least as lossy: ``to_core(event) -> Event``
ToCoreFn = Callable[[Event], Event]
#: a certified privacy profile: ``privacy_profile(event, adjacency, epsilon) -> delta upper bound``
ProfileFn = Callable[[Event, Adjacency, float], float]
#: a discrete dominating pair: ``dominating_pair(event, adjacency) -> (losses, p_masses,
#: inf_mass)``, the P-masses at finite privacy losses and P's mass at +infinity (Q's masses
#: are ``p e^-loss``, the rest of Q is where P has none)
PairFn = Callable[[Event, Adjacency], tuple[Sequence[float], Sequence[float], float]]
#: a Renyi-DP curve: ``rdp_curve(event, adjacency, alpha) -> epsilon_RDP(alpha)``, an upper
#: bound on the Renyi divergence of order ``alpha > 1`` between the outputs on any two
#: neighbouring datasets (both orders of the pair)
RDPFn = Callable[[Event, Adjacency, float], float]


def _strict_bool(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, bool):
        raise InvalidParameterError(
            attribute.name, f"must be True or False, got {value!r}", "pass a bool"
        )


def _event_class_validator(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not (isinstance(value, type) and issubclass(value, Event) and attrs.has(value)):
        raise InvalidParameterError(
            attribute.name,
            f"must be an attrs Event subclass, got {value!r}",
            "define the leaf event with @attrs.frozen class MyEvent(Event)",
        )
    kind = value.__dict__.get("kind")
    if not isinstance(kind, str) or not kind:
        raise InvalidParameterError(
            attribute.name, f"{value.__name__} has no own 'kind'", "set kind: ClassVar[str]"
        )
    if kind in CORE_EVENT_KINDS or kind == Event.kind:
        raise InvalidParameterError(
            attribute.name, f"kind {kind!r} is a core event kind", "choose a new, prefixed kind"
        )
    if _events.EVENT_KINDS.get(kind) is not value:
        registered = _events.EVENT_KINDS.get(kind)
        owner = f"{registered.__module__}.{registered.__qualname__}" if registered else "nothing"
        raise InvalidParameterError(
            attribute.name,
            f"{value.__module__}.{value.__qualname__} is not the registered class of kind "
            f"{kind!r} ({owner} is)",
            "set kind in the class body (not after the class is created), with a unique name",
        )


#: a mechanism's accountant characterisations, in their order of use
CHARACTERISATIONS: tuple[str, ...] = ("to_core", "dominating_pair", "privacy_profile", "rdp_curve")


@attrs.frozen
class MechanismSpec:
    """A new leaf mechanism event with at least one accountant characterisation.

    ``to_core`` maps an instance onto an event built from core events that is *at least as
    lossy* (the accountant then handles it exactly like a core event); ``dominating_pair`` is a
    discrete pair of distributions that dominates every ordered pair of neighbouring outputs of
    one instance (composed exactly: its curve is tabulated at its own losses);
    ``privacy_profile`` is a certified upper bound on ``delta(epsilon)`` of one instance;
    ``rdp_curve`` is an upper bound on its Renyi-DP curve (composed by the RDP accountant only).
    Give at least one; they are used in that order (the first one given is the only one used).

    ``pair_is_tight`` claims that the dominating pair is the mechanism's exact pair: for each
    direction of the relation, some neighbouring datasets give output laws whose privacy curve
    is exactly the pair's, whatever the other releases of the pipeline. Like the pair, the claim
    rests on ``proof``; only with it does the PLD accountant certify a lower bound from the pair
    (reports name the claim beside that lower bound).
    """

    name: str = attrs.field(validator=_name_validator)
    event_class: type[Event] = attrs.field(validator=_event_class_validator)
    description: str = attrs.field(validator=_text_validator)
    proof: ProofRef = attrs.field(converter=_proof_converter, validator=_proof_validator)
    to_core: ToCoreFn | None = attrs.field(default=None, validator=_optional_callable)
    privacy_profile: ProfileFn | None = attrs.field(default=None, validator=_optional_callable)
    provenance: Provenance | None = attrs.field(
        default=None, validator=_provenance_validator, eq=False
    )
    dominating_pair: PairFn | None = attrs.field(default=None, validator=_optional_callable)
    rdp_curve: RDPFn | None = attrs.field(default=None, validator=_optional_callable)
    pair_is_tight: bool = attrs.field(default=False, validator=_strict_bool)

    def __attrs_post_init__(self) -> None:
        if all(getattr(self, n) is None for n in CHARACTERISATIONS):
            raise InvalidParameterError(
                "to_core",
                "a mechanism needs at least one accountant characterisation",
                "give to_core (a mapping onto core events), dominating_pair, privacy_profile "
                "or rdp_curve",
            )
        if self.pair_is_tight and self.dominating_pair is None:
            raise InvalidParameterError(
                "pair_is_tight",
                "claims a dominating pair is tight, but none is given",
                "give dominating_pair, or leave pair_is_tight False",
            )

    @property
    def kind(self) -> str:
        return str(self.event_class.kind)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "description": self.description,
            "characterisations": [n for n in CHARACTERISATIONS if getattr(self, n) is not None],
            "pair_is_tight": self.pair_is_tight,
            "proof": self.proof.to_dict(),
            "provenance": self.provenance.to_dict() if self.provenance else None,
        }


#: ``render(context) -> Markdown``; ``context`` holds the report's data as plain values, and
#: ``context['release_events']`` maps each release to its declared event as an event dict
RenderFn = Callable[[Mapping[str, Any]], str]


def _names_converter(value: Any) -> Any:
    return tuple(value) if isinstance(value, list | tuple | set | frozenset) else value


def _method_names_validator(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None:
        return
    if not (isinstance(value, tuple) and value):
        raise InvalidParameterError(
            attribute.name,
            f"must be a non-empty sequence of method names, got {value!r}",
            "name the plugin's own methods, or leave it unset for all of them",
        )
    for name in value:
        _name_validator(instance, attribute, name)


@attrs.frozen
class ReportSectionSpec:
    """An extra section of the privacy report, rendered to Markdown from the report's data.

    A report draws the section only when it has a release of a method registered by the same
    plugin (:meth:`concerns`); ``methods`` narrows that to some of the plugin's own methods
    (unset: all of them). A method of another plugin never makes the section appear.
    """

    name: str = attrs.field(validator=_name_validator)
    title: str = attrs.field(validator=_text_validator)
    render: RenderFn = attrs.field(validator=_callable_validator)
    provenance: Provenance | None = attrs.field(
        default=None, validator=_provenance_validator, eq=False
    )
    methods: tuple[str, ...] | None = attrs.field(
        default=None, converter=_names_converter, validator=_method_names_validator, kw_only=True
    )

    def concerns(self, method: MethodSpec) -> bool:
        """Whether a release of ``method`` gets this section: the plugin that registered the
        section registered the method too (and ``methods``, when set, names it)."""
        mine, theirs = self.provenance, method.provenance
        if mine is None or theirs is None or mine.plugin != theirs.plugin:
            return False
        return self.methods is None or method.name in self.methods

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "methods": list(self.methods) if self.methods is not None else None,
            "provenance": self.provenance.to_dict() if self.provenance else None,
        }


AnySpec = MethodSpec | MechanismSpec | ReportSectionSpec
