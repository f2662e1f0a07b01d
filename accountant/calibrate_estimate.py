"""Where a noise calibration's crossing lies, estimated from bounds much cheaper than the query
it certifies with: RDP's, then the PLD accountant's plain upper compositions on a coarse grid,
then on the grid of the full query's first pass (the composition its upper bound usually comes
from, without the lower bounds that cost most of that query).

An estimate only chooses where the full query is evaluated first and the slope its search
starts from; nothing computed here is returned as a certified number.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import attrs

from dpledger.accountant.base import EpsilonBound
from dpledger.accountant.calibrate_search import GAP_CAP, gap
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import DPLedgerError
from dpledger.core.events import Event

if TYPE_CHECKING:
    from dpledger.accountant.pld_compositions import Compositions
    from dpledger.accountant.pld_prepared import Prepared

__all__ = ["COARSE_POINTS", "PRECISE_TOLERANCE", "Estimate", "estimate_crossing"]

#: grid points of the coarse PLD pass the estimate reads
COARSE_POINTS = 1 << 10
#: the secant stops when its step (in log sigma) is below this
STEP_TOLERANCE = {"rdp": 1e-2, "coarse": 2e-2, "plain": 1e-4}
#: most evaluations of each stage
STAGE_EVALUATIONS = {"rdp": 12, "coarse": 3, "plain": 4}
#: the first secant step of a stage goes this share of the way its start's slope says (the
#: plain stage's start is the coarse grid's crossing, whose slope is nearly its own)
FIRST_STEP = {"rdp": 0.5, "coarse": 0.5, "plain": 1.0}
#: an estimate whose last secant step was below this (in log sigma) is ``precise``: the
#: calibration's first full queries are made just beside it
PRECISE_TOLERANCE = 1e-4
#: one secant step moves log sigma by at most this
MAX_STEP = math.log(100.0)


@attrs.frozen
class Estimate:
    """The estimated crossing and d log(epsilon) / d log(sigma) there (negative)."""

    sigma: float
    slope: float
    #: whether the last stage converged (its secant step was below PRECISE_TOLERANCE)
    precise: bool = False


def _rdp(event: Event, adjacency: Adjacency | None, delta: float) -> float:
    from dpledger.accountant.select import account

    bound = account(event, adjacency, delta=delta, backends=("rdp",)).bound
    assert isinstance(bound, EpsilonBound)
    return bound.epsilon


def _plain_upper(event: Event, adjacency: Adjacency | None, delta: float, coarse: bool) -> float:
    """The PLD accountant's plain tilted upper bound: the direction of the larger Chernoff
    epsilon composed on the grid of the full query's first pass (or COARSE_POINTS when
    ``coarse``), the others on COARSE_POINTS unless their Chernoff estimate is at most the
    epsilon read already; the largest epsilon read. No lower bound, no split composition: the
    full query's upper bound is usually this first one."""
    from dpledger.accountant.pld import ADAPTIVE_START_POINTS, PLDAccountant
    from dpledger.accountant.pld_compositions import Compositions
    from dpledger.accountant.pld_tilt import chernoff_epsilon

    acc = PLDAccountant(adjacency)
    acc.compose(event)
    prep = acc._prepared()
    if prep is None:
        return 0.0
    first = acc._start_points(min(acc.target_points, ADAPTIVE_START_POINTS), delta)
    cache = Compositions(COARSE_POINTS)
    chernoff = {n: chernoff_epsilon(prep.coarse[n], delta) for n in prep.names}
    order = sorted(prep.names, key=lambda n: -chernoff[n])
    found = 0.0
    for i, name in enumerate(order):
        if i > 0 and chernoff[name] <= found:
            # its Chernoff estimate bounds its epsilon on the coarse grid from above (up to
            # round-off): composing it would not raise the largest epsilon read
            continue
        points = COARSE_POINTS if coarse or i > 0 else first
        found = max(found, _direction_upper(cache, prep, name, delta, points))
    return min(found, prep.pure_cap)


