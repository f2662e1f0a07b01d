"""The directed privacy curves of one leaf event: which profile construction each kind of leaf
(sampled, shuffled, allocated, tabulated, plain) gets under each neighbouring relation.

The constructions themselves live in :mod:`dpledger.accountant.profiles` and
:mod:`dpledger.accountant.random_allocation`; this module only dispatches.
"""

from __future__ import annotations

import attrs

from dpledger.accountant.allocation_laplace import (
    is_laplace_allocation,
    laplace_allocation_profiles,
)
from dpledger.accountant.profiles import (
    DirectedProfiles,
    Profile,
    attained_base,
    base_profile,
    claimed_pair_profile,
    noise_factor,
    poisson_add,
    poisson_remove,
    replace_one_profiles,
    self_dual,
    shuffled_profiles,
    symmetric_profiles,
    tabulated_profiles,
)
from dpledger.accountant.random_allocation import allocation_profiles
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import UnsupportedEventError
from dpledger.core.events import (
    Event,
    GaussianEvent,
    PoissonSampledEvent,
    RandomAllocationEvent,
    SampledWithoutReplacementEvent,
    ShuffledBatchesEvent,
    TabulatedProfileEvent,
)


def leaf_profiles(event: Event, adjacency: Adjacency) -> DirectedProfiles:
    """Directed profiles of a leaf or sampled-leaf event under ``adjacency``'s relation."""
    if isinstance(event, TabulatedProfileEvent):
        tabulated = tabulated_profiles(event, adjacency)
        if event.tight_losses is None:
            return tabulated
        # the claim: the pair is attained in each direction (lower bounds only)
        exact = claimed_pair_profile(event)
        return attrs.evolve(tabulated, lower_remove=exact, lower_add=exact)
    if isinstance(event, RandomAllocationEvent):
        if is_laplace_allocation(event):
            return laplace_allocation_profiles(event, adjacency)
        return allocation_profiles(event, adjacency)  # type: ignore[no-any-return]
    factor = noise_factor(adjacency)
    if isinstance(event, ShuffledBatchesEvent):
        return shuffled_profiles(event, adjacency)
    if isinstance(event, PoissonSampledEvent):
        q = event.sampling_probability
        inner = event.event
        if adjacency.relation == "add_remove":
            base = base_profile(inner, 1.0)
            low = attained_base(inner, base)
            if q == 1.0:
                return _plain(base, low)
            # the lower curves charge the rounding of the sampled losses the other way
            lower_remove, lower_add = poisson_remove(low, q, -1.0), poisson_add(low, q, -1.0)
            return DirectedProfiles(
                poisson_remove(base, q), poisson_add(base, q), lower_remove, lower_add
            )
        if isinstance(inner, GaussianEvent):
            if q == 1.0:
                return symmetric_profiles(base_profile(inner, factor))
            return replace_one_profiles(1.0 / inner.noise_multiplier, q)
        raise UnsupportedEventError(
            f"Poisson sampling of {inner.kind} under replace-one has no tight analysis here; "
            "use add/remove adjacency or fixed-size sampling without replacement"
        )
    if isinstance(event, SampledWithoutReplacementEvent):
        if adjacency.relation != "replace_one":
            raise UnsupportedEventError(
                "sampling without replacement is analysed under replace-one adjacency only; "
                "declare relation = 'replace_one' (or use Poisson sampling with add/remove)"
            )
        q = event.sampling_probability
        base = base_profile(event.event, factor)  # substitution pair of the base mechanism
        low = attained_base(event.event, base)
        if q == 1.0:
            return _plain(base, low)
        # Upper: Balle, Barthe, Gaboardi (2018), Thm 10 for eps >= 0, extended to eps < 0 by the
        # symmetry of the substitution relation. Lower: the achievable configuration in which the
        # record swapped out of the batch equals the original record (an add-type pair).
        upper = self_dual(poisson_remove(base, q), exact=False)
        lower = poisson_add(low, q, -1.0)
        return DirectedProfiles(upper, upper, lower, poisson_remove(low, q, -1.0))
    base = base_profile(event, factor)
    return _plain(base, attained_base(event, base))


def _plain(base: Profile, attained: Profile) -> DirectedProfiles:
    """A symmetric base: its curve in both directions, and the curve it attains as the lower
    one (the same object when the base curve is attained)."""
    if attained is base:
        return symmetric_profiles(base)
    return DirectedProfiles(base, base, attained, attained)
