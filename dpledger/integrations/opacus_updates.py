"""What changes after attach behind the tracker's back: the model's parameters updated by no
noisy step of the tracked optimizer, and the sampler's parameters.

:class:`UpdateWatch` records the version counter of every parameter of the ``DPOptimizer``
after each of its updates (a step post-hook of the optimizer it wraps). At the next noisy step
the counters must be the same: an in-place change in between (a second optimizer, DP or not,
stepping on the same parameters) updated the model with gradients the tracker neither saw nor
accounted. A change through ``.data`` does not move the counter and is not seen.

At every noisy step the batch construction is read again from the data loader
(:func:`~dpledger.integrations.opacus_events.detect_batching`); a sampler whose rate, batch
size or weights were changed after attach draws records at a rate the run is not accounted at.
"""

from __future__ import annotations

from typing import Any

from dpledger.integrations.opacus_checks import FLAGGED, Finding

__all__ = ["UpdateWatch", "rows_not_drawn", "sampler_changed"]


class UpdateWatch:
    """Flags parameters changed in place between two noisy steps of the tracked optimizer."""

    def __init__(self, optimizer: Any) -> None:
        self.optimizer = optimizer
        self.finding: Finding | None = None
        self._versions: list[int] | None = None
        self._handle: Any = None

    def install(self) -> None:
        inner = getattr(self.optimizer, "original_optimizer", None)
        if inner is not None and hasattr(inner, "register_step_post_hook"):
            self._handle = inner.register_step_post_hook(self._after)

    def remove(self) -> None:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    def _current(self) -> list[int]:
        return [int(p._version) for p in self.optimizer.params]

    def _after(self, *_: Any) -> None:
        self._versions = self._current()

    def check(self, step: int) -> None:
        """At a noisy step: flag a change since the tracked optimizer's last update."""
        if self.finding is not None or self._versions is None:
            return
        if self._current() != self._versions:
            self.finding = Finding(
                "parameters_updated_outside",
                FLAGGED,
                "the model's parameters changed in place between two noisy steps of the "
                "tracked optimizer (another optimizer stepped on them): those updates are not "
                "clipped, noised or accounted here",
                "train the model with the one optimizer make_private returned; account any "
                "other private training separately and compose the two",
                step,
                True,
            )


def sampler_changed(data_loader: Any, booked: Any, step: int) -> Finding | None:
    """A finding when the loader's batch construction is no longer the one booked at attach."""
    from dpledger.integrations.opacus_events import detect_batching

    now: Any
    try:
        now = detect_batching(data_loader)
    except Exception as error:
        now = error
    if now == booked:
        return None
    return Finding(
        "sampler_changed",
        FLAGGED,
        f"the data loader's batches changed after attach (booked: {booked.kind}, rate "
        f"{booked.inclusion_rate}; now: {getattr(now, 'kind', now)}, rate "
        f"{getattr(now, 'inclusion_rate', None)}): records are drawn at a rate the run is not "
        "accounted at",
        "keep the sampler's rate, batch size and weights fixed during training (attach a new "
        "tracker for a new schedule)",
        step,
        True,
    )


def rows_not_drawn(drawn: int | None, clipped: int, batches: int, step: int) -> Finding | None:
    """A finding when a noisy step of one logical batch clipped another number of per-sample
    gradients than the records its sampler drew (unknown with prefetching workers: None)."""
    if drawn is None or batches != 1 or drawn == clipped:
        return None
    return Finding(
        "rows_not_drawn",
        FLAGGED,
        f"the step clipped {clipped} per-sample gradients but the sampler drew {drawn} "
        "records: the batch holds records the sampler did not draw (a collate_fn or a "
        "dataset that adds or repeats records), at a rate the run is not accounted at",
        "let the data loader's batches be exactly the records its sampler draws",
        step,
        True,
    )
