"""Report diffs on hand-made reports: how the bound moved, and each kind of change named."""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest

from dpledger.core.errors import InvalidParameterError
from dpledger.report.diff import ReportDiff, diff_reports
from dpledger.report.model import SCHEMA_VERSION, ExtraSection

from .cases import minimal_report

WHERE = "at δ = 1e-05 (method pld)"


def _base() -> dict[str, Any]:
    return minimal_report().to_dict()


def _changed(change: Callable[[dict[str, Any]], None]) -> tuple[dict[str, Any], dict[str, Any]]:
    a = _base()
    b = copy.deepcopy(a)
    change(b)
    return a, b


def _set_epsilon(value: Any) -> Callable[[dict[str, Any]], None]:
    def change(b: dict[str, Any]) -> None:
        b["bound"]["epsilon"] = value

    return change


@pytest.mark.parametrize(
    ("epsilon", "summary", "moved"),
    [
        (3.0, f"ε increased: 1.50000 → 3.00000 (+1.50000, +100.00%) {WHERE}", 1.5),
        (1.0, f"ε decreased: 1.50000 → 1.00000 (-0.500000, -33.33%) {WHERE}", -0.5),
        ("inf", f"ε moved: 1.50000 → inf {WHERE}", math.inf),
        (1.5, f"ε unchanged: ε ≤ 1.50000 {WHERE}", 0.0),
    ],
)
def test_how_the_bound_moved(epsilon: Any, summary: str, moved: float) -> None:
    d = diff_reports(*_changed(_set_epsilon(epsilon)))
    assert (d.summary, d.moved) == (summary, moved)
    assert d.changes == () and d.identical is (moved == 0.0)
    assert d.lines() == [summary, "- nothing else changed"]


@pytest.mark.parametrize("epsilon", [1.50000001, 1.49999999, 1.5 + 1e-12, 2.0 / 3.0])
def test_an_increase_is_printed_rounded_up_and_a_decrease_rounded_down(epsilon: float) -> None:
    d = diff_reports(*_changed(_set_epsilon(epsilon)))
    assert d.moved == epsilon - 1.5
    match = re.match(r"ε (increased|decreased): 1\.50000 → (\S+) \(([+-])(\S+), ", d.summary)
    assert match is not None, d.summary
    word, printed, sign, step = match.groups()
    assert Decimal(printed) >= Decimal(epsilon)  # the new bound, rounded up
    if d.moved > 0:
        assert (word, sign) == ("increased", "+") and Decimal(step) >= Decimal(d.moved)
    else:
        assert (word, sign) == ("decreased", "-") and Decimal(step) <= Decimal(-d.moved)


def test_the_query_delta_and_method_are_named() -> None:
    def other_delta(b: dict[str, Any]) -> None:
        b["bound"].update(delta=1e-6, method="rdp", epsilon=2.0)
        b["query"] = {"delta": 1e-6}

    d = diff_reports(*_changed(other_delta))
    assert d.summary.endswith("at δ = 1e-05 → 1e-06 (method pld → rdp)")
    assert "query: δ = 1e-05 → δ = 1e-06" in d.changes


def test_bounds_of_different_queries_are_not_compared() -> None:
    def delta_query(b: dict[str, Any]) -> None:
        b["query"] = {"epsilon": 1.0}
        b["bound"] = {"epsilon": 1.0, "delta": 1e-3, "delta_lower": 1e-4, "method": "pld"}
        b["releases"][0]["bound"] = b["bound"]

    d = diff_reports(*_changed(delta_query))
    assert d.moved is None and not d.identical
    assert d.summary == ("the query changed (δ = 1e-05 → ε = 1): the bounds are not comparable")
    assert not any(c.startswith(("release q:", "accountant ")) for c in d.changes)


def test_a_moved_lower_bound_alone_is_named() -> None:
    def lower(b: dict[str, Any]) -> None:
        b["bound"]["epsilon_lower"] = 1.3

    d = diff_reports(*_changed(lower))
    assert d.moved == 0.0 and not d.identical
    assert d.changes == ("certified bracket: [1.25000, 1.50000] (pld) → [1.30000, 1.50000] (pld)",)


