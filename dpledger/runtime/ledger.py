"""The runtime privacy ledger: every bit of noise and every sample a method draws goes through it.

A method declares the event it may spend (``MethodSpec.declare``); its ``run`` then gets a
:class:`PrivacyLedger` built on that declaration and must use the ledger's primitives for all
noise and sampling. Each primitive records the event it *executes* (as core events) and is
checked against the declaration *before* any noise is drawn: a step that is not covered raises
:class:`~dpledger.core.errors.LedgerViolationError` naming the step, so nothing noisy is
returned. :func:`run_verified` runs a method and releases its outputs only after
:meth:`PrivacyLedger.verify` has passed.

The comparison is deliberately simple and sound. Both events are flattened
(:func:`dpledger.core.events.flatten`) into multisets of leaf (or sampled) events, and every
executed step must be matched to its own declared step that *dominates* it: the same kind, a
noise multiplier at least as large, an epsilon at most as large, a sampling rate at most as
large (a sampled step is matched inside declared sampled steps recursively). The matching is a
maximum flow, so the order of steps does not matter.

Sensitivity. ``sensitivity`` is the per-record *add/remove* contribution bound of the query
(the adjacency object carries the factor of a replace-one relation; see
:mod:`dpledger.core.events`). After :meth:`PrivacyLedger.clip_rows_l2` the clip bound stays in
force: a noise call that claims a smaller sensitivity is booked with the clip bound, i.e. with a
proportionally smaller effective noise multiplier, and so fails verification.

Floating point. The noise comes from a numpy ``Generator`` and is added in floating point.
Textbook floating-point samplers are *porous* (Mironov, CCS 2012: the set of reachable outputs
depends on the input, which can break differential privacy outright; Jin et al., S&P 2022 show
the same for the Gaussian). The guarantees accounted here are those of the ideal real-valued
mechanisms ("idealized numerics"). ``secure=True`` seeds the generator from the operating
system's CSPRNG (``secrets``), so the seed cannot be guessed or replayed; it does **not** make
the stream cryptographic and does **not** fix floating-point porosity.
"""

from __future__ import annotations

import math
import secrets
from collections import Counter
from collections.abc import Callable, Hashable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from dpledger.core.adjacency import Adjacency
from dpledger.core.declaration import Declaration, frozen_copy
from dpledger.core.errors import InvalidParameterError, LedgerViolationError, PluginError
from dpledger.core.events import (
    ComposedEvent,
    Event,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    RandomAllocationEvent,
    ReportNoisyMaxEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    ShuffledBatchesEvent,
    flatten,
)
from dpledger.runtime.coverage import (
    canonical_multiset,
    canonical_step,
    describe_step,
    explain_uncovered,
    multiset_covered,
)
from dpledger.runtime.sample_record import PoissonDraws, move_to_private
from dpledger.runtime.units import (
    DataUnits,
    bound_arguments,
    check_sample_size,
    codes_of,
    first_rows_per_unit,
    grouping,
    sums_per_unit,
)

if TYPE_CHECKING:
    pass

FloatArray = NDArray[np.float64]

#: relative shrink applied to clipped rows so that rounding never leaves a norm above the bound
_CLIP_SHRINK = 1.0 - 8.0 * np.finfo(np.float64).eps


# ---------------------------------------------------------------------------------------------
# The ledger
# ---------------------------------------------------------------------------------------------
def _check_step(step: Any) -> str:
    if not isinstance(step, str) or not step:
        raise InvalidParameterError("step", f"must be a non-empty name, got {step!r}", "name it")
    return step


def _positive(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.floating | np.integer):
        raise InvalidParameterError(name, f"expected a number, got {value!r}", "pass a float")
    v = float(value)
    if not (v > 0 and math.isfinite(v)):
        raise InvalidParameterError(name, f"must be > 0 and finite, got {value!r}", "pass e.g. 1.0")
    return v


def _finite_array(name: str, values: Any) -> FloatArray:
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidParameterError(name, "is not numeric", "pass an array of numbers") from None
    if not np.all(np.isfinite(arr)):
        raise InvalidParameterError(name, "contains NaN or infinite values", "clean the input")
    return arr


def _count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise InvalidParameterError(name, f"must be an integer >= 1, got {value!r}", "pass e.g. 1")
    return int(value)


