"""An Opacus run as dpledger events: how its batches were built and what its steps spent.

Only public parameters of the data loader and the noisy steps' counts are read (no data
value, sampled index or gradient); see :mod:`dpledger.integrations.opacus` for the events and
the soundness of each case.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import attrs

from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError, UnsupportedEventError
from dpledger.core.events import (
    ComposedEvent,
    Event,
    GaussianEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
    ShuffledBatchesEvent,
)

__all__ = [
    "ADD_REMOVE",
    "FIXED_ORDER",
    "POISSON",
    "REPLACE_ONE",
    "SHUFFLED",
    "Batching",
    "PassCounter",
    "Step",
    "compose_counts",
    "detect_batching",
    "epoch_notes",
    "rate_disagreements",
    "run_events",
]

POISSON = "poisson"
SHUFFLED = "shuffled"
FIXED_ORDER = "fixed_order"

ADD_REMOVE = Adjacency()
REPLACE_ONE = Adjacency(relation="replace_one")


# ---------------------------------------------------------------------------------------------
# batch construction
# ---------------------------------------------------------------------------------------------
@attrs.frozen
class Batching:
    """How batches were built: public parameters of the data loader only."""

    kind: str
    dataset_size: int
    #: batches of one pass over the data loader (``len(data_loader)``)
    batches_per_epoch: int
    #: Poisson: the probability that a record is in a batch
    sample_rate: float | None = None
    #: shuffled / fixed order: records per batch (the last one may hold fewer)
    batch_size: int | None = None
    drop_last: bool = False

    @property
    def adjacency(self) -> Adjacency:
        """Poisson sampling is accounted under add/remove, fixed partitions under replace-one
        (the dataset size fixes the partition)."""
        return ADD_REMOVE if self.kind == POISSON else REPLACE_ONE

    @property
    def remainder(self) -> int:
        """Records in the last, short batch of a pass (0 when the batch size divides n)."""
        if self.batch_size is None:
            return 0
        return self.dataset_size % self.batch_size

    def describe(self) -> str:
        n = self.dataset_size
        if self.kind == POISSON:
            return (
                f"Poisson sampling (Opacus DPDataLoader): each of n={n} records joins each "
                f"batch independently with probability q={self.sample_rate:.6g}"
            )
        tail = ""
        if self.remainder:
            tail = (
                f"; the last {self.remainder} records are dropped each epoch"
                if self.drop_last
                else f"; the last batch holds {self.remainder}"
            )
        order = "shuffled each epoch" if self.kind == SHUFFLED else "in a fixed order"
        return (
            f"fixed-size batches {order}: n={n} records, batch size {self.batch_size}, "
            f"{self.batches_per_epoch} batches per epoch{tail}"
        )

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


def detect_batching(data_loader: Any) -> Batching:
    """The batch construction of a PyTorch/Opacus data loader, read from its sampler objects.

    Poisson: Opacus's ``DPDataLoader`` (its batch sampler is a ``UniformWithReplacementSampler``).
    Shuffled: a ``BatchSampler`` over a ``RandomSampler`` without replacement that draws the
    whole dataset (``DataLoader(..., shuffle=True)``). Fixed order: a ``BatchSampler`` over a
    ``SequentialSampler`` (``shuffle=False``). Anything else is refused, naming it.
    """
    from opacus.utils.uniform_sampler import (
        DistributedUniformWithReplacementSampler,
        UniformWithReplacementSampler,
    )
    from torch.utils.data import BatchSampler

    batch_sampler = getattr(data_loader, "batch_sampler", None)
    dataset = getattr(data_loader, "dataset", None)
    if batch_sampler is None or dataset is None:
        raise UnsupportedEventError(
            "the data loader has no batch sampler (an iterable dataset or batch_size=None); "
            "pass the DataLoader that make_private returned"
        )
    if isinstance(batch_sampler, DistributedUniformWithReplacementSampler):
        raise UnsupportedEventError(
            "distributed Poisson sampling is not tracked; account the run on one process"
        )
    if isinstance(batch_sampler, UniformWithReplacementSampler):
        return Batching(
            kind=POISSON,
            dataset_size=int(batch_sampler.num_samples),
            batches_per_epoch=int(batch_sampler.steps),
            sample_rate=float(batch_sampler.sample_rate),
        )
    if isinstance(batch_sampler, BatchSampler):
        return _fixed_size_batching(batch_sampler, len(dataset))
    raise UnsupportedEventError(
        f"batches drawn by {type(batch_sampler).__name__} are not tracked; use "
        "DataLoader(shuffle=True) or Opacus's Poisson sampling (poisson_sampling=True)"
    )


def _fixed_size_batching(batch_sampler: Any, n: int) -> Batching:
    """The batching of a ``BatchSampler`` over a dataset of ``n`` records: shuffled (a
    ``RandomSampler`` drawing the whole dataset without replacement) or in a fixed order (a
    ``SequentialSampler``); anything else is refused, naming it."""
    from torch.utils.data import RandomSampler, SequentialSampler

    sampler = _unwrap(batch_sampler.sampler)
    b = int(batch_sampler.batch_size)
    drop_last = bool(batch_sampler.drop_last)
    per_epoch = n // b if drop_last else -(-n // b)
    if isinstance(sampler, RandomSampler):
        if sampler.replacement or sampler.num_samples != n:
            raise UnsupportedEventError(
                "the RandomSampler draws with replacement or not the whole dataset "
                f"(num_samples={sampler.num_samples}, n={n}); use DataLoader(shuffle=True) "
                "or Opacus's Poisson sampling"
            )
        kind = SHUFFLED
    elif isinstance(sampler, SequentialSampler):
        kind = FIXED_ORDER
    else:
        raise UnsupportedEventError(
            f"batches drawn by {type(sampler).__name__} are not tracked; use "
            "DataLoader(shuffle=True) or Opacus's Poisson sampling (poisson_sampling=True)"
        )
    if per_epoch < 1:
        raise InvalidParameterError(
            "data_loader", f"batch size {b} exceeds the dataset ({n} records)", "use b <= n"
        )
    return Batching(
        kind=kind, dataset_size=n, batches_per_epoch=per_epoch, batch_size=b, drop_last=drop_last
    )


def epoch_notes(b: Batching, epochs: int, complete: int) -> list[str]:
    """What the bracket leaves out: dropped records, or epochs that ran only in part."""
    if b.kind == SHUFFLED and b.drop_last and b.remainder:
        return [
            f"drop_last discards {b.remainder} records per epoch: the upper bound is that "
            "of the loader that keeps them (dropping is post-processing); no lower bound "
            "is certified"
        ]
    if epochs > complete:
        return [
            f"{epochs - complete} of {epochs} epochs ran only part of their batches (or "
            "changed the noise multiplier): each is counted as a full epoch at its "
            "smallest multiplier in the upper bound and left out of the lower bound"
        ]
    return []


def rate_disagreements(
    b: Batching, history: Sequence[Any], steps: int, opacus_rate: float | None
) -> list[str]:
    """Where Opacus's own accountant counts other steps, or another sampling rate, than the
    tracker and the sampler."""
    notes = []
    counted_steps = sum(h[2] for h in history)
    if counted_steps != steps:
        notes.append(f"Opacus's accountant counts {counted_steps} steps, the tracker {steps}")
    if (
        b.kind == POISSON
        and opacus_rate is not None
        and b.sample_rate is not None
        and not math.isclose(opacus_rate, b.sample_rate, rel_tol=1e-12)
    ):
        notes.append(
            f"Opacus accounts q={opacus_rate:.6g}; the sampler draws q={b.sample_rate:.6g}"
        )
    return notes


class PassCounter:
    """Wraps a sampler and counts the passes started over it (one per epoch); indices pass
    through unread."""

    def __init__(self, sampler: Any) -> None:
        self.sampler = sampler
        self.passes = 0

    def __iter__(self) -> Iterator[Any]:
        self.passes += 1
        return iter(self.sampler)

    def __len__(self) -> int:
        return len(self.sampler)

    def __getattr__(self, name: str) -> Any:
        if name in ("sampler", "passes"):
            raise AttributeError(name)
        return getattr(self.sampler, name)


def _unwrap(sampler: Any) -> Any:
    return sampler.sampler if isinstance(sampler, PassCounter) else sampler


# ---------------------------------------------------------------------------------------------
# steps and the run's events
# ---------------------------------------------------------------------------------------------
@attrs.frozen
class Step:
    """One noisy optimizer step: public parameters and counts only."""

    noise_multiplier: float
    max_grad_norm: float | tuple[float, ...]
    #: the pass over the data loader (epoch, from 1) the step ran in; 0 for Poisson sampling
    epoch: int
    #: batches whose clipped gradients the step summed (gradient accumulation when > 1)
    batches: int = 1

    def to_dict(self) -> dict[str, Any]:
        norm = self.max_grad_norm
        return {
            "step": "dp_sgd",
            "noise_multiplier": self.noise_multiplier,
            "max_grad_norm": list(norm) if isinstance(norm, tuple) else norm,
            "epoch": self.epoch,
            "batches": self.batches,
        }


def compose_counts(parts: Sequence[tuple[Event, int]]) -> Event:
    """``SelfComposedEvent`` of runs of equal events, composed when there are several."""
    merged: dict[Event, int] = {}
    for event, count in parts:
        merged[event] = merged.get(event, 0) + count
    events = [SelfComposedEvent(e, k) for e, k in merged.items() if k > 0]
    if not events:
        return SelfComposedEvent(GaussianEvent(1.0), 0)
    return events[0] if len(events) == 1 else ComposedEvent(events)


def run_events(batching: Batching, steps: tuple[Step, ...]) -> tuple[Event, Event | None, int, int]:
    """(upper event, lower event or None, epochs touched, epochs complete) of the steps.

    The upper event's certified upper bound covers what ran; the lower event's certified lower
    bound is below what ran (None: no lower bound is certified).
    """
    if any(s.batches != 1 for s in steps):
        k = max(s.batches for s in steps)
        raise UnsupportedEventError(
            f"a step summed {k} batches (gradient accumulation): not tracked; take one "
            "optimizer step per batch (Opacus's BatchMemoryManager is fine)"
        )
    if batching.kind == POISSON:
        q = batching.sample_rate
        assert q is not None
        parts = [(PoissonSampledEvent(q, GaussianEvent(s.noise_multiplier)), 1) for s in steps]
        event = compose_counts(parts)
        return event, event, 0, 0
    by_epoch: dict[int, list[Step]] = {}
    for s in steps:
        by_epoch.setdefault(s.epoch, []).append(s)
    if 0 in by_epoch:
        raise UnsupportedEventError(
            "steps ran without a pass over the tracked data loader: attach the tracker to the "
            "DataLoader the training loop iterates (the one make_private returned)"
        )
    upper: list[tuple[Event, int]] = []
    lower: list[tuple[Event, int]] = []
    complete = 0
    assert batching.batch_size is not None
    for epoch, group in sorted(by_epoch.items()):
        if len(group) > batching.batches_per_epoch:
            raise UnsupportedEventError(
                f"epoch {epoch} took {len(group)} noisy steps but has "
                f"{batching.batches_per_epoch} batches: a record may be in several steps"
            )
        sigmas = {s.noise_multiplier for s in group}
        # a larger multiplier on some batches is post-processing of the smallest on all
        inner = GaussianEvent(min(sigmas))
        if batching.kind == SHUFFLED:
            epoch_event: Event = ShuffledBatchesEvent(
                batching.dataset_size, batching.batch_size, inner
            )
        else:
            epoch_event = inner
        upper.append((epoch_event, 1))
        full = len(group) == batching.batches_per_epoch and len(sigmas) == 1
        if batching.kind == FIXED_ORDER:
            # the first batch's records are in every epoch that ran a step: exact
            full = len(sigmas) == 1
        if full:
            complete += 1
            lower.append((epoch_event, 1))
    low: Event | None = compose_counts(lower) if lower else None
    if batching.kind == SHUFFLED and batching.drop_last and batching.remainder:
        low = None
    return compose_counts(upper), low, len(by_epoch), complete


# ---------------------------------------------------------------------------------------------
# the result: certified bracket and Opacus's figure
# ---------------------------------------------------------------------------------------------
