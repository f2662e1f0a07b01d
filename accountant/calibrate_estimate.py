"""Where a noise calibration's crossing lies, estimated from bounds much cheaper than the query
it certifies with: RDP's, then the PLD accountant's on a coarse grid.

An estimate only chooses where the full query is evaluated first and the slope its search
starts from; nothing computed here is returned as a certified number.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import attrs

from dpledger.accountant.base import EpsilonBound
from dpledger.accountant.calibrate_search import GAP_CAP, gap
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import DPLedgerError
from dpledger.core.events import Event

__all__ = ["COARSE_POINTS", "Estimate", "estimate_crossing"]

#: grid points of the coarse PLD pass the estimate reads
COARSE_POINTS = 1 << 10
#: the secant stops when its step (in log sigma) is below this
STEP_TOLERANCE = {"rdp": 1e-2, "coarse": 2e-2}
#: most evaluations of each stage
STAGE_EVALUATIONS = {"rdp": 12, "coarse": 3}
#: the first secant step of a stage goes this share of the way its start's slope says
FIRST_STEP = 0.5
#: one secant step moves log sigma by at most this
MAX_STEP = math.log(100.0)


@attrs.frozen
class Estimate:
    """The estimated crossing and d log(epsilon) / d log(sigma) there (negative)."""

    sigma: float
    slope: float


def _rdp(event: Event, adjacency: Adjacency | None, delta: float) -> float:
    from dpledger.accountant.select import account

    bound = account(event, adjacency, delta=delta, backends=("rdp",)).bound
    assert isinstance(bound, EpsilonBound)
    return bound.epsilon


def _coarse(event: Event, adjacency: Adjacency | None, delta: float) -> float:
    from dpledger.accountant.pld import PLDAccountant, upper_only

    with upper_only():
        acc = PLDAccountant(adjacency, target_points=COARSE_POINTS)
        acc.compose(event)
        return acc.get_epsilon(delta).epsilon


_STAGES: dict[str, Callable[[Event, Adjacency | None, float], float]] = {
    "rdp": _rdp,
    "coarse": _coarse,
}


def estimate_crossing(
    make_event: Callable[[float], Event],
    adjacency: Adjacency | None,
    target: float,
    delta: float,
    bracket: tuple[float, float],
) -> Estimate | None:
    """The sigma in ``bracket`` where the coarse PLD bound crosses ``target`` (started from the
    RDP bound's crossing), by secant steps on (log sigma, log epsilon); None if neither bound
    is available or the bracket holds no crossing of them."""
    lo, hi = bracket
    start = Estimate(math.sqrt(lo * hi), -1.0)
    found = None
    for name in ("rdp", "coarse"):
        stage = _STAGES[name]

        def value(sigma: float, stage: Callable[..., float] = stage) -> float:
            return gap(stage(make_event(sigma), adjacency, delta), target)

        try:
            found = _secant(value, start, bracket, STEP_TOLERANCE[name], STAGE_EVALUATIONS[name])
        except (DPLedgerError, ArithmeticError, ValueError):
            continue
        if found is not None:
            start = found
    return found


def _secant(
    value: Callable[[float], float],
    start: Estimate,
    bracket: tuple[float, float],
    tolerance: float,
    most: int,
) -> Estimate | None:
    """Secant steps from ``start`` (its slope for the first one), within the bracket; the
    estimate after the last, or None if the crossing left the bracket."""
    lo, hi = math.log(bracket[0]), math.log(bracket[1])
    x, slope = math.log(start.sigma), start.slope
    g = value(math.exp(x))
    for i in range(most - 1):
        # the first step only half way: the start's slope is another bound's
        step = max(-MAX_STEP, min(MAX_STEP, -g / slope)) * (FIRST_STEP if i == 0 else 1.0)
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
    return Estimate(math.exp(root), slope)
