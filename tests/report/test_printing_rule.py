"""The one printing rule of every bound (``dpledger.report.numbers``): six significant digits,
upper bounds rounded up and lower bounds down, as hypothesis properties; and no decimal with
more digits than the rule in any example pipeline's report (Markdown, HTML, the text of JSON)."""

from __future__ import annotations

import json
import re
import tomllib
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.report import render_html, render_json, render_markdown, report_input
from dpledger.report.numbers import (
    SIGNIFICANT,
    fmt_down,
    fmt_up,
    significant_digits,
    tidy_text,
)

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples" / "pipelines").glob("*.toml"))
#: a decimal literal in text, as the rule reads them
LITERAL = re.compile(r"(?<![\w.])(\d+\.\d+(?:e[-+]?\d+)?|\d+e[-+]?\d+)(?![\w.])")

finite = st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=True)


@settings(max_examples=150, deadline=None)
@given(finite)
def test_upper_rounds_up_and_lower_rounds_down(x: float) -> None:
    up, down = fmt_up(x), fmt_down(x)
    assert Decimal(up) >= Decimal(x) >= Decimal(down)


@settings(max_examples=150, deadline=None)
@given(finite.filter(lambda x: 0.0 < abs(x) < 1.7e308))
def test_both_sides_have_the_same_significant_digits(x: float) -> None:
    up, down = fmt_up(x), fmt_down(x)
    assert significant_digits(up.lstrip("-")) == SIGNIFICANT
    assert significant_digits(down.lstrip("-")) == SIGNIFICANT


@settings(max_examples=150, deadline=None)
@given(finite.filter(lambda x: 0.0 < abs(x) < 1.7e308))  # above, no 6-digit float: inf
def test_the_two_sides_are_one_step_of_the_last_digit_apart(x: float) -> None:
    up, down = Decimal(fmt_up(x)), Decimal(fmt_down(x))
    step = Decimal(10) ** (Decimal(abs(x)).adjusted() - SIGNIFICANT + 1)
    assert up - down <= step


@settings(max_examples=100, deadline=None)
@given(st.floats(min_value=1e-300, max_value=1e300))
def test_a_long_parameter_is_shortened_and_marked(x: float) -> None:
    text = tidy_text(f"gaussian(noise_multiplier={x!r})")
    # the parameter as printed: a decimal, an exponent form or (100000.0 -> 100000) an integer
    shown = text.removeprefix("gaussian(noise_multiplier=").removesuffix(")").lstrip("≈")
    assert float(shown) > 0 and significant_digits(shown) <= SIGNIFICANT, text
    assert ("≈" in text) == (significant_digits(repr(x)) > SIGNIFICANT)


def _long_literals(text: str) -> list[str]:
    return [m for m in LITERAL.findall(text) if significant_digits(m) > SIGNIFICANT]


def _json_strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _json_strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _json_strings(v)]
    return []


def _check_example(path: Path) -> None:
    host = None
    releases = tomllib.loads(path.read_text(encoding="utf-8")).get("releases", [])
    if any("method" in r for r in releases):  # a release of a builtin method
        from dpledger.runtime.plugin_manager import PluginHost

        host = PluginHost.create(builtin_only=True)
    report = report_input(path, brackets=False, host=host).report
    assert not _long_literals(render_markdown(report)), path.name
    assert not _long_literals(render_html(report)), path.name
    data = json.loads(render_json(report))
    data.pop("account")  # dpledger account --json's output, verbatim
    found = [m for s in _json_strings(data) for m in _long_literals(s)]
    assert not found, (path.name, found)


def test_the_dp_sgd_example_prints_no_long_float() -> None:
    # 0.004266666666666667 (256/60000) in its event: shown as ≈0.00426667
    _check_example(next(p for p in EXAMPLES if p.name == "dpsgd.toml"))


@pytest.mark.slow
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_no_example_pipeline_prints_a_long_float(path: Path) -> None:
    _check_example(path)
