"""The ledger of a method that runs in its own process: a proxy there, the real ledger here.

A third-party method's ``run(params, data, ledger, rng)`` executes in a worker process
(:mod:`dpledger.cleanroom.run_worker`). Its ``ledger`` is a :class:`LedgerProxy`: every method
of the ledger's public API is forwarded over the channel (:mod:`dpledger.cleanroom.wire`) to the
real :class:`~dpledger.runtime.ledger.PrivacyLedger`, which lives in dpledger's process and is
served by :class:`LedgerServer`. dpledger's process books, samples, clips, bounds units and draws
every noise itself, and sends back only what the ledger returns (arrays, numbers, tables; a
sample or an epoch as its indices and a handle to enter and leave it). An error of the ledger is
raised in the method's process as the same kind of error, and, if the run ends with it,
dpledger raises its own copy. Nothing the method's process does to its proxy, its classes or
its interpreter reaches the ledger: only requests do, and only those listed here are served.
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from dpledger.cleanroom.wire import Link, WireError
from dpledger.core import errors
from dpledger.core.adjacency import Adjacency
from dpledger.core.declaration import Declaration
from dpledger.core.errors import InvalidParameterError, PluginError
from dpledger.core.events import Event, event_from_dict

#: the ledger's methods a method's process may call (see ``docs/writing-a-plugin.md``)
FORWARDED = frozenset(
    {
        "gaussian",
        "laplace",
        "clipped_sum_gaussian",
        "clipped_sum_laplace",
        "clip_rows_l2",
        "bound_units",
        "exponential_mechanism",
        "report_noisy_max",
        "noisy_top_k",
        "poisson_sample",
        "sample_without_replacement",
        "shuffle_batches",
        "allocate",
        "charge",
        "verify",
        "matches_exactly",
        "public_matches_exactly",
        "executed_event",
        "public_executed_event",
        "to_dict",
    }
)
#: requests that get no answer (entering and leaving a sample)
DEFERRED = ("enter", "exit")
#: the ledger's attributes a method's process may read (a copy; changing it changes nothing)
ATTRIBUTES = frozenset({"adjacency", "declared", "declaration", "secure"})
#: why a public part of the ledger is not forwarded, and what to use instead
NOT_FORWARDED = {
    "sample_certified": "its sampler would have to run with the ledger's generator",
    "rng": "the ledger's generator never leaves dpledger's process",
    "units": "the unit keys stay in dpledger's process",
    "log": "the ledger's log stays in dpledger's process",
    "private_log": "the ledger's log stays in dpledger's process",
}
#: builtin exceptions of the ledger that are raised again as themselves in the method's process
_BUILTIN_ERRORS = ("TypeError", "ValueError", "IndexError", "KeyError", "ArithmeticError")


# ---------------------------------------------------------------------------------------------
# dpledger's side
# ---------------------------------------------------------------------------------------------
class LedgerServer:
    """Answers the requests of a method's process with the real ledger."""

    def __init__(self, ledger: Any) -> None:
        self.ledger = ledger
        #: samples, epochs and batches handed out, by handle
        self.scopes: dict[int, Any] = {}
        #: every error the ledger raised for the method's process, by key
        self.errors: dict[int, Exception] = {}
        #: the error of a sample entered or left, answered to the next request
        self.pending: dict[str, Any] | None = None

    def unanswered(self) -> Exception | None:
        """The error of the last sample entered or left, if no request has received it."""
        return None if self.pending is None else self.errors[self.pending["error"]["key"]]

    def answer(self, request: Mapping[str, Any]) -> dict[str, Any] | None:
        """The answer to one request: the ledger's value, or the error it raised.

        Entering and leaving a sample get no answer (they arrive with the next request): an
        error of either is the answer to the next request, which is then not served.
        """
        deferred = request.get("op") in DEFERRED
        if self.pending is not None:
            pending = None if deferred else self.pending
            self.pending = None if not deferred else self.pending
            return pending
        try:
            answer = self._value(self._dispatch(request))
        except Exception as exc:  # the ledger's own errors, and bad arguments
            key = len(self.errors) + 1
            self.errors[key] = exc
            answer = {"error": describe_error(exc, key)}
        if deferred:
            self.pending = answer if "error" in answer else None
            return None
        return answer

    def _dispatch(self, request: Mapping[str, Any]) -> Any:
        op, name = request.get("op"), request.get("name")
        if op == "call" and name in FORWARDED:
            args = [_event_arg(a) for a in request.get("args") or []]
            kwargs = {str(k): _event_arg(v) for k, v in (request.get("kwargs") or {}).items()}
            return getattr(self.ledger, str(name))(*args, **kwargs)
        if op == "get" and name in ATTRIBUTES:
            return getattr(self.ledger, str(name))
        if op in ("enter", "exit") and request.get("handle") in self.scopes:
            scope = self.scopes[request["handle"]]
            if op == "enter":
                scope.__enter__()
            else:
                scope.__exit__(None, None, None)
            return None
        raise PluginError(f"the method's process asked for {op!r} {name!r}, which is not served")

    def _handle(self, scope: Any) -> int:
        self.scopes[len(self.scopes) + 1] = scope
        return len(self.scopes)

    def _value(self, value: Any) -> dict[str, Any]:
        from dpledger.runtime.ledger import Sample, ShuffledEpoch

        if isinstance(value, Sample):
            return {"sample": self._sample(value)}
        if isinstance(value, ShuffledEpoch):
            batches = [{**self._sample(b), "position": b.position} for b in value.batches]
            epoch = {"step": value.step, "source_size": value.source_size, "batches": batches}
            for name in ("batch_size", "num_steps", "num_selected"):
                if hasattr(value, name):
                    epoch[name] = getattr(value, name)
            return {"epoch": epoch}
        if isinstance(value, Event):
            return {"event": value.to_dict()}
        if isinstance(value, Adjacency):
            return {"adjacency": value.to_dict()}
        if isinstance(value, Declaration):
            return {"declaration": value.to_dict()}
        return {"value": value}

    def _sample(self, sample: Any) -> dict[str, Any]:
        return {
            "handle": self._handle(sample),
            "indices": sample.indices,
            "kind": sample.kind,
            "step": sample.step,
        }


