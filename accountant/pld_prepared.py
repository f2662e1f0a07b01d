"""A ledger's PLD components prepared for composition (:class:`Prepared`): the directions to
compose, the coarse grid that guides windows and tilts, the untilted window widths, the lower
pairs' own coarse grid and the pure-DP cap."""

from __future__ import annotations

import math

import attrs
import numpy as np

from dpledger.accountant.pld_components import _exact_pure_cap, _unbounded_loss
from dpledger.accountant.pld_discrete import MAX_LOSS, DiscretePLD, discretise
from dpledger.accountant.pld_tilt import tilted_window
from dpledger.accountant.profiles_base import DirectedProfiles
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import BoundUnavailable
from dpledger.core.events import Event

__all__ = ["COARSE_MAX_POINTS", "TAIL_MASS", "Prepared", "prepare", "pure_cap"]

#: most grid points per component on the coarse grid that guides windows and tilts
COARSE_MAX_POINTS = 1 << 16
#: truncation mass of the composed window (charged to delta)
TAIL_MASS = 1e-18


@attrs.frozen
class Prepared:
    """The components of the ledger, their coarse discretisations and the pure-DP cap."""

    comps: list[tuple[DirectedProfiles, int]]
    lower_comps: list[tuple[DirectedProfiles, int]]
    names: tuple[str, ...]  # directions to compose ("remove" only when symmetric)
    coarse: dict[str, list[tuple[DiscretePLD, int]]]
    #: the lower pairs on the coarse grid (guides for their own tails), when they differ
    coarse_lower: dict[str, list[tuple[DiscretePLD, int]]] | None
    h0: float
    pure_cap: float  # basic-composition epsilon if all parts are pure, else inf
    keep_lower: bool
    span: float
    width0: dict[str, float]  # width of the untilted window per direction


def prepare(
    comps: list[tuple[DirectedProfiles, int]],
    lower_comps: list[tuple[DirectedProfiles, int]],
    upper_events: dict[Event, int],
    adjacency: Adjacency,
) -> Prepared:
    """The upper and lower components (not empty) prepared; ``upper_events`` are the leaves the
    upper components come from (they decide the pure-DP cap)."""
    span = max(p.loss_hi - p.loss_lo for d, _ in comps for p in (d.remove, d.add))
    symmetric = all(d.remove is d.add for d, _ in comps) and all(
        d.lower_remove is d.lower_add for d, _ in lower_comps
    )
    names = ("remove",) if symmetric else ("remove", "add")
    h0, coarse = _coarse_grid(comps, names, span)
    # lumped losses keep lower bounds sound: above the grid they go to +infinity, which
    # lower bounds drop; below -MAX_LOSS they carry P-mass at most e^-MAX_LOSS, inside the
    # BELOW_RANGE_MASS charged per component (and dominated pairs are 1 - e^eps, resp. 0,
    # beyond their first and last points, below any curve)
    lower_exact = all(d.lower_remove.exact and d.lower_add.exact for d, _ in lower_comps)
    width0 = {}
    for name in names:
        a, b = tilted_window(coarse[name], 0.0, TAIL_MASS)
        width0[name] = max(b - a, 1e-9)
    distinct = lower_comps is not comps or any(
        getattr(d, "lower_" + name) is not getattr(d, name) for d, _ in comps for name in names
    )
    coarse_lower = (
        {
            name: [(discretise(getattr(d, "lower_" + name), h0), k) for d, k in lower_comps]
            for name in names
        }
        if distinct and lower_exact
        else None
    )
    cap = pure_cap(comps, upper_events, adjacency)
    return Prepared(
        comps,
        lower_comps,
        names,
        coarse,
        coarse_lower,
        h0,
        cap,
        lower_exact,
        span,
        width0,
    )


def pure_cap(
    comps: list[tuple[DirectedProfiles, int]], upper_events: dict[Event, int], adjacency: Adjacency
) -> float:
    """Basic composition of the components' largest losses when every curve is 0 at its
    top loss (pure composition), rounded up; infinity otherwise."""
    if any(_unbounded_loss(event) for event in upper_events):
        # a Gaussian-based curve is 0 at its top loss only by underflow (tiny q): not pure
        return math.inf
    cap = 0.0
    for d, k in comps:
        for p in (d.remove, d.add):
            if not (math.isfinite(p.loss_hi) and float(p(_arr(p.loss_hi))[0]) == 0.0):
                cap = math.inf
        if math.isfinite(cap):
            cap += k * max(d.remove.loss_hi, d.add.loss_hi)
    # the pure losses (e.g. sensitivity / scale) and their sum are rounded: round the cap up
    # so that delta = 0 is never reported below the true pure epsilon (exactly when the
    # pure epsilons are known exactly)
    if math.isfinite(cap):
        cap = _exact_pure_cap(upper_events, adjacency) or math.nextafter(
            cap * (1 + 16 * 2.0**-53 * (len(comps) + 4)), math.inf
        )
    return cap


def _coarse_grid(
    comps: list[tuple[DirectedProfiles, int]], names: tuple[str, ...], span: float
) -> tuple[float, dict[str, list[tuple[DiscretePLD, int]]]]:
    """(spacing, components per direction) of the coarse grid that guides windows and tilts.

    The coarse grid adds rounding noise of variance ~ total h0^2 / 4 to the sum: it is refined
    until that noise is small against the composed window."""
    h0 = max(span / 1024.0, 1e-9)
    if h0 > MAX_LOSS / 8:
        # the coarse grid cannot resolve the losses the grid represents (+-MAX_LOSS)
        raise BoundUnavailable("pld", f"privacy losses span {span:g}, beyond the loss grid")
    total = sum(k for _, k in comps)
    coarse = {name: [(discretise(getattr(d, name), h0), k) for d, k in comps] for name in names}
    for _ in range(3):
        a, b = tilted_window(coarse[names[0]], 0.0, TAIL_MASS)
        target = max((b - a) / (40.0 * total**0.5), span / COARSE_MAX_POINTS)
        if target >= h0 / 2:
            break
        h0 = target
        coarse = {name: [(discretise(getattr(d, name), h0), k) for d, k in comps] for name in names}
    return h0, coarse


def _arr(x: float):  # type: ignore[no-untyped-def]

    return np.array([x])


def _next_up(x: float) -> float:
    return x if not math.isfinite(x) else math.nextafter(x * (1 + 1e-12), math.inf)