def _direction_upper(
    cache: Compositions, prep: Prepared, name: str, delta: float, points: int
) -> float:
    """One direction's plain tilted upper bound on ``points`` grid points (on COARSE_POINTS,
    its window not extended over the heavy tilted tail)."""
    from dpledger.accountant.pld_epsilon import tilt_level
    from dpledger.accountant.pld_read import epsilon_for
    from dpledger.accountant.pld_tilt import tilt_for_delta

    cache.points = points
    tilt = tilt_for_delta(prep.coarse[name], delta)
    tilts = cache.tilts(prep, name, tilt, tilt_level(prep, delta))
    eps = math.inf
    for tilt in tilts:
        if points == COARSE_POINTS:
            # a coarse window not extended over the heavy tilted tail (wrapped mass only
            # adds to the upper bound): a fraction of the points, for an estimate
            h, win = cache.window(prep, name, tilt, delta, 0)
            up = cache.compose_at(prep, name, tilt, h, win, "upper")
        else:
            up = cache.composed(prep, name, tilt, delta)
        if up is None:
            continue
        eps = epsilon_for(up, delta, upper=True)
        if math.isfinite(eps) and eps > float(up.losses[0]) + up.h:
            break
    return eps


def _coarse(event: Event, adjacency: Adjacency | None, delta: float) -> float:
    return _plain_upper(event, adjacency, delta, coarse=True)


def _plain(event: Event, adjacency: Adjacency | None, delta: float) -> float:
    return _plain_upper(event, adjacency, delta, coarse=False)


_STAGES: dict[str, Callable[[Event, Adjacency | None, float], float]] = {
    "rdp": _rdp,
    "coarse": _coarse,
    "plain": _plain,
}


def estimate_crossing(
    make_event: Callable[[float], Event],
    adjacency: Adjacency | None,
    target: float,
    delta: float,
    bracket: tuple[float, float],
) -> Estimate | None:
    """The sigma in ``bracket`` where the plain PLD upper bound crosses ``target`` (started from
    the RDP bound's crossing, then the coarse grid's), by secant steps on (log sigma, log
    epsilon); a stage that fails leaves the estimate of the one before it; None if no bound is
    available or the bracket holds no crossing of any."""
    lo, hi = bracket
    start = Estimate(math.sqrt(lo * hi), -1.0)
    best = None
    for name in ("rdp", "coarse", "plain"):
        stage = _STAGES[name]

        def value(sigma: float, stage: Callable[..., float] = stage) -> float:
            return gap(stage(make_event(sigma), adjacency, delta), target)

        try:
            found = _secant(value, start, bracket, name)
        except (DPLedgerError, ArithmeticError, ValueError):
            continue
        if found is not None:
            start = best = found
    return best


def _secant(
    value: Callable[[float], float],
    start: Estimate,
    bracket: tuple[float, float],
    stage: str,
) -> Estimate | None:
    """Secant steps from ``start`` (its slope for the first one), within the bracket; the
    estimate after the last, or None if the crossing left the bracket."""
    lo, hi = math.log(bracket[0]), math.log(bracket[1])
    tolerance, most = STEP_TOLERANCE[stage], STAGE_EVALUATIONS[stage]
    x, slope = math.log(start.sigma), start.slope
    g = value(math.exp(x))
    for i in range(most - 1):
        # the first step only part of the way: the start's slope is another bound's
        step = max(-MAX_STEP, min(MAX_STEP, -g / slope)) * (FIRST_STEP[stage] if i == 0 else 1.0)
        nxt = max(lo, min(hi, x + step))
        if abs(nxt - x) < tolerance:
            break
        g_next = value(math.exp(nxt))
        if abs(g) < GAP_CAP and abs(g_next) < GAP_CAP and g_next != g:
            found = (g_next - g) / (nxt - x)
            slope = found if found < 0 else slope
        x, g = nxt, g_next
    root = x + max(-MAX_STEP, min(MAX_STEP, -g / slope))
    if abs(g) >= GAP_CAP or not lo <= root <= hi:
        return None
    return Estimate(math.exp(root), slope, stage == "plain" and abs(root - x) < PRECISE_TOLERANCE)