def _event_arg(value: Any) -> Any:
    """An argument as the ledger takes it (an event arrives as its table)."""
    if isinstance(value, Mapping) and set(value) == {"$event"}:
        return event_from_dict(value["$event"], path="event")
    return value


def describe_error(exc: Exception, key: int) -> dict[str, Any]:
    """An error of the ledger as data."""
    out: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc), "key": key}
    if isinstance(exc, InvalidParameterError):
        out.update(field=exc.field, problem=exc.problem, fix=exc.fix)
    return out


# ---------------------------------------------------------------------------------------------
# the method's side
# ---------------------------------------------------------------------------------------------
def raise_remote(error: Mapping[str, Any]) -> None:
    """Raise, in the method's process, the error the ledger raised in dpledger's process."""
    kind, message = str(error.get("type")), str(error.get("message"))
    exc: Exception
    if "field" in error:
        exc = InvalidParameterError(str(error["field"]), str(error["problem"]), str(error["fix"]))
    elif kind in ("LedgerViolationError", "PluginError", "DPLedgerError"):
        exc = getattr(errors, kind)(message)
    elif kind in _BUILTIN_ERRORS:
        exc = getattr(builtins, kind)(message)
    else:
        exc = PluginError(f"the ledger raised {kind}: {message}")
    exc.channel_key = error.get("key")  # type: ignore[attr-defined]
    raise exc


def _arg(value: Any) -> Any:
    """An argument as it crosses: an event as its table, an array-like as an array."""
    if isinstance(value, Event):
        return {"$event": value.to_dict()}
    if value is None or isinstance(value, bool | str | int | float | np.ndarray | np.generic):
        return value
    if isinstance(value, Mapping):
        return {k: _arg(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_arg(v) for v in value]
    return np.asarray(value)


class LedgerProxy:
    """The ``ledger`` a method gets in its own process (see the module docstring)."""

    def __init__(self, link: Link, method: str) -> None:
        self._link = link
        self._method = method
        #: samples entered and left since the last request (sent with the next one)
        self._queued: list[dict[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if name in FORWARDED:
            return functools.partial(self._call, name)
        if name in ATTRIBUTES:
            return self._ask({"op": "get", "name": name})
        why = NOT_FORWARDED.get(name, "it is not part of the ledger's public API")
        raise PluginError(
            f"method {self._method!r} uses ledger.{name}, which is not available to a method "
            f"that runs in its own process ({why}). Fix: use the ledger's primitives "
            f"({', '.join(sorted(FORWARDED))}); rng is for non-private randomness"
        )

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        try:
            request = {
                "op": "call",
                "name": name,
                "args": [_arg(a) for a in args],
                "kwargs": {k: _arg(v) for k, v in kwargs.items()},
            }
            return self._ask(request)
        except WireError as exc:
            raise InvalidParameterError(
                f"ledger.{name}", f"got an argument that cannot be sent ({exc})", "pass arrays"
            ) from None

    def queued(self) -> list[dict[str, Any]]:
        """The samples entered and left since the last request; they are sent now."""
        with self._link.lock:
            queued, self._queued = self._queued, []
        return queued

    def _ask(self, request: Mapping[str, Any]) -> Any:
        with self._link.lock:
            answer = self._link.ask({**request, "queued": self.queued()})
        if "error" in answer:
            raise_remote(answer["error"])
        if "sample" in answer:
            return SampleProxy(self, answer["sample"])
        if "epoch" in answer:
            return EpochProxy(self, answer["epoch"])
        if "event" in answer:
            return event_from_dict(answer["event"])
        if "adjacency" in answer:
            return Adjacency(**answer["adjacency"])
        if "declaration" in answer:
            found = answer["declaration"]
            return Declaration(event_from_dict(found["event"]), str(found["unit"]))
        return answer.get("value")

    def _scope(self, op: str, handle: int) -> None:
        """Enter or leave a sample: sent with the next request, whose answer is the error of
        either, if any."""
        with self._link.lock:
            self._queued.append({"op": op, "handle": handle})


class SampleProxy:
    """A sample drawn by the ledger: its ``indices``; enter it around the steps run on it."""

    def __init__(self, proxy: LedgerProxy, info: Mapping[str, Any]) -> None:
        self._proxy = proxy
        self._handle = int(info["handle"])
        self.indices = np.asarray(info["indices"], dtype=np.int64)
        self.kind = str(info["kind"])
        self.step = str(info["step"])
        self.position = info.get("position")

    def __len__(self) -> int:
        return int(self.indices.size)

    def __enter__(self) -> SampleProxy:
        self._proxy._scope("enter", self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        self._proxy._scope("exit", self._handle)


class EpochProxy:
    """A shuffled or allocated epoch drawn by the ledger: iterate over its batches."""

    def __init__(self, proxy: LedgerProxy, info: Mapping[str, Any]) -> None:
        self.step = str(info["step"])
        self.source_size = int(info["source_size"])
        self.batches = tuple(SampleProxy(proxy, b) for b in info["batches"])
        for name in ("batch_size", "num_steps", "num_selected"):
            if name in info:
                setattr(self, name, int(info[name]))

    def __iter__(self) -> Iterator[SampleProxy]:
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)
