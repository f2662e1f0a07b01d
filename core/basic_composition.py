"""Basic composition: the epsilons of pure-DP steps add up.

The one place dpledger sums epsilons. The kernel's ``pure_epsilon`` uses it, and the backends as
a cap (the closed form and RDP) or as the answer for an all-pure ledger (PLD), so it must never
round down: the sum is taken exactly over the rationals and rounded up to the next float. Float
terms are summed exactly at any count (integers per power-of-two denominator); rational terms
(a sensitivity over a noise multiplier) exactly up to EXACT_RATIONAL_TERMS distinct values, and
beyond that each rounded up to a float first (an exact sum of reciprocals of distinct floats
has a denominator that grows with every term: 25,000 Laplace scales took 11 s).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from fractions import Fraction

from dpledger.core.errors import InvalidParameterError

__all__ = ["EXACT_RATIONAL_TERMS", "basic_composition_epsilon"]

#: distinct rational epsilons summed exactly; beyond, each term is rounded up to a float
EXACT_RATIONAL_TERMS = 64


def basic_composition_epsilon(terms: Iterable[tuple[int, float | Fraction]]) -> float:
    """``sum(count * epsilon)`` over ``(count, epsilon)`` pairs, exact, rounded up.

    Counts are non-negative integers and epsilons non-negative (a Fraction is taken as exact,
    e.g. a sensitivity over a noise multiplier); an infinite epsilon with a positive count gives
    infinity, as does a sum beyond the largest float.
    """
    # the float terms, exactly: numerators summed per (power-of-two) denominator
    by_denominator: dict[int, int] = {}
    rationals: dict[Fraction, int] = {}
    for count, epsilon in terms:
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise InvalidParameterError(
                "count", f"must be an integer >= 0, got {count!r}", "pass a step count"
            )
        if not epsilon >= 0:
            raise InvalidParameterError(
                "epsilon", f"must be >= 0, got {epsilon!r}", "pass eps >= 0"
            )
        if count == 0 or epsilon == 0:
            continue
        if isinstance(epsilon, float):
            if math.isinf(epsilon):
                return math.inf
            numerator, denominator = epsilon.as_integer_ratio()
            by_denominator[denominator] = by_denominator.get(denominator, 0) + count * numerator
        else:
            rational = Fraction(epsilon)
            rationals[rational] = rationals.get(rational, 0) + count
    total = Fraction(0)
    if len(rationals) <= EXACT_RATIONAL_TERMS:
        total = sum((c * r for r, c in rationals.items()), Fraction(0))
    else:
        for rational, count in rationals.items():
            term = _float_at_least(count * rational)
            if math.isinf(term):
                return math.inf
            numerator, denominator = term.as_integer_ratio()
            by_denominator[denominator] = by_denominator.get(denominator, 0) + numerator
    total += sum((Fraction(n, d) for d, n in by_denominator.items()), Fraction(0))
    return _float_at_least(total)


def _float_at_least(value: Fraction) -> float:
    """The least float at or above ``value`` (infinity beyond the largest float)."""
    try:
        rounded = float(value)
    except OverflowError:
        return math.inf
    return rounded if Fraction(rounded) >= value else math.nextafter(rounded, math.inf)
