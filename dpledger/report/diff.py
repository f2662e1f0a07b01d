"""Compare two JSON reports: what changed, and how the certified bound moved."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from dpledger.core.errors import InvalidParameterError
from dpledger.report.model import SCHEMA_VERSION
from dpledger.report.numbers import as_float, fmt_down, fmt_exact, fmt_up, tidy_text

_RELEASE_FIELDS = (
    "source",
    "method",
    "plugin",
    "distribution",
    "version",
    "event",
    "count",
    "declared_unit",
    "lifted_event",
    "lift_rules",
    "tier",
    "proof",
)


@attrs.frozen
class ReportDiff:
    """``summary`` says how the bound moved; ``changes`` name everything else that differs."""

    summary: str
    changes: tuple[str, ...]
    moved: float | None

    @property
    def identical(self) -> bool:
        return not self.changes and self.moved in (None, 0.0)

    def lines(self) -> list[str]:
        return (
            [self.summary, *(f"- {c}" for c in self.changes)]
            if self.changes
            else [self.summary, "- nothing else changed"]
        )


def _check(report: Any, name: str) -> Mapping[str, Any]:
    if not isinstance(report, Mapping) or "schema_version" not in report:
        raise InvalidParameterError(
            name, "is not a dpledger JSON report", "write one with dpledger report --format json"
        )
    if report["schema_version"] != SCHEMA_VERSION:
        raise InvalidParameterError(
            name,
            f"has report schema {report['schema_version']!r}, this dpledger reads {SCHEMA_VERSION}",
            "regenerate both reports with the same dpledger",
        )
    return report


def _query(report: Mapping[str, Any]) -> str:
    """A report's query as ``δ = 1e-05`` or ``ε = 1``."""
    query = report["query"]
    if isinstance(query, Mapping) and len(query) == 1:
        [(name, value)] = query.items()
        return f"{'δ' if name == 'delta' else 'ε'} = {fmt_exact(value)}"
    return _value(query)


def _quantity(report: Mapping[str, Any]) -> str:
    return "epsilon" if "delta" in report["query"] else "delta"


