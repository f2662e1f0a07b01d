"""Self-contained HTML rendering: inline CSS, figures as base64 PNG data URIs, no external URL."""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Mapping, Sequence
from typing import Any

from dpledger.report.model import NO_GUARANTEE, PrivacyReport
from dpledger.report.numbers import fmt_down, fmt_exact, fmt_up, tidy_text
from dpledger.report.render_md import (
    beside_bracket,
    bound_pair,
    observed,
    observed_items,
    release_columns,
    rule_legend,
    sentence,
)

CSS = """
body { font-family: sans-serif; max-width: 72rem; margin: 2rem auto; padding: 0 1rem;
       color: #222; line-height: 1.45; }
h1 { border-bottom: 2px solid #444; }
h2 { margin-top: 2rem; border-bottom: 1px solid #bbb; }
table { border-collapse: collapse; margin: 0.5rem 0; font-size: 0.9rem; }
th, td { border: 1px solid #bbb; padding: 0.25rem 0.5rem; text-align: left;
         vertical-align: top; }
th { background: #eee; }
.statement { background: #eef6ee; border-left: 4px solid #393; padding: 0.6rem 1rem; }
.warning { color: #8a4b00; }
figure { margin: 1rem 0; }
figure img { max-width: 100%; border: 1px solid #ddd; }
pre { background: #f6f6f6; padding: 0.5rem; overflow-x: auto; }
td { overflow-wrap: anywhere; }
td.num { white-space: nowrap; overflow-wrap: normal; font-variant-numeric: tabular-nums; }
.wide, .section { max-width: 100%; overflow-x: auto; }
"""


def e(value: Any) -> str:
    """Escaped text; ``-`` for nothing."""
    if value is None or value == "" or value == [] or value == ():
        return "-"
    if isinstance(value, list | tuple):
        value = ", ".join(str(v) for v in value)
    return html.escape(tidy_text(str(value)), quote=True)


def markdown_html(text: str) -> str:
    """A plugin section's Markdown as HTML (markdown-it, raw HTML, links and images disabled),
    or escaped text when markdown-it-py is not installed."""
    text = tidy_text(text)
    try:
        from markdown_it import MarkdownIt
    except ImportError:
        return f"<pre>{e(text)}</pre>"
    # no raw HTML, and no links or images: the page loads nothing and points nowhere outside
    parser = MarkdownIt("commonmark", {"html": False}).enable("table")
    return str(parser.disable(["link", "image", "autolink"]).render(text))


#: a cell that is one number (a bound, a count, ``inf``, ``none``): never broken across lines
NUMBER_CELL = re.compile(r"^[-+]?(?:\d[\d.]*(?:e[-+]?\d+)?|inf|none|nan)$")


