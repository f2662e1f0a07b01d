"""The interface every accountant backend implements, and its result types.

Results are brackets ``(lower, upper, method)``. Only ``upper`` is ever reported as the
guarantee; ``lower`` exists to cross-check backends against each other.
"""

from __future__ import annotations

import abc
import contextlib
import math
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import attrs
import numpy as np
from numpy.typing import NDArray

from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import (
    BoundUnavailable,
    DPLedgerError,
    InvalidParameterError,
    UnsupportedEventError,
)
from dpledger.core.events import (
    Event,
    SelfComposedEvent,
    TabulatedProfileEvent,
    canonical,
    coarsen_tabulated,
    flatten,
)
from dpledger.core.validation import check_delta_query, check_epsilon_query

_T = TypeVar("_T")

#: a support check: (event, adjacency, ledger, ledger length, reason)
_SupportMemo = tuple[Event, Adjacency, list[tuple[Event, int]], int, str | None]


@attrs.frozen
class Budget:
    """Time and memory a backend query may use before it is abandoned as unavailable."""

    seconds: float
    memory_bytes: int


@attrs.frozen
class EpsilonBound:
    """A certified epsilon upper bound at a fixed delta, with a lower bound beside it."""

    epsilon: float
    epsilon_lower: float
    delta: float
    method: str
    details: dict[str, Any] = attrs.field(factory=dict, eq=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "epsilon": self.epsilon,
            "epsilon_lower": self.epsilon_lower,
            "delta": self.delta,
            "method": self.method,
        }


@attrs.frozen
class DeltaBound:
    """A certified delta upper bound at a fixed epsilon, with a lower bound beside it."""

    delta: float
    delta_lower: float
    epsilon: float
    method: str
    details: dict[str, Any] = attrs.field(factory=dict, eq=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "delta": self.delta,
            "delta_lower": self.delta_lower,
            "epsilon": self.epsilon,
            "method": self.method,
        }


def _check_count(count: int) -> int:
    if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 0:
        raise InvalidParameterError(
            "count", f"must be an integer >= 0, got {count!r}", "pass e.g. 1"
        )
    return int(count)


