"""Run the backends that support an event and report the certified bracket.

The reported bound is ``[max of certified lowers, min of certified uppers]`` over the backends
that ran. If any backend's certified lower bound exceeds another's certified upper bound, one of
them is broken: :class:`BackendInconsistencyError` is raised rather than a number printed.

By default the tight backends (closed form, PLD) always run; of the independent cross-checks,
RDP runs where cheap (:func:`_expensive`), in-process and to completion (its cost is linear in
the distinct leaves, which it rounds to a bounded number of representatives, so the reported
bound never depends on the machine's load), and PRV runs on request only; a cross-check that
is skipped is listed as unavailable with the reason. A backend that runs isolated (a forked
child) is held to :data:`DEFAULT_BUDGET` and listed as unavailable when it exceeds it.
``crosscheck=True`` (or :func:`crosscheck_mode`) runs every backend in full, in-process and
unbounded.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import itertools
import math
from collections.abc import Callable, Iterator, Sequence

import attrs

from dpledger.accountant.base import Accountant, Budget, DeltaBound, EpsilonBound
from dpledger.accountant.exact_lower import raise_lower
from dpledger.accountant.product_event_lower import raise_product_lower
from dpledger.accountant.threads import one_blas_thread
from dpledger.accountant.unamplified import has_lower_construction, split_epochs
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import (
    BackendInconsistencyError,
    BoundUnavailable,
    InvalidParameterError,
    UnsupportedEventError,
)
from dpledger.core.event_trees import CORE_LEAVES, any_node, flatten_memo
from dpledger.core.events import Event, TabulatedProfileEvent, canonical, flatten

#: (module, class) of every backend, tightest first. Modules that fail to import are skipped
#: (recorded as unavailable), so the core works without optional cross-check libraries.
BACKENDS: tuple[tuple[str, str], ...] = (
    ("dpledger.accountant.closed_form", "ClosedFormAccountant"),
    ("dpledger.accountant.pld", "PLDAccountant"),
    ("dpledger.accountant.rdp", "RDPAccountant"),
    ("dpledger.accountant.prv_adapter", "PRVAccountant"),
)

#: the lower/upper consistency check allows this much floating-point slack (relative, and
#: absolute for epsilons; deltas far below 1e-9 are compared relative only)
CONSISTENCY_SLACK = 1e-9
#: absolute slack of the check for deltas
DELTA_CONSISTENCY_FLOOR = 1e-300

#: backends whose bound is the reported one in practice: they always run
PRIMARY: tuple[str, ...] = ("closed_form", "pld")
#: default-mode budget of a cross-check backend that runs isolated (seconds, bytes of address
#: space); in-process backends check no budget of their own
DEFAULT_BUDGET = Budget(seconds=0.5, memory_bytes=1 << 30)
#: default-mode cross-checks skip ledgers with more distinct leaves than this (they group them
#: into representatives, so their cost stays linear) when the PLD bracket is within
#: TIGHT_BRACKET: where PLD declines, or leaves the closed form alone, or is looser, they run
CHEAP_DISTINCT_LEAVES = 64
TIGHT_BRACKET = 1.01
#: the same for a delta bracket: delta falls steeply in epsilon (a bracket of 0.5 % in epsilon
#: is several per cent in delta), and the cross-checks' delta comes from a looser epsilon
TIGHT_DELTA_BRACKET = 1.1
#: a certified bracket this narrow (relative) is exact: the backends after it in default mode
#: certify their upper bound only (a lower bound of theirs could raise the reported one by no
#: more than this, and refining it is what costs them time)
EXACT_BRACKET = 1e-9

_CROSSCHECK: contextvars.ContextVar[bool] = contextvars.ContextVar("crosscheck", default=False)


@contextlib.contextmanager
def crosscheck_mode(enabled: bool = True) -> Iterator[None]:
    """Within the block, :func:`account` runs every cross-check backend in full."""
    token = _CROSSCHECK.set(enabled)
    try:
        yield
    finally:
        _CROSSCHECK.reset(token)


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


#: an event description longer than this is shortened in the one-line refusal
_SHOWN = 120
#: the sub-events whose descriptions are shortened (the first ones of a walk)
_SHORTENED = 200


def _short(event: Event) -> str:
    text = event.describe()
    return text if len(text) <= _SHOWN else f"{event.kind}(...)"


def _nothing_bounds(event: Event, unavailable: Sequence[tuple[str, str]]) -> str:
    """The one line that says no backend bounds ``event``: each backend's reason (long event
    descriptions in it shortened) and the fix."""
    long_ones: dict[str, str] = {}
    for node in itertools.islice(event.walk(), _SHORTENED):
        text = node.describe()
        if len(text) > _SHOWN:
            long_ones.setdefault(text, f"{node.kind}(...)")
    reasons = []
    for name, reason in unavailable:
        for text in sorted(long_ones, key=len, reverse=True):
            reason = reason.replace(text, long_ones[text])
        reasons.append(f"{name}: {reason}")
    detail = "; ".join(reasons)
    return (
        f"no accountant can bound {_short(event)} ({detail}). Fix: state the event with the "
        "kinds and nesting the accountants support (docs/accountants.md), e.g. one sampling of "
        "a Gaussian per step repeated with a count instead of nested samplings"
    )


def account(
    event: Event,
    adjacency: Adjacency | None = None,
    *,
    delta: float | None = None,
    epsilon: float | None = None,
    backends: Sequence[str] | None = None,
    crosscheck: bool | None = None,
) -> Selection:
    """Certified epsilon at ``delta`` (or delta at ``epsilon``) of one event tree.

    ``crosscheck`` (default: the enclosing :func:`crosscheck_mode`, else False) runs the
    independent backends in full; otherwise they run only where cheap (isolated ones within
    :data:`DEFAULT_BUDGET`). Backends named in ``backends`` always run, in full.
    """
    if (delta is None) == (epsilon is None):
        raise InvalidParameterError(
            "delta", "give exactly one of delta or epsilon", "pass delta=1e-5"
        )
    adjacency = adjacency or Adjacency()
    if not isinstance(event, Event):
        raise InvalidParameterError("event", f"expected an Event, got {event!r}", "pass an event")
    if crosscheck is None:
        crosscheck = _CROSSCHECK.get()
    event = canonical(event)
    # every backend flattens the tree: within one call, it is walked once
    with flatten_memo(), one_blas_thread():  # one BLAS thread: a second only waits for a core
        candidates, unavailable = _run_backends(
            event, adjacency, delta, epsilon, backends, crosscheck
        )
        if backends is None and not any(c.method == "pld" for c in candidates):
            # PLD declined: epochs it could not analyse are bounded without amplification
            candidates += _unamplified_bounds(event, adjacency, delta, epsilon, unavailable)
        if not candidates:
            raise UnsupportedEventError(_nothing_bounds(event, unavailable))
        # a loose bracket's lower end is also read by exact conditioning (exact_lower.py) and
        # from one product event of constant loss (product_event_lower.py)
        bound = raise_lower(_bracket(candidates), event, adjacency)
        bound = raise_product_lower(bound, event, adjacency)
    return Selection(bound, tuple(candidates), tuple(unavailable))


def _run_backends(
    event: Event,
    adjacency: Adjacency,
    delta: float | None,
    epsilon: float | None,
    backends: Sequence[str] | None,
    crosscheck: bool,
) -> tuple[list[EpsilonBound | DeltaBound], list[tuple[str, str]]]:
    """Every backend's bound of ``event`` (the candidates), and why the others gave none: the
    primary backends and the requested ones in full, then the cheap cross-checks on a budget."""
    candidates: list[EpsilonBound | DeltaBound] = []
    unavailable: list[tuple[str, str]] = []
    deferred: list[tuple[str, Callable[[Adjacency], Accountant]]] = []
    # one walk of the tree for every backend (each composes the same canonical event)
    tabulated = any_node(event, _is_tabulated, _NOT_TABULATED)

    def run(name: str, factory: Callable[[Adjacency], Accountant], budget: Budget | None) -> None:
        args = (event, adjacency, delta, epsilon, budget, candidates, unavailable, tabulated)
        _run(name, factory, *args)

    for name, factory, reason in backend_factories(backends):
        if factory is None:
            unavailable.append((name, reason))
            continue
        if backends is None and not crosscheck and name not in PRIMARY:
            deferred.append((name, factory))
            continue
        # requested in full (named, or crosscheck): in-process and unbounded, as a report asks
        with _upper_only_after_exact(candidates, backends is None and not crosscheck):
            run(name, factory, None)
    for name, factory in deferred:
        why = _expensive(name, event, candidates)
        if why is not None:
            unavailable.append((name, why))
            continue
        budget = DEFAULT_BUDGET
        run(name, factory, budget)
    return candidates, unavailable


#: the backends that bound an event whose epochs are replaced by their unamplified cost
UNAMPLIFIED_BACKENDS: tuple[str, ...] = ("closed_form", "pld", "rdp")


def _unamplified_bounds(
    event: Event,
    adjacency: Adjacency,
    delta: float | None,
    epsilon: float | None,
    unavailable: list[tuple[str, str]],
) -> list[EpsilonBound | DeltaBound]:
    """Upper bounds of ``event`` with shuffled or allocated epochs replaced by what they cost
    without amplification (:mod:`~dpledger.accountant.unamplified`): first only the epochs PLD
    refuses on their own (the others keep their amplification), then also those it bounds below
    by nothing (:func:`~dpledger.accountant.unamplified.has_lower_construction`: replacing them
    loses nothing), then every epoch. The lower bound is that of the composition without the
    replaced epochs (a marginal of the outputs), 0 when nothing else remains."""
    factories = [(n, f) for n, f, _ in backend_factories(UNAMPLIFIED_BACKENDS) if f is not None]
    pld = dict(factories).get("pld")

    def pld_alone(leaf: Event) -> bool:
        return pld is not None and pld(adjacency)._checked_reason(leaf) is None

    def with_lower(leaf: Event) -> bool:
        return has_lower_construction(leaf) and pld_alone(leaf)

    tried: set[int] = set()
    for keep in (pld_alone, with_lower, lambda leaf: False):
        parts = split_epochs(event, adjacency, keep)
        if parts is None or parts[2] in tried:
            continue  # (a stage that replaces as many epochs as one before replaces the same)
        tried.add(parts[2])
        upper, rest, replaced = parts
        found: list[EpsilonBound | DeltaBound] = []
        why: list[tuple[str, str]] = []
        for name, factory in factories:
            _run(name, factory, canonical(upper), adjacency, delta, epsilon, None, found, why)
        if not found:
            continue
        lower = 0.0
        if rest is not None:
            with contextlib.suppress(UnsupportedEventError):
                sub = account(rest, adjacency, delta=delta, epsilon=epsilon).bound
                lower = _lower(sub)
        epochs = "epoch" if replaced == 1 else "epochs"
        note = f"{replaced} distinct {epochs} bounded by their releases without amplification"
        out: list[EpsilonBound | DeltaBound] = []
        for bound in found:
            extra = {**bound.details, "no_amplification": note}
            method = f"{bound.method} (no amplification)"
            if isinstance(bound, EpsilonBound):
                out.append(attrs.evolve(bound, epsilon_lower=lower, method=method, details=extra))
            else:
                out.append(attrs.evolve(bound, delta_lower=lower, method=method, details=extra))
        return out
    unavailable.append(("no amplification", "no backend bounds the epochs' releases either"))
    return []


#: the core leaf classes that are not tabulated profiles (passed over in bulk by the walk)
_NOT_TABULATED = CORE_LEAVES - {TabulatedProfileEvent}


def _is_tabulated(event: Event) -> bool:
    return isinstance(event, TabulatedProfileEvent)


@contextlib.contextmanager
def _upper_only_after_exact(
    candidates: Sequence[EpsilonBound | DeltaBound], default_mode: bool
) -> Iterator[None]:
    """In default mode, once a backend's bracket is exact (within EXACT_BRACKET), the next ones
    run in upper-only mode: their upper bounds stay a cross-check of it, and their lower
    bounds, which could not narrow the bracket, are not refined (a single exponential mechanism
    at delta = 1e-15 took seconds of PLD passes for a bracket the closed form gives exactly)."""
    if not (default_mode and any(_exact(c) for c in candidates)):
        yield
        return
    from dpledger.accountant.pld import upper_only

    with upper_only():
        yield


def _exact(bound: EpsilonBound | DeltaBound) -> bool:
    """Whether a bound's certified bracket is exact: relative width at most EXACT_BRACKET, or
    an upper bound of 0."""
    top, bottom = _upper(bound), _lower(bound)
    if top == 0.0:
        return True  # [0, 0]: e.g. delta 0 at or above a pure epsilon
    return math.isfinite(top) and bottom > 0 and top - bottom <= EXACT_BRACKET * top


def _bracket(candidates: Sequence[EpsilonBound | DeltaBound]) -> EpsilonBound | DeltaBound:
    """The smallest certified upper bound, with the largest certified lower bound (capped by
    it) beside it, once the candidates are checked to be consistent."""
    _check_consistency(candidates)
    best = min(candidates, key=_upper)
    lower = min(max(_lower(c) for c in candidates), _upper(best))
    if isinstance(best, EpsilonBound):
        return attrs.evolve(best, epsilon_lower=lower)
    return attrs.evolve(best, delta_lower=lower)


def _run(
    name: str,
    factory: Callable[[Adjacency], Accountant],
    event: Event,
    adjacency: Adjacency,
    delta: float | None,
    epsilon: float | None,
    budget: Budget | None,
    candidates: list[EpsilonBound | DeltaBound],
    unavailable: list[tuple[str, str]],
    tabulated: bool | None = None,
) -> None:
    """Compose ``event`` (canonical; holding a tabulated profile or not, by ``tabulated``,
    None: unknown) in a new accountant of one backend and query it: its bound goes to
    ``candidates``, or why it gave none to ``unavailable``."""
    acc = factory(adjacency)
    # checked once: composing the same event reads the check back (Accountant._checked_reason)
    why = acc._checked_reason(event)
    if why is not None:
        unavailable.append((name, f"unsupported: {why}"))
        return
    acc.budget = budget
    # the PRV library allocates freely: budgeted PRV queries run in a forked, capped child
    acc.isolate = acc.isolate or name == "prv"
    try:
        acc._compose_canonical(event, 1, tabulated)
        if delta is not None:
            candidates.append(acc.get_epsilon(delta))
        else:
            assert epsilon is not None
            candidates.append(acc.get_delta(epsilon))
    except BoundUnavailable as exc:
        unavailable.append((name, exc.reason))
    except UnsupportedEventError as exc:
        unavailable.append((name, str(exc)))


def _expensive(
    name: str, event: Event, candidates: Sequence[EpsilonBound | DeltaBound]
) -> str | None:
    """Why a cross-check is skipped in default mode (None: it runs, within its budget)."""
    finite = any(math.isfinite(_upper(c)) for c in candidates)
    if not finite:
        return None  # no tight bound: the cross-checks are the only hope, run them
    if name == "prv":
        return (
            "skipped: PRV cross-check runs on request only (crosscheck=True, "
            "dpledger account --crosscheck); it never gave the reported bound"
        )
    if not _tight(candidates):
        return None  # PLD declined or left a loose bracket: the cross-check may narrow it
    distinct = len({leaf for leaf, _ in flatten(event)})
    if distinct > CHEAP_DISTINCT_LEAVES:
        tight = TIGHT_BRACKET if isinstance(candidates[0], EpsilonBound) else TIGHT_DELTA_BRACKET
        return (
            f"skipped: {distinct} distinct releases exceed the default cross-check size "
            f"({CHEAP_DISTINCT_LEAVES}) and the PLD bracket is within "
            f"{tight - 1:.0%}; run with crosscheck=True"
        )
    return None


def _tight(candidates: Sequence[EpsilonBound | DeltaBound]) -> bool:
    """Whether the PLD backend gave a bracket within TIGHT_BRACKET (an epsilon) or
    TIGHT_DELTA_BRACKET (a delta): a cross-check, which certifies no lower bound, could then
    lower the upper bound by less than that."""
    for c in candidates:
        if c.method == "pld" and math.isfinite(_upper(c)):
            tight = TIGHT_BRACKET if isinstance(c, EpsilonBound) else TIGHT_DELTA_BRACKET
            return _upper(c) <= tight * _lower(c)
    return False


def _upper(b: EpsilonBound | DeltaBound) -> float:
    return b.epsilon if isinstance(b, EpsilonBound) else b.delta


def _lower(b: EpsilonBound | DeltaBound) -> float:
    return b.epsilon_lower if isinstance(b, EpsilonBound) else b.delta_lower


def _check_consistency(candidates: Sequence[EpsilonBound | DeltaBound]) -> None:
    lo = max(candidates, key=_lower)
    hi = min(candidates, key=_upper)
    floor = CONSISTENCY_SLACK if isinstance(hi, EpsilonBound) else DELTA_CONSISTENCY_FLOOR
    if _lower(lo) > _upper(hi) * (1 + CONSISTENCY_SLACK) + floor:
        raise BackendInconsistencyError(
            f"{lo.method} certifies a lower bound {_lower(lo):.6g} above {hi.method}'s upper "
            f"bound {_upper(hi):.6g}; one backend is wrong, so no bound is reported"
        )
