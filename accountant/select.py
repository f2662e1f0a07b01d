"""Run every backend that supports an event and report the smallest certified upper bound.

If any backend's certified lower bound exceeds another's certified upper bound, one of them is
broken: :class:`BackendInconsistencyError` is raised rather than a number printed.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence

import attrs

from dpledger.accountant.base import Accountant, DeltaBound, EpsilonBound
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import (
    BackendInconsistencyError,
    BoundUnavailable,
    InvalidParameterError,
    UnsupportedEventError,
)
from dpledger.core.events import Event, canonical

#: (module, class) of every backend, tightest first. Modules that fail to import are skipped
#: (recorded as unavailable), so the core works without optional cross-check libraries.
BACKENDS: tuple[tuple[str, str], ...] = (
    ("dpledger.accountant.closed_form", "ClosedFormAccountant"),
    ("dpledger.accountant.pld", "PLDAccountant"),
    ("dpledger.accountant.rdp", "RDPAccountant"),
    ("dpledger.accountant.prv_adapter", "PRVAccountant"),
)

#: the lower/upper consistency check allows this much floating-point slack
CONSISTENCY_SLACK = 1e-9


@attrs.frozen
class Selection:
    """The reported bound and every backend's bracket beside it."""

    bound: EpsilonBound | DeltaBound
    candidates: tuple[EpsilonBound | DeltaBound, ...]
    unavailable: tuple[tuple[str, str], ...]

    @property
    def method(self) -> str:
        return self.bound.method


def backend_factories(
    names: Sequence[str] | None = None,
) -> list[tuple[str, Callable[[Adjacency], Accountant] | None, str]]:
    """(name, factory or None, reason) for every configured backend."""
    out: list[tuple[str, Callable[[Adjacency], Accountant] | None, str]] = []
    for module_name, class_name in BACKENDS:
        short = module_name.rsplit(".", 1)[-1]
        try:
            module = importlib.import_module(module_name)
            cls = getattr(module, class_name)
        except ImportError as exc:
            out.append((short, None, f"not installed: {exc}"))
            continue
        if names is not None and cls.name not in names:
            continue
        out.append((cls.name, cls, ""))
    return out


def account(
    event: Event,
    adjacency: Adjacency | None = None,
    *,
    delta: float | None = None,
    epsilon: float | None = None,
    backends: Sequence[str] | None = None,
) -> Selection:
    """Certified epsilon at ``delta`` (or delta at ``epsilon``) of one event tree."""
    if (delta is None) == (epsilon is None):
        raise InvalidParameterError(
            "delta", "give exactly one of delta or epsilon", "pass delta=1e-5"
        )
    adjacency = adjacency or Adjacency()
    if not isinstance(event, Event):
        raise InvalidParameterError("event", f"expected an Event, got {event!r}", "pass an event")
    event = canonical(event)
    candidates: list[EpsilonBound | DeltaBound] = []
    unavailable: list[tuple[str, str]] = []
    for name, factory, reason in backend_factories(backends):
        if factory is None:
            unavailable.append((name, reason))
            continue
        acc = factory(adjacency)
        why = acc._unsupported_reason(event)
        if why is not None:
            unavailable.append((name, f"unsupported: {why}"))
            continue
        try:
            acc.compose(event)
            if delta is not None:
                candidates.append(acc.get_epsilon(delta))
            else:
                assert epsilon is not None
                candidates.append(acc.get_delta(epsilon))
        except BoundUnavailable as exc:
            unavailable.append((name, exc.reason))
        except UnsupportedEventError as exc:
            unavailable.append((name, str(exc)))
    if not candidates:
        detail = "; ".join(f"{n}: {r}" for n, r in unavailable)
        raise UnsupportedEventError(f"no accountant can bound {event.describe()} ({detail})")
    _check_consistency(candidates)
    best = min(candidates, key=_upper)
    return Selection(best, tuple(candidates), tuple(unavailable))


def _upper(b: EpsilonBound | DeltaBound) -> float:
    return b.epsilon if isinstance(b, EpsilonBound) else b.delta


def _lower(b: EpsilonBound | DeltaBound) -> float:
    return b.epsilon_lower if isinstance(b, EpsilonBound) else b.delta_lower


def _check_consistency(candidates: Sequence[EpsilonBound | DeltaBound]) -> None:
    lo = max(candidates, key=_lower)
    hi = min(candidates, key=_upper)
    if _lower(lo) > _upper(hi) * (1 + CONSISTENCY_SLACK) + CONSISTENCY_SLACK:
        raise BackendInconsistencyError(
            f"{lo.method} certifies a lower bound {_lower(lo):.6g} above {hi.method}'s upper "
            f"bound {_upper(hi):.6g}; one backend is wrong, so no bound is reported"
        )
