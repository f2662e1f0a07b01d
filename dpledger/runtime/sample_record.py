"""What a run publishes about its randomly sized batches: nothing that depends on their sizes.

The size of a Poisson sample (and of a batch of a random allocation) is random and, under
add/remove adjacency, depends on how many records there are. A method sees it (``len(batch)``)
and may act on it, e.g. skip an empty batch; what it then runs on the batch is a function of the
data that no event accounts for. The public record (``ledger.json``) therefore never shows it:

* every Poisson sample a run draws outside any other sample is stated in the public
  ``executed`` event, in the order drawn, as the declared Poisson-sampled step it is charged
  to, at the rate drawn: the first declared one, in declaration order, of rate at least that
  rate and not yet charged. So every sample the run opened is stated, whether its batch was
  empty or not and whatever ran on it (a sample that no declared Poisson step is left for is
  not stated: it runs within the rest of the declaration, checked by the ledger);
* the steps logged while a randomly sized batch is open (its noise, clips and nested draws)
  move to the private diagnostics when it closes; the public log keeps the draw itself (step
  and rate), made before the batch is seen.

The executed event as booked, batch by batch, goes to the private diagnostics.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dpledger.core.events import ComposedEvent, Event, PoissonSampledEvent, flatten


def _declared_poisson(declared: Event) -> list[list[Any]]:
    """``[step, times still to charge]`` for each declared Poisson-sampled step, in order."""
    return [
        [leaf, count] for leaf, count in flatten(declared) if isinstance(leaf, PoissonSampledEvent)
    ]


def _charge(declared: list[list[Any]], rate: float) -> Event | None:
    """The declared step a sample of ``rate`` is charged to, at that rate (None: none left)."""
    for slot in declared:
        step: PoissonSampledEvent = slot[0]
        if slot[1] > 0 and step.sampling_probability >= rate:
            slot[1] -= 1
            return (
                step if step.sampling_probability == rate else PoissonSampledEvent(rate, step.event)
            )
    return None


class PoissonDraws:
    """The Poisson samples a ledger drew outside any other sample, and the entries they booked."""

    def __init__(self) -> None:
        #: (number of ledger entries when drawn, rate), in the order drawn
        self._drawn: list[tuple[int, float]] = []
        #: indices of the ledger entries those samples booked when they closed
        self._booked: set[int] = set()

    def __bool__(self) -> bool:
        return bool(self._drawn)

    def drew(self, position: int, rate: float) -> None:
        self._drawn.append((position, rate))

    def booked(self, index: int) -> None:
        self._booked.add(index)

    def public_event(self, entries: Sequence[Event], declared: Event) -> Event:
        """The executed event with each drawn sample stated as the declared step it is charged
        to, in place of what it booked: a function of the declaration and the draws only."""
        budget = _declared_poisson(declared)
        stated: dict[int, list[Event]] = {}
        for position, rate in self._drawn:
            step = _charge(budget, rate)
            if step is not None:
                stated.setdefault(position, []).append(step)
        out: list[Event] = []
        for i in range(len(entries) + 1):
            out.extend(stated.get(i, ()))
            if i < len(entries) and i not in self._booked:
                out.append(entries[i])
        return ComposedEvent(out)


def move_to_private(
    log: list[dict[str, Any]], private_log: list[dict[str, Any]], start: int, batch: str
) -> None:
    """Move the public log entries from ``start`` on (made while ``batch`` was open) to the
    private log, each marked with the batch it ran on."""
    moved = log[start:]
    del log[start:]
    private_log.extend({**entry, "batch": batch} for entry in moved)
