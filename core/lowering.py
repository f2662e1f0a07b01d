"""Lowering plugin mechanism events onto core events the accountants characterise.

A mechanism's ``to_core`` mapping is used when it has one; a mechanism with only a privacy
profile becomes the approximate-DP event read off that profile (:func:`profile_to_core`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import (
    PluginError,
    UnsupportedEventError,
)
from dpledger.core.events import ApproxDPEvent, Event, PureDPEvent, map_children
from dpledger.core.specs import (
    MechanismSpec,
)

#: epsilons tried when a mechanism is characterised only by its privacy profile
PROFILE_EPSILONS: tuple[float, ...] = tuple(
    float(x) for x in np.concatenate([[0.0], np.geomspace(1e-3, 200.0, 400)])
)
#: the delta a profile-only mechanism is charged (per instance)
PROFILE_DELTA = 1e-10


def profile_to_core(spec: MechanismSpec, event: Event, adjacency: Adjacency) -> Event:
    """The core event certified by a plugin's privacy profile.

    Every point ``(eps, profile(eps))`` of a certified privacy profile is a valid
    ``(eps, delta)`` guarantee. The smallest ``eps`` on :data:`PROFILE_EPSILONS` whose delta is
    at most :data:`PROFILE_DELTA` is used: ``PureDPEvent`` if the profile is 0 there,
    ``ApproxDPEvent`` otherwise. Loose next to a full PLD of the mechanism, never optimistic.
    """
    assert spec.privacy_profile is not None
    owner = spec.provenance.plugin if spec.provenance else "?"
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
        if delta == 0.0:
            return PureDPEvent(eps)
        if delta <= PROFILE_DELTA:
            return ApproxDPEvent(eps, PROFILE_DELTA)
    raise UnsupportedEventError(
        f"{event.kind} (plugin {owner}): its privacy profile stays above {PROFILE_DELTA:g} up "
        f"to epsilon {PROFILE_EPSILONS[-1]:g}; give the mechanism a to_core mapping"
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
