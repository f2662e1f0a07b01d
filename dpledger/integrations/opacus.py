"""What an Opacus DP-SGD run actually spent: attach dpledger to a ``PrivacyEngine`` loop.

Opacus accounts every run as Poisson sampling at rate ``1 / len(data_loader)``, also when
``make_private(..., poisson_sampling=False)`` leaves a plain shuffled ``DataLoader`` of
fixed-size batches in place. :class:`OpacusTracker` reads the batch construction from the
objects (Opacus's ``DPDataLoader`` with its ``UniformWithReplacementSampler``, or a
``BatchSampler`` over a ``RandomSampler`` or ``SequentialSampler``), counts the noisy optimizer
steps through the ``DPOptimizer`` step hook, and states the run as a dpledger event:

============================  ==================================================  ============
batches                       event                                               adjacency
============================  ==================================================  ============
Poisson (``DPDataLoader``)    ``SelfComposedEvent(PoissonSampledEvent(q,          add/remove
                              GaussianEvent(sigma)), steps)``
shuffled, fixed size          ``SelfComposedEvent(ShuffledBatchesEvent(n, b,      replace-one
                              GaussianEvent(sigma)), epochs)``
fixed order (no shuffling)    ``SelfComposedEvent(GaussianEvent(sigma), epochs)``  replace-one
============================  ==================================================  ============

The event is accounted with :func:`dpledger.accountant.select.account`, which returns a
certified bracket ``[lower, upper]`` on the run's epsilon at the given delta; Opacus's own
figure is printed beside it. Only public parameters and step counts are read: no data value,
sampled index or gradient. torch and Opacus are imported only when a tracker is attached.

Soundness of the shuffled case: an epoch cut short (the loop left the data loader early, or
training stopped mid-epoch) is counted as a full epoch for the upper bound (releasing a prefix
of an epoch's batches is post-processing of the full epoch) and left out of the lower bound.
A data loader with ``drop_last=True`` whose batch size does not divide the dataset gets the
upper bound of the loader that keeps the last, short batch (dropping it is post-processing)
and no certified lower bound.

Reference: L. Chua, B. Ghazi, P. Kamath, R. Kumar, P. Manurangsi, A. Sinha, C. Zhang, "How
Private are DP-SGD Implementations?", ICML 2024 (arXiv 2403.17673).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from dpledger.accountant import select
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
from dpledger.report.numbers import fmt_down, fmt_up
from dpledger.runtime.run_dir import write_run_dir
from dpledger.runtime.run_record import RECORD_FILE, RunRecord
from dpledger.runtime.session import privacy_section, record_fields

#: the method name a run record of a tracked Opacus run carries
METHOD = "opacus_dp_sgd"
POISSON = "poisson"
SHUFFLED = "shuffled"
FIXED_ORDER = "fixed_order"
#: relative gap under which Opacus's figure is said to agree with the certified upper bound
AGREEMENT = 0.02

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


def _epoch_notes(b: Batching, epochs: int, complete: int) -> list[str]:
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


def _disagreements(
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


class _PassCounter:
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
    return sampler.sampler if isinstance(sampler, _PassCounter) else sampler


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


def _compose(parts: Sequence[tuple[Event, int]]) -> Event:
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
        event = _compose(parts)
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
    low: Event | None = _compose(lower) if lower else None
    if batching.kind == SHUFFLED and batching.drop_last and batching.remainder:
        low = None
    return _compose(upper), low, len(by_epoch), complete


# ---------------------------------------------------------------------------------------------
# the result: certified bracket and Opacus's figure
# ---------------------------------------------------------------------------------------------
@attrs.frozen
class OpacusResult:
    """The certified bracket of what ran, and Opacus's own figure beside it."""

    delta: float
    batching: Batching
    steps: int
    noise_multipliers: tuple[float, ...]
    max_grad_norms: tuple[Any, ...]
    epochs: int
    complete_epochs: int
    event: Event
    lower_event: Event | None
    adjacency: Adjacency
    #: certified: the run's epsilon at ``delta`` is at most this
    epsilon: float
    #: certified: the run's epsilon at ``delta`` is at least this (0: none certified)
    epsilon_lower: float
    method: str
    selection: select.Selection
    opacus_epsilon: float | None
    opacus_accountant: str
    #: (noise multiplier, sample rate, steps) as Opacus's accountant recorded them
    opacus_history: tuple[tuple[float, float, int], ...]
    #: what Opacus's figure is: a claim about this run, or about a run that did not happen
    opacus_status: str
    explanation: str
    notes: tuple[str, ...] = ()
    #: shuffled/fixed order: Poisson sampling at Opacus's rate under replace-one (reference)
    poisson_same_relation: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "delta": self.delta,
            "batching": self.batching.to_dict(),
            "steps": self.steps,
            "noise_multipliers": list(self.noise_multipliers),
            "max_grad_norms": [list(c) if isinstance(c, tuple) else c for c in self.max_grad_norms],
            "epochs": self.epochs,
            "complete_epochs": self.complete_epochs,
            "event": self.event.to_dict(),
            "lower_event": None if self.lower_event is None else self.lower_event.to_dict(),
            "adjacency": self.adjacency.to_dict(),
            "certified_upper": self.epsilon,
            "certified_lower": self.epsilon_lower,
            "method": self.method,
            "opacus_epsilon": self.opacus_epsilon,
            "opacus_accountant": self.opacus_accountant,
            "opacus_history": [list(h) for h in self.opacus_history],
            "opacus_status": self.opacus_status,
            "poisson_same_relation": self.poisson_same_relation,
            "explanation": self.explanation,
            "notes": list(self.notes),
        }

    def summary(self) -> str:
        """A few lines for a terminal: the bracket, Opacus's figure, and why they differ."""
        b = self.batching
        sig = ", ".join(f"{s:g}" for s in self.noise_multipliers)
        norms = ", ".join(str(c) for c in self.max_grad_norms)
        epochs = "" if b.kind == POISSON else f" in {self.epochs} epoch(s)"
        lines = [
            f"Opacus DP-SGD run: {self.steps} noisy steps{epochs}, noise multiplier {sig}, "
            f"max grad norm {norms}",
            f"batches: {b.describe()}",
            f"event: {self.event.describe()}",
            f"adjacency: {self.adjacency.describe()}; delta = {self.delta:g}",
            f"  certified upper bound   epsilon <= {fmt_up(self.epsilon)}   ({self.method})",
        ]
        if self.epsilon_lower > 0:
            lines.append(f"  certified lower bound   epsilon >= {fmt_down(self.epsilon_lower)}")
        else:
            lines.append("  certified lower bound   none")
        opacus = "n/a" if self.opacus_epsilon is None else f"{self.opacus_epsilon:.6g}"
        lines.append(
            f"  Opacus ({self.opacus_accountant})".ljust(26)
            + f"epsilon  = {opacus}   {self.opacus_status}"
        )
        if self.poisson_same_relation is not None:
            lines.append(
                "  Poisson at Opacus's rate under replace-one (did not run): epsilon <= "
                f"{fmt_up(self.poisson_same_relation)}"
            )
        lines.append(self.explanation)
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)


