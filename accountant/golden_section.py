"""Golden-section search for the maximum of a function on an interval (a tuning search:
the bounds it chooses parameters for are certified whatever it returns)."""

from __future__ import annotations

import math
from collections.abc import Callable

__all__ = ["golden_section"]

#: the golden ratio's conjugate, the fraction each step keeps of the interval
_RATIO = (math.sqrt(5.0) - 1) / 2


def golden_section(
    f: Callable[[float], float], lo: float, hi: float, steps: int
) -> tuple[tuple[float, float], tuple[float, float]]:
    """The two last interior points ``((f(a), a), (f(b), b))`` of ``steps`` golden-section
    steps on ``[lo, hi]``."""
    a, b = hi - _RATIO * (hi - lo), lo + _RATIO * (hi - lo)
    fa, fb = f(a), f(b)
    for _ in range(steps):
        if fa >= fb:
            hi, b, fb = b, a, fa
            a = hi - _RATIO * (hi - lo)
            fa = f(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + _RATIO * (hi - lo)
            fb = f(b)
    return (fa, a), (fb, b)
