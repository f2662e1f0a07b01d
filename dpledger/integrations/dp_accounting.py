"""Convert between dp-accounting's ``DpEvent`` trees and dpledger events.

A ``DpEvent`` from any Google DP library (TensorFlow Privacy, JAX Privacy, dp-accounting itself)
can be accounted, cross-checked and reported by dpledger, and a dpledger event can be handed to
dp-accounting. The named-tuple form (``DpEvent.to_named_tuple()``) is read without dp-accounting
installed, in both its JSON forms: objects (field names kept, as :func:`to_named_tuple_dict` and
:func:`named_tuple_json` write it) and arrays (``json.dump(event.to_named_tuple(), f)``: each
named tuple a list ``[module_name, class_name, *fields]``, in the field order of
:data:`DP_EVENT_FIELDS`). :func:`pipeline_dp_events` exports a pipeline's sources as DpEvents.

Supported kinds, both ways: no-op, non-private, Gaussian, Laplace, randomized response,
self-composed, composed, Poisson sampled and sampled without replacement. Every conversion is
exact except randomized response, whose two parametrisations are related by a logarithm:
dp-accounting's noise parameter ``p`` (output uniform with probability ``p``) is
``epsilon = log(1 + k (1 - p) / p)``. Each direction rounds to the side that over-states the
privacy loss of what it describes (epsilon up; ``p`` down), so a round trip returns a ``p``
at most a few units in the last place below the original. Other kinds raise
:class:`~dpledger.core.errors.UnsupportedEventError` naming the kind.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dpledger.core.errors import InvalidParameterError, UnsupportedEventError
from dpledger.core.events import (
    ComposedEvent,
    Event,
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    NoOpEvent,
    PoissonSampledEvent,
    PureDPEvent,
    RandomizedResponseEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
)

__all__ = [
    "DP_EVENT_FIELDS",
    "MAX_DEPTH",
    "MODULE",
    "NEIGHBORING_RELATION",
    "SUPPORTED",
    "dp_event_from_json",
    "from_dp_event",
    "is_dp_event_json",
    "load_pipeline_or_dp_event",
    "named_tuple_json",
    "pipeline_dp_events",
    "pipeline_from_dp_event",
    "rr_epsilon",
    "rr_noise_parameter",
    "to_dp_event",
    "to_named_tuple_dict",
]

MODULE = "dp_accounting.dp_event"
#: the fields of each supported ``DpEvent`` class, in dp-accounting 0.6.0's order (its attrs
#: fields, which ``to_named_tuple()`` follows): the array form lists them after the module and
#: class names (checked against the installed classes by the tests)
DP_EVENT_FIELDS: dict[str, tuple[str, ...]] = {
    "NoOpDpEvent": (),
    "NonPrivateDpEvent": (),
    "GaussianDpEvent": ("noise_multiplier",),
    "LaplaceDpEvent": ("noise_multiplier",),
    "RandomizedResponseDpEvent": ("noise_parameter", "num_buckets"),
    "SelfComposedDpEvent": ("event", "count"),
    "ComposedDpEvent": ("events",),
    "PoissonSampledDpEvent": ("sampling_probability", "event"),
    "SampledWithoutReplacementDpEvent": ("source_dataset_size", "sample_size", "event"),
}
#: dp-accounting's ``NeighboringRelation`` member for each dpledger relation
NEIGHBORING_RELATION: dict[str, str] = {
    "add_remove": "ADD_OR_REMOVE_ONE",
    "replace_one": "REPLACE_ONE",
}
_HOW = "json.dump(event.to_named_tuple(), f)"
#: nesting deeper than this is refused (a malformed or hostile file)
MAX_DEPTH = 200
#: units in the last place added to a rounded epsilon (log1p and the quotient: < 3 ulp)
_ULP_MARGIN = 4


def _up(x: float, steps: int = _ULP_MARGIN) -> float:
    for _ in range(steps):
        x = math.nextafter(x, math.inf)
    return x


def _down(x: float, steps: int = _ULP_MARGIN) -> float:
    for _ in range(steps):
        x = math.nextafter(x, 0.0)
    return x


def rr_epsilon(noise_parameter: float, num_buckets: int) -> float:
    """An upper bound on the epsilon of randomized response with noise parameter ``p``."""
    p, k = noise_parameter, num_buckets
    return _up(math.log1p(_up(k * (1.0 - p) / p)))


def rr_noise_parameter(epsilon: float, num_buckets: int) -> float:
    """A lower bound on the noise parameter of ``epsilon``-randomized response (more loss)."""
    return _down(num_buckets / _up(math.expm1(epsilon) + num_buckets))


# ---------------------------------------------------------------------------------------------
# DpEvent (or its named-tuple / JSON form) -> dpledger
# ---------------------------------------------------------------------------------------------
def _is_array_form(value: Any) -> bool:
    """Whether ``value`` is a named tuple written as a JSON array (its module name first)."""
    return isinstance(value, list | tuple) and len(value) > 0 and value[0] == MODULE


def _fits(value: Sequence[Any]) -> bool:
    """Whether an array-form event names a class dpledger reads, with its number of fields."""
    fields = DP_EVENT_FIELDS.get(value[1]) if len(value) > 1 and isinstance(value[1], str) else None
    return fields is not None and len(value) - 2 == len(fields)


def _array_to_mapping(value: Sequence[Any], where: str) -> dict[str, Any]:
    """One level of the array form ``[module_name, class_name, *fields]`` as the object form
    (nested events stay as they are); a class dpledger does not read keeps only its name."""
    name = value[1] if len(value) > 1 else None
    if not isinstance(name, str):
        raise InvalidParameterError(
            f"{where}[1]",
            f"expected the DpEvent's class name, got {name!r:.60}",
            f'write the event as {_HOW} does: ["{MODULE}", class name, fields...]',
        )
    fields = DP_EVENT_FIELDS.get(name)
    if fields is None:
        return {"module_name": MODULE, "class_name": name}  # named as unsupported by the parser
    if len(value) - 2 != len(fields):
        listed = ", ".join(fields) if fields else "no fields"
        raise InvalidParameterError(
            where,
            f"{name} in its array form has {len(fields)} field(s) after the module and class "
            f"names ({listed}), got {len(value) - 2}",
            f'write it as {_HOW} does: ["{MODULE}", "{name}"'
            + "".join(f", <{f}>" for f in fields)
            + "]",
        )
    return {"module_name": MODULE, "class_name": name, **dict(zip(fields, value[2:], strict=True))}


def _as_mapping(value: Any, where: str = "event") -> Mapping[str, Any]:
    to_nt = getattr(value, "to_named_tuple", None)
    if callable(to_nt):
        value = to_nt()
    asdict = getattr(value, "_asdict", None)
    if callable(asdict):
        value = asdict()
    elif _is_array_form(value):
        value = _array_to_mapping(value, where)
    if not isinstance(value, Mapping) or "class_name" not in value:
        raise InvalidParameterError(
            where,
            f"is not a DpEvent or its named-tuple form: {value!r:.80}",
            "pass a dp_accounting DpEvent, DpEvent.to_named_tuple(), or its JSON form "
            f'(written by {_HOW}: ["{MODULE}", class name, fields...])',
        )
    return value


def _number(data: Mapping[str, Any], key: str, where: str) -> float:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidParameterError(
            f"{where}.{key}", f"expected a number, got {value!r}", f"write {key} as a number"
        )
    return float(value)


def _integer(data: Mapping[str, Any], key: str, where: str) -> int:
    value = data.get(key)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidParameterError(
            f"{where}.{key}",
            f"expected an integer, got {value!r}",
            f"write {key} as a whole number",
        )
    return value


def _randomized_response(data: Mapping[str, Any], where: str) -> Event:
    """A ``RandomizedResponseDpEvent``: non-private, ignoring its input, or k-ary RR."""
    p = _number(data, "noise_parameter", where)
    k = _integer(data, "num_buckets", where)
    if not 0.0 <= p <= 1.0 or k < 1:
        raise InvalidParameterError(
            where,
            f"noise_parameter {p!r} / num_buckets {k!r} out of range",
            "use 0 <= noise_parameter <= 1 and num_buckets >= 1",
        )
    if p == 0.0:
        return NonPrivateEvent()  # always the true bucket: no privacy
    if p == 1.0 or k == 1:
        return PureDPEvent(0.0)  # the output ignores the input
    return RandomizedResponseEvent(rr_epsilon(p, k), k)


def _from(value: Any, where: str, depth: int) -> Event:
    if depth > MAX_DEPTH:
        raise InvalidParameterError(
            where, f"nests more than {MAX_DEPTH} events deep", "flatten the composition"
        )
    data = _as_mapping(value, where)
    name = data.get("class_name")

    def inner(key: str) -> Event:
        return _from(data.get(key), f"{where}.{key}", depth + 1)

    try:
        if name == "NoOpDpEvent":
            return NoOpEvent()
        if name == "NonPrivateDpEvent":
            return NonPrivateEvent()
        if name == "GaussianDpEvent":
            return GaussianEvent(_number(data, "noise_multiplier", where))
        if name == "LaplaceDpEvent":
            return LaplaceEvent(_number(data, "noise_multiplier", where))
        if name == "RandomizedResponseDpEvent":
            return _randomized_response(data, where)
        if name == "SelfComposedDpEvent":
            return SelfComposedEvent(inner("event"), _integer(data, "count", where))
        if name == "ComposedDpEvent":
            events = data.get("events")
            if not isinstance(events, list | tuple):
                raise InvalidParameterError(
                    f"{where}.events", "must be a list of events", "write events = [...]"
                )
            return ComposedEvent(
                [_from(e, f"{where}.events[{i}]", depth + 1) for i, e in enumerate(events)]
            )
        if name == "PoissonSampledDpEvent":
            return PoissonSampledEvent(_number(data, "sampling_probability", where), inner("event"))
        if name == "SampledWithoutReplacementDpEvent":
            return SampledWithoutReplacementEvent(
                _integer(data, "source_dataset_size", where),
                _integer(data, "sample_size", where),
                inner("event"),
            )
    except InvalidParameterError as exc:
        if exc.field.startswith(where):
            raise
        raise InvalidParameterError(f"{where}.{exc.field}", exc.problem, exc.fix) from None
    raise UnsupportedEventError(
        f"{where}: dp-accounting event {name!r} has no dpledger counterpart. Fix: supported "
        f"kinds are {', '.join(SUPPORTED)}"
    )


SUPPORTED: tuple[str, ...] = (
    "NoOpDpEvent",
    "NonPrivateDpEvent",
    "GaussianDpEvent",
    "LaplaceDpEvent",
    "RandomizedResponseDpEvent",
    "SelfComposedDpEvent",
    "ComposedDpEvent",
    "PoissonSampledDpEvent",
    "SampledWithoutReplacementDpEvent",
)


def from_dp_event(value: Any) -> Event:
    """The dpledger event of a ``DpEvent``, its named tuple, or the JSON form of that tuple."""
    return _from(value, "event", 0)


# ---------------------------------------------------------------------------------------------
# dpledger -> named-tuple form / DpEvent
# ---------------------------------------------------------------------------------------------
def to_named_tuple_dict(event: Event) -> dict[str, Any]:
    """The JSON-able named-tuple form of ``event`` as dp-accounting writes it."""

    def tag(name: str, **fields: Any) -> dict[str, Any]:
        return {"module_name": MODULE, "class_name": name, **fields}

    if isinstance(event, NoOpEvent):
        return tag("NoOpDpEvent")
    if isinstance(event, NonPrivateEvent):
        return tag("NonPrivateDpEvent")
    if isinstance(event, GaussianEvent):
        return tag("GaussianDpEvent", noise_multiplier=event.noise_multiplier)
    if isinstance(event, LaplaceEvent):
        return tag("LaplaceDpEvent", noise_multiplier=event.noise_multiplier)
    if isinstance(event, RandomizedResponseEvent):
        return tag(
            "RandomizedResponseDpEvent",
            noise_parameter=rr_noise_parameter(event.epsilon, event.num_buckets),
            num_buckets=event.num_buckets,
        )
    if isinstance(event, SelfComposedEvent):
        return tag("SelfComposedDpEvent", event=to_named_tuple_dict(event.event), count=event.count)
    if isinstance(event, ComposedEvent):
        return tag("ComposedDpEvent", events=[to_named_tuple_dict(e) for e in event.events])
    if isinstance(event, PoissonSampledEvent):
        return tag(
            "PoissonSampledDpEvent",
            sampling_probability=event.sampling_probability,
            event=to_named_tuple_dict(event.event),
        )
    if isinstance(event, SampledWithoutReplacementEvent):
        return tag(
            "SampledWithoutReplacementDpEvent",
            source_dataset_size=event.source_size,
            sample_size=event.sample_size,
            event=to_named_tuple_dict(event.event),
        )
    raise UnsupportedEventError(
        f"{event.kind} has no dp-accounting counterpart. Fix: account it with dpledger, or "
        "describe it with Gaussian, Laplace or randomized-response events"
    )


def _dp_event_module() -> Any:
    try:
        from dp_accounting import dp_event
    except ImportError:
        raise InvalidParameterError(
            "dp_accounting", "is not installed", "pip install 'dpledger[crosscheck]'"
        ) from None
    return dp_event


def _build(module: Any, data: Mapping[str, Any]) -> Any:
    """The DpEvent of the object form ``data`` (nested objects and lists of them built too)."""
    cls = getattr(module, str(data["class_name"]))
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if key in ("module_name", "class_name"):
            continue
        if isinstance(value, Mapping):
            kwargs[key] = _build(module, value)
        elif isinstance(value, list):
            kwargs[key] = [_build(module, v) for v in value]
        else:
            kwargs[key] = value
    return cls(**kwargs)


def to_dp_event(event: Event) -> Any:
    """The ``dp_accounting.dp_event.DpEvent`` of ``event`` (needs dp-accounting installed)."""
    return _build(_dp_event_module(), to_named_tuple_dict(event))


def dp_event_from_json(data: Any) -> Any:
    """The ``DpEvent`` of either JSON form of its named tuple (objects, as ``dpledger account
    --to-dp-event`` prints, or arrays, as ``json.dump`` writes), checked as
    :func:`from_dp_event` checks it and built as written (needs dp-accounting installed)."""
    from_dp_event(data)  # a malformed or unsupported event: one line naming the field
    return _build(_dp_event_module(), named_tuple_json(data))


def named_tuple_json(value: Any) -> Any:
    """A ``DpEvent`` (or its named tuple, or its JSON array form) as nested JSON objects (named
    tuples become objects, not arrays, so that the class and field names are kept)."""
    to_nt = getattr(value, "to_named_tuple", None)
    if callable(to_nt):
        value = to_nt()
    asdict = getattr(value, "_asdict", None)
    if callable(asdict):
        return {k: named_tuple_json(v) for k, v in asdict().items()}
    if _is_array_form(value) and _fits(value):
        return {k: named_tuple_json(v) for k, v in _array_to_mapping(value, "event").items()}
    if isinstance(value, list | tuple):
        return [named_tuple_json(v) for v in value]
    return value


def is_dp_event_json(data: Any) -> bool:
    """Whether parsed JSON is a DpEvent's named-tuple form (rather than a pipeline): an object
    with dp-accounting's module and a class name, or any array (a pipeline is an object)."""
    if isinstance(data, list):
        return True
    return (
        isinstance(data, Mapping) and data.get("module_name") == MODULE and ("class_name" in data)
    )