def _bracket(selection: select.Selection) -> tuple[float, float, str]:
    bound = selection.bound
    eps = getattr(bound, "epsilon", math.inf)
    low = getattr(bound, "epsilon_lower", 0.0)
    return float(eps), float(low), str(bound.method)


def explain(
    batching: Batching,
    upper: float,
    lower: float,
    opacus: float | None,
    accountant: str,
    opacus_rate: float | None,
) -> tuple[str, str]:
    """(what Opacus's figure is, the one-line explanation of any mismatch)."""
    bracket = f"[{fmt_down(lower)}, {fmt_up(upper)}]"
    rate = f"q={opacus_rate:.4g}" if opacus_rate is not None else "its rate"
    if batching.kind != POISSON:
        status = (
            f"accounts Poisson sampling at {rate}, which did not run: no theorem covers this run"
        )
        how = "shuffled" if batching.kind == SHUFFLED else "taken in a fixed order"
        line = (
            f"Opacus accounts Poisson sampling, but batches were {how}: the certified bound "
            f"for what ran is {bracket}."
        )
        if opacus is not None and opacus < lower:
            line += (
                f" Opacus's {opacus:.6g} is below the certified lower bound: it "
                "under-states this run's privacy loss."
            )
        return status, line
    kinds = {
        "rdp": "an RDP upper bound for Poisson sampling",
        "prv": "a PRV numerical bound for Poisson sampling",
        "gdp": "a central-limit approximation, not a bound",
    }
    status = kinds.get(accountant, f"Opacus's {accountant} figure for Poisson sampling")
    status += " (as ran; not certified by dpledger)"
    if opacus is None:
        return status, f"Poisson sampling ran; the certified bound is {bracket}."
    if opacus < lower:
        line = (
            f"Opacus's {opacus:.6g} is below the certified lower bound {fmt_down(lower)}: "
            "it under-states this run's privacy loss"
        )
    elif abs(opacus - upper) <= AGREEMENT * upper:
        line = (
            f"Poisson sampling ran, as Opacus accounts it: Opacus's figure agrees with the "
            f"certified upper bound within {100 * abs(opacus - upper) / upper:.1f}%"
        )
    elif opacus > upper:
        line = (
            f"Poisson sampling ran, as Opacus accounts it: Opacus's figure is "
            f"{100 * (opacus / upper - 1):.1f}% above the certified upper bound (looser)"
        )
    else:
        line = (
            "Poisson sampling ran, as Opacus accounts it: Opacus's figure lies inside the "
            "certified bracket"
        )
    return status, f"{line}; certified bracket {bracket}."


