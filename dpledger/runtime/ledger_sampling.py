"""The sampling scopes of the runtime ledger and the draws that open them.

A sample (:class:`Sample`: Poisson or without replacement) or an epoch of batches
(:class:`ShuffledEpoch`, :class:`AllocatedEpoch`) is drawn by the functions here, which back
:class:`~dpledger.runtime.ledger.PrivacyLedger`'s ``poisson_sample``,
``sample_without_replacement``, ``shuffle_batches`` and ``allocate`` (whose docstrings are the
reference). A method enters each sample or batch (``with sample:``) around the steps that run on
it; the ledger books those steps into the innermost open scope, and the scope books what ran
inside, wrapped in its sampling event, when it closes. Scopes reach the ledger only through its
public scope API (``open_scopes``, ``open_scope``, ``close_scope``, ``commit``, ``book_entry``,
``note_poisson_draw``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterator
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from dpledger.core.errors import InvalidParameterError, LedgerViolationError, PluginError
from dpledger.core.events import (
    ComposedEvent,
    Event,
    PoissonSampledEvent,
    RandomAllocationEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    ShuffledBatchesEvent,
    flatten,
)
from dpledger.runtime.coverage import canonical_step
from dpledger.runtime.ledger_arguments import check_step
from dpledger.runtime.ledger_units import check_units_sampled
from dpledger.runtime.sample_record import move_to_private

if TYPE_CHECKING:
    from dpledger.runtime.ledger import PrivacyLedger

__all__ = [
    "AllocatedEpoch",
    "Sample",
    "ShuffledBatch",
    "ShuffledEpoch",
    "allocate",
    "poisson_sample",
    "sample_without_replacement",
    "shuffle_batches",
]


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
        self.drawn_on_top = kind == "poisson" and not ledger.open_scopes
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
        scopes = self._ledger.open_scopes
        if self.drawn_on_top and scopes:
            raise PluginError(
                f"sample {self.step!r} was drawn outside any sample but is entered inside "
                f"{scopes[-1].step!r}. Fix: draw it where it runs"
            )
        self._open = True
        self._ledger.open_scope(self)
        self._log_start = len(self._ledger.log)
        return self

    def __exit__(self, *exc: object) -> None:
        self._ledger.close_scope(self)
        self._open = False
        self._closed = True
        if self.random_size:
            ledger = self._ledger
            move_to_private(ledger.log, ledger.private_log, self._log_start, self.label())
        self._book()

    def label(self) -> str:
        """The scope as named in errors and in the private log."""
        return f"sample {self.step!r}"

    def step_label(self, step: str) -> str:
        """``step`` (run inside this scope) as named in a violation."""
        return repr(step)

    def add(self, event: Event) -> None:
        """Book ``event``, checked, as run inside this scope (the ledger calls it)."""
        self._inner.append(event)

    def _book(self) -> None:
        """Book what ran inside, once the scope has closed."""
        event = self.wrapped()
        if event is not None:
            self._ledger.commit(event, drawn_sample=self.drawn_on_top)


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
        scopes = self._ledger.open_scopes
        if scopes:
            raise PluginError(
                f"batch {self.position} of {self.step!r} is entered inside the open sample "
                f"{scopes[-1].step!r}; run shuffled epochs at the top level"
            )
        super().__enter__()
        return self

    def label(self) -> str:
        return f"batch {self.position} of {self.step!r}"

    def step_label(self, step: str) -> str:
        return f"{step!r} (batch {self.position} of epoch {self.step!r})"

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
            self._index = self._ledger.book_entry(event, self._index)


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


def poisson_sample(ledger: PrivacyLedger, n: int, q: float, *, step: str) -> Sample:
    """A sample holding each of ``n`` records independently with probability ``q``."""
    step = check_step(step)
    check_units_sampled(ledger, step, n)
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
        raise InvalidParameterError("n", f"must be an integer >= 0, got {n!r}", "pass len(data)")
    if isinstance(q, bool) or not isinstance(q, int | float) or not 0.0 <= float(q) <= 1.0:
        raise InvalidParameterError("q", f"must lie in [0, 1], got {q!r}", "pass a rate")
    rate = float(q)
    indices = np.flatnonzero(ledger.rng.random(int(n)) < rate).astype(np.int64)
    ledger.log.append({"step": step, "poisson_sample": rate})
    ledger.private_log.append({"step": step, "size": int(indices.size)})
    sample = Sample(ledger, "poisson", step, lambda e: PoissonSampledEvent(rate, e), indices)
    if sample.drawn_on_top:
        ledger.note_poisson_draw(rate)
    return sample


def sample_without_replacement(ledger: PrivacyLedger, n: int, m: int, *, step: str) -> Sample:
    """A sample of exactly ``m`` of ``n`` records, uniformly at random."""
    step = check_step(step)
    check_units_sampled(ledger, step, n)
    for name, v in (("n", n), ("m", m)):
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 0:
            raise InvalidParameterError(name, f"must be an integer >= 0, got {v!r}", "fix it")
    if n < 1 or m > n:
        raise InvalidParameterError("m", f"cannot draw {m} of {n} records", "use m <= n")
    indices = np.sort(ledger.rng.choice(int(n), size=int(m), replace=False)).astype(np.int64)
    ledger.log.append({"step": step, "sample_without_replacement": [int(m), int(n)]})
    return Sample(
        ledger,
        "wor",
        step,
        lambda e: SampledWithoutReplacementEvent(int(n), int(m), e),
        indices,
    )


def shuffle_batches(ledger: PrivacyLedger, n: int, batch_size: int, *, step: str) -> ShuffledEpoch:
    """One epoch of ``n`` shuffled records cut into batches of ``batch_size``
    (replace-one adjacency only)."""
    step = check_step(step)
    check_units_sampled(ledger, step, n)
    for name, v in (("n", n), ("batch_size", batch_size)):
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
            raise InvalidParameterError(name, f"must be an integer >= 1, got {v!r}", "fix it")
    if batch_size > n:
        raise InvalidParameterError(
            "batch_size", f"{batch_size} exceeds n = {n}", "use a batch no larger than n"
        )
    if ledger.adjacency.relation != "replace_one":
        raise LedgerViolationError(
            f"step {step!r}: shuffled batches are analysed under replace-one adjacency only "
            "(adding or removing a record changes the partition). Fix: run under "
            "Adjacency(relation='replace_one'), or use ledger.poisson_sample"
        )
    order = ledger.rng.permutation(int(n)).astype(np.int64)
    epoch = ShuffledEpoch(ledger, step, int(n), int(batch_size), order)
    ledger.log.append({"step": step, "shuffle_batches": [int(batch_size), int(n)]})
    ledger.private_log.append({"step": step, "batch_sizes": [len(b) for b in epoch.batches]})
    return epoch


def allocate(ledger: PrivacyLedger, n: int, t: int, k: int, *, step: str) -> AllocatedEpoch:
    """One epoch of random allocation: each of ``n`` records in ``k`` of ``t`` steps, chosen
    uniformly at random, independently of the other records (add/remove adjacency only)."""
    step = check_step(step)
    check_units_sampled(ledger, step, n)
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
        raise InvalidParameterError("n", f"must be an integer >= 0, got {n!r}", "pass len(data)")
    for name, v in (("t", t), ("k", k)):
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
            raise InvalidParameterError(name, f"must be an integer >= 1, got {v!r}", "fix it")
    if k > t:
        raise InvalidParameterError("k", f"{k} exceeds t = {t}", "use k <= t")
    if ledger.adjacency.relation != "add_remove":
        raise LedgerViolationError(
            f"step {step!r}: random allocation is analysed under add/remove adjacency only "
            "(the dominating pair is proven for adding or removing one record). Fix: run "
            "under Adjacency(relation='add_remove'), or batch with ledger.shuffle_batches"
        )
    n, t, k = int(n), int(t), int(k)
    if k == 1:
        chosen = ledger.rng.integers(0, t, size=n).astype(np.int64)
        order = np.argsort(chosen, kind="stable").astype(np.int64)
        bounds = np.searchsorted(chosen[order], np.arange(t + 1))
        members = [order[bounds[i] : bounds[i + 1]] for i in range(t)]
    else:
        lists: list[list[int]] = [[] for _ in range(t)]
        for record in range(n):
            for s in ledger.rng.choice(t, size=k, replace=False):
                lists[int(s)].append(record)
        members = [np.asarray(m, dtype=np.int64) for m in lists]
    epoch = AllocatedEpoch(ledger, step, n, t, k, members)
    ledger.log.append({"step": step, "allocate": [k, t]})
    ledger.private_log.append({"step": step, "batch_sizes": [len(b) for b in epoch.batches]})
    return epoch
