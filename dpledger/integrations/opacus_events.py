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
from dpledger.integrations.opacus_samplers import RATE_TOLERANCE

__all__ = [
    "ADD_REMOVE",
    "FIXED_ORDER",
    "POISSON",
    "REPLACE_ONE",
    "SAMPLED",
    "SHUFFLED",
    "WEIGHTED_DRAWS",
    "WEIGHTED_POISSON",
    "Batching",
    "PassCounter",
    "Step",
    "adaptive_noise",
    "compose_counts",
    "detect_batching",
    "epoch_notes",
    "rate_disagreements",
    "run_events",
    "step_sigma",
]

POISSON = "poisson"
SHUFFLED = "shuffled"
FIXED_ORDER = "fixed_order"
#: per-record Poisson sampling at its own rate (``WeightedPoissonSampler``)
WEIGHTED_POISSON = "weighted_poisson"
#: independent weighted draws with replacement (``WeightedRandomSampler``)
WEIGHTED_DRAWS = "weighted_draws"
#: kinds whose steps are independent samples (no epochs)
SAMPLED = (POISSON, WEIGHTED_POISSON, WEIGHTED_DRAWS)

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
    #: distributed Poisson sampling: the ranks whose shards make up each batch
    world_size: int = 1
    #: weighted draws: the largest probability that one draw picks a given record
    draw_rate: float | None = None

    @property
    def adjacency(self) -> Adjacency:
        """Poisson sampling is accounted under add/remove, fixed partitions under replace-one
        (the dataset size fixes the partition); weighted draws by their dominating pair, stated
        as add/remove curves (see :mod:`dpledger.integrations.opacus_samplers`)."""
        return ADD_REMOVE if self.kind in SAMPLED else REPLACE_ONE

    @property
    def size_public(self) -> bool:
        """Whether the analysis fixes the dataset size (replace-one): under add/remove it is
        private, and so is anything derived from it."""
        return self.kind in (SHUFFLED, FIXED_ORDER, WEIGHTED_DRAWS)

    @property
    def inclusion_rate(self) -> float | None:
        """The largest probability that one record is in one batch (None: not a sample)."""
        if self.kind == WEIGHTED_DRAWS:
            from dpledger.integrations.opacus_samplers import draw_inclusion

            assert self.draw_rate is not None and self.batch_size is not None
            return draw_inclusion(self.draw_rate, self.batch_size)
        return self.sample_rate

    @property
    def remainder(self) -> int:
        """Records in the last, short batch of a pass (0 when the batch size divides n)."""
        if self.batch_size is None:
            return 0
        return self.dataset_size % self.batch_size

    def describe(self) -> str:
        n = self.dataset_size
        if self.kind == POISSON:
            ranks = (
                f" (distributed: {self.world_size} ranks each sample their shard at q)"
                if self.world_size > 1
                else ""
            )
            return (
                f"Poisson sampling (Opacus DPDataLoader): each of n={n} records joins each "
                f"batch independently with probability q={self.sample_rate:.6g}{ranks}"
            )
        if self.kind == WEIGHTED_POISSON:
            return (
                f"weighted Poisson sampling: each of n={n} records joins each batch "
                f"independently at its own rate, at most q_max={self.sample_rate:.6g}"
            )
        if self.kind == WEIGHTED_DRAWS:
            return (
                f"weighted draws with replacement: batches of {self.batch_size} draws over n={n} "
                f"records, one draw picks a record with probability at most "
                f"p_max={self.draw_rate:.6g} (in a batch with probability at most "
                f"{self.inclusion_rate:.6g}); analysed under replace-one of a record in its slot"
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
    from dpledger.integrations.opacus_samplers import WeightedPoissonSampler as Weighted
    from dpledger.integrations.opacus_samplers import check_iteration, drawn_rate

    check_iteration(batch_sampler, _unwrap(getattr(batch_sampler, "sampler", None)))

    if isinstance(batch_sampler, DistributedUniformWithReplacementSampler):
        return Batching(
            kind=POISSON,
            dataset_size=int(batch_sampler.total_size),
            batches_per_epoch=int(batch_sampler.num_batches),
            sample_rate=drawn_rate(float(batch_sampler.sample_rate)),
            world_size=int(batch_sampler.num_replicas),
        )
    if isinstance(batch_sampler, UniformWithReplacementSampler):
        return Batching(
            kind=POISSON,
            dataset_size=int(batch_sampler.num_samples),
            batches_per_epoch=int(batch_sampler.steps),
            sample_rate=drawn_rate(float(batch_sampler.sample_rate)),
        )

    if isinstance(batch_sampler, Weighted):
        _check_size(batch_sampler.num_samples, len(dataset))
        return Batching(
            kind=WEIGHTED_POISSON,
            dataset_size=len(dataset),
            batches_per_epoch=len(batch_sampler),
            sample_rate=batch_sampler.max_rate,
        )
    if isinstance(batch_sampler, BatchSampler):
        return _fixed_size_batching(batch_sampler, len(dataset))
    raise UnsupportedEventError(
        f"batches drawn by {type(batch_sampler).__name__} are not tracked; use "
        "DataLoader(shuffle=True) or Opacus's Poisson sampling (poisson_sampling=True)"
    )


def _check_size(sampled: int, n: int) -> None:
    if sampled != n:
        raise InvalidParameterError(
            "batch_sampler",
            f"draws from {sampled} records but the dataset has {n}",
            "give the sampler one rate per record of the dataset",
        )


def _weighted_batching(sampler: Any, batch_sampler: Any, n: int) -> Batching:
    from dpledger.integrations.opacus_samplers import weighted_draw_rates

    rates = weighted_draw_rates(sampler, n)
    b = int(batch_sampler.batch_size)
    per_epoch = len(batch_sampler)
    return Batching(
        kind=WEIGHTED_DRAWS,
        dataset_size=n,
        batches_per_epoch=per_epoch,
        batch_size=b,
        drop_last=bool(batch_sampler.drop_last),
        draw_rate=max(rates),
    )


def _fixed_size_batching(batch_sampler: Any, n: int) -> Batching:
    """The batching of a ``BatchSampler`` over a dataset of ``n`` records: shuffled (a
    ``RandomSampler`` drawing the whole dataset without replacement) or in a fixed order (a
    ``SequentialSampler``); anything else is refused, naming it."""
    from torch.utils.data import (
        DistributedSampler,
        RandomSampler,
        SequentialSampler,
        WeightedRandomSampler,
    )

    sampler = _unwrap(batch_sampler.sampler)
    if isinstance(sampler, DistributedSampler):
        raise UnsupportedEventError(
            "distributed training without Poisson sampling (a DistributedSampler): each rank "
            "takes its own fixed-size batches and no theorem covers the run as Opacus accounts "
            "it; fix: make_private(..., poisson_sampling=True) on the DPDDP-wrapped model, which "
            "gives Opacus's distributed Poisson sampler"
        )
    if isinstance(sampler, WeightedRandomSampler):
        return _weighted_batching(sampler, batch_sampler, n)
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


def epoch_notes(b: Batching, epochs: int, complete: int, steps: tuple[Step, ...] = ()) -> list[str]:
    """What the bracket leaves out: dropped records, epochs that ran only in part, batches
    accumulated under one noise draw, the looseness of weighted draws."""
    notes = []
    k = max((s.batches for s in steps), default=1)
    if k > 1:
        notes.append(
            f"steps summed up to {k} logical batches under one noise draw: each is accounted as "
            "that many batches with the noise split evenly between them (an upper bound; no "
            "lower bound is certified)"
        )
    if b.kind == WEIGHTED_DRAWS:
        notes.append(
            "weighted draws with replacement: the event is the dominating pair of one draw at a "
            "time (the noise split over the batch's draws), stated as add/remove curves for "
            "replace-one of a record in its slot; certified but loose; dpledger's "
            "WeightedPoissonSampler is accounted tightly"
        )
    return notes + _partition_notes(b, epochs, complete)


def _partition_notes(b: Batching, epochs: int, complete: int) -> list[str]:
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
        and not math.isclose(opacus_rate, b.sample_rate, rel_tol=0.0, abs_tol=RATE_TOLERANCE)
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
    #: logical batches (batches drawn by the data loader's sampler) whose clipped gradients
    #: the step summed: 1 with or without Opacus's BatchMemoryManager, k when k batches were
    #: accumulated into one noisy step
    batches: int = 1
    #: adaptive clipping: the noise multiplier of the gradient sum as drawn (Opacus's
    #: effective multiplier) and the standard deviation of the noisy unclipped count
    effective_noise: float | None = None
    count_noise: float | None = None
    #: the pass of the first batch the step summed, when it differs from ``epoch``
    first_epoch: int | None = None

    def to_dict(self) -> dict[str, Any]:
        norm = self.max_grad_norm
        out: dict[str, Any] = {
            "step": "dp_sgd",
            "noise_multiplier": self.noise_multiplier,
            "max_grad_norm": list(norm) if isinstance(norm, tuple) else norm,
            "epoch": self.epoch,
            "batches": self.batches,
        }
        for name in ("effective_noise", "count_noise", "first_epoch"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out


def adaptive_noise(optimizer: Any) -> dict[str, float]:
    """An ``AdaClipDPOptimizer``'s noise as drawn: the gradient sum's effective multiplier
    ``(sigma^-2 - (2 s_b)^-2)^(-1/2)`` (Opacus's Theorem 1 of Andrew et al. 2021) and the
    unclipped count's standard deviation ``s_b``; nothing for other optimizers."""
    count = getattr(optimizer, "unclipped_num_std", None)
    if count is None:
        return {}
    sigma = float(optimizer.noise_multiplier)
    effective = (sigma**-2 - (2 * float(count)) ** -2) ** -0.5 if sigma > 0 else 0.0
    return {"effective_noise": effective, "count_noise": float(count)}


def step_sigma(step: Step) -> float:
    """The multiplier a step is accounted at. Adaptive clipping releases the clipped sum with
    multiplier ``s_g`` and the count of unclipped records (sensitivity 1: a record added or
    removed changes it by at most one) with standard deviation ``s_b``, on the same batch: one
    Gaussian release of the pair, whose multiplier is ``(s_g^-2 + s_b^-2)^(-1/2)`` (rounded
    down, the safe side)."""
    if step.count_noise is None:
        return step.noise_multiplier
    gradient = step.noise_multiplier if step.effective_noise is None else step.effective_noise
    if gradient <= 0 or step.count_noise <= 0:
        return 0.0
    value = (gradient**-2 + step.count_noise**-2) ** -0.5
    return math.nextafter(value, 0.0)


def compose_counts(parts: Sequence[tuple[Event, int]]) -> Event:
    """``SelfComposedEvent`` of runs of equal events, composed when there are several."""
    merged: dict[Event, int] = {}
    for event, count in parts:
        merged[event] = merged.get(event, 0) + count
    events = [SelfComposedEvent(e, k) for e, k in merged.items() if k > 0]
    if not events:
        return SelfComposedEvent(GaussianEvent(1.0), 0)
    return events[0] if len(events) == 1 else ComposedEvent(events)


def _sampled_part(batching: Batching, step: Step) -> tuple[Event, int]:
    """The event of one noisy step over independent samples, and how often it composes.

    ``k`` logical batches summed into one noisy step with multiplier ``sigma`` are the
    post-processing (their sum) of ``k`` steps with multiplier ``sigma / sqrt(k)`` each: the
    noise splits into ``k`` independent parts.
    """
    k = step.batches
    sigma = step_sigma(step)
    if batching.kind == WEIGHTED_DRAWS:
        assert batching.draw_rate is not None and batching.batch_size is not None
        draws = k * batching.batch_size
        inner = GaussianEvent(math.nextafter(sigma / (2 * math.sqrt(draws)), 0.0))
        return PoissonSampledEvent(batching.draw_rate, inner), draws
    q = batching.sample_rate
    assert q is not None
    split = sigma if k == 1 else math.nextafter(sigma / math.sqrt(k), 0.0)
    return PoissonSampledEvent(q, GaussianEvent(split)), k


def _check_drawn(steps: tuple[Step, ...]) -> None:
    if any(s.batches < 1 for s in steps):
        raise UnsupportedEventError(
            "a noisy step ran without a batch drawn from the tracked data loader: attach the "
            "tracker to the DataLoader the training loop iterates (the one make_private "
            "returned, or the one BatchMemoryManager wraps)"
        )


def run_events(batching: Batching, steps: tuple[Step, ...]) -> tuple[Event, Event | None, int, int]:
    """(upper event, lower event or None, epochs touched, epochs complete) of the steps.

    The upper event's certified upper bound covers what ran; the lower event's certified lower
    bound is below what ran (None: no lower bound is certified).
    """
    if batching.kind in SAMPLED:
        _check_drawn(steps)
        event = compose_counts([_sampled_part(batching, s) for s in steps])
        exact = batching.kind != WEIGHTED_DRAWS and all(s.batches == 1 for s in steps)
        return event, event if exact else None, 0, 0
    by_epoch: dict[int, list[Step]] = {}
    for s in steps:
        by_epoch.setdefault(s.epoch, []).append(s)
    if 0 in by_epoch:
        raise UnsupportedEventError(
            "steps ran without a pass over the tracked data loader: attach the tracker to the "
            "DataLoader the training loop iterates (the one make_private returned)"
        )
    straddling = [s for s in steps if s.first_epoch is not None and s.first_epoch != s.epoch]
    if straddling:
        raise UnsupportedEventError(
            f"a noisy step summed batches of epochs {straddling[0].first_epoch} and "
            f"{straddling[0].epoch} (a record may be in it twice): not accounted; take the "
            "optimizer step at the end of each epoch's last batch"
        )
    upper: list[tuple[Event, int]] = []
    lower: list[tuple[Event, int]] = []
    complete = 0
    for epoch, group in sorted(by_epoch.items()):
        epoch_event, full = _epoch_event(batching, epoch, group)
        upper.append((epoch_event, 1))
        if full:
            complete += 1
            lower.append((epoch_event, 1))
    low: Event | None = compose_counts(lower) if lower else None
    if batching.kind == SHUFFLED and batching.drop_last and batching.remainder:
        low = None
    return compose_counts(upper), low, len(by_epoch), complete


def _epoch_event(batching: Batching, epoch: int, group: list[Step]) -> tuple[Event, bool]:
    """An epoch's event (each record is in one noisy step of it: one run of the inner
    Gaussian, whatever the steps' grouping of batches) and whether its lower bound counts."""
    assert batching.batch_size is not None
    drawn = sum(s.batches for s in group)
    if drawn > batching.batches_per_epoch:
        raise UnsupportedEventError(
            f"epoch {epoch} took {drawn} batches but has "
            f"{batching.batches_per_epoch}: a record may be in several steps"
        )
    _check_drawn(tuple(group))
    sigmas = {step_sigma(s) for s in group}
    # a larger multiplier on some batches is post-processing of the smallest on all
    inner = GaussianEvent(min(sigmas))
    if batching.kind == SHUFFLED:
        epoch_event: Event = ShuffledBatchesEvent(batching.dataset_size, batching.batch_size, inner)
    else:
        epoch_event = inner
    single = all(s.batches == 1 for s in group)
    full = len(group) == batching.batches_per_epoch and len(sigmas) == 1 and single
    if batching.kind == FIXED_ORDER:
        # the first batch's records are in every epoch that ran a step: exact
        full = len(sigmas) == 1 and single
    return epoch_event, full


# ---------------------------------------------------------------------------------------------
# the result: certified bracket and Opacus's figure
# ---------------------------------------------------------------------------------------------
