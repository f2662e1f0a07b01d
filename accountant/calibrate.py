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
from dpledger.accountant.calibrate_estimate import Estimate, estimate_crossing
from dpledger.accountant.calibrate_search import GAP_CAP, Search, gap
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


def _account(
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


def _check_bracket(bracket: tuple[float, float], rtol: float) -> tuple[float, float]:
    """The bracket's ends as floats, refused unless ``0 < lo < hi < inf`` and ``0 < rtol < 1``."""
    lo, hi = (float(b) for b in bracket)
    if not (0 < lo < hi and math.isfinite(hi)):
        raise InvalidParameterError(
            "bracket", f"must satisfy 0 < lo < hi < inf, got {bracket!r}", "pass e.g. (0.1, 100)"
        )
    if not (0 < rtol < 1):
        raise InvalidParameterError("rtol", f"must lie in (0, 1), got {rtol!r}", "pass e.g. 1e-4")
    return lo, hi


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

    Every evaluation is the full query (``account`` as it prints the bound, so the result is
    certified by it); where the PLD accountant makes it, the search starts at the crossing
    of cheaper bounds (:mod:`~dpledger.accountant.calibrate_estimate`) with their slope.
    """
    eps_t, delta = _check_targets(target_epsilon, target_delta)
    lo, hi = _check_bracket(bracket, rtol)
    estimate = None
    if backends is None or "pld" in backends:
        estimate = estimate_crossing(make_event, adjacency, eps_t, delta, (lo, hi))
    search = Search(lo, hi, rtol, slope=None if estimate is None else estimate.slope)
    known: dict[float, EpsilonBound] = {}

    def evaluate(sigma: float) -> EpsilonBound:
        if sigma not in known:
            known[sigma] = _account(make_event(sigma), adjacency, delta, backends)
        search.add(sigma, gap(known[sigma].epsilon, eps_t))
        return known[sigma]

    first = math.sqrt(lo * hi) if estimate is None else estimate.sigma
    if estimate is not None and estimate.precise:
        # just above the estimated crossing: met there, the next candidate lies just below it
        first *= 1.0 + rtol / 4
    _first_evaluations(search, evaluate, first)
    if not any(b.epsilon <= eps_t for b in known.values()):
        at_hi = evaluate(hi)
        if not at_hi.epsilon <= eps_t:
            raise InvalidParameterError(
                "bracket",
                f"even noise_multiplier={hi:g} gives certified epsilon {at_hi.epsilon:.6g} > "
                f"target {eps_t:g}",
                "raise the upper end of the bracket, or relax the target",
            )
    for _ in range(MAX_CALIBRATION_STEPS):
        if search.done():
            break
        evaluate(search.candidate())
    sigma = search.hi
    if not search.lo_known and search.lo == lo and evaluate(lo).epsilon <= eps_t:
        sigma = lo
    return _confirmed(make_event, adjacency, eps_t, delta, backends, sigma, search, known)


def _first_evaluations(
    search: Search, evaluate: Callable[[float], EpsilonBound], first: float
) -> None:
    """The first evaluation at ``first`` (kept inside the bracket); from an estimate, one more
    at the search's next candidate when the first did not meet the target."""
    if search.done():
        return
    evaluate(min(search.hi, max(search.lo, first)))
    if search.slope is not None and search.points[-1][1] > 0 and not search.done():
        evaluate(search.candidate())


def _confirmed(
    make_event: Callable[[float], Event],
    adjacency: Adjacency | None,
    eps_t: float,
    delta: float,
    backends: Sequence[str] | None,
    sigma: float,
    search: Search,
    known: dict[float, EpsilonBound] | None = None,
) -> CalibrationResult:
    """``sigma``, raised until the full query (as ``account`` makes it) meets the target too
    (``known``: the full queries made already). Each raise is at least one ``rtol`` step, and
    as far as the search's slope says the full query's excess needs."""
    rtol = search.rtol
    slope = _slope(search.points)
    known = {} if known is None else known
    for _ in range(MAX_CONFIRM_STEPS):
        bound = known.get(sigma) or _account(make_event(sigma), adjacency, delta, backends)
        if bound.epsilon <= eps_t:
            return CalibrationResult(sigma, bound.epsilon, delta, bound.method)
        needed = gap(bound.epsilon, eps_t) / -slope if slope < 0 else 0.0
        sigma *= max(1.0 + rtol, math.exp(min(needed, 1.0)) * (1.0 + rtol / 4))
    raise InvalidParameterError(
        "target_epsilon",
        f"no noise multiplier near {sigma:g} is certified at {eps_t:g}",
        "relax the target or widen the bracket",
    )


def _slope(points: Sequence[tuple[float, float]]) -> float:
    """d gap / d log sigma between the two evaluations nearest the crossing (0 if unknown)."""
    near = sorted((p for p in points if abs(p[1]) < GAP_CAP), key=lambda p: abs(p[1]))[:2]
    if len(near) < 2 or near[0][0] == near[1][0]:
        return 0.0
    (x1, g1), (x2, g2) = near
    return (g2 - g1) / (x2 - x1)


#: most full-resolution confirmations of a calibrated noise multiplier
MAX_CONFIRM_STEPS = 20


#: most accountant evaluations of one noise calibration
MAX_CALIBRATION_STEPS = 80


#: significant digits of a noise multiplier calibrated on the grid (:func:`calibrate_on_grid`)
GRID_DIGITS = 3


def _on_grid(count: int, exponent: int) -> float:
    """``count * 10^exponent``, written so that grid points are the nearest doubles."""
    return count / 10.0**-exponent if exponent < 0 else count * 10.0**exponent


def grid_neighbours(sigma: float, digits: int = GRID_DIGITS) -> tuple[float, float]:
    """(the grid point below the ceiling, the ceiling): the least point at or above ``sigma``
    with ``digits`` significant digits, and the one a step under it. A ``sigma`` within 1e-9
    (relative) of a grid point counts as on it, so the ceiling can be below ``sigma`` by that
    much (callers certify what they return); so does a grid point itself at any number of
    digits (:func:`_grid_index`). A decade's first point has the finer step below it."""
    index = _grid_index(sigma, digits)
    return _grid_value(index - 1, digits), _grid_value(index, digits)


def calibrate_on_grid(
    make_event: Callable[[float], Event],
    adjacency: Adjacency | None,
    target_epsilon: float,
    target_delta: float,
    *,
    bracket: tuple[float, float] = (1e-2, 1e3),
    digits: int = GRID_DIGITS,
    backends: Sequence[str] | None = None,
) -> CalibrationResult:
    """Least noise multiplier with ``digits`` significant digits whose certified epsilon meets
    the target (as :func:`calibrate_noise_multiplier`, whose result it falls back to if no grid
    point next to it is certified).

    It costs at most ``10^(1 - digits)`` more noise (relative), and a run that uses it stays the
    same when the accountant's bounds move slightly: the result changes only if the certified
    epsilon at a grid point crosses the target, where an unrounded calibration moves with every
    change, and with it every number of the run.

    Where the PLD accountant gives an estimate of the crossing, the grid points are searched
    from the one above it (:func:`_grid_search`: usually two full queries, that point met and
    the one below failed); otherwise, or when that search does not end within
    MAX_GRID_QUERIES queries, the unrounded calibration is made first and its grid neighbours
    are queried."""
    if isinstance(digits, bool) or not isinstance(digits, int) or not 1 <= digits <= 12:
        raise InvalidParameterError(
            "digits", f"must be an integer in [1, 12], got {digits!r}", "pass e.g. 3"
        )
    eps_t, delta = _check_targets(target_epsilon, target_delta)
    lo, hi = _check_bracket(bracket, 0.5 * 10.0**-digits)
    if backends is None or "pld" in backends:
        estimate = estimate_crossing(make_event, adjacency, eps_t, delta, (lo, hi))
        if estimate is not None:
            found = _grid_search(
                make_event, adjacency, (eps_t, delta), backends, estimate, digits, (lo, hi)
            )
            if found is not None:
                return found
    found = calibrate_noise_multiplier(
        make_event,
        adjacency,
        target_epsilon,
        target_delta,
        bracket=bracket,
        rtol=0.5 * 10.0**-digits,
        backends=backends,
    )
    # found is within half a smallest grid step (10^-digits relative) of the least certified
    # value, so the grid point below its ceiling is the only smaller candidate
    for sigma in grid_neighbours(found.noise_multiplier, digits):
        if not bracket[0] <= sigma <= bracket[1]:
            continue
        bound = _account(make_event(sigma), adjacency, found.delta, backends)
        if bound.epsilon <= target_epsilon:
            return CalibrationResult(sigma, bound.epsilon, found.delta, bound.method)
    return found


#: most full queries of a search on the grid (:func:`calibrate_on_grid`) before the unrounded
#: calibration takes over
MAX_GRID_QUERIES = 6


def _grid_search(
    make_event: Callable[[float], Event],
    adjacency: Adjacency | None,
    targets: tuple[float, float],
    backends: Sequence[str] | None,
    estimate: Estimate,
    digits: int,
    bracket: tuple[float, float],
) -> CalibrationResult | None:
    """The least grid point in ``bracket`` whose full query meets the targets: full queries at
    grid points (the ceiling of the estimated crossing first, then of the crossing the last
    two queries, or the estimate's slope, predict), each strictly between the greatest point
    known to fail and the least known to meet (epsilon does not increase with the noise),
    until those two are neighbours or the least met is the bracket's lowest grid point. None
    when MAX_GRID_QUERIES queries do not settle it, no grid point in the bracket can meet, or
    the bracket holds none."""
    eps_t, delta = targets
    lo, hi = bracket
    low_end, high_end = _grid_index(lo, digits), _grid_index(hi, digits, ceiling=False)
    # (a bracket end within the snapping of a grid point: the point inside the bracket)
    low_end += _grid_value(low_end, digits) < lo
    high_end -= _grid_value(high_end, digits) > hi
    if low_end > high_end:  # no grid point in the bracket
        return None
    failed, met = low_end - 1, high_end + 1  # (indices beyond the bracket: not queried)
    best: EpsilonBound | None = None
    points: list[tuple[float, float]] = []
    aim = estimate.sigma
    for _ in range(MAX_GRID_QUERIES):
        index = min(max(_grid_index(aim, digits), failed + 1), met - 1)
        if index > high_end:
            return None
        sigma = _grid_value(index, digits)
        bound = _account(make_event(sigma), adjacency, delta, backends)
        points.append((math.log(sigma), gap(bound.epsilon, eps_t)))
        if bound.epsilon <= eps_t:
            met, best = index, bound
        else:
            failed = index
        if best is not None and failed == met - 1:
            return CalibrationResult(_grid_value(met, digits), best.epsilon, delta, best.method)
        if failed >= high_end:
            return None
        slope = _slope(points) if len(points) > 1 else estimate.slope
        x, g = points[-1]
        step = -g / slope if slope < 0 and abs(g) < GAP_CAP else 0.0
        aim = math.exp(x + max(-1.0, min(1.0, step)))
    return None


def _grid_index(sigma: float, digits: int, *, ceiling: bool = True) -> int:
    """The position on the grid of the least grid point at or above ``sigma``, or with
    ``ceiling`` False of the greatest at or below it; a ``sigma`` within 5e-10 of a grid step
    (as :func:`grid_neighbours`) or a few units in the last place of it (the rounding of a
    grid point itself, at many digits) counts as on it. Positions increase with the points,
    ``9 10^(digits - 1)`` to a decade."""
    exponent = math.floor(math.log10(sigma)) - (digits - 1)
    scaled = sigma / _on_grid(1, exponent)
    nearest = round(scaled)
    if abs(scaled - nearest) <= max(5e-10, 4 * math.ulp(scaled)):
        scaled = float(nearest)
    count = math.ceil(scaled) if ceiling else math.floor(scaled)
    first = int(10 ** (digits - 1))  # the first count of a decade
    return exponent * 9 * first + count - first


def _grid_value(index: int, digits: int) -> float:
    """The grid point at a position of :func:`_grid_index`."""
    exponent, rest = divmod(index, 9 * 10 ** (digits - 1))
    return _on_grid(rest + 10 ** (digits - 1), exponent)


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

    points: list[tuple[float, float]] = []  # (log count, gap) of every full query

    def meets(count: int) -> EpsilonBound | None:
        # the full query: the count returned is one whose printed bound meets the target
        bound = _account(make_event(count), adjacency, delta, backends)
        points.append((math.log(count), gap(bound.epsilon, eps_t)))
        return bound if bound.epsilon <= eps_t else None

    first = meets(1)
    if first is None:
        return StepsCalibrationResult(0, 0.0, delta, "none")
    good, best = 1, first
    bad = max_count + 1  # the least count known to fail (one above max_count: none known)
    last = 1  # the count queried last
    steps: list[int] = []  # the moves made once a count failed
    patience = 4 * max_count.bit_length() + 8  # queries before only bisections are made
    while good < max_count and bad - good > 1:
        count = _next_count(points, bad)
        if bad > max_count:  # nothing failed yet: at least a doubling, at most max_count
            count = min(max(count, 2 * good), max_count)
        else:
            # a bisection where the interpolation aims outside the bracket (the model
            # disagrees with the queries), or, as in Brent's method, where the move is not half
            # the one before last (a jump in epsilon would otherwise keep it creeping)
            creeping = len(steps) >= 2 and 2 * abs(count - last) > steps[-2]
            if not good < count < bad or creeping or len(points) > patience:
                count = (good + bad) // 2
            steps.append(abs(count - last))
        bound = meets(count)
        last = count
        if bound is None:
            bad = count
        else:
            good, best = count, bound
    return StepsCalibrationResult(good, best.epsilon, delta, best.method)


#: d log(epsilon) / d log(count) assumed before two queries measure it (epsilon of a long
#: composition grows about as the square root of its length)
STEPS_SLOPE = 0.5
#: one interpolated step moves the count by at most this factor
MAX_STEPS_GROWTH = 1000.0


def _next_count(points: Sequence[tuple[float, float]], bad: int) -> int:
    """The next count the interpolation asks for (the caller keeps it inside the bracket or
    bisects): where the crossing the two queries nearest it predict (on log count and log
    epsilon; one query: STEPS_SLOPE) lies, on the side the last query did not fall on;
    ``bad`` (the least count known to fail, or one above the largest allowed) when it
    predicts one at or beyond it."""
    x, g = points[-1]
    slope = _slope(points)
    if slope > 0:  # from the query nearest the crossing
        x, g = min((p for p in points if abs(p[1]) < GAP_CAP), key=lambda p: abs(p[1]))
    else:
        slope = STEPS_SLOPE
    step = max(-math.log(MAX_STEPS_GROWTH), min(math.log(MAX_STEPS_GROWTH), -g / slope))
    if x + step >= math.log(bad):
        return bad
    # the last query met: aim at the first count predicted to fail, else at the last to meet
    return math.floor(math.exp(x + step)) + (1 if points[-1][1] <= 0 else 0)


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
