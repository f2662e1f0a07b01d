"""Random allocation of one Laplace release per step (add/remove): the epoch's curves.

Upper: no amplification (``proofs_checks/no_amplification/proof.md``): a 1-of-t epoch costs one
Laplace release; a k-of-t epoch at most k of them, which are ``k eps0``-DP, and binary randomized
response at ``k eps0`` dominates every ``k eps0``-DP pair (the composed upper bound uses the
epoch's 1-of-t/k parts instead, one release each). Lower: the maximum of the t step outputs, as
for Gaussian steps (``proofs_checks/random_allocation/proof.md``): a query that is 1 on the
differing record and 0 elsewhere puts its k steps at 1 under P (the record present) and every
step at 0 under Q; the maximum is post-processing, its binned masses certified
(:func:`~dpledger.accountant.profiles.max_of_batches_pair`).
"""

from __future__ import annotations

import functools
import math

from dpledger.accountant.profiles import (
    DirectedProfiles,
    base_profile,
    lower_pair_profiles,
    max_of_batches_pair,
)
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import UnsupportedEventError
from dpledger.core.events import (
    ALLOCATION_NEEDS_ADD_REMOVE,
    Event,
    LaplaceEvent,
    PureDPEvent,
    RandomAllocationEvent,
)

__all__ = ["is_laplace_allocation", "laplace_allocation_profiles"]

#: unit roundoff of IEEE double
_U = 2.0**-53


def is_laplace_allocation(event: Event) -> bool:
    """Whether ``event`` is a random allocation whose step is one Laplace release."""
    return isinstance(event, RandomAllocationEvent) and type(event.event) is LaplaceEvent


def laplace_allocation_profiles(
    event: RandomAllocationEvent, adjacency: Adjacency
) -> DirectedProfiles:
    """Directed profiles of one epoch of :func:`is_laplace_allocation` (add/remove only)."""
    if adjacency.relation != "add_remove":
        raise UnsupportedEventError(ALLOCATION_NEEDS_ADD_REMOVE)
    step = event.event
    assert isinstance(step, LaplaceEvent)
    k = event.num_selected
    if k == 1:
        upper = base_profile(step, 1.0)
    else:  # k releases of an eps0-DP mechanism: k eps0-DP (rounded up)
        eps = math.nextafter(k / step.noise_multiplier * (1 + 4 * _U), math.inf)
        upper = base_profile(PureDPEvent(eps), 1.0)
    forward, backward = _lower(float(step.noise_multiplier), event.num_steps, k)
    return DirectedProfiles(upper, upper, forward, backward)


@functools.lru_cache(maxsize=32)
def _lower(scale: float, num_steps: int, num_selected: int):  # type: ignore[no-untyped-def]
    """The max-of-step-outputs lower curves (remove, add), made once per parameters."""
    pair = max_of_batches_pair(num_steps, scale, 1.0, 0.0, "laplace", shifted=num_selected)
    name = f"allocation_max(k={num_selected} of t={num_steps}, laplace scale={scale:g})"
    return lower_pair_profiles(pair, name)