class Accountant(abc.ABC):
    """Composes events under one row- or unit-level neighbouring relation.

    Subclasses implement :meth:`_unsupported_reason`, :meth:`_epsilon` and :meth:`_delta`.
    Queries are pure: they never change the ledger.
    """

    #: short method name printed next to every bound
    name: str = "abstract"

    #: run budgeted queries in a forked child process (hard time and memory limits); backends
    #: that run in-process leave this False (they check no budget of their own)
    isolate: bool = False

    #: whether the backend composes tabulated privacy profiles as curves; the others get each
    #: one's (eps, delta) coarsening
    composes_tabulated: bool = False

    def __init__(self, adjacency: Adjacency | None = None) -> None:
        self.adjacency = adjacency or Adjacency()
        self._ledger: list[tuple[Event, int]] = []
        #: time/memory budget of queries (None: unlimited)
        self.budget: Budget | None = None
        #: a tabulated profile was composed as its (eps, delta) point: no lower bound holds
        self._upper_only = False
        #: the last support check (:meth:`_checked_reason`)
        self._support_memo: _SupportMemo | None = None

    # -- composition -------------------------------------------------------------------
    @abc.abstractmethod
    def _unsupported_reason(self, event: Event) -> str | None:
        """None if supported; otherwise the reason, naming the offending sub-event."""

    def supports(self, event: Event) -> bool:
        """Whether this backend can characterise ``event`` (checked recursively)."""
        return self._unsupported_reason(event) is None

    def compose(self, event: Event, count: int = 1) -> Accountant:
        """Add ``count`` repetitions of ``event``; raise if unsupported (nothing is added)."""
        count = _check_count(count)
        if not isinstance(event, Event):
            raise InvalidParameterError(
                "event", f"expected an Event, got {event!r}", "pass an event"
            )
        return self._compose_canonical(canonical(event), count)

    def _compose_canonical(
        self, event: Event, count: int, tabulated: bool | None = None
    ) -> Accountant:
        """:meth:`compose` of an event in canonical form and a checked count; ``tabulated``
        says whether the event holds a :class:`TabulatedProfileEvent` (None: its tree is
        walked to find out). A caller that has run :meth:`_checked_reason` on the same event
        does not have it walked again."""
        if tabulated is None:
            tabulated = any(isinstance(e, TabulatedProfileEvent) for e in event.walk())
        if not self.composes_tabulated and tabulated:
            event = coarsen_tabulated(event, self.adjacency.relation)
            # a table only bounds its mechanism from above: nothing certifies a lower bound
            self._upper_only = True
        reason = self._checked_reason(event)
        if reason is None and count > 1:
            # a count is a self-composition: limits on it (grid precision, a backend's largest
            # count) hold for both spellings
            reason = self._unsupported_reason(SelfComposedEvent(event, count))
        if reason is not None:
            raise UnsupportedEventError(
                f"{self.name} accountant cannot handle {_shown(event)} under "
                f"{self.adjacency.relation}: {reason}"
            )
        if count:
            self._ledger.append((event, count))
            self._invalidate()
        return self

    def _checked_reason(self, event: Event) -> str | None:
        """:meth:`_unsupported_reason` of ``event``, remembered for the last event checked: the
        same event object, adjacency and ledger give the same reason without a second walk
        of the tree (the check depends on nothing else)."""
        memo: _SupportMemo | None = getattr(self, "_support_memo", None)
        if (
            memo is not None
            and memo[0] is event
            and memo[1] is self.adjacency
            and memo[2] is self._ledger
            and memo[3] == len(self._ledger)
        ):
            return memo[4]
        reason = self._unsupported_reason(event)
        self._support_memo = (event, self.adjacency, self._ledger, len(self._ledger), reason)
        return reason

    def _invalidate(self) -> None:  # noqa: B027 - an optional hook, empty by default
        """Hook for subclasses that cache composed state."""

    @property
    def ledger(self) -> tuple[tuple[Event, int], ...]:
        return tuple(self._ledger)

    # -- queries -----------------------------------------------------------------------
    def get_epsilon(self, delta: float) -> EpsilonBound:
        """Smallest certified epsilon such that the composition is (epsilon, delta)-DP."""
        delta = check_delta_query(delta)
        if not self._ledger:
            return EpsilonBound(0.0, 0.0, delta, self.name)
        with _numerical_failure(self.name):
            if self.isolate and self.budget is not None:
                bound = run_isolated(self._epsilon, delta, self.budget, self.name)
            else:
                bound = self._epsilon(delta)
        return attrs.evolve(bound, epsilon_lower=0.0) if self._upper_only else bound

    def get_delta(self, epsilon: float) -> DeltaBound:
        """Certified delta(epsilon) of the composition."""
        epsilon = check_epsilon_query(epsilon)
        if not self._ledger:
            return identical_delta(epsilon, self.name)
        with _numerical_failure(self.name):
            if self.isolate and self.budget is not None:
                found = run_isolated(self._delta, epsilon, self.budget, self.name)
            else:
                found = self._delta(epsilon)
        return attrs.evolve(found, delta_lower=0.0) if self._upper_only else found

    def privacy_profile(self, epsilons: NDArray[np.float64] | list[float]) -> NDArray[np.float64]:
        """Certified delta upper bounds on a grid of epsilons."""
        return np.array([self.get_delta(float(e)).delta for e in epsilons], dtype=float)

    @abc.abstractmethod
    def _epsilon(self, delta: float) -> EpsilonBound: ...

    @abc.abstractmethod
    def _delta(self, epsilon: float) -> DeltaBound: ...


@contextlib.contextmanager
def _numerical_failure(method: str) -> Iterator[None]:
    """A backend whose arithmetic fails declines (BoundUnavailable) instead of crashing: the
    caller then falls back to another backend or refuses; no number is guessed."""
    try:
        yield
    except DPLedgerError:
        raise
    except (ArithmeticError, ValueError, MemoryError, RecursionError) as exc:
        raise BoundUnavailable(
            method, f"numerical failure ({type(exc).__name__}: {str(exc)[:120]})"
        ) from None


def identical_delta(epsilon: float, method: str) -> DeltaBound:
    """The bound of a composition that touches no data (P = Q): delta = max(0, 1 - e^eps),
    which is positive below epsilon 0 (every pair has at least this much)."""
    exact = -math.expm1(min(epsilon, 0.0))
    return DeltaBound(min(1.0, exact * (1 + 1e-12)), exact * (1 - 1e-12), epsilon, method)


