"""The runtime privacy ledger: every bit of noise and every sample a method draws goes through it.

A method declares the event it may spend (``MethodSpec.declare``); its ``run`` then gets a
:class:`PrivacyLedger` built on that declaration and must use the ledger's primitives for all
noise and sampling. Each primitive records the event it *executes* (as core events) and is
checked against the declaration *before* any noise is drawn: a step that is not covered raises
:class:`~dpledger.core.errors.LedgerViolationError` naming the step, so nothing noisy is
returned. :func:`run_verified` runs a method and releases its outputs only after
:meth:`PrivacyLedger.verify` has passed.

This module is the booking core: it checks each step, books it, verifies the run and writes the
public and private records. The primitives are methods of :class:`PrivacyLedger` that delegate
to companion modules: noise in :mod:`~dpledger.runtime.ledger_noise`, selection in
:mod:`~dpledger.runtime.ledger_selection`, clipping and the privacy unit in
:mod:`~dpledger.runtime.ledger_units`, samples and epochs in
:mod:`~dpledger.runtime.ledger_sampling`. These reach the ledger only through its public scope
API (``check``, ``book``, ``commit``, ``book_entry``, ``open_scope``/``close_scope``, ...), never
through a private member (``tests/runtime/test_ledger_scope_api.py``).

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

import secrets
from collections import Counter
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from dpledger.core.adjacency import Adjacency
from dpledger.core.declaration import Declaration, frozen_copy
from dpledger.core.errors import InvalidParameterError, LedgerViolationError, PluginError
from dpledger.core.events import ComposedEvent, Event, flatten
from dpledger.runtime import ledger_noise, ledger_sampling, ledger_selection, ledger_units
from dpledger.runtime.coverage import (
    canonical_multiset,
    canonical_step,
    describe_step,
    explain_uncovered,
    multiset_covered,
)
from dpledger.runtime.ledger_arguments import FloatArray
from dpledger.runtime.ledger_sampling import AllocatedEpoch, Sample, ShuffledBatch, ShuffledEpoch
from dpledger.runtime.ledger_selection import selection_epsilon
from dpledger.runtime.sample_record import PoissonDraws
from dpledger.runtime.units import DataUnits

__all__ = [
    "AllocatedEpoch",
    "FloatArray",
    "PrivacyLedger",
    "Sample",
    "ShuffledBatch",
    "ShuffledEpoch",
    "make_rng",
    "selection_epsilon",
]


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

    # -- scope API: what the primitives and the sampling scopes use (a method never needs it) --
    def check(self, event: Event, step: str) -> None:
        """Raise LedgerViolationError naming ``step`` unless the declaration covers everything
        booked so far plus ``event`` (run inside the open scopes, which are not booked yet)."""
        entry, counts = self._candidate(event)
        executed = tuple(
            sorted(((k, v) for k, v in counts.items() if v > 0), key=lambda kv: repr(kv[0]))
        )
        if not multiset_covered(executed, self._declared_ms):
            culprit = canonical_step(flatten(entry)[0][0]) if flatten(entry) else entry
            reason = explain_uncovered(culprit, executed, self._declared_ms)
            label = self._scopes[0].step_label(step) if self._scopes else repr(step)
            raise LedgerViolationError(
                f"step {label}: executed {describe_step(culprit)} is not covered by the declared "
                f"{self.declared.describe()}: {reason}. Fix: make run() match declare()"
            )

    def book(self, event: Event, step: str, detail: dict[str, Any]) -> None:
        """Check ``event`` against the declaration, log it with ``detail`` and book it (call it
        before any noise is drawn)."""
        self.check(event, step)
        self.log.append({"step": step, "event": event.to_dict(), **detail})
        self.commit(event)

    def commit(self, event: Event, *, drawn_sample: bool = False) -> None:
        """Book ``event``, already checked, into the innermost open scope, or else as a new
        entry; ``drawn_sample``: the entry is what a Poisson sample drawn outside any other
        sample ran (stated publicly as the declared step it is charged to)."""
        if self._scopes:
            self._scopes[-1].add(event)
            return
        if drawn_sample:
            self._poisson_draws.booked(len(self._entries))
        self.book_entry(event)

    def book_entry(self, event: Event, index: int | None = None) -> int:
        """Book ``event`` as a new entry, or in place of entry ``index`` (a shuffled epoch booked
        again after one more batch); return its index."""
        if index is None:
            index = len(self._entries)
            self._entries.append(event)
        else:
            for s, c in canonical_multiset(self._entries[index]):
                self._counts[s] -= c
            self._entries[index] = event
        for s, c in canonical_multiset(event):
            self._counts[s] += c
        return index

    @property
    def open_scopes(self) -> tuple[Sample, ...]:
        """The samples and batches entered and not left yet, innermost last."""
        return tuple(self._scopes)

    def open_scope(self, scope: Sample) -> None:
        """Enter ``scope``: the steps booked from now on run inside it."""
        self._scopes.append(scope)

    def close_scope(self, scope: Sample) -> None:
        """Leave ``scope``, which must be the innermost open one."""
        if not self._scopes or self._scopes[-1] is not scope:
            raise PluginError(f"{scope.label()} closed out of order")
        self._scopes.pop()

    def note_poisson_draw(self, rate: float) -> None:
        """Note a Poisson sample of ``rate`` drawn outside any other sample."""
        self._poisson_draws.drew(len(self._entries), rate)

    @property
    def clip_in_force(self) -> tuple[float, str] | None:
        """The L2 bound of the last row clip and its step (None: no row was clipped)."""
        return self._clip_l2

    def enforce_clip(self, bound: float, step: str) -> None:
        """Note that ``step`` clipped every row to L2 norm ``bound`` (stays in force)."""
        self._clip_l2 = (bound, step)

    @property
    def rows_per_unit(self) -> int | None:
        """The rows one unit may contribute (None: no contribution bound is in force)."""
        return self._rows_per_unit

    def enforce_unit(self, step: str, *, rows_per_unit: int | None = None) -> None:
        """Note that ``step`` enforced the privacy unit; ``rows_per_unit``: it bounded each
        unit's rows (the largest bound stays in force)."""
        if rows_per_unit is not None:
            self._rows_per_unit = max(rows_per_unit, self._rows_per_unit or 0)
        self.unit_steps.append(step)

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

    # -- clipping and the privacy unit (ledger_units) ---------------------------------
    def clip_rows_l2(self, x: Any, bound: float, *, step: str = "clip") -> FloatArray:
        """Scale each row of ``x`` to L2 norm at most ``bound``; the bound stays in force."""
        return ledger_units.clip_rows_l2(self, x, bound, step=step)

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
        return ledger_units.bound_units(
            self, max_contributions, old, rows=rows, part=part, step=step
        )

    # -- noise (ledger_noise) ----------------------------------------------------------
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
        return ledger_noise.clipped_sum_gaussian(
            self,
            contributions,
            clip_norm,
            noise_multiplier,
            step=step,
            per_unit=per_unit,
            rows=rows,
            part=part,
            unit_keys=unit_keys,
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
        return ledger_noise.clipped_sum_laplace(
            self,
            contributions,
            clip_norm,
            noise_multiplier,
            step=step,
            per_unit=per_unit,
            rows=rows,
            part=part,
            unit_keys=unit_keys,
        )

    def gaussian(
        self, values: Any, sensitivity: float, noise_multiplier: float, *, step: str
    ) -> Any:
        """``values + N(0, (noise_multiplier * sensitivity)^2)``; books GaussianEvent.

        ``sensitivity`` is that of one row (of one unit, on a user-level ledger only once a
        per-unit clip produced ``values``; see :meth:`bound_units`)."""
        return ledger_noise.gaussian(self, values, sensitivity, noise_multiplier, step=step)

    def laplace(
        self, values: Any, sensitivity: float, noise_multiplier: float, *, step: str
    ) -> Any:
        """``values + Laplace(noise_multiplier * sensitivity)`` (L1); books LaplaceEvent."""
        return ledger_noise.laplace(self, values, sensitivity, noise_multiplier, step=step)

    def charge(self, event: Event, *, step: str, reason: str = "") -> None:
        """Book a privacy cost that no draw carries, e.g. the failure probability of a
        data-independent bound (an ``ApproxDPEvent(0, p)``). Checked against the declaration
        like every other step; ``reason`` goes into the log."""
        ledger_noise.charge(self, event, step=step, reason=reason)

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
        return ledger_noise.sample_certified(self, sampler, event, step=step, note=note)

    # -- selection (ledger_selection) --------------------------------------------------
    def exponential_mechanism(
        self, scores: Any, sensitivity: float, epsilon: float, *, step: str, monotonic: bool = False
    ) -> int:
        """Index ``i`` with probability proportional to ``exp(epsilon * s_i / (2 * sensitivity))``.

        With ``monotonic=True`` (scores move in one direction between neighbours) the factor 2
        is dropped. Sampled exactly via the Gumbel-max trick; books ExponentialMechanismEvent.
        """
        return ledger_selection.exponential_mechanism(
            self, scores, sensitivity, epsilon, step=step, monotonic=monotonic
        )

    def report_noisy_max(
        self, scores: Any, sensitivity: float, epsilon: float, *, step: str, monotonic: bool = False
    ) -> int:
        """Argmax of scores + Laplace(2 * sensitivity / epsilon); books ReportNoisyMaxEvent."""
        return ledger_selection.report_noisy_max(
            self, scores, sensitivity, epsilon, step=step, monotonic=monotonic
        )

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
        return ledger_selection.noisy_top_k(
            self, scores, sensitivity, epsilon, k, step=step, monotonic=monotonic
        )

    # -- sampling (ledger_sampling) ----------------------------------------------------
    def poisson_sample(self, n: int, q: float, *, step: str) -> Sample:
        """Include each of ``n`` records independently with probability ``q``.

        Use the result as a context manager around the steps that run on the sample; they are
        booked as ``PoissonSampledEvent(q, ...)``. An empty sample is returned as is.
        """
        return ledger_sampling.poisson_sample(self, n, q, step=step)

    def sample_without_replacement(self, n: int, m: int, *, step: str) -> Sample:
        """A uniformly random subset of exactly ``m`` of ``n`` records (booked as such)."""
        return ledger_sampling.sample_without_replacement(self, n, m, step=step)

    def shuffle_batches(self, n: int, batch_size: int, *, step: str) -> ShuffledEpoch:
        """One epoch: shuffle ``n`` records and cut them into batches of ``batch_size`` (the last
        holds the remainder), so that every record is in exactly one batch.

        Iterate over the result and run each batch's steps inside ``with batch:``; the epoch is
        booked as ``ShuffledBatchesEvent(n, batch_size, ...)`` (call once per epoch; the
        permutation comes from the ledger's generator). ``n`` is public: the analysis holds
        under replace-one adjacency only, where the dataset size is fixed.
        """
        return ledger_sampling.shuffle_batches(self, n, batch_size, step=step)

    def allocate(self, n: int, t: int, k: int = 1, *, step: str) -> AllocatedEpoch:
        """One epoch of random allocation (balls-in-bins): each of ``n`` records is allocated
        to ``k`` of ``t`` steps chosen uniformly at random (distinct, independently of the
        other records), so the steps' batch sizes are random.

        Iterate over the result for the ``t`` steps and run each step inside ``with batch:``;
        the epoch is booked as ``RandomAllocationEvent(t, ..., k)`` (call once per epoch; the
        allocation comes from the ledger's generator). The analysis holds under add/remove
        adjacency only.
        """
        return ledger_sampling.allocate(self, n, t, k, step=step)

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


if TYPE_CHECKING:  # strict mypy (tests/test_typing.py) checks the runtime ledger against the
    # kernel's protocol that a method's run is typed with
    from dpledger.core.ledger_protocol import Ledger

    def _implements_the_ledger_protocol(ledger: PrivacyLedger) -> Ledger:
        return ledger
