"""The checks of the extreme-parameter tests: what :func:`~dpledger.accountant.select.account`
certifies against a 50-digit reference curve, or against a discretised bracket of it.

The promise checked: for an epsilon query at ``delta`` the true curve satisfies
``delta(epsilon) <= delta`` and ``delta(epsilon_lower) >= delta``; for a delta query at ``eps``
the true ``delta(eps)`` lies in ``[delta_lower, delta]`` (relative slack 1e-9, absolute 1e-300).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import mpmath as mp

from dpledger.accountant.base import DeltaBound, EpsilonBound
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import Event

from .extreme_references import Curve, Truth

__all__ = [
    "FLOOR",
    "NOISE",
    "REL",
    "bracket_sweep",
    "delta_bound",
    "delta_problems",
    "epsilon_bound",
    "epsilon_problems",
    "sweep",
]

REL = 1e-9
FLOOR = 1e-300
#: roundoff floor of the FFT-composed brackets (their values below it are noise)
NOISE = 1e-12


def epsilon_bound(event: Event, adjacency: Adjacency, delta: float) -> EpsilonBound:
    b = account(event, adjacency, delta=delta).bound
    assert isinstance(b, EpsilonBound)
    return b


def delta_bound(event: Event, adjacency: Adjacency, eps: float) -> DeltaBound:
    b = account(event, adjacency, epsilon=eps).bound
    assert isinstance(b, DeltaBound)
    return b


def epsilon_problems(event: Event, adjacency: Adjacency, delta: float, truth: Truth) -> list[str]:
    b = epsilon_bound(event, adjacency, delta)
    lo, up = b.epsilon_lower, b.epsilon
    out = []
    if not lo <= up or math.isnan(lo) or math.isnan(up):
        out.append(f"lower {lo} above upper {up}")
    if math.isfinite(up) and truth(up) > delta * (1 + REL) + FLOOR:
        out.append(f"delta({up!r}) = {mp.nstr(truth(up), 12)} > {delta} ({b.method})")
    if lo > 0 and truth(lo) < delta * (1 - REL) - FLOOR:
        out.append(f"delta({lo!r}) = {mp.nstr(truth(lo), 12)} < {delta} ({b.method})")
    return out


def delta_problems(event: Event, adjacency: Adjacency, eps: float, truth: Truth) -> list[str]:
    b = delta_bound(event, adjacency, eps)
    lo, up = b.delta_lower, b.delta
    t = truth(eps)
    if lo * (1 - REL) - FLOOR <= t <= up * (1 + REL) + FLOOR:
        return []
    return [f"delta({eps!r}) = {mp.nstr(t, 17)} outside [{lo!r}, {up!r}] ({b.method})"]


def sweep(
    event: Event,
    adjacency: Adjacency,
    truth: Truth,
    deltas: Sequence[float],
    epsilons: Sequence[float],
) -> None:
    problems = []
    for d in deltas:
        problems += epsilon_problems(event, adjacency, d, truth)
    for e in epsilons:
        problems += delta_problems(event, adjacency, e, truth)
    assert not problems, problems


def bracket_sweep(
    event: Event,
    adjacency: Adjacency,
    bracket: tuple[Curve, Curve],
    deltas: Sequence[float],
    epsilons: Sequence[float],
) -> None:
    """Only what the bracket proves: an upper bound below the truth's lower curve, or a lower
    bound above the truth's upper curve."""
    low, high = bracket
    lower: Curve = lambda e: low(e) - NOISE  # noqa: E731
    upper: Curve = lambda e: high(e) + NOISE  # noqa: E731
    problems = []
    for d in deltas:
        b = epsilon_bound(event, adjacency, d)
        lo, up = b.epsilon_lower, b.epsilon
        if math.isfinite(up) and lower(up) > d * (1 + REL):
            problems.append(f"delta({up!r}) >= {lower(up)} > {d} ({b.method})")
        if lo > 0 and upper(lo) < d * (1 - REL):
            problems.append(f"delta({lo!r}) <= {upper(lo)} < {d} ({b.method})")
    for e in epsilons:
        c = delta_bound(event, adjacency, e)
        lo, up = c.delta_lower, c.delta
        if up < lower(e) * (1 - REL) or lo > upper(e) * (1 + REL):
            problems.append(f"delta({e}) in [{lower(e)}, {upper(e)}], not in [{lo}, {up}]")
    assert not problems, problems
