"""The ledger's leaves as PLD components.

Unsampled Gaussians are merged into one; for the upper bound each k-of-t allocation (k > 1) is
reduced to its epochs of 1-of-t/k allocation; beyond MAX_DISTINCT_COMPONENTS distinct leaves the
parameters are rounded to representatives (:mod:`~dpledger.accountant.representatives`),
dominating ones for the upper bound and dominated ones for the lower bound. Also the exact
basic-composition cap of pure leaves.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from dpledger.accountant.conversions import merged_gaussian_multiplier
from dpledger.accountant.pld_discrete import U
from dpledger.accountant.random_allocation import allocation_parts
from dpledger.accountant.representative_steps import weighted_steps
from dpledger.accountant.representatives import REPRESENTATIVE_STEP, Table
from dpledger.core.adjacency import Adjacency
from dpledger.core.basic_composition import basic_composition_epsilon
from dpledger.core.events import (
    ApproxDPEvent,
    Event,
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    PoissonSampledEvent,
    PureDPEvent,
    RandomAllocationEvent,
    SampledWithoutReplacementEvent,
    ShuffledBatchesEvent,
    flatten,
)

__all__ = [
    "MAX_DISTINCT_COMPONENTS",
    "MAX_ROUNDED_COMPONENTS",
    "MAX_ROUNDED_STEP",
    "REPRESENTATIVE_STEP",
    "approx_failures",
    "gaussian_inside",
    "ledger_leaves",
    "representative_components",
    "rounded_components",
]

#: above this many distinct leaf events, parameters are rounded to dominating representatives
MAX_DISTINCT_COMPONENTS = 256
#: the representatives' grid is no coarser than this relative step (a parameter moves by less
#: than 2.5 %) unless more than MAX_COMPONENTS components would remain
MAX_REPRESENTATIVE_STEP = 0.025
#: the most components composed after rounding to representatives (each costs one FFT)
MAX_COMPONENTS = 256
#: a step above MAX_ROUNDED_STEP (and MAX_REPRESENTATIVE_STEP) at MAX_COMPONENTS is lowered to
#: it (on the grid of steps) where that leaves at most MAX_ROUNDED_COMPONENTS: parameters
#: spread in several dimensions (a sampling rate and a noise) otherwise round most of the
#: bracket; a step beyond reach of that budget is left as it is (its components would cost
#: time without bringing the rounding down to a small part of the bracket)
MAX_ROUNDED_STEP = 0.03
MAX_ROUNDED_COMPONENTS = 360


def representative_components(
    merged: dict[Event, int], limit: int = MAX_DISTINCT_COMPONENTS, reserved: int = 0
) -> tuple[dict[Event, int], dict[Event, int], float]:
    """(upper events, lower events, step): the leaves rounded to dominating resp. dominated
    representatives on the finest grid that leaves at most ``limit`` components
    (:meth:`~dpledger.accountant.representatives.Table.step`); the step stays at most
    MAX_REPRESENTATIVE_STEP while that leaves at most MAX_COMPONENTS, and at most
    MAX_ROUNDED_STEP while that leaves at most MAX_ROUNDED_COMPONENTS; ``reserved``
    components (made elsewhere) are taken from each of these budgets."""
    table = Table(merged)
    if reserved and table.count(table.step(limit - reserved)) > limit - reserved:
        # the leaves that are never rounded alone exceed the reduced budget: reserving would
        # only coarsen the rounded ones, without saving components
        reserved = 0
    step = table.step(limit - reserved)
    if step > MAX_REPRESENTATIVE_STEP:
        step = max(
            table.step(MAX_COMPONENTS - reserved), table.step_at_most(MAX_REPRESENTATIVE_STEP)
        )
    cap = max(MAX_ROUNDED_STEP, MAX_REPRESENTATIVE_STEP)
    if step > cap:
        # a coarse step rounds most of the bracket: a finer one where a few more components do
        finer = table.step_at_most(cap)
        if table.count(finer) <= MAX_ROUNDED_COMPONENTS - reserved:
            step = finer
    steps = weighted_steps(table, step)
    if steps is not None:
        widest = max(float(np.max(s)) for s in steps.values())
        return table.grouped(steps, up=True), table.grouped(steps, up=False), widest
    return table.grouped(step, up=True), table.grouped(step, up=False), step


#: the least failure mass split off: far above the subnormal range, where relative rounding
#: (a product with 1 - 4u) would leave a value unmoved
_SMALLEST_FAILURE = 1e-300


def approx_failures(
    merged: dict[Event, int],
) -> tuple[dict[Event, int], tuple[float, float] | None]:
    """(leaves, failure masses): two or more distinct approximate-DP leaves with a positive
    delta as their pure parts (``PureDPEvent(eps)``) and the failure mass of them all, one
    ``1 - prod (1 - delta_i)^k_i`` rounded up and one rounded down (None: unchanged). The
    tight pair of ``(eps, delta)``-DP is the product of the pairs of ``(0, delta)``-DP and of
    ``eps``-DP, and those of ``(0, delta_i)``-DP compose to that of ``(0, 1 - prod (1 -
    delta_i))``-DP exactly (proofs_checks/representatives): the parameters then round in one
    dimension (epsilon), not two."""
    approx = [(e, k) for e, k in merged.items() if isinstance(e, ApproxDPEvent) and e.delta > 0]
    if len(approx) < 2:
        return merged, None
    log_keep = math.fsum(k * math.log1p(-e.delta) for e, k in approx)
    slack = 4 * U * (len(approx) + 4)
    up = -math.expm1(log_keep * (1 + slack)) * (1 + 4 * U)
    down = -math.expm1(log_keep * (1 - slack)) * (1 - 4 * U)
    if not _SMALLEST_FAILURE <= down <= up < 1.0:
        return merged, None  # (a subnormal mass would not move under the rounding down)
    out = {e: k for e, k in merged.items() if not (isinstance(e, ApproxDPEvent) and e.delta > 0)}
    for e, k in approx:
        if e.epsilon > 0.0:
            pure = PureDPEvent(e.epsilon)
            out[pure] = out.get(pure, 0) + k
    return out, (up, down)


def rounded_components(
    merged: dict[Event, int], limit: int, reserved: int
) -> tuple[dict[Event, int], dict[Event, int], float]:
    """(upper events, lower events, step) of many distinct leaves: approximate-DP leaves as
    their pure parts and one exact failure mass (:func:`approx_failures`), the rest rounded to
    at most ``limit`` representatives (:func:`representative_components`, ``reserved`` taken
    from its budgets)."""
    rounded, failure = approx_failures(merged)
    limit -= failure is not None
    upper, lower, step = representative_components(rounded, limit, reserved)
    if failure is not None:
        upper = {**upper, ApproxDPEvent(0.0, failure[0]): 1}
        lower = {**lower, ApproxDPEvent(0.0, failure[1]): 1}
    return upper, lower, step


def ledger_leaves(ledger: Sequence[tuple[Event, int]]) -> tuple[dict[Event, int], bool]:
    """(the ledger's private leaves with their total counts, unsampled Gaussians merged into
    one; whether it holds a non-private leaf)."""
    merged: dict[Event, int] = {}
    non_private = False
    for event, count in ledger:
        for leaf, k in flatten(event):
            if isinstance(leaf, NonPrivateEvent):
                non_private = True
                continue
            merged[leaf] = merged.get(leaf, 0) + k * count
    return _merge_gaussians(merged), non_private


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


def _unbounded_loss(event: Event) -> bool:
    """Whether the leaf widens the composed loss grid as an unbounded loss does: a Gaussian,
    however sampled, and any shuffled or allocated epoch whatever its step (a choice of grids
    only; whether a leaf is pure, for the cap, is :func:`gaussian_inside`)."""
    inner = event
    while isinstance(inner, PoissonSampledEvent | SampledWithoutReplacementEvent):
        inner = inner.event
    return isinstance(inner, GaussianEvent | ShuffledBatchesEvent | RandomAllocationEvent)


def gaussian_inside(event: Event) -> bool:
    """Whether a Gaussian runs anywhere inside the leaf (however sampled, shuffled or
    allocated): its curves are 0 at their top loss only by underflow, never a pure bound."""
    return any(isinstance(node, GaussianEvent) for node in event.walk())


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
