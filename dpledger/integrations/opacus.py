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
figure is printed beside it. The accounting reads only public parameters and counts (no data
value or sampled index); the clipping check recomputes each step's clipped sum from the
per-sample gradients and keeps nothing of them (:mod:`.opacus_checks`). torch and Opacus are
imported only when a tracker is attached.

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

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from dpledger.accountant import select
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import (
    Event,
)
from dpledger.integrations.opacus_accumulation import BatchCounter, gradients_pending
from dpledger.integrations.opacus_checks import (
    ClipWatch,
    Finding,
    StepMonitor,
    attach_findings,
    check_module,
    check_optimizer,
    finding_lines,
)
from dpledger.integrations.opacus_events import (
    ADD_REMOVE,
    FIXED_ORDER,
    POISSON,
    REPLACE_ONE,
    SAMPLED,
    SHUFFLED,
    Batching,
    Step,
    adaptive_noise,
    detect_batching,
    epoch_notes,
    rate_disagreements,
    run_events,
)
from dpledger.integrations.opacus_figures import (
    AGREEMENT,
    OpacusFigure,
    difference,
    explain,
    opacus_figures,
)
from dpledger.integrations.opacus_figures import bracket as _bracket
from dpledger.integrations.opacus_figures import same_relation as _same_relation
from dpledger.integrations.opacus_noise import NoiseWatch
from dpledger.integrations.opacus_run import METHOD, check_out, read_result, run_record, write_run
from dpledger.integrations.opacus_updates import UpdateWatch, rows_not_drawn, sampler_changed
from dpledger.report.numbers import fmt_down, fmt_up