# ---------------------------------------------------------------------------------------------
# the tracker
# ---------------------------------------------------------------------------------------------
class OpacusTracker:
    """Records every noisy step of an Opacus ``DPOptimizer`` and the batch construction.

    Use :meth:`attach` after ``privacy_engine.make_private(...)`` and before the first step::

        model, optimizer, loader = engine.make_private(module=..., optimizer=...,
                                                       data_loader=..., ...)
        tracker = OpacusTracker.attach(engine, optimizer, loader)
        ...  # train as usual
        print(tracker.summary(delta=1e-5))
        tracker.write_run("runs/dp-sgd", delta=1e-5)   # `dpledger report runs/dp-sgd`
    """

    def __init__(self, privacy_engine: Any, optimizer: Any, data_loader: Any) -> None:
        self.privacy_engine = privacy_engine
        self.optimizer = optimizer
        self.data_loader = data_loader
        self.batching = detect_batching(data_loader)
        self._steps: list[Step] = []
        self._counter: _PassCounter | None = None
        self._previous_hook: Callable[[Any], None] | None = None
        self._attached = False
        #: (delta, steps recorded) -> result: accounting is a function of both
        self._results: dict[tuple[float, int], OpacusResult] = {}

    # -- attaching -------------------------------------------------------------------------
    @classmethod
    def attach(cls, privacy_engine: Any, optimizer: Any, data_loader: Any) -> OpacusTracker:
        """Track ``optimizer`` (the ``DPOptimizer`` of ``privacy_engine.make_private``) over
        ``data_loader`` (the loader it returned). Call before the first optimizer step."""
        from opacus.optimizers import DPOptimizer

        if not isinstance(optimizer, DPOptimizer):
            raise InvalidParameterError(
                "optimizer",
                f"is a {type(optimizer).__name__}, not an Opacus DPOptimizer",
                "pass the optimizer that privacy_engine.make_private returned",
            )
        name = type(optimizer).__name__
        if "Distributed" in name or "FSDP" in name or "AdaClip" in name:
            raise UnsupportedEventError(
                f"{name} is not tracked (distributed training, or adaptive clipping, which "
                "spends privacy on the clipping norm too)"
            )
        done = sum(int(h[2]) for h in _history(privacy_engine))
        if done:
            raise InvalidParameterError(
                "optimizer",
                f"Opacus has already accounted {done} steps",
                "attach the tracker before the first optimizer step",
            )
        tracker = cls(privacy_engine, optimizer, data_loader)
        tracker._hook()
        return tracker

    def _hook(self) -> None:
        self._previous_hook = self.optimizer.step_hook
        previous = self._previous_hook

        def hook(optimizer: Any) -> None:
            if previous is not None:
                previous(optimizer)  # Opacus's own accountant
            self._record(optimizer)

        self.optimizer.attach_step_hook(hook)
        if self.batching.kind != POISSON:
            batch_sampler = self.data_loader.batch_sampler
            self._counter = _PassCounter(batch_sampler.sampler)
            batch_sampler.sampler = self._counter
        self._attached = True

    def detach(self) -> None:
        """Give the optimizer back its previous step hook and the loader its sampler."""
        if not self._attached:
            return
        self.optimizer.step_hook = self._previous_hook
        if self._counter is not None:
            self.data_loader.batch_sampler.sampler = self._counter.sampler
        self._attached = False

    def _record(self, optimizer: Any) -> None:
        norm = optimizer.max_grad_norm
        max_grad_norm: float | tuple[float, ...] = (
            tuple(float(c) for c in norm) if isinstance(norm, list | tuple) else float(norm)
        )
        epoch = self._counter.passes if self._counter is not None else 0
        self._steps.append(
            Step(
                noise_multiplier=float(optimizer.noise_multiplier),
                max_grad_norm=max_grad_norm,
                epoch=epoch,
                batches=int(optimizer.accumulated_iterations),
            )
        )

    # -- what ran --------------------------------------------------------------------------
    @property
    def steps(self) -> tuple[Step, ...]:
        return tuple(self._steps)

    @property
    def adjacency(self) -> Adjacency:
        return self.batching.adjacency

    def event(self) -> Event:
        """The event whose certified upper bound covers the executed steps."""
        return run_events(self.batching, self.steps)[0]

    def opacus_epsilon(self, delta: float) -> float | None:
        """Opacus's own figure (``privacy_engine.get_epsilon``), None before any step."""
        if not _history(self.privacy_engine):
            return None
        return float(self.privacy_engine.get_epsilon(delta))

    def result(self, delta: float) -> OpacusResult:
        """Account what ran at ``delta``; Opacus's figure and the explanation beside it."""
        if isinstance(delta, bool) or not isinstance(delta, int | float) or not 0 < delta < 1:
            raise InvalidParameterError("delta", f"must be in (0, 1), got {delta!r}", "e.g. 1e-5")
        key = (float(delta), len(self._steps))
        if key not in self._results:
            self._results[key] = self._result(float(delta))
        return self._results[key]

    def _result(self, delta: float) -> OpacusResult:
        steps = self.steps
        if not steps:
            raise InvalidParameterError(
                "tracker", "recorded no optimizer step", "train before asking what was spent"
            )
        b = self.batching
        upper_event, lower_event, epochs, complete = run_events(b, steps)
        adjacency = b.adjacency
        selection = select.account(upper_event, adjacency, delta=delta)
        upper, lower, method = _bracket(selection)
        notes = _epoch_notes(b, epochs, complete)
        if lower_event is None:
            lower = 0.0
        elif lower_event != upper_event:
            counted = select.account(lower_event, adjacency, delta=delta)
            lower = min(_bracket(counted)[1], upper)
        history = _history(self.privacy_engine)
        accountant = _mechanism(self.privacy_engine)
        opacus = self.opacus_epsilon(delta)
        rates = {h[1] for h in history}
        opacus_rate = next(iter(rates)) if len(rates) == 1 else None
        notes += _disagreements(b, history, len(steps), opacus_rate)
        same_relation = None
        if b.kind != POISSON and opacus_rate is not None:
            sigmas = [s.noise_multiplier for s in steps]
            reference = _compose(
                [(PoissonSampledEvent(opacus_rate, GaussianEvent(s)), 1) for s in sigmas]
            )
            same_relation = _bracket(select.account(reference, adjacency, delta=delta))[0]
        status, line = explain(b, upper, lower, opacus, accountant, opacus_rate)
        if b.kind == SHUFFLED and lower > 0:
            notes.append(
                "the lower bound is the max-of-batch-sums attack of Chua et al. (ICML 2024), "
                "with its likelihood ratio, on DP-SGD with these parameters: a guarantee for "
                "them cannot be smaller"
            )
        return OpacusResult(
            delta=delta,
            batching=b,
            steps=len(steps),
            noise_multipliers=tuple(sorted({s.noise_multiplier for s in steps})),
            max_grad_norms=tuple(dict.fromkeys(s.max_grad_norm for s in steps)),
            epochs=epochs,
            complete_epochs=complete,
            event=upper_event,
            lower_event=lower_event,
            adjacency=adjacency,
            epsilon=upper,
            epsilon_lower=lower,
            method=method,
            selection=selection,
            opacus_epsilon=opacus,
            opacus_accountant=accountant,
            opacus_history=history,
            opacus_status=status,
            explanation=line,
            notes=tuple(notes),
            poisson_same_relation=same_relation,
        )

    def summary(self, delta: float) -> str:
        """:meth:`OpacusResult.summary` of :meth:`result`."""
        return self.result(delta).summary()

    def write_run(self, out: str | os.PathLike[str], delta: float) -> Path:
        """Write a run directory (``ledger.json``, public facts only) that
        ``dpledger report OUT`` reads; returns its path."""
        _check_out(Path(out))
        return write_run(out, self.result(delta), secure=bool(self.privacy_engine.secure_mode))