class Sample:
    """A drawn sample; use it as a context manager around the steps that run on it.

    ``indices`` may be empty (a Poisson sample of size zero is a valid outcome and is never
    re-drawn: re-drawing would break the Poisson analysis).
    """

    def __init__(
        self,
        ledger: PrivacyLedger,
        kind: str,
        step: str,
        wrap: Callable[[Event], Event],
        indices: NDArray[np.int64],
    ) -> None:
        self._ledger = ledger
        self.kind = kind
        self.step = step
        self.indices = indices
        self._wrap = wrap
        self._inner: list[Event] = []
        self._open = False
        self._closed = False
        #: random size (Poisson, random allocation): its steps are logged privately
        #: (:mod:`dpledger.runtime.sample_record`); ``drawn_on_top``: drawn in no other sample
        self.random_size = kind in ("poisson", "allocation")
        self.drawn_on_top = kind == "poisson" and not ledger._scopes
        self._log_start = 0

    def __len__(self) -> int:
        return int(self.indices.size)

    def replaced_entry(self) -> int | None:
        """Index of the ledger entry that this scope's event replaces when it closes (None: the
        event is a new entry)."""
        return None

    def wrapped(self, extra: Event | None = None) -> Event | None:
        """The executed sampled event (with ``extra`` appended inside); None if empty."""
        inner = [*self._inner, *([extra] if extra is not None else [])]
        if not inner:
            return None
        return self._wrap(inner[0] if len(inner) == 1 else ComposedEvent(inner))

    def __enter__(self) -> Sample:
        if self._open or self._closed:
            raise PluginError(f"sample {self.step!r} can be entered only once")
        if self.drawn_on_top and self._ledger._scopes:
            raise PluginError(
                f"sample {self.step!r} was drawn outside any sample but is entered inside "
                f"{self._ledger._scopes[-1].step!r}. Fix: draw it where it runs"
            )
        self._open = True
        self._ledger._scopes.append(self)
        self._log_start = len(self._ledger.log)
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._ledger._scopes or self._ledger._scopes[-1] is not self:
            raise PluginError(f"{self._label()} closed out of order")
        self._ledger._scopes.pop()
        self._open = False
        self._closed = True
        if self.random_size:
            ledger = self._ledger
            move_to_private(ledger.log, ledger.private_log, self._log_start, self._label())
        self._book()

    def _label(self) -> str:
        return f"sample {self.step!r}"

    def _book(self) -> None:
        """Book what ran inside, once the scope has closed."""
        event = self.wrapped()
        if event is not None:
            if self.drawn_on_top:
                self._ledger._poisson_draws.booked(len(self._ledger._entries))
            self._ledger._append(event, self.step, checked=True)


class ShuffledBatch(Sample):
    """One batch of a :class:`ShuffledEpoch`; use it as a context manager around the steps that
    run on it (like :class:`Sample`). Its steps are booked as part of the epoch's one
    :class:`~dpledger.core.events.ShuffledBatchesEvent`."""

    def __init__(self, epoch: ShuffledEpoch, position: int, indices: NDArray[np.int64]) -> None:
        super().__init__(epoch._ledger, "shuffle", epoch.step, lambda e: e, indices)
        self._epoch = epoch
        self.position = position
        self.random_size = isinstance(epoch, AllocatedEpoch)

    def replaced_entry(self) -> int | None:
        return self._epoch._index

    def wrapped(self, extra: Event | None = None) -> Event | None:
        inner = [*self._inner, *([extra] if extra is not None else [])]
        return self._epoch._event(inner)

    def __enter__(self) -> ShuffledBatch:
        if self._ledger._scopes:
            raise PluginError(
                f"batch {self.position} of {self.step!r} is entered inside the open sample "
                f"{self._ledger._scopes[-1].step!r}; run shuffled epochs at the top level"
            )
        super().__enter__()
        return self

    def _label(self) -> str:
        return f"batch {self.position} of {self.step!r}"

    def _book(self) -> None:
        self._epoch._close(self._inner)


class ShuffledEpoch:
    """One epoch of shuffled fixed-size batches (:meth:`PrivacyLedger.shuffle_batches`).

    Iterate over it for its batches, in order; enter each batch (``with batch:``) around the
    steps that run on it. A record is in exactly one batch, so the epoch is booked as one
    ``ShuffledBatchesEvent(n, batch_size, inner)`` whose ``inner`` holds, for each kind of
    step, the most any batch ran (a batch that runs nothing costs nothing).
    """

    def __init__(
        self, ledger: PrivacyLedger, step: str, n: int, batch_size: int, order: NDArray[np.int64]
    ) -> None:
        self._ledger = ledger
        self.step = step
        self.source_size = n
        self.batch_size = batch_size
        self._index: int | None = None
        self._most: Counter[Hashable] = Counter()
        self._leaf: dict[Hashable, Event] = {}
        self.batches = tuple(
            ShuffledBatch(self, i, np.sort(order[start : start + batch_size]).astype(np.int64))
            for i, start in enumerate(range(0, n, batch_size))
        )

    def __iter__(self) -> Iterator[ShuffledBatch]:
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)

    def _counts(self, inner: list[Event]) -> Counter[Hashable]:
        counts: Counter[Hashable] = Counter()
        for leaf, k in flatten(ComposedEvent(inner)):
            key = canonical_step(leaf)
            self._leaf.setdefault(key, leaf)
            counts[key] += k
        return counts

    def _event(self, inner: list[Event]) -> Event | None:
        """The epoch's event if one more batch ran ``inner`` (None if no batch ran anything):
        for each kind of step, the most any batch ran."""
        most = self._most | self._counts(inner)
        if not most:
            return None
        parts: list[Event] = [
            self._leaf[key] if c == 1 else SelfComposedEvent(self._leaf[key], c)
            for key, c in sorted(most.items(), key=lambda kv: repr(kv[0]))
        ]
        return self._epoch_event(parts[0] if len(parts) == 1 else ComposedEvent(parts))

    def _epoch_event(self, body: Event) -> Event:
        """The epoch's event around what one batch runs at most."""
        return ShuffledBatchesEvent(self.source_size, self.batch_size, body)

    def _close(self, inner: list[Event]) -> None:
        event = self._event(inner)
        self._most |= self._counts(inner)
        if event is not None:
            self._ledger._book_epoch(self, event)


