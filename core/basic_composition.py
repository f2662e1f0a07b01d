"""Basic composition: the epsilons of pure-DP steps add up.

The one place dpledger sums epsilons. The kernel's ``pure_epsilon`` uses it, and the backends as
a cap (the closed form and RDP) or as the answer for an all-pure ledger (PLD), so it must never
round down: the sum is taken exactly
over the rationals and rounded up to the next float.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from fractions import Fraction

from dpledger.core.errors import InvalidParameterError


def basic_composition_epsilon(terms: Iterable[tuple[int, float | Fraction]]) -> float:
    """``sum(count * epsilon)`` over ``(count, epsilon)`` pairs, exact, rounded up.

    Counts are non-negative integers and epsilons non-negative (a Fraction is taken as exact,
    e.g. a sensitivity over a noise multiplier); an infinite epsilon with a positive count gives
    infinity, as does a sum beyond the largest float.
    """
    total = Fraction(0)
    # the float terms, exactly: numerators summed per (power-of-two) denominator
    by_denominator: dict[int, int] = {}
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
            total += count * Fraction(epsilon)
    total += sum((Fraction(n, d) for d, n in by_denominator.items()), Fraction(0))
    try:
        value = float(total)
    except OverflowError:
        return math.inf
    return value if Fraction(value) >= total else math.nextafter(value, math.inf)
