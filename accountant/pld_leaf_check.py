"""The PLD backend's support check of many leaves in one pass: plain and Poisson-sampled leaves
of the common flat kinds have their parameters checked in arrays and their shapes told apart by
type, so 1e5 distinct leaves cost one loop of attribute reads (the leaf-by-leaf check of
:mod:`~dpledger.accountant.pld_support` names the leaf at fault when this one finds one)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import cast

import numpy as np

from dpledger.accountant.pld_support import MAX_BUCKETS, MAX_NOISE, MAX_PURE_EPSILON, MIN_NOISE
from dpledger.core.events import (
    ApproxDPEvent,
    Event,
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    PoissonSampledEvent,
    PureDPEvent,
    RandomizedResponseEvent,
)

__all__ = ["shapes_in_range"]

#: leaf kinds whose shape (:func:`~dpledger.accountant.representatives.split`) is their type
#: alone, plain or inside Poisson sampling
_NOISE = (GaussianEvent, LaplaceEvent)
_EPSILON = (PureDPEvent, ApproxDPEvent)


def shapes_in_range(leaves: list[tuple[Event, int]], factor: float) -> list[Event] | None:
    """The first leaf of each shape, in order, when every leaf other than a non-private one is
    a plain or Poisson-sampled Gaussian, Laplace, pure-DP, approximate-DP or randomized-response
    leaf whose parameters lie within the PLD grid's range (those of
    :func:`~dpledger.accountant.pld_support._parameter_reason`); None when a leaf is of another
    kind or outside the range (the caller then checks leaf by leaf)."""
    noise: list[float] = []
    eps: list[float] = []
    buckets: list[int] = [0]
    firsts: dict[Hashable, Event] = {}
    for leaf, _ in leaves:
        kind = type(leaf)
        if kind is NonPrivateEvent:
            continue
        inner = cast(PoissonSampledEvent, leaf).event if kind is PoissonSampledEvent else leaf
        inner_kind = type(inner)
        if inner_kind in _NOISE:
            noise.append(cast(GaussianEvent | LaplaceEvent, inner).noise_multiplier)
            key: Hashable = (kind, inner_kind)
        elif inner_kind in _EPSILON:
            eps.append(cast(PureDPEvent | ApproxDPEvent, inner).epsilon)
            key = (kind, inner_kind)
        elif inner_kind is RandomizedResponseEvent:
            rr = cast(RandomizedResponseEvent, inner)
            eps.append(rr.epsilon)
            buckets.append(rr.num_buckets)
            key = (kind, inner_kind, rr.num_buckets)
        else:
            return None
        if key not in firsts:
            firsts[key] = leaf
    sigma = np.array(noise, dtype=float) / factor
    if not bool(np.all((sigma >= MIN_NOISE) & (sigma <= MAX_NOISE))):
        return None
    if not bool(np.all(np.array(eps, dtype=float) <= MAX_PURE_EPSILON)) or any(
        not isinstance(e, float) for e in eps
    ):
        return None
    if max(buckets) > MAX_BUCKETS:
        return None
    return list(firsts.values())
