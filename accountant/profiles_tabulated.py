"""Profiles of tabulated privacy curves (:class:`~dpledger.core.events.TabulatedProfileEvent`):
the chord interpolation of a certified table, and the curve of a claimed discrete pair.
"""

from __future__ import annotations

import math
from collections.abc import (
    Callable,
)

import numpy as np

from dpledger.accountant.profiles_base import (
    Array,
    DirectedProfiles,
    Profile,
)
from dpledger.core.adjacency import (
    Adjacency,
)
from dpledger.core.errors import (
    UnsupportedEventError,
)
from dpledger.core.events import (
    TabulatedProfileEvent,
)

__all__ = ["claimed_pair_below", "claimed_pair_profile", "tabulated_delta", "tabulated_profiles"]


def tabulated_delta(epsilons: Array, deltas: Array) -> Callable[[Array], Array]:
    """The chord interpolation, in ``x = e^eps``, of a curve tabulated at ``epsilons``.

    A hockey-stick curve is convex and non-increasing in ``x`` with value 1 at ``x = 0``, so
    the chord through upper bounds at neighbouring points bounds it from above in between;
    below the first point the chord from ``(0, 1)`` does, and beyond the last point the last
    value does."""
    xs = np.exp(epsilons)
    ds = np.maximum.accumulate(np.asarray(deltas, dtype=float)[::-1])[::-1]  # non-increasing

    def delta(eps: Array) -> Array:
        x = np.exp(np.minimum(eps, 700.0))
        inside = np.interp(x, xs, ds)
        below = 1.0 - (1.0 - ds[0]) * x / xs[0]
        return np.where(x < xs[0], below, inside)

    return delta


def tabulated_profiles(event: TabulatedProfileEvent, adjacency: Adjacency) -> DirectedProfiles:
    """Upper curves of a tabulated profile (no lower bound: the table is only an upper
    bound); refused under another relation than the one it was tabulated for.

    Below epsilon 0 each direction's curve is read off the other direction's table:
    ``delta(eps) = 1 - e^eps + e^eps * delta_swapped(-eps)`` (the table bounds both
    directions when ``deltas_add`` is None)."""
    if adjacency.relation != event.relation:
        raise UnsupportedEventError(
            f"{event.describe()} was tabulated under {event.relation}, not "
            f"{adjacency.relation}; tabulate it under the relation of the source"
        )
    eps = np.asarray(event.epsilons, dtype=float)
    remove = tabulated_delta(eps, np.asarray(event.deltas, dtype=float))
    add = remove
    if event.deltas_add is not None:
        add = tabulated_delta(eps, np.asarray(event.deltas_add, dtype=float))
    hi = max(float(eps[-1]), 0.0)

    def profile(own: Callable[[Array], Array], swapped: Callable[[Array], Array]) -> Profile:
        def delta(values: Array) -> Array:
            neg = np.minimum(values, 0.0)
            below = -np.expm1(neg) + np.exp(neg) * np.minimum(swapped(-neg), 1.0)
            return np.where(values >= 0, own(np.maximum(values, 0.0)), below)

        name = f"tabulated({event.name or 'plugin'})"
        return Profile(delta, -hi, hi, False, name, swapped)

    up_remove = profile(remove, add)
    up_add = up_remove if add is remove else profile(add, remove)
    return DirectedProfiles(up_remove, up_add, up_remove, up_add)


def claimed_pair_below(losses: Array, masses: Array, inf_mass: float) -> Callable[[Array], Array]:
    """The curve of a discrete pair (P-masses at finite losses, P's mass at +infinity), rounded
    down: ``inf + S1 - e^eps S2`` over the losses above ``eps`` (running sums from the top),
    less a bound on its roundoff. For certified lower bounds of a pair claimed exact."""
    top = np.argsort(-losses, kind="stable")
    ls, ps = losses[top], masses[top]
    s1 = np.concatenate([[0.0], np.cumsum(ps)])
    s2 = np.concatenate([[0.0], np.cumsum(ps * np.exp(-ls))])

    def delta(eps: Array) -> Array:
        eps = np.asarray(eps, dtype=float)
        k = np.searchsorted(-ls, -eps, side="left")  # the losses above eps
        with np.errstate(over="ignore", invalid="ignore"):
            below = np.where(k > 0, np.exp(np.minimum(eps, 700.0)) * s2[k], 0.0)
        value = inf_mass + s1[k] - below
        err = (k + 8) * 4 * 2.0**-53 * (inf_mass + s1[k]) + k * 1e-100
        return np.asarray(np.maximum(0.0, value - err), dtype=float)

    return delta


def claimed_pair_profile(event: TabulatedProfileEvent) -> Profile:
    """The exact curve of the pair a table's ``tight_claim`` states (rounded down), with the
    swapped pair's curve as its dual (Q's mass where P has none is at +infinity there)."""
    assert event.tight_losses is not None and event.tight_masses is not None
    ls = np.asarray(event.tight_losses, dtype=float)
    total = math.fsum([*event.tight_masses, event.tight_inf_mass]) * (1 + 2.0**-52)
    scale = max(1.0, total)  # P's masses, scaled down to at most a probability law
    ps = np.asarray(event.tight_masses, dtype=float) / scale
    inf_mass = event.tight_inf_mass / scale
    qs = ps * np.exp(-ls)
    q_rest = max(0.0, 1.0 - math.fsum(qs.tolist()) - 1e-15)
    reach = float(np.max(np.abs(ls))) if ls.size else 0.0
    name = f"claimed_exact({event.name or 'plugin'})"
    own = claimed_pair_below(ls, ps, inf_mass)
    return Profile(own, -reach, reach, True, name, claimed_pair_below(-ls, qs, q_rest))