def pipeline_from_dp_event(data: Any, origin: str = "<dp_event>") -> Any:
    """A one-release :class:`~dpledger.runtime.pipeline.Pipeline` of a DpEvent (JSON form),
    under add/remove of one row: dp-accounting's default neighbouring relation."""
    from dpledger.core.adjacency import Adjacency
    from dpledger.runtime.graph import CompositionGraph
    from dpledger.runtime.pipeline import Pipeline

    event = from_dp_event(data)
    graph = CompositionGraph()
    graph.add_source("data", Adjacency())
    graph.add_release("dp_event", event, "data")
    return Pipeline(graph, name=str(_as_mapping(data).get("class_name")), origin=origin)


def load_pipeline_or_dp_event(path: str | Path, resolve_method: Any = None) -> Any:
    """A pipeline file (``.toml``/``.json``), or a DpEvent in either named-tuple JSON form (a
    one-release pipeline): what ``dpledger account`` and ``dpledger report`` accept."""
    from dpledger.runtime.pipeline import load_pipeline

    if str(path).lower().endswith(".json"):
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError, ValueError):
            data = None  # the pipeline loader names the problem
        if is_dp_event_json(data):
            return pipeline_from_dp_event(data, origin=str(path))
    return load_pipeline(path, resolve_method=resolve_method)


