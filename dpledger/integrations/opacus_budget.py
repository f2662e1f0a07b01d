"""An Opacus training run booked in a privacy budget store before its first noisy step.

``OpacusTracker.attach(..., budget=OpacusBudget(STORE, "patients", steps=N, accumulation=k))``
states the planned run and books it (:func:`dpledger.budget.store.book`) before training
starts: N noisy steps, each summing k logical batches under one noise draw, accounted as the
tracker accounts them (:func:`~dpledger.integrations.opacus_events.run_events`): k
Poisson-sampled Gaussian steps at multiplier sigma / sqrt(k) per noisy step, at the loader's
rate (plain, distributed or weighted Poisson: the largest rate), or the draws of weighted
sampling with replacement. A plan that does not fit raises
:class:`~dpledger.budget.rules.BudgetRefused` from ``attach``, before any step.

Every noisy step is then compared, before the optimizer applies it, with the plan: the step's
accounted events (the logical batches the tracker counts, at the multiplier it accounts) must
be dominated by booked ones, each at a sampling rate no larger and a multiplier no smaller, and
their number must stay within the booking. The run is then a post-processing of a prefix of
the booked composition, so its spend is within what was booked under every rule. A step that
would spend more (more batches accumulated than planned, a lowered multiplier, a step beyond
the plan) raises :class:`~dpledger.core.errors.LedgerViolationError` from the optimizer's step
hook, before the update. A run killed after its booking keeps the spend booked.
"""

from __future__ import annotations

from typing import Any

from dpledger.core.errors import InvalidParameterError, LedgerViolationError
from dpledger.core.events import (
    ComposedEvent,
    Event,
    GaussianEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
)
from dpledger.integrations.opacus_events import SAMPLED, Step, adaptive_noise, run_events

__all__ = ["OpacusBudget"]

#: (sampling rate, noise multiplier) of one accounted Poisson-sampled Gaussian batch
Part = tuple[float, float]


def _positive(name: str, value: Any, example: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidParameterError(
            name, f"must be a positive integer, got {value!r}", f"pass {name}={example}"
        )
    return value


def _parts(event: Event) -> dict[Part, int]:
    """The accounted batches of a run's event: (rate, multiplier) -> count."""
    items = event.events if isinstance(event, ComposedEvent) else (event,)
    out: dict[Part, int] = {}
    for item in items:
        assert isinstance(item, SelfComposedEvent)
        inner = item.event
        assert isinstance(inner, PoissonSampledEvent) and isinstance(inner.event, GaussianEvent)
        key = (float(inner.sampling_probability), float(inner.event.noise_multiplier))
        out[key] = out.get(key, 0) + int(item.count)
    return out


class OpacusBudget:
    """The store, source and plan (noisy steps, logical batches per step) of one run."""

    def __init__(
        self,
        store: str,
        source: str,
        *,
        steps: int,
        accumulation: int = 1,
        unit: str = "row",
        run_id: str | None = None,
    ) -> None:
        self.steps = _positive("steps", steps, "1000")
        self.accumulation = _positive("accumulation", accumulation, "4")
        self.store, self.source, self.unit, self.run_id = store, source, unit, run_id
        self.entry: dict[str, Any] | None = None
        #: the booked batches: (rate, multiplier) and how many
        self.booked: tuple[Part, int] | None = None
        #: the batches accounted so far, and noisy steps taken
        self.accounted: dict[Part, int] = {}
        self.taken = 0

    def planned_event(self, tracker: Any) -> Event:
        """The run as planned, accounted as the tracker will account it."""
        batching = tracker.batching
        if batching.kind not in SAMPLED:
            raise InvalidParameterError(
                "budget",
                f"a run of {batching.kind} batching cannot be booked at attach time",
                "use Poisson sampling (make_private's default), or book the run's event with "
                "dpledger budget book",
            )
        step = self._step(tracker.optimizer, self.accumulation)
        return run_events(batching, (step,) * self.steps)[0]

    @staticmethod
    def _step(optimizer: Any, batches: int) -> Step:
        adaptive = adaptive_noise(optimizer)
        return Step(
            noise_multiplier=float(optimizer.noise_multiplier),
            max_grad_norm=0.0,
            epoch=0,
            batches=batches,
            effective_noise=adaptive.get("effective_noise"),
            count_noise=adaptive.get("count_noise"),
        )

    def book(self, tracker: Any) -> dict[str, Any]:
        """Book the planned run, then guard the optimizer's steps (call before training)."""
        from dpledger.budget.store import book

        self.refuse_if_not_covered(tracker)  # a departure found at attach: nothing is booked
        event = self.planned_event(tracker)
        ((part, count),) = _parts(event).items()
        self.entry = book(
            self.store,
            self.source,
            event,
            unit=self.unit,
            run_id=self.run_id,
            relation=tracker.batching.adjacency.relation,
            parameters={
                "integration": "opacus",
                "steps": self.steps,
                "accumulation": self.accumulation,
            },
        )
        self.booked = (part, count)
        self._guard(tracker)
        return self.entry

    def _batches(self, tracker: Any, optimizer: Any) -> int:
        """Logical batches of the noisy step now running, as the tracker will count them."""
        counter = getattr(tracker, "_counter", None)
        if counter is not None and counter.exact:
            return int(counter.pending)
        return max(1, int(optimizer.accumulated_iterations))

    def admit(self, batching: Any, step: Step) -> None:
        """Count ``step``'s accounted batches, or refuse it if the booking does not cover them."""
        assert self.booked is not None
        (rate, sigma), count = self.booked
        self.taken += 1
        new = _parts(run_events(batching, (step,))[0])
        accounted = dict(self.accounted)
        for key, n in new.items():
            accounted[key] = accounted.get(key, 0) + n
        weaker = [k for k in new if k[0] > rate or k[1] < sigma]
        total = sum(accounted.values())
        if weaker or total > count:
            what = (
                f"accounts batches at rate {weaker[0][0]:.6g}, multiplier {weaker[0][1]:.6g}, "
                f"beyond the booked rate {rate:.6g}, multiplier {sigma:.6g}"
                if weaker
                else f"brings the accounted batches to {total}, beyond the {count} booked"
            )
            raise LedgerViolationError(
                f"noisy step {self.taken} ({step.batches} logical batches) {what} in "
                f"{self.store} (booked for {self.steps} steps of {self.accumulation} batches): "
                "refused before the optimizer applies it. Fix: book the run as it trains "
                "(steps, accumulation) or book the further steps as a new run"
            )
        self.accounted = accounted

    def refuse_if_not_covered(self, tracker: Any) -> None:
        """Refuse the step once a check has found a departure that voids the bound (the
        sampler's rate raised after attach, records no sampler drew, too little noise, ...):
        the booking was made for the run as declared, and no longer bounds what it spends."""
        voiding = [f for f in tracker.findings if f.voids]
        if voiding:
            raise LedgerViolationError(
                f"{voiding[0].line()}; a booking in {self.store} covers the run as declared, "
                "not this one: refused before the optimizer applies a step. Fix: remove the "
                "departure and book the run again"
            )

    def _guard(self, tracker: Any) -> None:
        optimizer = tracker.optimizer
        previous = optimizer.step_hook

        def guard(opt: Any) -> None:
            step = self._step(opt, self._batches(tracker, opt))
            if previous is not None:
                previous(opt)  # the tracker records the step and runs its checks
            self.refuse_if_not_covered(tracker)
            self.admit(tracker.batching, step)

        optimizer.attach_step_hook(guard)
