"""The ledger's leaves as PLD components.

Unsampled Gaussians are merged into one; for the upper bound each k-of-t allocation (k > 1) is
reduced to its epochs of 1-of-t/k allocation; beyond MAX_DISTINCT_COMPONENTS distinct leaves the
parameters are rounded to representatives on a geometric grid, dominating ones for the upper
bound and dominated ones for the lower bound. Also the exact basic-composition cap of pure
leaves.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

from dpledger.accountant.conversions import merged_gaussian_multiplier
from dpledger.accountant.random_allocation import allocation_parts
from dpledger.core.adjacency import Adjacency
from dpledger.core.basic_composition import basic_composition_epsilon
from dpledger.core.events import (
    Event,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PureDPEvent,
    RandomAllocationEvent,
    SampledWithoutReplacementEvent,
    ShuffledBatchesEvent,
    flatten,
)

__all__ = ["MAX_DISTINCT_COMPONENTS", "REPRESENTATIVE_STEP"]

#: above this many distinct leaf events, parameters are rounded to dominating representatives
MAX_DISTINCT_COMPONENTS = 256
#: relative step of the representative grid (noise rounded down, rates and epsilons rounded up)
REPRESENTATIVE_STEP = 1e-3


def _allocation_reduced(events: dict[Event, int]) -> dict[Event, int]:
    """The upper bound's components with each k-of-t allocation (k > 1) replaced by its k
    epochs of 1-of-t/k allocation (:func:`~dpledger.accountant.random_allocation.
    allocation_parts`); the same dict when there is none. The lower bound keeps the k-of-t
    event (the parts bound it from above only)."""
    if not any(isinstance(e, RandomAllocationEvent) and e.num_selected > 1 for e in events):
        return events
    out: dict[Event, int] = {}
    for leaf, count in events.items():
        parts: Sequence[tuple[Event, int]] = ((leaf, 1),)
        if isinstance(leaf, RandomAllocationEvent):
            parts = allocation_parts(leaf)
        for part, times in parts:
            # 1-of-1 allocation is the step's own mechanism: the closed form composes it
            flat = flatten(part.event) if isinstance(part, RandomAllocationEvent) else ()
            if isinstance(part, RandomAllocationEvent) and part.num_steps == 1:
                for inner, n in flat:
                    out[inner] = out.get(inner, 0) + n * times * count
            else:
                out[part] = out.get(part, 0) + times * count
    return _merge_gaussians(out)


def _merge_gaussians(merged: dict[Event, int]) -> dict[Event, int]:
    """Unsampled Gaussians compose exactly into one Gaussian: 1/s^2 = sum k_i / s_i^2."""
    gaussians = [(e, k) for e, k in merged.items() if isinstance(e, GaussianEvent)]
    if len(gaussians) <= 1:
        return merged
    out = {e: k for e, k in merged.items() if not isinstance(e, GaussianEvent)}
    sigma = merged_gaussian_multiplier((e.noise_multiplier, k) for e, k in gaussians)
    out[GaussianEvent(sigma)] = out.get(GaussianEvent(sigma), 0) + 1
    return out


def _grid_index(x: float, step: float, *, up: bool) -> int:
    """Index of ``x`` (> 0) on the geometric grid ``(1 + step)^i``, rounding up or down."""
    i = math.log(x) / math.log1p(step)
    return math.ceil(i) if up else math.floor(i)


def _round_up(x: float, step: float = REPRESENTATIVE_STEP) -> float:
    if x <= 0:
        return x
    return float(math.exp(_grid_index(x, step, up=True) * math.log1p(step)))


def _round_down(x: float, step: float = REPRESENTATIVE_STEP) -> float:
    return float(math.exp(_grid_index(x, step, up=False) * math.log1p(step)))


def _representative(event: Event, step: float, *, up: bool) -> Event:
    """An event on a geometric parameter grid of ``step``: at least (``up``) or at most as
    privacy-costly as ``event``. Upper bounds use the first, lower bounds the second."""
    cost_up, cost_down = (_round_up, _round_down) if up else (_round_down, _round_up)
    if isinstance(event, GaussianEvent):
        return GaussianEvent(cost_down(event.noise_multiplier, step))
    if isinstance(event, LaplaceEvent):
        return LaplaceEvent(cost_down(event.noise_multiplier, step))
    if isinstance(event, PureDPEvent):
        return PureDPEvent(cost_up(event.epsilon, step))
    if isinstance(event, PoissonSampledEvent):
        q = min(1.0, cost_up(event.sampling_probability, step))
        return PoissonSampledEvent(q, _representative(event.event, step, up=up))
    return event


def _group(merged: dict[Event, int], step: float, *, up: bool) -> dict[Event, int]:
    out: dict[Event, int] = {}
    for event, k in merged.items():
        rep = _representative(event, step, up=up)
        out[rep] = out.get(rep, 0) + k
    return out


def _grid_key(event: Event, step: float) -> Hashable:
    """The cell of ``event`` on the representative grid (cheap: builds no event)."""
    if isinstance(event, GaussianEvent | LaplaceEvent):
        return (event.kind, _grid_index(event.noise_multiplier, step, up=False))
    if isinstance(event, PureDPEvent):
        return (event.kind, _grid_index(event.epsilon, step, up=True) if event.epsilon else None)
    if isinstance(event, PoissonSampledEvent):
        q = _grid_index(event.sampling_probability, step, up=True)
        return (event.kind, q, _grid_key(event.event, step))
    return event


def _representative_step(merged: dict[Event, int], limit: int = MAX_DISTINCT_COMPONENTS) -> float:
    """The finest grid step (growing from REPRESENTATIVE_STEP to ~3%) leaving at most ``limit``
    components."""
    step = REPRESENTATIVE_STEP
    while step < 0.025 and len({_grid_key(e, step) for e in merged}) > limit:
        step *= 1.5
    return step


def _unbounded_loss(event: Event) -> bool:
    """Whether the leaf's privacy loss is unbounded (a Gaussian inside, however sampled)."""
    inner = event
    while isinstance(inner, PoissonSampledEvent | SampledWithoutReplacementEvent):
        inner = inner.event
    return isinstance(inner, GaussianEvent | ShuffledBatchesEvent | RandomAllocationEvent)


def _exact_pure_cap(events: dict[Event, int], adjacency: Adjacency) -> float | None:
    """The basic-composition epsilon, rounded up from its exact rational value, when every
    leaf is unsampled Laplace or pure DP; None otherwise."""
    from fractions import Fraction

    terms: list[tuple[int, float | Fraction]] = []
    for event, k in events.items():
        if isinstance(event, LaplaceEvent):
            s = Fraction(adjacency.sensitivity_factor)
            terms.append((k, s / Fraction(event.noise_multiplier)))
        elif isinstance(event, PureDPEvent):
            terms.append((k, event.epsilon))
        else:
            return None
    return basic_composition_epsilon(terms)