def infinite_epsilon(delta: float, method: str) -> EpsilonBound:
    """The bound for a non-private release."""
    return EpsilonBound(math.inf, math.inf, delta, method)


def narrower_epsilon(a: EpsilonBound, b: EpsilonBound) -> EpsilonBound:
    """The intersection of two certified brackets (the details of the narrower one)."""
    upper, lower = min(a.epsilon, b.epsilon), max(a.epsilon_lower, b.epsilon_lower)
    best = a if a.epsilon - a.epsilon_lower <= b.epsilon - b.epsilon_lower else b
    return EpsilonBound(upper, min(lower, upper), a.delta, a.method, best.details)


def narrower_delta(a: DeltaBound, b: DeltaBound) -> DeltaBound:
    """The intersection of two certified delta brackets (the details of the narrower one)."""
    upper, lower = min(a.delta, b.delta), max(a.delta_lower, b.delta_lower)
    best = a if a.delta - a.delta_lower <= b.delta - b.delta_lower else b
    return DeltaBound(upper, min(lower, upper), a.epsilon, a.method, best.details)


#: libraries whose threads make a forked child unsafe (the budget is then not enforced)
_FORK_UNSAFE = ("jax",)


def run_isolated(fn: Callable[[float], _T], arg: float, budget: Budget, name: str) -> _T:
    """``fn(arg)`` in a forked child limited to ``budget``; BoundUnavailable when it is exceeded.

    The child's address space is capped with ``RLIMIT_AS`` and it is killed after
    ``budget.seconds``. Where fork is unavailable or unsafe (a multithreaded library such as
    JAX is loaded) the call runs in-process, unbounded.
    """
    import multiprocessing as mp
    import sys

    if any(name in sys.modules for name in _FORK_UNSAFE):
        return fn(arg)  # forking these libraries' threads can deadlock the child
    try:
        ctx = mp.get_context("fork")
    except ValueError:  # pragma: no cover - platforms without fork
        return fn(arg)
    reader, writer = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(fn, arg, budget.memory_bytes, writer), daemon=True)
    proc.start()
    writer.close()
    timeout = None if math.isinf(budget.seconds) else budget.seconds
    try:
        if not reader.poll(timeout):
            raise BoundUnavailable(
                name, f"exceeded its time budget of {budget.seconds:g} s (bound unavailable)"
            )
        try:
            ok, payload = reader.recv()
        except EOFError:
            raise BoundUnavailable(
                name,
                f"stopped without a result (memory budget {budget.memory_bytes / 2**30:.3g} GiB "
                "exceeded or crash)",
            ) from None
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()
        reader.close()
    if not ok:
        exc_type, message = payload
        if exc_type == "BoundUnavailable":
            raise BoundUnavailable(name, message)
        if isinstance(message, str) and exc_type == "MemoryError":
            raise BoundUnavailable(
                name, f"exceeded its memory budget of {budget.memory_bytes / 2**30:.3g} GiB"
            )
        raise BoundUnavailable(name, f"{exc_type}: {message}")
    return payload  # type: ignore[no-any-return]


def _child(fn: Callable[[float], Any], arg: float, memory: int, writer: Any) -> None:
    import resource

    with contextlib.suppress(ValueError, OSError):  # limit not settable: run unlimited
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    try:
        writer.send((True, fn(arg)))
    except BoundUnavailable as exc:
        writer.send((False, ("BoundUnavailable", exc.reason)))
    except BaseException as exc:
        with contextlib.suppress(BaseException):
            writer.send((False, (type(exc).__name__, str(exc))))
    finally:
        writer.close()


#: an event described in a refusal is shortened beyond this many characters
SHOWN_CHARACTERS = 200


def _shown(event: Event) -> str:
    """The event's description for a one-line message: shortened to its kind and its number
    of leaves when long (a composition of many leaves is never listed leaf by leaf)."""
    text: str = event.describe()
    if len(text) <= SHOWN_CHARACTERS:
        return text
    return f"{event.kind}(... {len(flatten(event))} leaves)"