def _cell(value: Any) -> str:
    text = e(value)
    return f'<td class="num">{text}</td>' if NUMBER_CELL.match(text) else f"<td>{text}</td>"


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in rows)
    return (
        f'<div class="wide"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )


def _ul(items: Sequence[str], cls: str = "") -> str:
    attr = f' class="{cls}"' if cls else ""
    return "<ul>" + "".join(f"<li{attr}>{e(i)}</li>" for i in items) + "</ul>"


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _audit(audit: Mapping[str, Any] | None) -> str:
    if audit is None:
        return "<p>No audit was supplied with this input.</p>"
    rows = [
        (
            fmt_exact(a["delta"]),
            "-" if a.get("claimed_epsilon") is None else fmt_up(a["claimed_epsilon"]),
            fmt_down(a["epsilon_lower"]),
            "-" if a.get("ceiling") is None else fmt_up(a["ceiling"]),
            a.get("verdict"),
        )
        for a in audit.get("audits", [])
    ]
    return (
        f"<p>Verdict: <strong>{e(audit.get('verdict'))}</strong> at confidence "
        f"{e(audit.get('confidence'))} (n_test = {e(audit.get('n_test'))}). An empirical lower "
        "bound can falsify a claim, never verify it.</p>"
        + _table(("δ", "claimed ε (upper)", "empirical ε lower", "ceiling for n", "verdict"), rows)
    )


def _runtime(runtime: Mapping[str, Any] | None) -> str:
    if runtime is None:
        return "<p>No runtime ledger was supplied (the report covers the declared pipeline).</p>"
    obs = runtime.get("observed")
    if isinstance(obs, Mapping):
        return _ul([item.replace("`", "") for item in observed_items(runtime, obs)])
    items = [
        f"method: {runtime.get('method')}",
        "ledger verified (every executed step covered by the declaration): "
        + ("yes" if runtime.get("verified") else "NO"),
        "re-verify: dpledger verify RUN_DIR recomputes every number of this run "
        "in a clean room (an isolated interpreter that loads no third-party code); run it where "
        "only dpledger is installed (a fresh virtual environment) to exclude other installed code",
        f"seed: {runtime.get('seed')}; secure seed: {runtime.get('secure_seed')}",
    ]
    if runtime.get("declared_core"):
        items.append(f"declared: {runtime['declared_core']}")
    if runtime.get("executed"):
        items.append(f"executed: {runtime['executed']}")
    if runtime.get("outputs"):
        items.append(f"outputs: {', '.join(runtime['outputs'])}")
    return _ul(items)


def render_html(report: PrivacyReport, figures: Mapping[str, bytes] | None = None) -> str:
    """The report as one HTML page; ``figures`` maps a caption to PNG bytes (embedded)."""
    parts = _opening(report)
    parts += _releases(report)
    parts += _brackets(report)
    parts += _closing(report, figures)
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _opening(report: PrivacyReport) -> list[str]:
    """From the page head to the accounting method and its assumptions."""
    q = "ε" if report.reports_epsilon else "δ"
    lo, hi = bound_pair(report.bound, report.reports_epsilon)
    obs = observed(report)
    beside = [f"<p>{e(' '.join(beside_bracket(obs)))}</p>"] if obs is not None else []
    return [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>Privacy report: {e(report.title)}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>Privacy report: {e(report.title)}</h1>",
        f"<p>Generated by dpledger {e(report.dpledger_version)} from {e(report.input_kind)} "
        f"<code>{e(report.input_name)}</code> (report schema {report.schema_version}).</p>",
        "<h2>Formal statement</h2>",
        f'<p class="statement">{e(report.statement)}</p>',
        f"<p>Certified bracket: {lo} ≤ {q} ≤ {hi} (the upper end is the guarantee).</p>"
        if report.guaranteed
        else f"<p>No accountant certifies a bound: {NO_GUARANTEE}.</p>",
        *beside,
        "<h2>DP setting</h2>",
        f"<p>{e(report.setting)}</p>",
        "<h2>Data accesses covered</h2>",
        _table(
            ("source", "adjacency", "releases", "notes"),
            [(d.source, d.adjacency, d.releases, d.notes) for d in report.data_accesses],
        ),
        "<h2>What is released</h2>",
        _table(
            ("node", "kind", "inputs", "description"),
            [(r.node, r.kind, r.inputs, r.description) for r in report.released],
        ),
        "<h2>Unit of privacy and adjacency</h2>",
        _ul([f"unit of privacy: {report.unit_of_privacy}", f"adjacency: {report.adjacency}"]),
        "<h2>Accounting method and assumptions</h2>",
        _ul(
            [
                f"reported by: {report.accounting_method} (smallest certified upper bound "
                "among the accountants below)",
                f"sources combined: {report.combined}",
                *report.assumptions,
            ]
        ),
    ]


def _releases(report: PrivacyReport) -> list[str]:
    """The releases table with its lifting-rule legend."""
    eq = report.reports_epsilon
    parts = ["<h2>Releases</h2>"]
    rows = []
    for r in report.releases:
        params = r.event if r.count == 1 else f"{r.event} × {r.count}"
        if r.lifted_event != r.event:
            params += f" → {r.lifted_event}"
        dist = f"{r.distribution} {r.version or ''}".strip() if r.distribution else None
        proof = r.proof if not r.proof_location else f"{r.proof} ({r.proof_location})"
        rows.append(
            (
                r.node,
                r.method,
                r.plugin,
                dist,
                params,
                r.lift_rules,
                r.tier,
                proof,
                bound_pair(r.bound, eq)[1],
            )
        )
    parts.append(_table(release_columns(report), rows))
    legend = rule_legend(report)
    if legend:
        parts.append(
            "<p>Lifting rules: "
            + "; ".join(f"<code>{e(r)}</code>: {e(t)}" for r, t in legend)
            + ".</p>"
        )
    return parts


def _brackets(report: PrivacyReport) -> list[str]:
    """Every backend's bracket, and the backends unavailable for the reported bound."""
    eq = report.reports_epsilon
    q = "ε" if eq else "δ"
    parts = ["<h2>Accountants side by side</h2>"]
    brows = []
    for b in report.brackets:
        blo, bhi = bound_pair(b.bound, eq)
        chosen = "yes" if b.bound is not None and b.backend == report.accounting_method else ""
        brows.append(
            (b.backend, blo, bhi, b.bound["method"] if b.bound else None, chosen, b.reason)
        )
    parts.append(
        _table(
            ("backend", f"{q} lower", f"{q} upper", "method", "reported", "unavailable because"),
            brows,
        )
    )
    if report.unavailable:
        parts.append("<p>Backends unavailable for the reported bound:</p>")
        parts.append(_ul([f"{n}: {r}" for n, r in report.unavailable]))
    obs = observed(report)
    if obs is not None:
        parts.append(f"<p>{e(obs['figure'])} {e(sentence(obs['accountants']))}.</p>")
    return parts


def _closing(report: PrivacyReport, figures: Mapping[str, bytes] | None) -> list[str]:
    """Audit, runtime ledger, warnings, figures and the plugins' sections."""
    parts = [
        "<h2>Audit</h2>",
        _audit(report.audit),
        "<h2>Runtime ledger</h2>",
        _runtime(report.runtime),
        "<h2>Warnings</h2>",
        _ul(list(report.warnings) or ["none"], "warning"),
    ]
    if figures:
        parts.append("<h2>Figures</h2>")
        for caption, png in figures.items():
            parts.append(
                f'<figure><img alt="{e(caption)}" src="{data_uri(png)}">'
                f"<figcaption>{e(caption)}</figcaption></figure>"
            )
    for s in report.sections:
        parts.append(
            f"<h2>{e(s.title)}</h2><p>(section by plugin {e(s.plugin)})</p>"
            f'<div class="section">{markdown_html(s.markdown)}</div>'
        )
    return parts
