"""Printing numbers in reports: upper bounds round up, lower bounds round down.

One rule for every printed bound (CLI lines, Markdown, HTML, the text of JSON): ``6``
significant digits, trailing zeros kept (``2.38000`` beside ``2.37540``, never ``2.38`` beside
``2.3754``); rounding to the nearest could print an epsilon a hair *below* the certified bound,
so every upper bound is rounded toward ``+inf`` and every lower bound toward ``-inf``. Exact
values stay in the JSON's numbers. Parameters inside event descriptions are shown with the same
digits, marked ``≈`` where that rounds them (:func:`tidy_text`).
"""

from __future__ import annotations

import math
import re
import sys
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import Any

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


#: a decimal literal in text (not part of a word, a version or a path)
_LITERAL = re.compile(r"(?<![\w.])(\d+\.\d+(?:e[-+]?\d+)?|\d+e[-+]?\d+)(?![\w.])")


def significant_digits(literal: str) -> int:
    """Significant digits of a decimal literal as written (``0.0042667`` has 5)."""
    mantissa = literal.lower().partition("e")[0].replace(".", "").lstrip("0")
    return len(mantissa)


def tidy_text(text: str, sig: int = SIGNIFICANT) -> str:
    """``text`` with every decimal literal of more than ``sig`` significant digits (a float's
    ``repr`` in an event description, ``noise_multiplier=3.9126655537666295``) shown with
    ``sig`` digits to the nearest and marked ``≈``. For parameters only: bounds are printed
    with :func:`fmt_up` and :func:`fmt_down`, which never have more digits."""

    def short(found: re.Match[str]) -> str:
        literal = found.group(0)
        if significant_digits(literal) <= sig:
            return literal
        return "≈" + f"{float(literal):.{sig}g}"

    return _LITERAL.sub(short, text)