def _edits() -> list[tuple[Callable[[dict[str, Any]], None], str]]:
    def set_key(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
        return lambda b: b.__setitem__(key, value)

    def release(field: str, value: Any) -> Callable[[dict[str, Any]], None]:
        return lambda b: b["releases"][0].__setitem__(field, value)

    def add_release(b: dict[str, Any]) -> None:
        b["releases"].append({**b["releases"][0], "node": "r", "event": "laplace(1)"})

    def release_bound(b: dict[str, Any]) -> None:
        b["releases"][0]["bound"] = {**b["releases"][0]["bound"], "epsilon": 2.0}

    def bracket(b: dict[str, Any]) -> None:
        b["brackets"][0]["bound"] = {**b["brackets"][0]["bound"], "epsilon_lower": 1.0}

    return [
        (set_key("title", "new"), "title: hand made → new"),
        (set_key("dpledger_version", "9"), "dpledger version: 0.0.0 → 9"),
        (set_key("unit_of_privacy", "u"), "unit of privacy: one row (record) of source 'db' → u"),
        (lambda b: b["accounting"].update(method="rdp"), "accounting method: pld → rdp"),
        (lambda b: b["accounting"]["assumptions"].append("new"), "assumption added: new"),
        (lambda b: b["warnings"].clear(), "warning removed: a warning"),
        (lambda b: b["data_accesses"].clear(), "source removed: db"),
        (lambda b: b["released"].clear(), "released output removed: q"),
        (add_release, "release added: r (laplace(1))"),
        (release("tier", "contrib"), "release q: tier unverified → contrib"),
        (release("count", 2), "release q: count 1 → 2"),
        (
            release_bound,
            "release q: epsilon alone [1.25000, 1.50000] (pld) → [1.25000, 2.00000] (pld)",
        ),
        (lambda b: b["brackets"].pop(), "accountant rdp: unavailable → absent"),
        (bracket, "accountant pld: [1.25000, 1.50000] (pld) → [1.00000, 1.50000] (pld)"),
        (set_key("audit", {"verdict": "falsified"}), "audit: no audit → falsified"),
        (set_key("runtime", {"method": "m"}), "runtime ledger section changed"),
    ]


@pytest.mark.parametrize(("change", "named"), _edits())
def test_each_change_is_named(change: Callable[[dict[str, Any]], None], named: str) -> None:
    d = diff_reports(*_changed(change))
    assert d.changes == (named,)
    assert d.lines() == [d.summary, f"- {named}"] and not d.identical


def test_an_audit_with_the_same_verdict() -> None:
    a, b = _base(), _base()
    a["audit"] = {"verdict": "consistent", "score": 1}
    b["audit"] = {"verdict": "consistent", "score": 2}
    assert diff_reports(a, b).changes == ("audit: results changed (same verdict)",)


@pytest.mark.parametrize(
    ("a", "b", "field", "problem"),
    [
        ([], {}, "A", "is not a dpledger JSON report"),
        ({"schema_version": SCHEMA_VERSION}, "text", "B", "is not a dpledger JSON report"),
        ({"schema_version": SCHEMA_VERSION + 1}, {}, "A", "has report schema"),
    ],
)
def test_other_files_are_refused_naming_which(a: Any, b: Any, field: str, problem: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        diff_reports(a, b)
    assert info.value.field == field and info.value.problem.startswith(problem)


def test_identical_needs_no_change_and_no_move() -> None:
    assert ReportDiff("s", (), None).identical and ReportDiff("s", (), 0.0).identical
    assert not ReportDiff("s", ("x",), 0.0).identical
    assert not ReportDiff("s", (), 0.5).identical


def _with_section(b: dict[str, Any]) -> None:
    b["sections"] = [ExtraSection("s", "S", "text", "p").to_dict()]


def _with_description(b: dict[str, Any]) -> None:
    b["released"][0]["description"] = "another description"


@pytest.mark.parametrize("change", [_with_section, _with_description])
def test_every_difference_is_named(change: Callable[[dict[str, Any]], None]) -> None:
    assert not diff_reports(*_changed(change)).identical