__all__ = [
    "ADD_REMOVE",
    "AGREEMENT",
    "FIXED_ORDER",
    "METHOD",
    "POISSON",
    "REPLACE_ONE",
    "SHUFFLED",
    "Batching",
    "OpacusFigure",
    "OpacusResult",
    "OpacusTracker",
    "Step",
    "detect_batching",
    "explain",
    "make_private",
    "read_result",
    "run_events",
    "run_record",
    "write_run",
]


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
    #: departures from what the accounting assumes (:mod:`.opacus_checks`)
    findings: tuple[Finding, ...] = ()
    #: Opacus's prv and rdp figures on ``opacus_history`` (:mod:`.opacus_figures`)
    opacus_figures: tuple[OpacusFigure, ...] = ()
    #: why those two figures differ ('' unless both were computed)
    opacus_difference: str = ""

    @property
    def covered(self) -> bool:
        """Whether the certified bound covers the run: no finding voids it."""
        return not any(f.voids for f in self.findings)

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
            "opacus_figures": [f.to_dict() for f in self.opacus_figures],
            "opacus_difference": self.opacus_difference,
            "poisson_same_relation": self.poisson_same_relation,
            "explanation": self.explanation,
            "notes": list(self.notes),
            "findings": [f.to_dict() for f in self.findings],
            "covered": self.covered,
        }

    def summary(self) -> str:
        """A few lines for a terminal: the bracket, Opacus's figure, and why they differ."""
        b = self.batching
        sig = ", ".join(f"{s:g}" for s in self.noise_multipliers)
        norms = ", ".join(str(c) for c in self.max_grad_norms)
        epochs = "" if b.kind in SAMPLED else f" in {self.epochs} epoch(s)"
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
        for f in self.opacus_figures:
            value = "n/a" if f.epsilon is None else f"{f.epsilon:.6g}"
            lines.append(
                f"  Opacus {f.accountant} (history)".ljust(26)
                + f"epsilon  = {value}   {f.comparison}"
            )
        if self.opacus_difference:
            lines.append(f"  {self.opacus_difference}")
        if self.poisson_same_relation is not None:
            lines.append(
                "  Poisson at Opacus's rate under replace-one (did not run): epsilon <= "
                f"{fmt_up(self.poisson_same_relation)}"
            )
        lines.append(self.explanation)
        lines.extend(f"note: {n}" for n in self.notes)
        if not self.covered:
            lines.append(
                "NOT COVERED: a flagged departure below breaks an assumption of the bound; the "
                "numbers above hold for the run as accounted, not for the run that happened"
            )
        lines.extend(finding_lines(self.findings))
        return "\n".join(lines)


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

    def __init__(
        self, privacy_engine: Any, optimizer: Any, data_loader: Any, module: Any = None
    ) -> None:
        self.privacy_engine = privacy_engine
        self.optimizer = optimizer
        self.data_loader = data_loader
        self.batching = detect_batching(data_loader)
        self._steps: list[Step] = []
        self._findings: list[Finding] = []
        self._monitor = StepMonitor(optimizer, module)
        self._clip_watch: ClipWatch | None = None
        self._noise_watch = NoiseWatch(optimizer)
        self._update_watch = UpdateWatch(optimizer)
        self._sampler_finding: Finding | None = None
        self._rows_finding: Finding | None = None
        self._counter: BatchCounter | None = None
        self._previous_hook: Callable[[Any], None] | None = None
        self._attached = False
        #: (delta, steps recorded) -> result: accounting is a function of both
        self._results: dict[tuple[float, int], OpacusResult] = {}

    # -- attaching -------------------------------------------------------------------------
    @classmethod
    def attach(
        cls,
        privacy_engine: Any,
        optimizer: Any,
        data_loader: Any,
        *,
        public_normaliser: float | None = None,
        module: Any = None,
        source_loader: Any = None,
        budget: Any = None,
    ) -> OpacusTracker:
        """Track ``optimizer`` (the ``DPOptimizer`` of ``privacy_engine.make_private``) over
        ``data_loader`` (the loader it returned). Call before the first optimizer step.

        ``public_normaliser``: the optimizer's ``expected_batch_size`` when it is a public
        number (not derived from the dataset size); ``module``: the model make_private returned
        (checks ghost clipping); ``source_loader``: the loader given to make_private (checks
        that its sampler was kept). See :mod:`dpledger.integrations.opacus_checks`.
        ``budget``: an :class:`~dpledger.integrations.opacus_budget.OpacusBudget`, which books
        the planned run in a budget store before the first step and refuses steps beyond it."""
        from opacus.optimizers import DPOptimizer

        if isinstance(optimizer, DPOptimizer):
            check_optimizer(optimizer, detect_batching(data_loader))
        else:
            check_optimizer(optimizer, Batching(POISSON, 1, 1))
        check_module(module)
        done = sum(int(h[2]) for h in _history(privacy_engine))
        if done:
            raise InvalidParameterError(
                "optimizer",
                f"Opacus has already accounted {done} steps",
                "attach the tracker before the first optimizer step",
            )
        tracker = cls(privacy_engine, optimizer, data_loader, module)
        tracker._findings = attach_findings(
            privacy_engine,
            optimizer,
            data_loader,
            tracker.batching,
            public_normaliser=public_normaliser,
            source_loader=source_loader,
            module=module,
        )
        tracker._hook()
        if budget is not None:  # booked before the first noisy step, or refused here; its
            budget.book(tracker)  # guard wraps the tracker's hook and sees each step's checks
        return tracker

    def _hook(self) -> None:
        self._previous_hook = self.optimizer.step_hook
        previous = self._previous_hook

        def hook(optimizer: Any) -> None:
            if previous is not None:
                previous(optimizer)  # Opacus's own accountant
            self._record(optimizer)

        self.optimizer.attach_step_hook(hook)
        workers = int(getattr(self.data_loader, "num_workers", 0) or 0)
        self._counter = BatchCounter(
            self.data_loader.batch_sampler,
            workers=workers,
            in_progress=self._in_progress,
        )
        self._counter.install()
        if not self._monitor.ghost:
            self._clip_watch = ClipWatch(self.optimizer)
            self._clip_watch.install()
        self._noise_watch.install()
        self._update_watch.install()
        self._attached = True

    def _in_progress(self) -> bool:
        """Whether gradients of the batches drawn since the last noisy step are pending."""
        if gradients_pending(self.optimizer):
            return True
        return self._monitor.ghost and self._monitor.fresh_norms()

    def detach(self) -> None:
        """Give the optimizer back its previous step hook and the loader its sampler."""
        if not self._attached:
            return
        self.optimizer.step_hook = self._previous_hook
        if self._counter is not None:
            self._counter.remove()
        if self._clip_watch is not None:
            self._clip_watch.remove()
        self._noise_watch.remove()
        self._update_watch.remove()
        self._attached = False

    def _record(self, optimizer: Any) -> None:
        norm = optimizer.max_grad_norm
        max_grad_norm: float | tuple[float, ...] = (
            tuple(float(c) for c in norm) if isinstance(norm, list | tuple) else float(norm)
        )
        assert self._counter is not None
        batches, first = self._counter.take(int(optimizer.accumulated_iterations))
        epoch = 0 if self.batching.kind in SAMPLED else self._counter.passes
        self._steps.append(
            Step(
                noise_multiplier=float(optimizer.noise_multiplier),
                max_grad_norm=max_grad_norm,
                epoch=epoch,
                batches=batches,
                first_epoch=None if epoch == 0 or first == epoch else first,
                **adaptive_noise(optimizer),
            )
        )
        self._monitor.check(optimizer, len(self._steps), batches)
        if self._clip_watch is not None:
            self._clip_watch.verify(len(self._steps))
        self._update_watch.check(len(self._steps))
        step = len(self._steps)
        self._sampler_finding = self._sampler_finding or sampler_changed(
            self.data_loader, self.batching, step
        )
        if self._clip_watch is not None:
            clipped = self._clip_watch.take_rows()
            drawn = self._counter.taken_rows
            self._rows_finding = self._rows_finding or rows_not_drawn(drawn, clipped, batches, step)
        self._noise_watch.record(float(optimizer.noise_multiplier), max_grad_norm, len(self._steps))

    # -- what ran --------------------------------------------------------------------------
    @property
    def steps(self) -> tuple[Step, ...]:
        return tuple(self._steps)

    @property
    def adjacency(self) -> Adjacency:
        return self.batching.adjacency

    @property
    def findings(self) -> tuple[Finding, ...]:
        """What the checks found so far (attach time, then every step)."""
        clip = self._clip_watch.finding if self._clip_watch is not None else None
        noise, update = self._noise_watch.finding, self._update_watch.finding
        later = (clip, noise, update, self._sampler_finding, self._rows_finding)
        extra = [f for f in later if f is not None]
        return (*self._findings, *self._monitor.findings, *extra)

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
        findings = self.findings
        selection = select.account(upper_event, adjacency, delta=delta)
        upper, lower, method = _bracket(selection)
        notes = epoch_notes(b, epochs, complete, steps)
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
        notes += rate_disagreements(b, history, len(steps), opacus_rate)
        same_relation = None
        if b.kind not in SAMPLED and opacus_rate is not None:
            same_relation = _same_relation(steps, opacus_rate, adjacency, delta)
        status, line = explain(b, upper, lower, opacus, accountant, opacus_rate)
        figures = opacus_figures(
            history, delta, b, lower, upper, opacus_rate, known=(accountant, opacus)
        )
        notes += _lower_note(b, lower)
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
            findings=findings,
            opacus_figures=figures,
            opacus_difference=difference(figures),
        )

    def summary(self, delta: float) -> str:
        """:meth:`OpacusResult.summary` of :meth:`result`."""
        return self.result(delta).summary()

    def write_run(self, out: str | os.PathLike[str], delta: float) -> Path:
        """Write a run directory (``ledger.json``, public facts only) that
        ``dpledger report OUT`` reads; returns its path."""
        check_out(Path(out))
        return write_run(out, self.result(delta), secure=bool(self.privacy_engine.secure_mode))


