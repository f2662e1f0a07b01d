"""The root search of a noise calibration: where a certified epsilon, falling with the noise
multiplier, crosses its target, to a relative tolerance, in few accountant evaluations.

On ``(log sigma, log epsilon / target)`` the curve is smooth and nearly straight, so the
search interpolates there (inverse quadratic interpolation through the last three
evaluations once the crossing is bracketed, else the secant through the bracketing pair, else
an extrapolation), safeguarded by bisection; each candidate aims just beside the estimated
crossing, on the side away from the last evaluation, and is kept at least a tolerance inside
the bracket, so that two evaluations close the bracket once the estimate is that close. The
search only chooses where to evaluate: which end is certified is decided by the evaluations.
"""

from __future__ import annotations

import math

import attrs

__all__ = ["GAP_CAP", "Search", "gap"]

#: the gap of epsilon 0 or infinity, and the largest gap an interpolation uses
GAP_CAP = 50.0
#: an extrapolation moves the noise multiplier by at most this factor
MAX_EXTRAPOLATION = 100.0
#: the inverse quadratic interpolation uses evaluations within this gap of the crossing only
#: (epsilon within a factor e of the target; farther ones bend it away)
QUADRATIC_GAP = 1.0
#: after this many evaluations in a row on one side of the crossing, the next is a bisection
SAME_SIDE_LIMIT = 3


def gap(epsilon: float, target: float) -> float:
    """log(epsilon / target), within +-GAP_CAP (finite stand-ins for 0 and inf)."""
    if epsilon <= 0:
        return -GAP_CAP
    if not math.isfinite(epsilon):
        return GAP_CAP
    return max(-GAP_CAP, min(GAP_CAP, math.log(epsilon / target)))


@attrs.define
class Search:
    """The bracket ``[lo, hi]`` of the least noise multiplier meeting the target: ``hi`` met
    it, ``lo`` failed (``lo_known``) or is the unevaluated bottom; the evaluations in order as
    ``(log sigma, gap)`` (gap <= 0: met)."""

    lo: float
    hi: float
    rtol: float
    lo_known: bool = False
    points: list[tuple[float, float]] = attrs.field(factory=list)
    #: d gap / d log sigma expected near the crossing (negative), from a cheaper bound; it
    #: sets the step from a single evaluation (without it, epsilon falling as 1 / sigma)
    slope: float | None = None

    def add(self, sigma: float, found_gap: float) -> None:
        """Record one evaluation and shrink the bracket by it."""
        self.points.append((math.log(sigma), found_gap))
        if found_gap <= 0:
            self.hi = min(self.hi, sigma)
        elif sigma > self.lo or not self.lo_known:
            self.lo, self.lo_known = max(self.lo, sigma), True

    def done(self) -> bool:
        return self.hi / self.lo - 1 <= self.rtol

    def candidate(self) -> float:
        """The next noise multiplier to evaluate, strictly inside ``(lo, hi)``."""
        lo, hi, rtol = self.lo, self.hi, self.rtol
        low, high = lo * (1 + rtol), hi / (1 + rtol)
        if low >= high:  # one more evaluation anywhere inside closes the bracket
            return math.sqrt(lo * hi)
        root = None if self._one_sided() else self._estimate()
        if root is None:
            return min(high, max(low, math.sqrt(lo * hi)))
        met_last = self.points[-1][1] <= 0
        aim = root / (1 + rtol / 4) if met_last else root * (1 + rtol / 4)
        return min(high, max(low, aim))

    def _one_sided(self) -> bool:
        """Whether the last SAME_SIDE_LIMIT evaluations all fell on one side (the estimates
        converge from one side only: bisect once)."""
        last = self.points[-SAME_SIDE_LIMIT:]
        if not self.lo_known or len(last) < SAME_SIDE_LIMIT:
            return False
        return len({g <= 0 for _, g in last}) == 1

    def _estimate(self) -> float | None:
        """The estimated crossing inside the bracket, or None."""
        finite = [(x, g) for x, g in self.points if abs(g) < GAP_CAP]
        guesses: list[float | None] = []
        if self.lo_known:
            near = [p for p in finite[-3:] if abs(p[1]) <= QUADRATIC_GAP]
            guesses.append(_inverse_quadratic(near))
            guesses.append(self._bracketing_secant(finite))
        elif len(finite) >= 2:
            guesses.append(_secant(finite[-2], finite[-1], MAX_EXTRAPOLATION))
        elif len(finite) == 1 and self.slope is None:
            # epsilon falling as 1 / sigma (a Gaussian's at large noise; it falls faster at
            # less noise): the guess lies at or below the crossing
            x0, g0 = finite[0]
            limit = math.log(MAX_EXTRAPOLATION)
            guesses.append(x0 + max(-limit, min(limit, g0)))
        if len(finite) == 1 and self.slope is not None and self.slope < 0:
            x0, g0 = finite[0]
            limit = math.log(MAX_EXTRAPOLATION)
            guesses.append(x0 + max(-limit, min(limit, -g0 / self.slope)))
        for guess in guesses:
            if guess is not None and self.lo < math.exp(guess) < self.hi:
                return math.exp(guess)
        return None

    def _bracketing_secant(self, finite: list[tuple[float, float]]) -> float | None:
        """The secant root through the failing evaluation nearest the crossing and the met
        one nearest it."""
        failed = [p for p in finite if p[1] > 0]
        met = [p for p in finite if p[1] <= 0]
        if not failed or not met:
            return None
        return _secant(max(failed), min(met), math.inf)


def _secant(a: tuple[float, float], b: tuple[float, float], most: float) -> float | None:
    """The root in x of the line through ``a`` and ``b``, moved at most ``log(most)`` from
    ``b``; None for a flat or rising line."""
    (x1, g1), (x2, g2) = a, b
    if x1 == x2 or (g2 - g1) / (x2 - x1) >= 0:
        return None
    step = -g2 * (x2 - x1) / (g2 - g1)
    limit = math.log(most)
    return x2 + max(-limit, min(limit, step))


def _inverse_quadratic(points: list[tuple[float, float]]) -> float | None:
    """x at gap 0 of the quadratic x(gap) through three points (None unless three with
    distinct gaps)."""
    if len(points) < 3:
        return None
    (x0, g0), (x1, g1), (x2, g2) = points
    if len({g0, g1, g2}) < 3:
        return None
    return (
        x0 * g1 * g2 / ((g0 - g1) * (g0 - g2))
        + x1 * g0 * g2 / ((g1 - g0) * (g1 - g2))
        + x2 * g0 * g1 / ((g2 - g0) * (g2 - g1))
    )
