"""Lowering plugin mechanism events onto core events the accountants characterise.

A mechanism's ``to_core`` mapping is used when it has one; a mechanism with only a privacy
profile becomes its profile tabulated on a grid (:func:`profile_to_core`), which the PLD
accountant composes as a privacy-loss distribution.
"""

from __future__ import annotations

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
        if spec.to_core is None:
            return profile_to_core(spec, event, adjacency)
        mapped = spec.to_core(event)
        if not isinstance(mapped, Event):
            raise PluginError(f"mechanism {spec.name!r}: to_core returned {mapped!r}")
        return lower_event(mapped, by_class, depth + 1, adjacency)
    return map_children(event, lambda sub: lower_event(sub, by_class, depth, adjacency))
