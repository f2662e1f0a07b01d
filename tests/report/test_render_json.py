"""Deterministic JSON: sorted keys, no NaN, a round trip to the same text, the Markdown's
numbers."""

from __future__ import annotations

import json
import math
from typing import Any

from dpledger.report.model import Bracket
from dpledger.report.numbers import fmt_down, fmt_up
from dpledger.report.render_json import render_json
from dpledger.report.render_md import render_markdown

from .cases import DELTA, SIGMA, analytic_gaussian_epsilon, gaussian_report, minimal_report


def _sorted_everywhere(value: Any) -> bool:
    if isinstance(value, dict):
        return list(value) == sorted(value) and all(_sorted_everywhere(v) for v in value.values())
    if isinstance(value, list):
        return all(_sorted_everywhere(v) for v in value)
    return True


def test_the_json_round_trips_to_the_same_text() -> None:
    report = gaussian_report().report
    text = render_json(report)
    data = json.loads(text)
    assert data == report.to_dict()
    again = json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)
    assert again + "\n" == text
    assert _sorted_everywhere(json.loads(text, object_pairs_hook=dict))
    assert "ε" in text and "\\u03b5" not in text  # Greek letters kept as written


def test_the_json_holds_the_exact_bound() -> None:
    report = gaussian_report().report
    data = json.loads(render_json(report))
    exact = analytic_gaussian_epsilon(SIGMA, DELTA)
    assert data["bound"]["epsilon"] == report.upper  # the float itself, not a rounded print
    assert exact <= data["bound"]["epsilon"] <= exact * (1 + 1e-9)
    assert data["bound"]["delta"] == DELTA and data["query"] == {"delta": DELTA}
    assert data["bound"] == {k: data["account"][k] for k in data["bound"]}


def test_json_and_markdown_hold_the_same_numbers() -> None:
    report = gaussian_report().report
    data = json.loads(render_json(report))
    md = render_markdown(report)
    bound = data["bound"]
    assert (
        f"Certified bracket: {fmt_down(bound['epsilon_lower'])} ≤ ε ≤ {fmt_up(bound['epsilon'])}"
    ) in md
    assert data["statement"] in md
    for row in data["releases"]:
        assert f"| {row['node']} |" in md and f"| {fmt_up(row['bound']['epsilon'])} |" in md
    for bracket in data["brackets"]:
        b = bracket["bound"]
        lower = "none" if b["epsilon_lower"] == 0 else fmt_down(b["epsilon_lower"])
        assert f"| {bracket['backend']} | {lower} | {fmt_up(b['epsilon'])} | {b['method']} |" in md
    for assumption in data["accounting"]["assumptions"]:
        assert f"- {assumption}\n" in md
    assert f"- unit of privacy: {data['unit_of_privacy']}\n" in md
    assert f"- adjacency: {data['adjacency']}\n" in md


def test_no_nan_or_infinity_literal() -> None:
    bound = {"epsilon": math.inf, "epsilon_lower": math.nan, "delta": 1e-5, "method": "rdp"}
    text = render_json(minimal_report(bound=bound, brackets=(Bracket("rdp", bound),)))
    assert "NaN" not in text and "Infinity" not in text
    data = json.loads(text)
    assert data["bound"] == {
        "epsilon": "inf",
        "epsilon_lower": "nan",
        "delta": 1e-5,
        "method": "rdp",
    }


def test_two_equal_reports_give_the_same_bytes() -> None:
    a, b = minimal_report(), minimal_report()
    assert render_json(a).encode() == render_json(b).encode()
    assert render_json(a) != render_json(minimal_report(title="other"))
    assert render_json(a).endswith("}\n")
