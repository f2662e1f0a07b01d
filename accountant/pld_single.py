"""One leaf released once: its profile is the composition, so its bounds are read off the
profile itself (upper curve for the upper bound, the exact curve deflated by LOWER_DEFLATION
for the lower one), epsilon(delta) by bisection."""

from __future__ import annotations

import math

import numpy as np

from dpledger.accountant.pld_discrete import LOWER_DEFLATION, MAX_CERTIFIED_EPSILON, SUBNORMAL_SLACK
from dpledger.accountant.pld_prepared import Prepared, _next_up
from dpledger.accountant.profiles_base import DirectedProfiles, Profile
from dpledger.core.events import Event, GaussianEvent

__all__ = ["ROOT_STEPS", "single_delta", "single_epsilon"]

#: bisection steps of the single-leaf roots (the bracket halves each step)
ROOT_STEPS = 200


def single_epsilon(
    prep: Prepared, events: dict[Event, int], delta: float
) -> tuple[float, float] | None:
    """(upper, lower) bounds of epsilon(delta) when one leaf released once is the whole
    composition, capped by the pure-DP cap; None otherwise, or when the root is beyond the
    certified range."""
    single = _single_leaf(prep, events)
    if single is None:
        return None
    upper = max(_upper_root(getattr(single, n), delta) for n in prep.names)
    if not math.isfinite(upper):
        return None
    lower = 0.0
    if prep.keep_lower:
        lower = max(_lower_root(getattr(single, "lower_" + n), delta) for n in prep.names)
    upper = min(upper, _next_up(prep.pure_cap))
    return upper, min(lower, upper)


def single_delta(
    prep: Prepared, events: dict[Event, int], epsilon: float
) -> tuple[float, float] | None:
    """(upper, lower) bounds of delta(epsilon) when one leaf released once is the whole
    composition and ``epsilon`` is within the range its curves are read accurately; None
    otherwise."""
    single = _single_leaf(prep, events)
    if single is not None and epsilon <= _root_limit(single, prep.names):
        at = np.array([float(epsilon)])
        top = max(float(getattr(single, n)(at)[0]) for n in prep.names) + SUBNORMAL_SLACK
        bottom = 0.0
        if prep.keep_lower:
            bottom = max(
                _lower_value(getattr(single, "lower_" + n), float(epsilon)) for n in prep.names
            )
        return min(1.0, top), min(bottom, top)
    return None


def _single_leaf(prep: Prepared, events: dict[Event, int]) -> DirectedProfiles | None:
    """The profiles of the one leaf released once, when that is the whole composition (unsampled
    pure leaves keep the exact rational cap of the composition path, and an unsampled Gaussian
    is the closed-form backend's; a sampled pure leaf's root is capped by the same cap)."""
    if len(prep.comps) != 1 or prep.comps[0][1] != 1 or prep.lower_comps is not prep.comps:
        return None
    if len(events) != 1:
        return None
    leaf = next(iter(events))
    if isinstance(leaf, GaussianEvent) or (math.isfinite(prep.pure_cap) and not leaf.children()):
        return None
    return prep.comps[0][0]


def _root_limit(single: DirectedProfiles, names: tuple[str, ...]) -> float:
    """Largest epsilon at which every curve of the single release is read accurately."""
    kinds = list(names) + ["lower_" + n for n in names]
    curves: list[Profile] = [getattr(single, k) for k in kinds]
    return min([MAX_CERTIFIED_EPSILON] + [c.accurate_hi for c in curves])


def _upper_root(profile: Profile, delta: float) -> float:
    """A certified upper bound of epsilon(delta) for an upper curve: a point where the curve is
    at most delta (inf when none is found in the curve's accurate range, at most
    MAX_CERTIFIED_EPSILON)."""

    def value(e: float) -> float:
        return float(profile(np.array([e]))[0]) + SUBNORMAL_SLACK

    if value(0.0) <= delta:
        return 0.0
    limit = min(MAX_CERTIFIED_EPSILON, profile.accurate_hi)
    hi = max(1.0, min(profile.loss_hi, limit))
    while not value(hi) <= delta:
        if hi >= limit:
            return math.inf
        hi = min(2 * hi, limit)
    lo = 0.0
    for _ in range(ROOT_STEPS):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if value(mid) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


def _lower_value(profile: Profile, epsilon: float) -> float:
    """A certified lower bound of an exact curve at ``epsilon``."""
    value = float(profile(np.array([epsilon]))[0]) / (1 + LOWER_DEFLATION) * (1 - 1e-15)
    return max(value - SUBNORMAL_SLACK, 0.0)


def _lower_root(profile: Profile, delta: float) -> float:
    """A certified lower bound of epsilon(delta) for an exact curve: a point where the curve
    (deflated) still exceeds delta; the true curve is non-increasing, so it exceeds delta at
    every smaller epsilon."""
    if not _lower_value(profile, 0.0) > delta:
        return 0.0
    lo, hi = 0.0, max(1.0, min(profile.loss_hi, MAX_CERTIFIED_EPSILON, profile.accurate_hi))
    if _lower_value(profile, hi) > delta:
        return hi
    for _ in range(ROOT_STEPS):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if _lower_value(profile, mid) > delta:
            lo = mid
        else:
            hi = mid
    return lo
