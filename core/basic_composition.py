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
    rationals: dict[tuple[int, int], int] = {}  # (numerator, denominator) -> count
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
            rational = epsilon if isinstance(epsilon, Fraction) else Fraction(epsilon)
            key = (rational.numerator, rational.denominator)  # (hashing a Fraction is slow)
            rationals[key] = rationals.get(key, 0) + count
    total = Fraction(0)
    if len(rationals) <= EXACT_RATIONAL_TERMS:
        total = sum((Fraction(c * n, d) for (n, d), c in rationals.items()), Fraction(0))
    else:
        for (n, d), count in rationals.items():
            term = _float_at_least(count * n, d)
            if math.isinf(term):
                return math.inf
            numerator, denominator = term.as_integer_ratio()
            by_denominator[denominator] = by_denominator.get(denominator, 0) + numerator
    total += sum((Fraction(n, d) for d, n in by_denominator.items()), Fraction(0))
    return _float_at_least(total.numerator, total.denominator)


def _float_at_least(numerator: int, denominator: int) -> float:
    """The least float at or above ``numerator / denominator`` (both non-negative, the
    denominator positive; infinity beyond the largest float)."""
    try:
        rounded = numerator / denominator  # integer true division rounds correctly
    except OverflowError:
        return math.inf
    a, b = rounded.as_integer_ratio()
    return rounded if a * denominator >= numerator * b else math.nextafter(rounded, math.inf)