def _lower_note(batching: Batching, lower: float) -> list[str]:
    if batching.kind != SHUFFLED or lower <= 0:
        return []
    return [
        "the lower bound is the max-of-batch-sums attack of Chua et al. (ICML 2024), with its "
        "likelihood ratio, on DP-SGD with these parameters: a guarantee for them cannot be "
        "smaller"
    ]


def make_private(privacy_engine: Any, **kwargs: Any) -> tuple[Any, ...]:
    """``privacy_engine.make_private(**kwargs)`` with a tracker attached: its outputs followed
    by the :class:`OpacusTracker` (``public_normaliser=`` goes to the tracker)."""
    public = kwargs.pop("public_normaliser", None)
    out = tuple(privacy_engine.make_private(**kwargs))
    tracker = OpacusTracker.attach(
        privacy_engine,
        out[1],
        out[-1],
        public_normaliser=public,
        module=out[0],
        source_loader=kwargs.get("data_loader"),
    )
    return (*out, tracker)


def _history(privacy_engine: Any) -> tuple[tuple[float, float, int], ...]:
    accountant = getattr(privacy_engine, "accountant", None)
    history = getattr(accountant, "history", None) or []
    return tuple((float(h[0]), float(h[1]), int(h[2])) for h in history)


def _mechanism(privacy_engine: Any) -> str:
    accountant = getattr(privacy_engine, "accountant", None)
    mechanism = getattr(accountant, "mechanism", None)
    return str(mechanism()) if callable(mechanism) else type(accountant).__name__
