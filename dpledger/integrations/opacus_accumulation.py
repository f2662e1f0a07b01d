"""Noisy steps against logical batches: what gradient accumulation and virtual steps summed.

A noisy step is an optimizer step that adds noise (Opacus calls the step hook exactly then),
not a physical batch. :class:`BatchCounter` counts the logical batches the data loader's batch
sampler yields between two noisy steps and the passes over it (epochs), without reading an
index:

* Opacus's ``BatchMemoryManager`` splits one logical batch into physical batches and skips the
  noise on all but the last: one logical batch, one noisy step;
* accumulating ``k`` logical batches into one noisy step (several ``backward`` calls, or
  ``signal_skip_step`` across logical batches) sums ``k`` batches under one noise draw: the
  tracker counts ``k`` and accounts it (:func:`dpledger.integrations.opacus_events.run_events`),
  where a count of noisy steps alone would book one batch.

The counter changes the batch sampler's class to a subclass of it whose ``__iter__`` counts what
it yields (so ``isinstance`` checks, such as the ``BatchMemoryManager``'s, still hold); removing
it restores the class. A batch drawn but left unused (a loop that breaks early) is dropped
from the count when a new pass starts and no gradient is being accumulated. With worker
processes the loader fetches batches ahead of the training loop, so the logical batches of a
step are read from the optimizer's count of ``backward`` calls instead (the
``BatchMemoryManager`` counts as one).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from dpledger.integrations.opacus_samplers import COUNTING

__all__ = ["BatchCounter", "gradients_pending"]


def gradients_pending(optimizer: Any) -> bool:
    """Whether the optimizer holds gradients not yet released in a noisy step: a skipped
    (virtual) step, or per-sample gradients not yet clipped."""
    if getattr(optimizer, "_is_last_step_skipped", False):
        return True
    for p in optimizer.params:
        sample = getattr(p, "grad_sample", None)
        items = sample if isinstance(sample, list) else [sample]
        if any(t is not None and not getattr(t, "_processed", False) for t in items):
            return True
    return False


class BatchCounter:
    """Counts logical batches and passes of one batch sampler; indices pass through unread."""

    def __init__(
        self,
        batch_sampler: Any,
        *,
        workers: int = 0,
        in_progress: Callable[[], bool] = lambda: True,
    ) -> None:
        self.batch_sampler = batch_sampler
        #: whether gradients of the pending batches are being accumulated (else, at a new
        #: pass, they were drawn and left unused, as by a loop that breaks early)
        self.in_progress = in_progress
        self.original = type(batch_sampler)
        #: passes started over the sampler (epochs, from 1)
        self.passes = 0
        #: logical batches yielded since the last noisy step, and the records they hold
        self.pending = 0
        self.rows = 0
        #: the records drawn for the noisy step that just ran (None: a batch of unknown size)
        self.taken_rows: int | None = None
        #: the pass of the first of them
        self.first_pass = 0
        #: whether batches reach the training loop as they are drawn (no prefetching worker)
        self.exact = workers == 0
        self._installed = False

    def install(self) -> None:
        """Count from now on (changes the batch sampler's class to a counting subclass)."""
        if not self._installed:
            self.batch_sampler.__class__ = _counting_class(self.original, self)
            self._installed = True

    def remove(self) -> None:
        """Give the batch sampler its class back."""
        if self._installed:
            self.batch_sampler.__class__ = self.original
            self._installed = False

    def new_pass(self) -> None:
        self.passes += 1
        if self.pending and not self.in_progress():
            self.pending = self.rows = 0

    def yielded(self, size: int = 0) -> None:
        if self.pending == 0:
            self.first_pass = self.passes
        self.pending += 1
        self.rows += size

    def take(self, accumulated: int) -> tuple[int, int | None]:
        """(logical batches of the noisy step that just ran, pass of its first batch or None);
        starts counting the next step. ``accumulated`` is the optimizer's count of backward
        calls, used when batches are prefetched by workers."""
        if self.exact:
            k, first = self.pending, self.first_pass
        else:
            k, first = max(1, accumulated), None
        self.taken_rows = self.rows if self.exact else None
        self.pending = self.rows = 0
        return k, first


def _counting_class(cls: type, counter: BatchCounter) -> type:
    original_iter = cls.__iter__  # type: ignore[attr-defined]

    def __iter__(self: Any) -> Iterator[Any]:
        counter.new_pass()
        for batch in original_iter(self):
            counter.yielded(len(batch) if hasattr(batch, "__len__") else 0)
            yield batch

    namespace = {
        "__iter__": __iter__,
        COUNTING: True,
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
    }
    return type(cls.__name__, (cls,), namespace)