class AllocatedEpoch(ShuffledEpoch):
    """One epoch of random allocation (:meth:`PrivacyLedger.allocate`): each record is in
    ``num_selected`` of the ``num_steps`` steps. Iterate over it for the steps, in order, and
    enter each (``with batch:``) around what runs on it. The epoch is booked as one
    ``RandomAllocationEvent(num_steps, inner, num_selected)`` whose ``inner`` holds, for each
    kind of step, the most any step ran (a step that runs less is a post-processing of it)."""

    def __init__(
        self,
        ledger: PrivacyLedger,
        step: str,
        n: int,
        num_steps: int,
        num_selected: int,
        members: list[NDArray[np.int64]],
    ) -> None:
        self._ledger = ledger
        self.step = step
        self.source_size = n
        self.num_steps = num_steps
        self.num_selected = num_selected
        self._index: int | None = None
        self._most: Counter[Hashable] = Counter()
        self._leaf: dict[Hashable, Event] = {}
        self.batches = tuple(ShuffledBatch(self, i, idx) for i, idx in enumerate(members))

    def _epoch_event(self, body: Event) -> Event:
        return RandomAllocationEvent(self.num_steps, body, self.num_selected)


def selection_epsilon(epsilon: float, adjacency: Adjacency) -> float:
    """The epsilon of a selection mechanism whose parameter is ``epsilon`` and whose scores have
    add/remove sensitivity as stated, under ``adjacency``'s relation (rounded up)."""
    factor = adjacency.sensitivity_factor
    if factor == 1.0:
        return float(epsilon)
    value = factor * float(epsilon)
    return math.nextafter(value, math.inf) if value < math.inf else value


def make_rng(
    seed: int | np.random.Generator | None = None, *, secure: bool = False
) -> np.random.Generator:
    """A numpy Generator: seeded, fresh, or (``secure``) keyed from the OS CSPRNG."""
    if secure:
        if seed is not None:
            raise InvalidParameterError(
                "seed", "a secure generator cannot be seeded", "drop the seed or secure=True"
            )
        return np.random.Generator(np.random.Philox(key=secrets.randbits(128)))
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise InvalidParameterError("seed", f"must be an integer >= 0, got {seed!r}", "pass 0")
    return np.random.default_rng(seed)


