"""Directed decimal printing of bounds: upper bounds round up, lower bounds round down.

Rounding to the nearest could print an epsilon a hair *below* the certified bound, so every
printed upper bound is rounded toward ``+inf`` and every lower bound toward ``-inf``, with
``SIGNIFICANT`` significant digits and trailing zeros kept.
"""

from __future__ import annotations

import math
import sys
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import Any

__all__ = ["SIGNIFICANT", "as_float", "fmt_down", "fmt_exact", "fmt_up"]

SIGNIFICANT = 6


def _fmt(x: float, rounding: str, sig: int) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == 0:
        return "0"
    exact = Decimal(x)
    scale = Decimal(10) ** (exact.adjusted() - sig + 1)  # the exact decimal exponent
    rounded = (exact / scale).to_integral_value(rounding=rounding) * scale
    if abs(x) >= sys.float_info.min:  # a normal float holds 6 digits: printed as they are
        return f"{float(rounded):#.{sig}g}".replace(".e", "e").rstrip(".")
    # a subnormal float cannot hold them: print the directed decimal itself
    mantissa, _, power = f"{rounded:.{sig - 1}e}".partition("e")
    return f"{mantissa}e{power}"


def fmt_up(x: Any, sig: int = SIGNIFICANT) -> str:
    """``x`` with ``sig`` significant digits, rounded toward +inf (for upper bounds)."""
    return _fmt(as_float(x), ROUND_CEILING, sig)


def fmt_down(x: Any, sig: int = SIGNIFICANT) -> str:
    """``x`` with ``sig`` significant digits, rounded toward -inf (for lower bounds)."""
    return _fmt(as_float(x), ROUND_FLOOR, sig)


def fmt_exact(x: Any) -> str:
    """A query parameter as given (``repr``-short, e.g. ``1e-05``)."""
    return f"{as_float(x):g}" if _short_enough(as_float(x)) else repr(as_float(x))


def _short_enough(x: float) -> bool:
    return math.isfinite(x) and float(f"{x:g}") == x


def as_float(x: Any) -> float:
    """Numbers from report JSON (``"inf"`` strings included) as floats."""
    if isinstance(x, str):
        return float(x)
    return float(x)
