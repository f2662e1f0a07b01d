"""Markdown rendering of a :class:`PrivacyReport` (figures linked as PNG files beside it)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dpledger.core.lifting import RULE_TEXT
from dpledger.report.model import NO_GUARANTEE, PrivacyReport
from dpledger.report.numbers import fmt_down, fmt_exact, fmt_up, tidy_text

#: section titles, in order (tests check that each is present)
SECTIONS: tuple[str, ...] = (
    "Formal statement",
    "DP setting",
    "Data accesses covered",
    "What is released",
    "Unit of privacy and adjacency",
    "Accounting method and assumptions",
    "Releases",
    "Accountants side by side",
    "Audit",
    "Runtime ledger",
    "Warnings",
)


def cell(value: Any) -> str:
    """A table cell: ``-`` for nothing, pipes escaped."""
    if value is None or value == "" or value == []:
        return "-"
    text = ", ".join(str(v) for v in value) if isinstance(value, list | tuple) else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines.extend("| " + " | ".join(cell(v) for v in row) + " |" for row in rows)
    return lines


def bound_pair(bound: Mapping[str, Any] | None, eps_query: bool) -> tuple[str, str]:
    """(lower, upper) of a bound, rounded to the safe sides."""
    if bound is None:
        return "-", "-"
    lower, upper = (
        (bound["epsilon_lower"], bound["epsilon"])
        if eps_query
        else (bound["delta_lower"], bound["delta"])
    )
    # a lower bound of 0 certifies nothing: say so rather than print it as a value
    shown = NO_LOWER if isinstance(lower, int | float) and lower == 0 else fmt_down(lower)
    return shown, fmt_up(upper)


#: what a table shows where a backend certifies no lower bound
NO_LOWER = "none"


def proof_text(proof: str | None, location: str | None) -> str:
    if proof is None:
        return "-"
    return f"[{proof}]({location})" if location else proof


def release_columns(report: PrivacyReport) -> tuple[str, ...]:
    """The headers of the releases table (Markdown and HTML alike)."""
    q = "ε" if report.reports_epsilon else "δ"
    return (
        "node",
        "method",
        "plugin",
        "distribution / version",
        "parameters",
        "lifting rule",
        "trust tier",
        "proof",
        f"{q} alone (upper)",
    )


def _releases(report: PrivacyReport) -> list[str]:
    header = release_columns(report)
    rows = []
    for r in report.releases:
        params = r.event if r.count == 1 else f"{r.event} × {r.count}"
        if r.lifted_event != r.event:
            params += f" → {r.lifted_event}"
        dist = f"{r.distribution} {r.version or ''}".strip() if r.distribution else "-"
        _, upper = bound_pair(r.bound, report.reports_epsilon)
        rows.append(
            (
                r.node,
                r.method,
                r.plugin,
                dist,
                params,
                ", ".join(r.lift_rules),
                r.tier,
                proof_text(r.proof, r.proof_location),
                upper,
            )
        )
    out = table(header, rows)
    legend = rule_legend(report)
    if legend:
        out += ["", "Lifting rules: " + "; ".join(f"`{r}`: {t}" for r, t in legend) + "."]
    return out


def rule_legend(report: PrivacyReport) -> list[tuple[str, str]]:
    """Each lifting rule the releases use, with what it means (in order of first use)."""
    used = dict.fromkeys(rule for r in report.releases for rule in r.lift_rules)
    return [(rule, RULE_TEXT.get(rule, "see dpledger.core.lifting")) for rule in used]


def _brackets(report: PrivacyReport) -> list[str]:
    q = "ε" if report.reports_epsilon else "δ"
    rows = []
    for b in report.brackets:
        lo, hi = bound_pair(b.bound, report.reports_epsilon)
        chosen = "yes" if b.bound is not None and b.backend == report.accounting_method else ""
        rows.append(
            (b.backend, lo, hi, b.bound["method"] if b.bound else "-", chosen, b.reason or "")
        )
    lines = table(
        ("backend", f"{q} lower", f"{q} upper", "method", "reported", "unavailable because"), rows
    )
    lines.append("")
    lines.append(
        "Only the smallest upper bound is the guarantee; lower bounds cross-check the backends "
        "(a lower bound above another backend's upper bound would stop the report)."
    )
    return lines


def _audit(audit: Mapping[str, Any] | None) -> list[str]:
    if audit is None:
        return ["No audit was supplied with this input."]
    lines = [
        f"Verdict: **{audit.get('verdict')}** at confidence {audit.get('confidence')} "
        f"(n_test = {audit.get('n_test')}, score {audit.get('score')}). "
        "An empirical lower bound can falsify a claim, never verify it.",
        "",
    ]
    rows = []
    for a in audit.get("audits", []):
        rows.append(
            (
                fmt_exact(a["delta"]),
                _maybe_up(a.get("claimed_epsilon")),
                fmt_down(a["epsilon_lower"]),
                _maybe_up(a.get("ceiling")),
                a.get("verdict"),
            )
        )
    lines.extend(
        table(("δ", "claimed ε (upper)", "empirical ε lower", "ceiling for n", "verdict"), rows)
    )
    if audit.get("description"):
        lines += ["", f"Audited: {audit['description']}"]
    return lines


def _maybe_up(x: Any) -> str:
    return "-" if x is None else fmt_up(x)


def observed(report: PrivacyReport) -> Mapping[str, Any] | None:
    """The observed-run facts of a report of a run dpledger observed (None otherwise)."""
    runtime = report.runtime
    found = runtime.get("observed") if runtime is not None else None
    return found if isinstance(found, Mapping) else None


def sentence(text: Any) -> str:
    """``text`` with its first letter in upper case (the rest as it is)."""
    out = str(text)
    return out[:1].upper() + out[1:]


def beside_bracket(obs: Mapping[str, Any]) -> list[str]:
    """The framework's own figure and the record's explanation, shown beside the bracket."""
    out = [str(obs["figure"])]
    if obs.get("explanation"):
        out.append(str(obs["explanation"]))
    if obs.get("bracket_note"):
        out.append(sentence(obs["bracket_note"]) + ".")
    return out


def observed_items(runtime: Mapping[str, Any], obs: Mapping[str, Any]) -> list[str]:
    """The runtime section of an observed run, item by item (Markdown and HTML alike)."""
    framework = obs.get("framework")
    items = [
        f"method: {runtime.get('method')}",
        f"{obs['how']}",
        f"noise: {obs['noise']}",
        "re-check: `dpledger report RUN_DIR` first recomputes this record's certified bound in "
        "a clean room (an isolated interpreter that loads no third-party code); `dpledger "
        "verify RUN_DIR` finds no seal (only `dpledger run` seals a run); neither checks the "
        f"training, which {framework} ran and dpledger observed",
    ]
    epochs = None if obs.get("batching") == "poisson" else obs.get("epochs")
    steps = f"{obs.get('steps')} noisy steps" + (f" in {epochs} epoch(s)" if epochs else "")
    if runtime.get("executed"):
        items.append(f"observed: {runtime['executed']} ({steps})")
    if obs.get("lower_event") and obs["lower_event"] != runtime.get("executed"):
        items.append(f"lower bound taken over: {obs['lower_event']}")
    rec = runtime.get("recorded_bound")
    if rec and "epsilon" in rec:
        items.append(
            f"recorded at run time: ε ≤ {fmt_up(rec['epsilon'])} at δ = "
            f"{fmt_exact(rec['delta'])} ({rec.get('method')})"
        )
    eps = obs.get("epsilon")
    own = "none recorded" if eps is None else f"ε = {fmt_exact(eps)}"
    items.append(f"{framework}'s own figure ({obs.get('accountant')}): {own}; {obs.get('status')}")
    items.append(f"{framework}'s accountants: {obs['accountants']}")
    if obs.get("poisson_same_relation") is not None:
        items.append(
            f"Poisson sampling at {framework}'s rate under the same relation (did not run): "
            f"ε ≤ {fmt_up(obs['poisson_same_relation'])}"
        )
    items.extend(f"note: {n}" for n in obs.get("notes") or [])
    return items


def _runtime(runtime: Mapping[str, Any] | None) -> list[str]:
    if runtime is None:
        return ["No runtime ledger was supplied (the report covers the declared pipeline)."]
    obs = runtime.get("observed")
    if isinstance(obs, Mapping):
        return [f"- {item}" for item in observed_items(runtime, obs)]
    lines = [
        f"- method: {runtime.get('method')}",
        f"- ledger verified (every executed step covered by the declaration): "
        f"{'yes' if runtime.get('verified') else 'NO'}",
        "- re-verify: `dpledger verify RUN_DIR` recomputes every number of this run in a clean "
        "room (an isolated interpreter that loads no third-party code); run it where only "
        "dpledger is installed (a fresh virtual environment) to exclude other installed code",
        f"- seed: {runtime.get('seed')}; secure seed: {runtime.get('secure_seed')}",
    ]
    if runtime.get("declared_core"):
        lines.append(f"- declared: {runtime['declared_core']}")
    if runtime.get("executed"):
        lines.append(f"- executed: {runtime['executed']}")
    rec = runtime.get("recorded_bound")
    if rec and "epsilon" in rec:
        lines.append(
            f"- recorded at run time: ε ≤ {fmt_up(rec['epsilon'])} at δ = "
            f"{fmt_exact(rec['delta'])} ({rec.get('method')})"
        )
    if runtime.get("outputs"):
        lines.append(f"- outputs: {', '.join(runtime['outputs'])}")
    return lines


def render_markdown(report: PrivacyReport, figures: Mapping[str, str] | None = None) -> str:
    """The report as Markdown; ``figures`` maps a caption to a relative PNG path."""
    out = _opening(report)
    out += table(
        ("source", "adjacency", "releases", "notes"),
        [(d.source, d.adjacency, list(d.releases), list(d.notes)) for d in report.data_accesses],
    )
    out += ["", "## What is released", ""]
    out += table(
        ("node", "kind", "inputs", "description"),
        [(r.node, r.kind, list(r.inputs), r.description) for r in report.released],
    )
    out += [
        "",
        "## Unit of privacy and adjacency",
        "",
        f"- unit of privacy: {report.unit_of_privacy}",
        f"- adjacency: {report.adjacency}",
        "",
        "## Accounting method and assumptions",
        "",
        f"- reported by: {report.accounting_method} (smallest certified upper bound among the "
        "accountants below)",
        f"- sources combined: {report.combined}",
    ]
    out += [f"- {a}" for a in report.assumptions]
    out += ["", "## Releases", ""]
    out += _releases(report)
    out += ["", "## Accountants side by side", ""]
    out += _brackets(report) if report.brackets else ["Brackets were not computed."]
    if report.unavailable:
        out += ["", "Backends unavailable for the reported bound:", ""]
        out += [f"- {n}: {r}" for n, r in report.unavailable]
    obs = observed(report)
    if obs is not None:
        out += ["", f"{obs['figure']} {sentence(obs['accountants'])}."]
    out += _closing(report, figures)
    return tidy_text("\n".join(out)) + "\n"


def _opening(report: PrivacyReport) -> list[str]:
    """Title, formal statement, certified bracket and DP setting, up to the data accesses."""
    lo, hi = bound_pair(report.bound, report.reports_epsilon)
    q = "ε" if report.reports_epsilon else "δ"
    obs = observed(report)
    beside = ["", " ".join(beside_bracket(obs))] if obs is not None else []
    return [
        f"# Privacy report: {report.title}",
        "",
        f"Generated by dpledger {report.dpledger_version} from {report.input_kind} "
        f"`{report.input_name}` (report schema {report.schema_version}).",
        "",
        "## Formal statement",
        "",
        report.statement,
        "",
        f"Certified bracket: {lo} ≤ {q} ≤ {hi} (the upper end is the guarantee)."
        if report.guaranteed
        else f"No accountant certifies a bound: {NO_GUARANTEE}.",
        *beside,
        "",
        "## DP setting",
        "",
        report.setting,
        "",
        "## Data accesses covered",
        "",
    ]


def _closing(report: PrivacyReport, figures: Mapping[str, str] | None) -> list[str]:
    """Audit, runtime ledger, warnings, figures and the plugins' sections."""
    out = ["", "## Audit", ""]
    out += _audit(report.audit)
    out += ["", "## Runtime ledger", ""]
    out += _runtime(report.runtime)
    out += ["", "## Warnings", ""]
    out += [f"- {w}" for w in report.warnings] or ["- none"]
    if figures:
        out += ["", "## Figures", ""]
        for caption, path in figures.items():
            out += [f"![{caption}]({path})", ""]
        out.pop()
    for s in report.sections:
        out += ["", f"## {s.title}", "", f"(section by plugin {s.plugin})", "", s.markdown.strip()]
    return out