def make_private(privacy_engine: Any, **kwargs: Any) -> tuple[Any, ...]:
    """``privacy_engine.make_private(**kwargs)`` with a tracker attached: its outputs followed
    by the :class:`OpacusTracker`."""
    out = tuple(privacy_engine.make_private(**kwargs))
    tracker = OpacusTracker.attach(privacy_engine, out[1], out[-1])
    return (*out, tracker)


def _history(privacy_engine: Any) -> tuple[tuple[float, float, int], ...]:
    accountant = getattr(privacy_engine, "accountant", None)
    history = getattr(accountant, "history", None) or []
    return tuple((float(h[0]), float(h[1]), int(h[2])) for h in history)


def _mechanism(privacy_engine: Any) -> str:
    accountant = getattr(privacy_engine, "accountant", None)
    mechanism = getattr(accountant, "mechanism", None)
    return str(mechanism()) if callable(mechanism) else type(accountant).__name__


# ---------------------------------------------------------------------------------------------
# the run directory
# ---------------------------------------------------------------------------------------------
def run_record(result: OpacusResult, *, secure: bool = False) -> RunRecord:
    """The public record of a tracked run: its event, adjacency, steps and the bracket."""
    b = result.batching
    log: list[dict[str, Any]] = []
    if b.kind == POISSON:
        log.append({"step": "batches", "poisson_sample": b.sample_rate})
    else:
        log.append({"step": "batches", f"{b.kind}_batches": [b.batch_size, b.dataset_size]})
    event = result.event.to_dict()
    ledger = {
        "declared": event,
        "declared_unit": "row",
        "unit_steps": [],
        "executed": event,
        "adjacency": result.adjacency.to_dict(),
        "secure_seed": secure,
        "steps": log,
    }
    privacy = {**privacy_section(result.selection), "epsilon_lower": result.epsilon_lower}
    params = {
        "noise_multipliers": list(result.noise_multipliers),
        "max_grad_norms": [list(c) if isinstance(c, tuple) else c for c in result.max_grad_norms],
        "steps": result.steps,
        "epochs": result.epochs,
        "complete_epochs": result.complete_epochs,
        "batching": b.to_dict(),
        "opacus": {
            "accountant": result.opacus_accountant,
            "epsilon": result.opacus_epsilon,
            "history": [list(h) for h in result.opacus_history],
            "status": result.opacus_status,
        },
        "poisson_same_relation": result.poisson_same_relation,
        "lower_event": None if result.lower_event is None else result.lower_event.to_dict(),
        "explanation": result.explanation,
        "notes": list(result.notes),
    }
    return record_fields(
        method=METHOD,
        provenance=None,
        params=params,
        ledger=ledger,
        declared_core=result.event,
        per_unit=result.event,
        lift_rules=(),
        privacy=privacy,
        exact_match=True,
    )


def _check_out(path: Path) -> None:
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise InvalidParameterError(
            "out", f"{path} exists and is not an empty directory", "choose a new run directory"
        )


def write_run(out: str | os.PathLike[str], result: OpacusResult, *, secure: bool = False) -> Path:
    """Write the run's record into ``out`` (new or empty), through a temporary sibling."""
    path = Path(out)
    _check_out(path)
    write_run_dir(path, {}, run_record(result, secure=secure))
    return path


def read_result(run_dir: str | os.PathLike[str]) -> Mapping[str, Any]:
    """The Opacus comparison stored in a run directory written by :func:`write_run`."""
    data = json.loads((Path(run_dir) / RECORD_FILE).read_text(encoding="utf-8"))
    record = RunRecord.from_json(data)
    return record.params
