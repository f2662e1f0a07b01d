"""What the PLD backend covers: the parameter ranges its loss grid represents and the size of
the compositions it makes (the closed-form and RDP backends cover the rest)."""

from __future__ import annotations

from collections.abc import Sequence

from dpledger.accountant.pld_components import MAX_DISTINCT_COMPONENTS, _grid_key
from dpledger.core.events import (
    Event,
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    PoissonSampledEvent,
    RandomAllocationEvent,
    RandomizedResponseEvent,
    SampledWithoutReplacementEvent,
    ShuffledBatchesEvent,
    flatten,
)

__all__ = [
    "MAX_BUCKETS",
    "MAX_COMPONENTS",
    "MAX_COMPOSITIONS",
    "MAX_NOISE",
    "MAX_PURE_EPSILON",
    "MIN_NOISE",
]

#: noise multipliers (per sensitivity) outside this range put the privacy loss beyond the loss
#: grid or below its resolution, or (above MAX_NOISE: mu < 1e-4) the Gaussian curve's tail
#: beyond its 1e-10 relative accuracy; the closed-form and RDP backends cover them
MIN_NOISE = 1e-4
MAX_NOISE = 1e4
#: pure epsilons above this exceed the loss grid (e^eps overflows near 709.8)
MAX_PURE_EPSILON = 500.0
#: at most this many randomized-response buckets (beyond, the masses lose all precision)
MAX_BUCKETS = 2**53
#: at most this many compositions in total (the Chernoff window and FFT powers lose precision)
MAX_COMPOSITIONS = 10**12
#: at most this many components after rounding to representatives (each costs one FFT)
MAX_COMPONENTS = 256


def _parameter_reason(leaf: Event, factor: float) -> str | None:
    """Why a leaf's parameters lie outside the range the PLD grid represents; None if inside."""
    inner = (
        leaf.event
        if isinstance(
            leaf,
            PoissonSampledEvent
            | SampledWithoutReplacementEvent
            | ShuffledBatchesEvent
            | RandomAllocationEvent,
        )
        else leaf
    )
    nodes = [inner] if not inner.children() else [e for e, _ in flatten(inner)]
    for node in nodes:
        if isinstance(node, GaussianEvent | LaplaceEvent):
            sigma = node.noise_multiplier / factor
            if not MIN_NOISE <= sigma <= MAX_NOISE:
                return (
                    f"noise multiplier {node.noise_multiplier:g} outside "
                    f"[{MIN_NOISE:g}, {MAX_NOISE:g}] (times the sensitivity factor): the privacy "
                    "loss leaves the PLD grid; the closed-form and RDP backends cover it"
                )
        epsilon = getattr(node, "epsilon", None)
        if isinstance(epsilon, float) and epsilon > MAX_PURE_EPSILON:
            return (
                f"epsilon {epsilon:g} above {MAX_PURE_EPSILON:g} leaves the PLD grid; the "
                "closed-form backend covers it"
            )
        if isinstance(node, RandomizedResponseEvent) and node.num_buckets > MAX_BUCKETS:
            return f"more than {MAX_BUCKETS} buckets; the closed-form backend covers it"
    return None


def _extent_reason(
    leaves: list[tuple[Event, int]],
    ledger: Sequence[tuple[Event, int]],
    limit: int = MAX_DISTINCT_COMPONENTS,
) -> str | None:
    """Why the whole composition (this event and the ledger) is too large to compose; beyond
    ``limit`` distinct leaves, the count after rounding to representatives decides."""
    everything = list(leaves) + [(e, k * m) for ev, m in ledger for e, k in flatten(ev)]
    total = sum(k for _, k in everything)
    if total > MAX_COMPOSITIONS:
        return (
            f"{_count_text(total)} compositions (more than {MAX_COMPOSITIONS:.0e}): beyond the PLD "
            "grid's precision; the closed-form and RDP backends cover them"
        )
    distinct = {e for e, _ in everything if not isinstance(e, GaussianEvent | NonPrivateEvent)}
    if len(distinct) > limit:
        coarsest = {_grid_key(e, 0.0256) for e in distinct}
        if len(coarsest) > MAX_COMPONENTS:
            return (
                f"{len(coarsest)} distinct components remain after rounding to representatives "
                f"(more than {MAX_COMPONENTS}); each costs one FFT. Group identical releases "
                "with a count, or use the RDP backend"
            )
    return None


def _count_text(n: int) -> str:
    """A composition count for a message (an integer of any size)."""
    return f"{n:.3g}" if n.bit_length() <= 1000 else f"an integer of {len(str(n))} digits"