class PrivacyLedger:
    """Records executed privacy events and refuses any step the declaration does not cover."""

    def __init__(
        self,
        declared: Event | Declaration,
        adjacency: Adjacency | None = None,
        rng: np.random.Generator | int | None = None,
        *,
        secure: bool = False,
        units: DataUnits | None = None,
    ) -> None:
        if isinstance(declared, Event):
            declared = Declaration(declared, "row")
        if not isinstance(declared, Declaration):
            raise InvalidParameterError(
                "declared",
                f"must be an Event or a Declaration, got {type(declared).__name__}",
                "pass an event",
            )
        self.adjacency = adjacency or Adjacency()
        if declared.unit == "user" and self.adjacency.unit != "user":
            raise InvalidParameterError(
                "declared",
                "a user-level declaration needs a user-level adjacency",
                "declare the row-level event, or pass Adjacency(unit='user', unit_key=...)",
            )
        #: the ledger's own copy: nothing the method holds can change what is enforced
        self.declaration = Declaration(frozen_copy(declared.event), declared.unit)
        self.declared = self.declaration.event
        self.secure = secure
        self.rng = make_rng(rng, secure=secure)
        self._declared_ms = canonical_multiset(frozen_copy(self.declared))
        self._entries: list[Event] = []
        self._counts: Counter[Hashable] = Counter()
        self._scopes: list[Sample] = []
        self._clip_l2: tuple[float, str] | None = None
        #: steps that enforced the privacy unit (grouping, contribution bound, per-unit clip)
        self.unit_steps: list[str] = []
        #: rows one unit may contribute (the largest ``bound_units`` bound; stays in force)
        self._rows_per_unit: int | None = None
        if units is not None and not isinstance(units, DataUnits):
            raise InvalidParameterError(
                "units", f"got {type(units).__name__}", "pass units_from_data(data, adjacency)"
            )
        #: the unit key of every row, read from the data by the runner (never by the method)
        self._units = units
        #: data-independent facts of every step (safe to publish with the outputs)
        self.log: list[dict[str, Any]] = []
        #: data-dependent diagnostics (realised sample sizes, row counts): never publish
        self.private_log: list[dict[str, Any]] = []
        #: the Poisson samples drawn outside any other sample (stated publicly as declared)
        self._poisson_draws = PoissonDraws()

    @property
    def units(self) -> DataUnits | None:
        """The unit keys the runner read from the data (None: a ledger given none)."""
        return self._units

    # -- bookkeeping -------------------------------------------------------------------
    def _candidate(self, event: Event) -> tuple[Event, Counter[Hashable]]:
        """The top-level entry ``event`` becomes (wrapped by open scopes) and the new counts."""
        entry: Event | None = event
        for scope in reversed(self._scopes):
            entry = scope.wrapped(entry)
        assert entry is not None
        counts = Counter(self._counts)
        replaced = self._scopes[0].replaced_entry() if self._scopes else None
        if replaced is not None:  # an open shuffled epoch: its booked event is superseded
            for step, c in canonical_multiset(self._entries[replaced]):
                counts[step] -= c
        for step, c in canonical_multiset(entry):
            counts[step] += c
        return entry, counts

    def _check(self, event: Event, step: str) -> None:
        # open samples are not in the counts yet: the candidate entry holds all their steps
        entry, counts = self._candidate(event)
        executed = tuple(
            sorted(((k, v) for k, v in counts.items() if v > 0), key=lambda kv: repr(kv[0]))
        )
        if not multiset_covered(executed, self._declared_ms):
            culprit = canonical_step(flatten(entry)[0][0]) if flatten(entry) else entry
            reason = explain_uncovered(culprit, executed, self._declared_ms)
            label = repr(step)
            if self._scopes and isinstance(self._scopes[0], ShuffledBatch):
                batch = self._scopes[0]
                label = f"{step!r} (batch {batch.position} of epoch {batch.step!r})"
            raise LedgerViolationError(
                f"step {label}: executed {describe_step(culprit)} is not covered by the declared "
                f"{self.declared.describe()}: {reason}. Fix: make run() match declare()"
            )

    def _record(self, event: Event, step: str, detail: dict[str, Any]) -> None:
        """Check ``event`` against the declaration, then book it (before any noise is drawn)."""
        self._check(event, step)
        self.log.append({"step": step, "event": event.to_dict(), **detail})
        self._append(event, step, checked=True)

    def _append(self, event: Event, step: str, *, checked: bool) -> None:
        if self._scopes:
            self._scopes[-1]._inner.append(event)
            return
        if not checked:
            self._check(event, step)
        self._entries.append(event)
        for s, c in canonical_multiset(event):
            self._counts[s] += c

    def _rows_of_one_unit(self, step: str) -> int:
        """How many rows of one unit a row-level step may see: 1 on a row-level ledger; on a
        user-level ledger, the contribution bound in force (refused if there is none)."""
        if self.declaration.unit != "user":
            return 1
        if self._rows_per_unit is None:
            raise LedgerViolationError(
                f"step {step!r}: the method declares a user-level event, but this row-level "
                "step runs while no contribution bound is in force, so one unit's share of it "
                "is unbounded. Fix: call ledger.bound_units(k) before it, or pass "
                "per_unit=True to a clipped sum"
            )
        return self._rows_per_unit

    def _unit_note(self, k: int) -> str:
        return f"one unit contributes up to {k} rows (bound_units)" if k > 1 else ""

    def _effective(self, sensitivity: float, norm: str, dim: int) -> tuple[float, str]:
        if self._clip_l2 is None:
            return sensitivity, ""
        bound, clip_step = self._clip_l2
        implied = bound if norm == "l2" else bound * math.sqrt(max(dim, 1))
        if sensitivity >= implied:
            return sensitivity, ""
        return implied, (
            f"claimed sensitivity {sensitivity!r} is below the {norm.upper()} bound {implied!r} "
            f"implied by the clip at step {clip_step!r}"
        )

    # -- clipping ----------------------------------------------------------------------
    def clip_rows_l2(self, x: Any, bound: float, *, step: str = "clip") -> FloatArray:
        """Scale each row of ``x`` to L2 norm at most ``bound``; the bound stays in force."""
        step = _check_step(step)
        c = _positive("bound", bound)
        arr = _finite_array("x", x)
        if arr.ndim == 0:
            raise InvalidParameterError("x", "must have one row per record", "pass a 2-D array")
        rows = arr.reshape(arr.shape[0], int(np.prod(arr.shape[1:], dtype=np.int64)))
        peak = np.max(np.abs(rows), axis=1, initial=0.0)
        safe = np.where(peak > 0, peak, 1.0)
        norms = peak * np.linalg.norm(rows / safe[:, None], axis=1)  # no overflow for huge rows
        factor = np.where(
            norms > c, (c / np.maximum(norms, np.finfo(float).tiny)) * _CLIP_SHRINK, 1.0
        )
        clipped = rows * factor[:, None]
        self._clip_l2 = (c, step)
        self.log.append({"step": step, "clip_l2": c})
        self.private_log.append({"step": step, "rows": int(rows.shape[0])})
        return clipped.reshape(arr.shape)

    # -- the privacy unit ----------------------------------------------------------------
    def bound_units(
        self,
        max_contributions: Any,
        *old: Any,
        rows: Any = None,
        part: int | None = None,
        step: str = "bound_units",
    ) -> NDArray[np.int64]:
        """Indices (into the data) of the rows to keep: at most ``max_contributions`` per unit.

        The units are the ledger's own: the adjacency's ``unit_key`` column, read from the data
        by the runner before the method ran. ``rows`` (indices into the data; default: every
        row) are the rows to bound, ``part`` the part of the data they index (e.g. the time of
        per-time ``ids``; default: the only part). A unit's first ``max_contributions`` rows in
        the order of ``rows`` are kept: the decision for a unit depends on that unit's rows
        only, so adding or removing one unit changes at most ``max_contributions`` kept rows.
        Records that the run enforced the unit (required by a user-level declaration). The old
        form ``bound_units(keys, k)`` runs only if ``keys`` group the rows as the data does.

        The bound stays in force: on a user-level ledger every later row-level step (a stated
        sensitivity, a row clip, selection scores) is booked at ``max_contributions`` times its
        row sensitivity, since one unit may contribute that many rows to it (the largest bound
        of any call counts).
        """
        step = _check_step(step)
        keys, k = bound_arguments(max_contributions, old)
        codes = codes_of(self._units, rows, part, keys, step)
        positions = first_rows_per_unit(codes, k)
        keep = positions if rows is None else np.asarray(rows, dtype=np.int64)[positions]
        self._rows_per_unit = max(k, self._rows_per_unit or 0)
        self.unit_steps.append(step)
        self.log.append({"step": step, "bound_units": k})
        self.private_log.append({"step": step, "rows": int(codes.size), "kept": int(keep.size)})
        return keep

    def _clipped_sum(
        self,
        contributions: Any,
        clip_norm: float,
        norm: str,
        step: str,
        codes: NDArray[np.int64] | None,
    ) -> tuple[FloatArray, tuple[int, ...], float]:
        c = _positive("clip_norm", clip_norm)
        arr = _finite_array("contributions", contributions)
        if arr.ndim == 0:
            raise InvalidParameterError(
                "contributions", "must have one row per record", "pass a 1-D or 2-D array"
            )
        shape = tuple(int(d) for d in arr.shape[1:])
        rows = arr.reshape(arr.shape[0], int(np.prod(shape, dtype=np.int64)))
        if codes is not None:
            rows = sums_per_unit(rows, codes, step)
            self.unit_steps.append(step)
        if self._scopes and rows.shape[0] != len(self._scopes[-1]):
            sample = self._scopes[-1]
            what = "units" if codes is not None else "rows"
            raise LedgerViolationError(
                f"step {step!r}: the contributions have {rows.shape[0]} {what}, but the open "
                f"sample {sample.step!r} holds {len(sample)}: the sampling bound is credited "
                "only to the sampled records. Fix: pass the rows of sample.indices"
            )
        if norm == "l2":
            size = np.linalg.norm(rows, axis=1) if rows.size else np.zeros(rows.shape[0])
        else:
            size = np.abs(rows).sum(axis=1) if rows.size else np.zeros(rows.shape[0])
        factor = np.where(
            size > c, (c / np.maximum(size, np.finfo(float).tiny)) * _CLIP_SHRINK, 1.0
        )
        total = (rows * factor[:, None]).sum(axis=0)
        per = "unit" if codes is not None else "row"
        self.log.append({"step": f"{step}.clip", f"clip_{norm}": c, "per": per})
        self.private_log.append({"step": f"{step}.clip", "rows": int(arr.shape[0])})
        return total, shape, c

    def clipped_sum_gaussian(
        self,
        contributions: Any,
        clip_norm: float,
        noise_multiplier: float,
        *,
        step: str,
        per_unit: bool = False,
        rows: Any = None,
        part: int | None = None,
        unit_keys: Any = None,
    ) -> Any:
        """Sum of per-record contributions clipped to L2 norm ``clip_norm``, plus Gaussian noise.

        The framework clips, so the sensitivity accounted is the one enforced: ``clip_norm``
        under add/remove. With ``per_unit=True`` each unit's rows are summed first and the
        unit's total is clipped: the sensitivity is then per unit (user level), and the step
        counts as enforcing the unit. The units are the ledger's own (read from the data):
        ``contributions`` holds one row per data row, or per row of ``rows`` (indices into the
        data, in ``part``; see :meth:`bound_units`). ``unit_keys`` (the old form) is accepted
        only if it groups the rows as the data does. Books ``GaussianEvent(noise_multiplier)``.
        """
        step = _check_step(step)
        _positive("noise_multiplier", noise_multiplier)
        codes = grouping(self._units, per_unit, rows, part, unit_keys, step)
        total, shape, c = self._clipped_sum(contributions, clip_norm, "l2", step, codes)
        return self._gaussian(
            total.reshape(shape) if shape else total[0],
            c,
            noise_multiplier,
            step=step,
            per_unit=codes is not None,
        )

    def clipped_sum_laplace(
        self,
        contributions: Any,
        clip_norm: float,
        noise_multiplier: float,
        *,
        step: str,
        per_unit: bool = False,
        rows: Any = None,
        part: int | None = None,
        unit_keys: Any = None,
    ) -> Any:
        """Sum of per-record contributions clipped to L1 norm ``clip_norm``, plus Laplace noise
        of scale ``noise_multiplier * clip_norm``; the unit arguments as in
        :meth:`clipped_sum_gaussian`. Books ``LaplaceEvent(noise_multiplier)``."""
        step = _check_step(step)
        _positive("noise_multiplier", noise_multiplier)
        codes = grouping(self._units, per_unit, rows, part, unit_keys, step)
        total, shape, c = self._clipped_sum(contributions, clip_norm, "l1", step, codes)
        scale = noise_multiplier * c
        k = 1 if codes is not None else self._rows_of_one_unit(step)
        event = LaplaceEvent(float(noise_multiplier) / k)
        detail = {"sensitivity": c, "scale": scale, "norm": "l1", "note": self._unit_note(k)}
        self._record(event, step, detail)
        noisy = total + self.rng.laplace(0.0, scale, size=total.shape)
        return noisy.reshape(shape) if shape else float(noisy[0])

    # -- additive noise ----------------------------------------------------------------
    def gaussian(
        self, values: Any, sensitivity: float, noise_multiplier: float, *, step: str
    ) -> Any:
        """``values + N(0, (noise_multiplier * sensitivity)^2)``; books GaussianEvent.

        ``sensitivity`` is that of one row (of one unit, on a user-level ledger only once a
        per-unit clip produced ``values``; see :meth:`bound_units`)."""
        return self._gaussian(values, sensitivity, noise_multiplier, step=step, per_unit=False)

    def _gaussian(
        self, values: Any, sensitivity: float, noise_multiplier: float, *, step: str, per_unit: bool
    ) -> Any:
        step = _check_step(step)
        s = _positive("sensitivity", sensitivity)
        m = _positive("noise_multiplier", noise_multiplier)
        arr = _finite_array("values", values)
        eff, note = self._effective(s, "l2", arr.size)
        k = 1 if per_unit else self._rows_of_one_unit(step)
        note = "; ".join(n for n in (note, self._unit_note(k)) if n)
        event = GaussianEvent(m if eff * k == s else m * s / (eff * k))
        try:
            self._record(event, step, {"sensitivity": s, "std": m * s, "note": note})
        except LedgerViolationError as exc:
            raise LedgerViolationError(f"{exc} ({note})" if note else str(exc)) from None
        out = arr + self.rng.normal(0.0, m * s, size=arr.shape)
        return float(out) if out.ndim == 0 else out

    def laplace(
        self, values: Any, sensitivity: float, noise_multiplier: float, *, step: str
    ) -> Any:
        """``values + Laplace(noise_multiplier * sensitivity)`` (L1); books LaplaceEvent."""
        step = _check_step(step)
        s = _positive("sensitivity", sensitivity)
        m = _positive("noise_multiplier", noise_multiplier)
        arr = _finite_array("values", values)
        eff, note = self._effective(s, "l1", arr.size)
        k = self._rows_of_one_unit(step)
        note = "; ".join(n for n in (note, self._unit_note(k)) if n)
        event = LaplaceEvent(m * s / (eff * k))
        try:
            self._record(event, step, {"sensitivity": s, "scale": m * s, "note": note})
        except LedgerViolationError as exc:
            raise LedgerViolationError(f"{exc} ({note})" if note else str(exc)) from None
        out = arr + self.rng.laplace(0.0, m * s, size=arr.shape)
        return float(out) if out.ndim == 0 else out

    # -- selection ---------------------------------------------------------------------
    def _scores(self, scores: Any) -> FloatArray:
        arr = _finite_array("scores", scores)
        if arr.ndim != 1 or arr.size == 0:
            raise InvalidParameterError("scores", "must be a non-empty 1-D array", "pass a vector")
        return arr

    def charge(self, event: Event, *, step: str, reason: str = "") -> None:
        """Book a privacy cost that no draw carries, e.g. the failure probability of a
        data-independent bound (an ``ApproxDPEvent(0, p)``). Checked against the declaration
        like every other step; ``reason`` goes into the log."""
        step = _check_step(step)
        if not isinstance(event, Event):
            raise InvalidParameterError(
                "event", f"must be an Event, got {type(event).__name__}", "pass the charged event"
            )
        self._record(event, step, {"reason": reason} if reason else {})

    def sample_certified(
        self,
        sampler: Callable[[np.random.Generator], Any],
        event: Event,
        *,
        step: str,
        note: str = "",
    ) -> Any:
        """Run ``sampler(rng)`` as one release whose privacy ``event`` certifies.

        For mechanisms the ledger cannot draw itself, e.g. sampling the law of a flow whose
        epsilon a theorem states (e.g. the SHK plugin's ``TimeProfiledPureDPEvent``). The
        event is checked against the declaration and booked *before* the sampler runs; the
        sampler gets the ledger's generator so the run stays reproducible. ``note`` (e.g. which
        approximation of the certified law was sampled) goes into the log.
        """
        step = _check_step(step)
        if not isinstance(event, Event):
            raise InvalidParameterError(
                "event",
                f"must be an Event, got {type(event).__name__}",
                "pass the certifying event",
            )
        if not callable(sampler):
            raise InvalidParameterError("sampler", "must be callable", "pass a function of an rng")
        self._record(event, step, {"note": note} if note else {})
        return sampler(self.rng)

    def _selection_epsilon(self, epsilon: float, step: str) -> float:
        """The epsilon a selection step spends under this ledger's relation and unit.

        ``sensitivity`` is the add/remove bound of every score for one row; replacing a record
        can move a score by twice that, so under replace-one the mechanism at parameter
        ``epsilon`` is ``2 * epsilon``-DP (rounded up); on a user-level ledger one unit moves a
        score by its rows' share (:meth:`bound_units`). The booked event states the epsilon
        for the declared unit under the relation.
        """
        k = self._rows_of_one_unit(step)
        eps = selection_epsilon(epsilon, self.adjacency)
        return eps if k == 1 else math.nextafter(eps * k, math.inf)

    def exponential_mechanism(
        self, scores: Any, sensitivity: float, epsilon: float, *, step: str, monotonic: bool = False
    ) -> int:
        """Index ``i`` with probability proportional to ``exp(epsilon * s_i / (2 * sensitivity))``.

        With ``monotonic=True`` (scores move in one direction between neighbours) the factor 2
        is dropped. Sampled exactly via the Gumbel-max trick; books ExponentialMechanismEvent.
        """
        step = _check_step(step)
        s = _positive("sensitivity", sensitivity)
        eps = _positive("epsilon", epsilon)
        arr = self._scores(scores)
        self._record(
            ExponentialMechanismEvent(self._selection_epsilon(eps, step)), step, {"sensitivity": s}
        )
        scale = (1.0 if monotonic else 2.0) * s / eps
        return int(np.argmax(arr / scale + self.rng.gumbel(size=arr.shape)))

    def report_noisy_max(
        self, scores: Any, sensitivity: float, epsilon: float, *, step: str, monotonic: bool = False
    ) -> int:
        """Argmax of scores + Laplace(2 * sensitivity / epsilon); books ReportNoisyMaxEvent."""
        step = _check_step(step)
        s = _positive("sensitivity", sensitivity)
        eps = _positive("epsilon", epsilon)
        arr = self._scores(scores)
        self._record(
            ReportNoisyMaxEvent(self._selection_epsilon(eps, step)), step, {"sensitivity": s}
        )
        scale = (1.0 if monotonic else 2.0) * s / eps
        return int(np.argmax(arr + self.rng.laplace(0.0, scale, size=arr.shape)))

    def noisy_top_k(
        self,
        scores: Any,
        sensitivity: float,
        epsilon: float,
        k: int,
        *,
        step: str,
        monotonic: bool = False,
    ) -> NDArray[np.int64]:
        """Top ``k`` indices of scores plus Gumbel noise (one shot).

        Equal in distribution to ``k`` rounds of peeling exponential mechanisms at ``epsilon``
        each (Durfee & Rogers 2019), and booked as ``k`` ExponentialMechanismEvents.
        """
        step = _check_step(step)
        s = _positive("sensitivity", sensitivity)
        eps = _positive("epsilon", epsilon)
        arr = self._scores(scores)
        if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 1 <= k <= arr.size:
            raise InvalidParameterError(
                "k",
                f"must be in [1, {arr.size}], got {k!r}",
                "pick at most as many as there are candidates",
            )
        self._record(
            SelfComposedEvent(
                ExponentialMechanismEvent(self._selection_epsilon(eps, step)), int(k)
            ),
            step,
            {"sensitivity": s, "k": int(k)},
        )
        scale = (1.0 if monotonic else 2.0) * s / eps
        noisy = arr / scale + self.rng.gumbel(size=arr.shape)
        return np.argsort(-noisy, kind="stable")[: int(k)].astype(np.int64)

    # -- sampling ----------------------------------------------------------------------
    def _check_units_sampled(self, step: str, n: Any) -> None:
        """On a user-level ledger a sample must draw units: each unit one row."""
        if self.declaration.unit != "user":
            return
        if self._rows_per_unit != 1:
            raise LedgerViolationError(
                f"step {step!r}: the method declares a user-level event, but a sample draws "
                "rows, and a unit's rows would be drawn independently (the sampling bound "
                "assumes a unit is drawn as a whole). Fix: keep one row per unit first "
                "(ledger.bound_units(1), e.g. one table per user) and sample those"
            )
        check_sample_size(self._units, n, step)

    def poisson_sample(self, n: int, q: float, *, step: str) -> Sample:
        """Include each of ``n`` records independently with probability ``q``.

        Use the result as a context manager around the steps that run on the sample; they are
        booked as ``PoissonSampledEvent(q, ...)``. An empty sample is returned as is.
        """
        step = _check_step(step)
        self._check_units_sampled(step, n)
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
            raise InvalidParameterError(
                "n", f"must be an integer >= 0, got {n!r}", "pass len(data)"
            )
        if isinstance(q, bool) or not isinstance(q, int | float) or not 0.0 <= float(q) <= 1.0:
            raise InvalidParameterError("q", f"must lie in [0, 1], got {q!r}", "pass a rate")
        rate = float(q)
        indices = np.flatnonzero(self.rng.random(int(n)) < rate).astype(np.int64)
        self.log.append({"step": step, "poisson_sample": rate})
        self.private_log.append({"step": step, "size": int(indices.size)})
        sample = Sample(self, "poisson", step, lambda e: PoissonSampledEvent(rate, e), indices)
        if sample.drawn_on_top:
            self._poisson_draws.drew(len(self._entries), rate)
        return sample

    def sample_without_replacement(self, n: int, m: int, *, step: str) -> Sample:
        """A uniformly random subset of exactly ``m`` of ``n`` records (booked as such)."""
        step = _check_step(step)
        self._check_units_sampled(step, n)
        for name, v in (("n", n), ("m", m)):
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 0:
                raise InvalidParameterError(name, f"must be an integer >= 0, got {v!r}", "fix it")
        if n < 1 or m > n:
            raise InvalidParameterError("m", f"cannot draw {m} of {n} records", "use m <= n")
        indices = np.sort(self.rng.choice(int(n), size=int(m), replace=False)).astype(np.int64)
        self.log.append({"step": step, "sample_without_replacement": [int(m), int(n)]})
        return Sample(
            self,
            "wor",
            step,
            lambda e: SampledWithoutReplacementEvent(int(n), int(m), e),
            indices,
        )

    def shuffle_batches(self, n: int, batch_size: int, *, step: str) -> ShuffledEpoch:
        """One epoch: shuffle ``n`` records and cut them into batches of ``batch_size`` (the last
        holds the remainder), so that every record is in exactly one batch.

        Iterate over the result and run each batch's steps inside ``with batch:``; the epoch is
        booked as ``ShuffledBatchesEvent(n, batch_size, ...)`` (call once per epoch; the
        permutation comes from the ledger's generator). ``n`` is public: the analysis holds
        under replace-one adjacency only, where the dataset size is fixed.
        """
        step = _check_step(step)
        self._check_units_sampled(step, n)
        for name, v in (("n", n), ("batch_size", batch_size)):
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
                raise InvalidParameterError(name, f"must be an integer >= 1, got {v!r}", "fix it")
        if batch_size > n:
            raise InvalidParameterError(
                "batch_size", f"{batch_size} exceeds n = {n}", "use a batch no larger than n"
            )
        if self.adjacency.relation != "replace_one":
            raise LedgerViolationError(
                f"step {step!r}: shuffled batches are analysed under replace-one adjacency only "
                "(adding or removing a record changes the partition). Fix: run under "
                "Adjacency(relation='replace_one'), or use ledger.poisson_sample"
            )
        order = self.rng.permutation(int(n)).astype(np.int64)
        epoch = ShuffledEpoch(self, step, int(n), int(batch_size), order)
        self.log.append({"step": step, "shuffle_batches": [int(batch_size), int(n)]})
        self.private_log.append({"step": step, "batch_sizes": [len(b) for b in epoch.batches]})
        return epoch

    def allocate(self, n: int, t: int, k: int = 1, *, step: str) -> AllocatedEpoch:
        """One epoch of random allocation (balls-in-bins): each of ``n`` records is allocated
        to ``k`` of ``t`` steps chosen uniformly at random (distinct, independently of the
        other records), so the steps' batch sizes are random.

        Iterate over the result for the ``t`` steps and run each step inside ``with batch:``;
        the epoch is booked as ``RandomAllocationEvent(t, ..., k)`` (call once per epoch; the
        allocation comes from the ledger's generator). The analysis holds under add/remove
        adjacency only.
        """
        step = _check_step(step)
        self._check_units_sampled(step, n)
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
            raise InvalidParameterError(
                "n", f"must be an integer >= 0, got {n!r}", "pass len(data)"
            )
        for name, v in (("t", t), ("k", k)):
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
                raise InvalidParameterError(name, f"must be an integer >= 1, got {v!r}", "fix it")
        if k > t:
            raise InvalidParameterError("k", f"{k} exceeds t = {t}", "use k <= t")
        if self.adjacency.relation != "add_remove":
            raise LedgerViolationError(
                f"step {step!r}: random allocation is analysed under add/remove adjacency only "
                "(the dominating pair is proven for adding or removing one record). Fix: run "
                "under Adjacency(relation='add_remove'), or batch with ledger.shuffle_batches"
            )
        n, t, k = int(n), int(t), int(k)
        if k == 1:
            chosen = self.rng.integers(0, t, size=n).astype(np.int64)
            order = np.argsort(chosen, kind="stable").astype(np.int64)
            bounds = np.searchsorted(chosen[order], np.arange(t + 1))
            members = [order[bounds[i] : bounds[i + 1]] for i in range(t)]
        else:
            lists: list[list[int]] = [[] for _ in range(t)]
            for record in range(n):
                for s in self.rng.choice(t, size=k, replace=False):
                    lists[int(s)].append(record)
            members = [np.asarray(m, dtype=np.int64) for m in lists]
        epoch = AllocatedEpoch(self, step, n, t, k, members)
        self.log.append({"step": step, "allocate": [k, t]})
        self.private_log.append({"step": step, "batch_sizes": [len(b) for b in epoch.batches]})
        return epoch

    def _book_epoch(self, epoch: ShuffledEpoch, event: Event) -> None:
        """Book (or re-book, after one more batch) the event of a shuffled epoch."""
        if epoch._index is None:
            epoch._index = len(self._entries)
            self._entries.append(event)
        else:
            for s, c in canonical_multiset(self._entries[epoch._index]):
                self._counts[s] -= c
            self._entries[epoch._index] = event
        for s, c in canonical_multiset(event):
            self._counts[s] += c

    # -- results -----------------------------------------------------------------------
    def executed_event(self) -> Event:
        """Everything executed so far (open samples included) as one composed event."""
        entries = list(self._entries)
        if self._scopes:
            open_entry = self._scopes[0].wrapped()
            replaced = self._scopes[0].replaced_entry()
            if open_entry is not None and replaced is not None:
                entries[replaced] = open_entry
            elif open_entry is not None:
                entries.append(open_entry)
        return ComposedEvent(entries)

    def verify(self) -> None:
        """Raise LedgerViolationError unless the declaration covers every executed step."""
        if self._scopes:
            raise LedgerViolationError(
                f"step {self._scopes[-1].step!r}: a sample is still open. Fix: leave the "
                "`with` block of every sample before returning"
            )
        if self.declaration.unit == "user" and not self.unit_steps:
            raise LedgerViolationError(
                "the method declares a user-level event but its run never enforced the unit: "
                "no step grouped rows by the unit key, bounded contributions per unit or clipped "
                "per unit. Fix: call ledger.bound_units(k) or pass per_unit=True to a clipped "
                "sum, or declare the row-level event and let dpledger lift it"
            )
        executed = canonical_multiset(self.executed_event())
        if not multiset_covered(executed, self._declared_ms):
            culprit = next(
                (s for s, _ in executed if not multiset_covered(((s, 1),), self._declared_ms)),
                executed[-1][0],
            )
            raise LedgerViolationError(
                f"executed {describe_step(culprit)} is not covered by the declared "
                f"{self.declared.describe()}: "
                f"{explain_uncovered(culprit, executed, self._declared_ms)}"
            )

    def matches_exactly(self) -> bool:
        """Whether the executed multiset equals the declared one (no unspent declared step)."""
        return canonical_multiset(self.executed_event()) == self._declared_ms

    def public_executed_event(self) -> Event:
        """The executed event as published: each Poisson sample drawn outside any other sample
        stated as the declared step it is charged to (:mod:`dpledger.runtime.sample_record`)."""
        if not self._poisson_draws:
            return self.executed_event()
        return self._poisson_draws.public_event(self._entries, self.declared)

    def public_matches_exactly(self) -> bool:
        """Whether the published executed multiset equals the declared one."""
        return canonical_multiset(self.public_executed_event()) == self._declared_ms

    def to_dict(self) -> dict[str, Any]:
        """Data-independent facts only: safe to publish beside the outputs."""
        return {
            "declared": self.declared.to_dict(),
            "declared_unit": self.declaration.unit,
            "unit_steps": list(self.unit_steps),
            "executed": self.public_executed_event().to_dict(),
            "adjacency": self.adjacency.to_dict(),
            "secure_seed": self.secure,
            "steps": list(self.log),
        }

    def private_dict(self) -> dict[str, Any]:
        """Data-dependent diagnostics (realised sample sizes, row counts, the executed event
        as booked batch by batch): never publish."""
        private: dict[str, Any] = {"steps": list(self.private_log)}
        if self._poisson_draws:
            private["executed"] = self.executed_event().to_dict()
        return private
