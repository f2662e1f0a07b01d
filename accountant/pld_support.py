"""What the PLD backend covers: the parameter ranges its loss grid represents and the size of
the compositions it makes (the closed-form and RDP backends cover the rest)."""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter

from dpledger.accountant.allocation_cells import epoch_components, is_cell_epoch
from dpledger.accountant.pld_components import MAX_COMPONENTS, MAX_DISTINCT_COMPONENTS
from dpledger.accountant.representatives import is_rounded
from dpledger.accountant.tabulated_cells import groupable, tabulated_components
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
    """Why the whole composition (this event and the ledger) is too large to compose: too many
    compositions, or beyond ``limit`` distinct leaves more than MAX_COMPONENTS of kinds that
    are not rounded to representatives (:mod:`~dpledger.accountant.representatives`)."""
    everything = list(leaves) + [(e, k * m) for ev, m in ledger for e, k in flatten(ev)]
    total = sum(map(itemgetter(1), everything))
    if total > MAX_COMPOSITIONS:
        return (
            f"{_count_text(total)} compositions (more than {MAX_COMPOSITIONS:.0e}): beyond the PLD "
            "grid's precision; the closed-form and RDP backends cover them"
        )
    events = list(map(itemgetter(0), everything))
    if any(issubclass(t, GaussianEvent | NonPrivateEvent) for t in set(map(type, events))):
        events = [e for e in events if not isinstance(e, GaussianEvent | NonPrivateEvent)]
    distinct = set(events)
    if len(distinct) > limit:
        # the roundable kinds fit any number of components (coarser cells), epochs of a
        # Gaussian step (or shuffled Laplace batches) a few cells each; the others do not
        fixed = [e for e in distinct if not (is_rounded(e) or is_cell_epoch(e) or groupable(e))]
        epochs = epoch_components(e for e in distinct if is_cell_epoch(e))
        epochs += tabulated_components(distinct)
        if len(fixed) + epochs > MAX_COMPONENTS:
            kinds = sorted({e.kind for e in fixed})
            return (
                f"{len(fixed)} distinct {'/'.join(kinds[:4])} releases (more than "
                f"{MAX_COMPONENTS - epochs}{_beside(epochs)}), which are not rounded to "
                "representatives; each costs one FFT. Group identical releases with a count"
            )
    return None


def _beside(epochs: int) -> str:
    """The components the epochs of a Gaussian step take, for a message ('' when none)."""
    return f" beside {epochs} components of cells" if epochs else ""


def _count_text(n: int) -> str:
    """A composition count for a message (an integer of any size)."""
    return f"{n:.3g}" if n.bit_length() <= 1000 else f"an integer of {len(str(n))} digits"