# ---------------------------------------------------------------------------------------------
# a pipeline's sources -> DpEvents (``dpledger account FILE --to-dp-event``)
# ---------------------------------------------------------------------------------------------
def _release_events(red: Any) -> None:
    """Refuse, naming it, a release of source reduction ``red`` with no DpEvent counterpart."""
    for release in red.releases:
        try:
            to_named_tuple_dict(release.lifted)
        except UnsupportedEventError as exc:
            raise UnsupportedEventError(
                f"release {release.release_id!r} of source {red.source!r}: {exc}"
            ) from None


def _source_entry(red: Any) -> dict[str, Any]:
    _release_events(red)
    entry: dict[str, Any] = {
        "source": red.source,
        "neighboring_relation": NEIGHBORING_RELATION[red.adjacency.relation],
        "dp_event": to_named_tuple_dict(red.event),
    }
    if len(red.alternatives) > 1:
        entry["alternatives"] = [to_named_tuple_dict(e) for e in red.alternatives]
        entry["note"] = (
            f"parallel composition: the source's loss is the worst of its "
            f"{len(red.alternatives)} alternatives; dp_event composes them all (it dominates "
            "each, so it may over-state the loss)"
        )
    return entry


def pipeline_dp_events(pipeline: Any) -> list[dict[str, Any]]:
    """Per source of ``pipeline`` (a :class:`~dpledger.runtime.pipeline.Pipeline`), its composed
    event (every release lifted to the source's unit) as a DpEvent in the JSON object form, with
    the neighbouring relation it is stated under: ``{"source", "neighboring_relation",
    "dp_event"}``, plus ``alternatives`` and a ``note`` where disjoint cells compose in
    parallel. Needs no dp-accounting; a release with no DpEvent counterpart is refused."""
    return [_source_entry(red) for red in pipeline.graph.reduce().values()]