def _movement(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[str, float | None]:
    qa, qb = _quantity(a), _quantity(b)
    sym = {"epsilon": "ε", "delta": "δ"}
    if qa != qb:
        return (
            f"the query changed ({_query(a)} → {_query(b)}): the bounds are not comparable",
            None,
        )
    x, y = as_float(a["bound"][qa]), as_float(b["bound"][qb])
    at = "δ" if qa == "epsilon" else "ε"
    fixed = a["bound"]["delta" if qa == "epsilon" else "epsilon"]
    fixed_b = b["bound"]["delta" if qa == "epsilon" else "epsilon"]
    fa, fb = fmt_exact(fixed), fmt_exact(fixed_b)
    where = f"at {at} = {fa}" if fixed == fixed_b else f"at {at} = {fa} → {fb}"
    ma, mb = a["bound"]["method"], b["bound"]["method"]
    how = f"method {ma}" if ma == mb else f"method {ma} → {mb}"
    s = sym[qa]
    if x == y:
        return f"{s} unchanged: {s} ≤ {fmt_up(x)} {where} ({how})", 0.0
    if math.isinf(x) or math.isinf(y):
        return f"{s} moved: {fmt_up(x)} → {fmt_up(y)} {where} ({how})", y - x
    d = y - x
    rel = f", {100.0 * d / x:+.2f}%" if x > 0 else ""
    word = "increased" if d > 0 else "decreased"
    sign = "+" if d > 0 else "-"
    step = fmt_up(abs(d)) if d > 0 else fmt_down(abs(d))
    return (f"{s} {word}: {fmt_up(x)} → {fmt_up(y)} ({sign}{step}{rel}) {where} ({how})", d)


def _set_changes(label: str, a: Sequence[Any], b: Sequence[Any]) -> list[str]:
    out = [f"{label} added: {_value(x)}" for x in b if x not in a]
    out += [f"{label} removed: {_value(x)}" for x in a if x not in b]
    return out


def _bound_text(bound: Mapping[str, Any] | None, q: str) -> str:
    """``[lower, upper] (method)``, a lower bound of 0 shown as ``none`` (as in the report)."""
    if bound is None:
        return "unavailable"
    lower = bound[q + "_lower"]
    shown = "none" if isinstance(lower, int | float) and lower == 0 else fmt_down(lower)
    return f"[{shown}, {fmt_up(bound[q])}] ({bound['method']})"


def _value(value: Any) -> str:
    """A changed field as text: a table or a list as compact JSON (never a Python repr), a
    description by the printing rule of :mod:`.numbers`."""
    if isinstance(value, Mapping | list | tuple):
        return tidy_text(json.dumps(value, sort_keys=True, ensure_ascii=False))
    return tidy_text(str(value))


def _releases(a: Mapping[str, Any], b: Mapping[str, Any], q: str) -> list[str]:
    ra = {r["node"]: r for r in a["releases"]}
    rb = {r["node"]: r for r in b["releases"]}
    out = [f"release added: {n} ({_value(rb[n]['event'])})" for n in rb if n not in ra]
    out += [f"release removed: {n} ({_value(ra[n]['event'])})" for n in ra if n not in rb]
    for n in ra:
        if n not in rb:
            continue
        for f in _RELEASE_FIELDS:
            if ra[n].get(f) != rb[n].get(f):
                out.append(f"release {n}: {f} {_value(ra[n].get(f))} → {_value(rb[n].get(f))}")
        ba, bb = ra[n].get("bound"), rb[n].get("bound")
        if ba != bb and (ba is None or bb is None or ba.get(q) != bb.get(q)):
            out.append(f"release {n}: {q} alone {_bound_text(ba, q)} → {_bound_text(bb, q)}")
    return out


def _brackets(a: Mapping[str, Any], b: Mapping[str, Any], q: str) -> list[str]:
    ba = {x["backend"]: x for x in a["brackets"]}
    bb = {x["backend"]: x for x in b["brackets"]}
    out = []
    for name in [*ba, *(n for n in bb if n not in ba)]:
        x, y = ba.get(name), bb.get(name)
        if x == y:
            continue
        tx = _bound_text(x["bound"], q) if x else "absent"
        ty = _bound_text(y["bound"], q) if y else "absent"
        if tx != ty:
            out.append(f"accountant {name}: {tx} → {ty}")
    return out


def _audit(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    xa, xb = a.get("audit"), b.get("audit")
    if xa == xb:
        return []
    va = xa.get("verdict") if xa else "no audit"
    vb = xb.get("verdict") if xb else "no audit"
    return [f"audit: {va} → {vb}" if va != vb else "audit: results changed (same verdict)"]


def diff_reports(a: Any, b: Any) -> ReportDiff:
    """Name what changed from report ``a`` to report ``b`` (both parsed JSON reports)."""
    a, b = _check(a, "A"), _check(b, "B")
    summary, moved = _movement(a, b)
    q = _quantity(a)
    changes: list[str] = []
    for key, label in (
        ("title", "title"),
        ("input", "input"),
        ("query", "query"),
        ("dpledger_version", "dpledger version"),
        ("adjacency", "adjacency"),
        ("unit_of_privacy", "unit of privacy"),
    ):
        if a.get(key) != b.get(key):
            show = _query if key == "query" else (lambda r, k=key: _value(r.get(k)))
            changes.append(f"{label}: {show(a)} → {show(b)}")
    acc_a, acc_b = a["accounting"], b["accounting"]
    for key in ("method", "combined"):
        if acc_a[key] != acc_b[key]:
            changes.append(f"accounting {key}: {acc_a[key]} → {acc_b[key]}")
    if a["bound"] != b["bound"] and moved == 0.0:
        changes.append(
            f"certified bracket: {_bound_text(a['bound'], q)} → {_bound_text(b['bound'], q)}"
        )
    changes += _set_changes(
        "source",
        [d["source"] for d in a["data_accesses"]],
        [d["source"] for d in b["data_accesses"]],
    )
    changes += _set_changes(
        "released output", [r["node"] for r in a["released"]], [r["node"] for r in b["released"]]
    )
    if q == _quantity(b):
        changes += _releases(a, b, q)
        changes += _brackets(a, b, q)
    changes += _set_changes("assumption", acc_a["assumptions"], acc_b["assumptions"])
    changes += _set_changes("warning", a["warnings"], b["warnings"])
    changes += _audit(a, b)
    if a.get("runtime") != b.get("runtime"):
        changes.append("runtime ledger section changed")
    changes += _described(a, b)
    changes += _set_changes(
        "plugin section",
        [f"{x.get('title')} ({x.get('plugin')})" for x in a.get("sections", [])],
        [f"{x.get('title')} ({x.get('plugin')})" for x in b.get("sections", [])],
    )
    if not changes and a.get("sections") != b.get("sections"):
        changes.append("plugin section text changed")
    return ReportDiff(summary, tuple(changes), moved)


def _described(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """Released outputs present in both reports whose description changed."""
    before = {r["node"]: r.get("description") for r in a["released"]}
    return [
        f"released output {r['node']}: description changed"
        for r in b["released"]
        if r["node"] in before and before[r["node"]] != r.get("description")
    ]
