"""Lowering plugin mechanism events onto core events the accountants characterise.

A mechanism's ``to_core`` mapping is used when it has one; then a discrete dominating pair
becomes its exact curve tabulated at its own losses (:func:`pair_to_core`); a mechanism with
only a privacy profile becomes its profile tabulated on a grid (:func:`profile_to_core`). The
PLD accountant composes either table as a privacy-loss distribution.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import (
    PluginError,
    UnsupportedEventError,
)
from dpledger.core.events import (
    PROFILE_DELTA,
    Event,
    TabulatedProfileEvent,
    map_children,
)
from dpledger.core.specs import (
    MechanismSpec,
)

#: epsilons at which a mechanism characterised only by its privacy profile is tabulated
PROFILE_EPSILONS: tuple[float, ...] = tuple(
    float(x) for x in np.concatenate([[0.0], np.geomspace(1e-3, 200.0, 400)])
)


def profile_to_core(spec: MechanismSpec, event: Event, adjacency: Adjacency) -> Event:
    """The core event certified by a plugin's privacy profile: the profile tabulated on
    :data:`PROFILE_EPSILONS` (up to the first epsilon where it is 0) under ``adjacency``'s
    relation.

    Every tabulated value is a certified ``delta(eps)`` bound of one instance; chords between
    them are too (the curve is convex in ``e^eps``), so the PLD accountant composes the table
    as a privacy-loss distribution and the other accountants use its (eps, delta) coarsening.
    """
    assert spec.privacy_profile is not None
    owner = spec.provenance.plugin if spec.provenance else "?"
    epsilons: list[float] = []
    deltas: list[float] = []
    for eps in PROFILE_EPSILONS:
        try:
            delta = float(spec.privacy_profile(event, adjacency, eps))
        except Exception as exc:  # a plugin's failure must not become a number
            raise PluginError(
                f"mechanism {spec.name!r} (plugin {owner}): privacy_profile raised {exc!r}"
            ) from None
        if not (0.0 <= delta <= 1.0):
            raise PluginError(
                f"mechanism {spec.name!r} (plugin {owner}): privacy_profile({eps:g}) returned "
                f"{delta!r}, not a probability"
            )
        epsilons.append(eps)
        deltas.append(delta)
        if delta == 0.0:
            break
    if min(deltas) > PROFILE_DELTA:
        raise UnsupportedEventError(
            f"{event.kind} (plugin {owner}): its privacy profile stays above {PROFILE_DELTA:g} "
            f"up to epsilon {PROFILE_EPSILONS[-1]:g}; give the mechanism a to_core mapping"
        )
    return TabulatedProfileEvent(
        tuple(epsilons), tuple(deltas), relation=adjacency.relation, name=spec.name
    )


#: most atoms of a plugin's dominating pair (each becomes a table point)
MAX_PAIR_ATOMS = 10_000


def pair_to_core(spec: MechanismSpec, event: Event, adjacency: Adjacency) -> Event:
    """The core event certified by a plugin's discrete dominating pair: the pair's exact curve
    tabulated at 0 and at its positive losses.

    Between consecutive losses a discrete pair's curve ``inf + sum_{l > eps} p_l (1 - e^{eps-l})``
    is linear in ``e^eps``, so the chord interpolation of the table is the curve itself (each
    value rounded up); beyond the largest loss it is the mass at infinity. The pair dominates
    both orders of neighbouring outputs, so one table serves both directions.
    """
    assert spec.dominating_pair is not None
    owner = spec.provenance.plugin if spec.provenance else "?"
    try:
        losses, masses, inf_mass = spec.dominating_pair(event, adjacency)
        ls = np.asarray(losses, dtype=float)
        ps = np.asarray(masses, dtype=float)
        inf = float(inf_mass)
    except Exception as exc:  # a plugin's failure must not become a number
        raise PluginError(
            f"mechanism {spec.name!r} (plugin {owner}): dominating_pair raised {exc!r}"
        ) from None
    problem = _pair_problem(ls, ps, inf)
    if problem is not None:
        raise PluginError(
            f"mechanism {spec.name!r} (plugin {owner}): dominating_pair returned {problem}"
        )
    points = np.unique(np.concatenate([[0.0], ls[ls > 0]]))
    deltas = [_pair_delta(ls, ps, inf, float(eps)) for eps in points]
    if min(deltas) > PROFILE_DELTA:
        raise UnsupportedEventError(
            f"{event.kind} (plugin {owner}): its dominating pair keeps delta above "
            f"{PROFILE_DELTA:g} at every epsilon; give the mechanism a to_core mapping"
        )
    return TabulatedProfileEvent(
        tuple(float(e) for e in points),
        tuple(deltas),
        relation=adjacency.relation,
        name=spec.name,
    )


def _pair_problem(losses: np.ndarray, masses: np.ndarray, inf: float) -> str | None:
    """Why arrays are not a discrete pair of (sub-)probability laws; None if they are."""
    if losses.ndim != 1 or losses.shape != masses.shape or losses.size > MAX_PAIR_ATOMS:
        return f"losses and masses of different shapes or more than {MAX_PAIR_ATOMS} atoms"
    if not (np.all(np.isfinite(losses)) and np.all(np.isfinite(masses))):
        return "a loss or mass that is not finite"
    if np.any(masses < 0) or not 0.0 <= inf <= 1.0:
        return "a negative mass or a mass at infinity outside [0, 1]"
    if math.fsum(masses.tolist()) + inf > 1.0 + 1e-12:
        return "P-masses summing above 1"
    if math.fsum((masses * np.exp(-losses)).tolist()) > 1.0 + 1e-12:
        return "Q-masses (p e^-loss) summing above 1"
    return None


def _pair_delta(losses: np.ndarray, masses: np.ndarray, inf: float, eps: float) -> float:
    """The pair's curve at ``eps``, rounded up (a probability)."""
    above = (losses > eps) & (masses > 0)
    if inf == 0.0 and not above.any():
        return 0.0  # no mass above eps: exactly 0
    terms = masses[above] * -np.expm1(eps - losses[above])
    value = (inf + math.fsum(terms.tolist())) * (1 + 1e-12) + 1e-300
    return min(1.0, value)


def lower_event(
    event: Event,
    by_class: Mapping[type[Event], MechanismSpec],
    depth: int,
    adjacency: Adjacency | None = None,
) -> Event:
    adjacency = adjacency or Adjacency()
    if depth > 32:
        raise PluginError("mechanism mappings nest more than 32 levels deep (a cycle?)")
    spec = by_class.get(type(event))
    if spec is not None:
        if spec.to_core is None and spec.dominating_pair is not None:
            return pair_to_core(spec, event, adjacency)
        if spec.to_core is None:
            return profile_to_core(spec, event, adjacency)
        mapped = spec.to_core(event)
        if not isinstance(mapped, Event):
            raise PluginError(f"mechanism {spec.name!r}: to_core returned {mapped!r}")
        return lower_event(mapped, by_class, depth + 1, adjacency)
    return map_children(event, lambda sub: lower_event(sub, by_class, depth, adjacency))
