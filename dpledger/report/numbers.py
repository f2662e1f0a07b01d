"""Printing numbers in reports: upper bounds round up, lower bounds round down.

One rule for every printed bound (CLI lines, Markdown, HTML, the text of JSON): ``6``
significant digits, trailing zeros kept (``2.38000`` beside ``2.37540``, never ``2.38`` beside
``2.3754``); rounding to the nearest could print an epsilon a hair *below* the certified bound,
so every upper bound is rounded toward ``+inf`` and every lower bound toward ``-inf``. Exact
values stay in the JSON's numbers. Parameters inside event descriptions are shown with the same
digits, marked ``≈`` where that rounds them (:func:`tidy_text`).
"""

from __future__ import annotations

import re

from dpledger.core.printed_numbers import SIGNIFICANT, as_float, fmt_down, fmt_exact, fmt_up

__all__ = [
    "SIGNIFICANT",
    "as_float",
    "fmt_down",
    "fmt_exact",
    "fmt_up",
    "significant_digits",
    "tidy_text",
]


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
