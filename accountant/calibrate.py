"""Calibration: the least noise (or the most steps) whose certified epsilon meets a target.

Every search keeps the invariant that its safe end was *certified* (by
:func:`dpledger.accountant.select.account`) to meet the target, and returns that end, so the
result never overshoots the target epsilon.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import attrs

from dpledger.accountant.base import EpsilonBound
from dpledger.accountant.conversions import U, gaussian_delta_bracket
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError, UnsupportedEventError
from dpledger.core.events import Event


@attrs.frozen
class CalibrationResult:
    """A calibrated noise multiplier and the certified epsilon it achieves."""

    noise_multiplier: float
    epsilon: float
    delta: float
    method: str


@attrs.frozen
class StepsCalibrationResult:
    """The largest step count meeting the target, and its certified epsilon."""

    count: int
    epsilon: float
    delta: float
    method: str


def _check_targets(target_epsilon: float, target_delta: float) -> tuple[float, float]:
    for name, value in (("target_epsilon", target_epsilon), ("target_delta", target_delta)):
        if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
            raise InvalidParameterError(name, f"expected a number, got {value!r}", "pass a float")
    if not (target_epsilon > 0 and math.isfinite(target_epsilon)):
        raise InvalidParameterError(
            "target_epsilon", f"must be > 0 and finite, got {target_epsilon!r}", "pass e.g. 1.0"
        )
    if not (0 < target_delta < 1):
        raise InvalidParameterError(
            "target_delta", f"must lie in (0, 1), got {target_delta!r}", "pass e.g. 1e-5"
        )
    return float(target_epsilon), float(target_delta)


#: backends tried first when the caller names none: they give the smallest certified bounds;
#: the slower cross-checks are used only for events these cannot bound
SEARCH_BACKENDS: tuple[str, ...] = ("closed_form", "pld")


def _certified(
    event: Event, adjacency: Adjacency | None, delta: float, backends: Sequence[str] | None
) -> EpsilonBound:
    if backends is None:
        try:
            bound = account(event, adjacency, delta=delta, backends=SEARCH_BACKENDS).bound
        except UnsupportedEventError:
            bound = account(event, adjacency, delta=delta).bound
    else:
        bound = account(event, adjacency, delta=delta, backends=backends).bound
    assert isinstance(bound, EpsilonBound)
    return bound


def calibrate_noise_multiplier(
    make_event: Callable[[float], Event],
    adjacency: Adjacency | None,
    target_epsilon: float,
    target_delta: float,
    *,
    bracket: tuple[float, float] = (1e-2, 1e3),
    rtol: float = 1e-4,
    backends: Sequence[str] | None = None,
) -> CalibrationResult:
    """Smallest noise multiplier in ``bracket`` (to ``rtol``) whose certified epsilon <= target.

    ``make_event(noise_multiplier)`` builds the event; epsilon must be non-increasing in the
    noise multiplier. Raises :class:`InvalidParameterError` if even ``bracket[1]`` is too little
    noise. Returns ``bracket[0]`` if that already meets the target.
    """
    eps_t, delta = _check_targets(target_epsilon, target_delta)
    lo, hi = (float(b) for b in bracket)
    if not (0 < lo < hi and math.isfinite(hi)):
        raise InvalidParameterError(
            "bracket", f"must satisfy 0 < lo < hi < inf, got {bracket!r}", "pass e.g. (0.1, 100)"
        )
    if not (0 < rtol < 1):
        raise InvalidParameterError("rtol", f"must lie in (0, 1), got {rtol!r}", "pass e.g. 1e-4")
    best = _certified(make_event(hi), adjacency, delta, backends)
    if not best.epsilon <= eps_t:
        raise InvalidParameterError(
            "bracket",
            f"even noise_multiplier={hi:g} gives certified epsilon {best.epsilon:.6g} > target "
            f"{eps_t:g}",
            "raise the upper end of the bracket, or relax the target",
        )
    at_lo = _certified(make_event(lo), adjacency, delta, backends)
    if at_lo.epsilon <= eps_t:
        return CalibrationResult(lo, at_lo.epsilon, delta, at_lo.method)
    # invariant: lo fails, hi meets the target (certified); bisect in log space
    while hi / lo - 1 > rtol:
        mid = math.sqrt(lo * hi)
        if not lo < mid < hi:
            break
        bound = _certified(make_event(mid), adjacency, delta, backends)
        if bound.epsilon <= eps_t:
            hi, best = mid, bound
        else:
            lo = mid
    return CalibrationResult(hi, best.epsilon, delta, best.method)


def calibrate_steps(
    make_event: Callable[[int], Event],
    adjacency: Adjacency | None,
    target_epsilon: float,
    target_delta: float,
    *,
    max_count: int = 10**7,
    backends: Sequence[str] | None = None,
) -> StepsCalibrationResult:
    """Largest ``count`` <= ``max_count`` whose certified epsilon <= target (0 if none).

    ``make_event(count)`` builds the event; epsilon must be non-decreasing in ``count``.
    """
    eps_t, delta = _check_targets(target_epsilon, target_delta)
    if isinstance(max_count, bool) or not isinstance(max_count, int) or max_count < 1:
        raise InvalidParameterError(
            "max_count", f"must be an integer >= 1, got {max_count!r}", "pass e.g. 10000"
        )

    def meets(count: int) -> EpsilonBound | None:
        bound = _certified(make_event(count), adjacency, delta, backends)
        return bound if bound.epsilon <= eps_t else None

    first = meets(1)
    if first is None:
        return StepsCalibrationResult(0, 0.0, delta, "none")
    good, best = 1, first
    bad = None
    while bad is None:  # exponential search for a failing count
        nxt = min(good * 2, max_count)
        if nxt == good:
            return StepsCalibrationResult(good, best.epsilon, delta, best.method)
        bound = meets(nxt)
        if bound is None:
            bad = nxt
        else:
            good, best = nxt, bound
    while bad - good > 1:
        mid = (good + bad) // 2
        bound = meets(mid)
        if bound is None:
            bad = mid
        else:
            good, best = mid, bound
    return StepsCalibrationResult(good, best.epsilon, delta, best.method)


def analytic_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest Gaussian std with exact delta(epsilon) <= delta (Balle & Wang 2018, Alg. 1).

    Valid for every epsilon > 0 (unlike the classical sqrt(2 ln(1.25/delta)) / epsilon, which is
    proven only for epsilon < 1). The returned std is rounded up: its certified delta upper
    bound at ``epsilon`` is at most ``delta``.
    """
    eps, delta = _check_targets(epsilon, delta)
    if (
        isinstance(sensitivity, bool)
        or not isinstance(sensitivity, int | float)
        or not (sensitivity > 0 and math.isfinite(sensitivity))
    ):
        raise InvalidParameterError(
            "sensitivity", f"must be > 0 and finite, got {sensitivity!r}", "pass e.g. 1.0"
        )

    def ok(mu: float) -> bool:
        return gaussian_delta_bracket(eps, mu * (1 + 8 * U))[1] <= delta

    lo = 1.0  # mu = sensitivity / sigma; find the largest mu with ok(mu)
    while not ok(lo):
        lo /= 2.0
        if lo < 1e-300:  # pragma: no cover - delta(eps) -> 0 as mu -> 0 for eps > 0
            raise InvalidParameterError("delta", "is too small to calibrate", "raise delta")
    hi = lo * 2.0
    while ok(hi):
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        if hi - lo <= 1e-15 * hi:
            break
        mid = 0.5 * (lo + hi)
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return float(sensitivity) / lo * (1 + 4 * U)
