"""Event tables (dicts, JSON records, pipeline files' tables) read into events."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from dpledger.core.errors import InvalidParameterError
from dpledger.core.event_kinds import EVENT_KINDS
from dpledger.core.event_nesting import MAX_NESTING

if TYPE_CHECKING:
    from dpledger.core.events import Event

__all__ = ["INT_EVENT_FIELDS", "event_from_dict", "short_repr"]


#: integer parameters; JSON Schema counts 10.0 as an integer, so 10.0 is read as 10
INT_EVENT_FIELDS = (
    "count",
    "source_size",
    "sample_size",
    "batch_size",
    "num_buckets",
    "num_steps",
    "num_selected",
    "max_partitions",
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
