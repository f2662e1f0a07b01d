"""Declarations as data: what crosses from a third-party plugin's worker into the clean room.

A release that names a method no builtin plugin provides needs that method's declaration. The
clean room asks for it (:class:`DeclarationRequest`: method, parameters, adjacency, all JSON);
a worker process answers with the declaration already lowered to core events
(:func:`reply_from_dict`), or with the error the method raised. The clean room checks the reply
(only core event kinds, a known unit) and labels every bound that uses it as resting on that
plugin's word.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import attrs

from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError, PluginError
from dpledger.core.events import (
    EVENT_KINDS,
    ApproxDPEvent,
    Event,
    NoOpEvent,
    PureDPEvent,
    event_from_dict,
)

UNITS = ("row", "user")


def _plain(value: Any, field: str) -> Any:
    """``value`` as plain JSON (finite numbers, strings, booleans, lists, tables)."""
    if value is None or isinstance(value, bool | str | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidParameterError(field, f"is {value}", "pass a finite number")
        return value
    if isinstance(value, list | tuple):
        return [_plain(v, f"{field}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        return {str(k): _plain(v, f"{field}.{k}") for k, v in value.items()}
    raise InvalidParameterError(
        field,
        f"holds a {type(value).__name__}, which a declaration cannot receive",
        "use numbers, strings, booleans, lists or tables",
    )


@attrs.frozen
class DeclarationRequest:
    """One method's declaration for one release, in canonical form."""

    method: str
    params: Mapping[str, Any]
    adjacency: Mapping[str, Any]

    @classmethod
    def of(cls, method: str, params: Mapping[str, Any], adjacency: Adjacency) -> DeclarationRequest:
        return cls(method, _plain(dict(params), "params"), adjacency.to_dict())

    def key(self) -> str:
        """The same string for the same request, whoever builds it."""
        return json.dumps(attrs.asdict(self), sort_keys=True, separators=(",", ":"))

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DeclarationRequest:
        return cls(str(data["method"]), dict(data["params"]), dict(data["adjacency"]))


@attrs.frozen
class DeclarationReply:
    """A worker's answer: the lowered declaration, or the error the method raised."""

    request: DeclarationRequest
    event: Mapping[str, Any] | None = None
    unit: str = "row"
    plugin: str | None = None
    distribution: str | None = None
    version: str | None = None
    error: Mapping[str, str] | None = None
    #: the plugin states that the method reads no private data
    post_processing: bool = False

    def to_dict(self) -> dict[str, Any]:
        out = attrs.asdict(self, recurse=False)
        out["request"] = self.request.to_dict()
        return out

    def who(self) -> str:
        """The plugin and distribution that gave this declaration."""
        dist = " ".join(p for p in (self.distribution, self.version) if p) or "unknown"
        return f"{self.plugin or 'unknown plugin'} ({dist})"

    def core_event(self) -> Event:
        """The declared event, refused unless it is made of core event kinds only and costs
        something (:class:`PluginError` naming the plugin)."""
        where = f"the declaration of method {self.request.method!r} by plugin {self.who()}"
        try:
            event = event_from_dict(self.event)
        except InvalidParameterError as exc:
            raise PluginError(
                f"{where} is not a valid core event ({exc}). Fix: correct the plugin's declare"
            ) from None
        foreign = sorted({e.kind for e in event.walk() if EVENT_KINDS.core.get(e.kind) is None})
        if foreign:
            raise PluginError(
                f"{where} uses event kinds {foreign} that are not core kinds after lowering. "
                "Fix: map the plugin's mechanisms onto core events (to_core, a pair, a profile)"
            )
        if costs_nothing(event) and not self.post_processing:
            raise PluginError(
                f"{where} declares no privacy cost ({event.describe()}) for a method that "
                "releases outputs computed from the data. Fix: declare the mechanisms the method "
                "runs; a step that reads only earlier releases is post-processing and belongs "
                "in the pipeline's [[postprocess]]"
            )
        if self.unit not in UNITS:
            raise PluginError(f"{where} has unit {self.unit!r}. Fix: use one of {UNITS}")
        return event


def costs_nothing(event: Event) -> bool:
    """Whether every leaf of ``event`` is free: no data touched, or a zero privacy loss."""
    leaves = [e for e in event.walk() if not e.children()]
    return all(
        isinstance(e, NoOpEvent)
        or (isinstance(e, PureDPEvent) and e.epsilon == 0)
        or (isinstance(e, ApproxDPEvent) and e.epsilon == 0 and e.delta == 0)
        for e in leaves
    )


def reply_from_dict(data: Mapping[str, Any]) -> DeclarationReply:
    """A reply read back from JSON; a malformed one is an error naming the field."""
    try:
        return DeclarationReply(
            request=DeclarationRequest.from_dict(data["request"]),
            event=data.get("event"),
            unit=str(data.get("unit", "row")),
            plugin=data.get("plugin"),
            distribution=data.get("distribution"),
            version=data.get("version"),
            error=data.get("error"),
            post_processing=data.get("post_processing") is True,
        )
    except (KeyError, TypeError, AttributeError) as exc:
        raise InvalidParameterError(
            "declaration reply", f"is malformed ({exc})", "rerun the command"
        ) from None
