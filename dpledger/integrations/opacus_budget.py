"""An Opacus training run booked in a privacy budget store before its first noisy step.

``OpacusTracker.attach(..., budget=OpacusBudget(STORE, "patients", steps=N))`` states the
planned run, N Poisson-sampled Gaussian steps at the optimizer's noise multiplier and the data
loader's sampling rate, books it (:func:`dpledger.budget.store.book`) and only then lets
training start: a booking that does not fit raises
:class:`~dpledger.budget.rules.BudgetRefused` from ``attach``, before any step. A step beyond
the N booked raises :class:`~dpledger.core.errors.LedgerViolationError` from the optimizer's
step hook, before the optimizer applies that step's noisy gradient. A run killed after its
booking keeps the spend booked. Only Poisson batching is booked this way; other batchings are
refused with the fix (book their event with ``dpledger budget book``).
"""

from __future__ import annotations

from typing import Any

from dpledger.core.errors import InvalidParameterError, LedgerViolationError
from dpledger.core.events import Event, GaussianEvent, PoissonSampledEvent, SelfComposedEvent
from dpledger.integrations.opacus_events import POISSON

__all__ = ["OpacusBudget"]


class OpacusBudget:
    """The store, source and planned number of noisy steps of one training run."""

    def __init__(
        self, store: str, source: str, *, steps: int, unit: str = "row", run_id: str | None = None
    ) -> None:
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise InvalidParameterError(
                "steps", f"must be a positive integer, got {steps!r}", "pass steps=1000"
            )
        self.store, self.source, self.unit, self.steps = store, source, unit, steps
        self.run_id = run_id
        self.entry: dict[str, Any] | None = None
        self._taken = 0

    def planned_event(self, tracker: Any) -> Event:
        """The run as planned: ``steps`` Poisson-sampled Gaussian steps."""
        batching = tracker.batching
        if batching.kind != POISSON or batching.sample_rate is None:
            raise InvalidParameterError(
                "budget",
                f"a run of {batching.kind} batching cannot be booked at attach time",
                "use Poisson sampling (make_private's default), or book the run's event with "
                "dpledger budget book",
            )
        sigma = float(tracker.optimizer.noise_multiplier)
        step = PoissonSampledEvent(float(batching.sample_rate), GaussianEvent(sigma))
        return SelfComposedEvent(step, self.steps)

    def book(self, tracker: Any) -> dict[str, Any]:
        """Book the planned run, then guard the optimizer's steps (call before training)."""
        from dpledger.budget.store import book

        event = self.planned_event(tracker)
        self.entry = book(
            self.store,
            self.source,
            event,
            unit=self.unit,
            run_id=self.run_id,
            relation=tracker.batching.adjacency.relation,
            parameters={"integration": "opacus", "steps": self.steps},
        )
        self._guard(tracker.optimizer)
        return self.entry

    def _guard(self, optimizer: Any) -> None:
        previous = optimizer.step_hook

        def guard(opt: Any) -> None:
            self._taken += 1
            if self._taken > self.steps:
                raise LedgerViolationError(
                    f"noisy step {self._taken} of a run booked for {self.steps} steps in "
                    f"{self.store}: refused before the optimizer applies it. Fix: book the "
                    "further steps as a new run"
                )
            if previous is not None:
                previous(opt)

        optimizer.attach_step_hook(guard)
