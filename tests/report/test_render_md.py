"""Markdown rendering: every section, the headline bound and the tables, from the report's
fields only."""

from __future__ import annotations

import attrs
import pytest

from dpledger.report.model import NO_GUARANTEE, Bracket, ExtraSection
from dpledger.report.numbers import fmt_up
from dpledger.report.render_md import (
    NO_LOWER,
    SECTIONS,
    bound_pair,
    cell,
    proof_text,
    release_columns,
    render_markdown,
    rule_legend,
    table,
)

from .cases import DELTA, SIGMA, analytic_gaussian_epsilon, gaussian_report, minimal_report


def _section(md: str, title: str) -> str:
    """The text of section ``## title`` up to the next section."""
    return md.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_the_gaussian_report_states_its_headline_and_what_it_rests_on() -> None:
    report = gaussian_report().report
    md = render_markdown(report)
    headline = fmt_up(analytic_gaussian_epsilon(SIGMA, DELTA))
    assert md.startswith("# Privacy report: one Gaussian\n")
    statement = _section(md, "Formal statement")
    assert report.statement in statement
    assert f"with ε = {headline} (certified upper bound, method closed_form)" in statement
    assert f"Certified bracket: 4.37717 ≤ ε ≤ {headline} (the upper end is the guarantee)." in (
        statement
    )
    unit = _section(md, "Unit of privacy and adjacency")
    assert "- unit of privacy: one row (record) of source 'db'" in unit
    assert "- adjacency: add/remove of one row (event level)" in unit
    method = _section(md, "Accounting method and assumptions")
    assert method.count("\n- ") == 2 + len(report.assumptions)
    assert "- reported by: closed_form (smallest certified upper bound" in method
    for assumption in report.assumptions:
        assert f"\n- {assumption}\n" in method + "\n"
    assert md.index("## Formal statement") < md.index("## DP setting")


def test_every_section_in_order() -> None:
    md = render_markdown(gaussian_report().report)
    positions = [md.index(f"\n## {title}\n") for title in SECTIONS]
    assert positions == sorted(positions)
    assert "## Figures" not in md  # none given


def test_the_tables_of_the_gaussian_report() -> None:
    report = gaussian_report().report
    md = render_markdown(report)
    upper = fmt_up(report.upper)
    assert (
        f"| q | - | - | - | gaussian(noise_multiplier=1.0) | unchanged_k1 | unverified | - | "
        f"{upper} |"
    ) in md
    assert f"| closed_form | 4.37717 | {upper} | closed_form | yes | - |" in md
    rdp = next(b for b in report.brackets if b.backend == "rdp")
    assert rdp.bound is not None and rdp.bound["epsilon_lower"] == 0.0
    assert f"| rdp | {NO_LOWER} | {fmt_up(rdp.bound['epsilon'])} | rdp | - | - |" in md
    assert "| db | add/remove of one row (event level) | q | - |" in md
    assert "`unchanged_k1`: one row per unit" in md


def test_every_table_row_has_the_header_s_columns() -> None:
    report = minimal_report()
    released = attrs.evolve(report.released[0], description="with | pipe\nand newline")
    md = render_markdown(attrs.evolve(report, released=(released,)))
    tables: list[list[str]] = []
    previous = ""
    for line in md.splitlines():
        if line.startswith("|"):
            if not previous.startswith("|"):
                tables.append([])
            tables[-1].append(line.replace("\\|", ""))
        previous = line
    assert len(tables) == 4  # data accesses, released, releases, accountants
    for rows in tables:
        assert len({row.count("|") for row in rows}) == 1, rows
    assert "with \\| pipe and newline" in md


def test_cells_and_tables() -> None:
    assert [cell(v) for v in (None, "", [], "a|b", "a\nb", ["x", "y"], ("z",), 3)] == [
        "-",
        "-",
        "-",
        "a\\|b",
        "a b",
        "x, y",
        "z",
        "3",
    ]
    assert table(("a", "b"), [(1, None)]) == ["| a | b |", "|---|---|", "| 1 | - |"]


def test_bound_pairs_round_to_the_safe_sides() -> None:
    bound = {"epsilon": 1.0000001, "epsilon_lower": 0.9999999, "delta": 1e-5, "method": "pld"}
    assert bound_pair(bound, True) == ("0.999999", "1.00001")
    assert bound_pair({**bound, "epsilon": 1.0}, True) == ("0.999999", "1.00000")
    assert bound_pair({**bound, "epsilon_lower": 0.0}, True) == (NO_LOWER, "1.00001")
    assert bound_pair({**bound, "epsilon": "inf"}, True) == ("0.999999", "inf")
    delta = {"epsilon": 1.0, "delta": 2.0000001e-6, "delta_lower": 1.9999999e-6, "method": "pld"}
    assert bound_pair(delta, False) == ("1.99999e-06", "2.00001e-06")
    assert bound_pair(None, True) == ("-", "-")


def test_proof_text_and_columns() -> None:
    assert proof_text(None, "x") == "-"
    assert proof_text("Paper 2020", None) == "Paper 2020"
    assert proof_text("Paper 2020", "docs/p.md") == "[Paper 2020](docs/p.md)"
    assert release_columns(minimal_report())[-1] == "ε alone (upper)"
    delta_query = minimal_report(query=("epsilon", 1.0))
    assert release_columns(delta_query)[-1] == "δ alone (upper)"


def test_rule_legend_lists_each_rule_once_in_order_of_use() -> None:
    report = minimal_report()
    row = report.releases[0]
    rows = (
        attrs.evolve(row, lift_rules=("pure_group_privacy", "unchanged_k1")),
        attrs.evolve(row, node="r", lift_rules=("pure_group_privacy", "no_such_rule")),
    )
    legend = rule_legend(attrs.evolve(report, releases=rows))
    assert [r for r, _ in legend] == ["pure_group_privacy", "unchanged_k1", "no_such_rule"]
    assert legend[2][1] == "see dpledger.core.lifting"


def test_a_repeated_and_lifted_release_shows_both_events() -> None:
    report = minimal_report()
    row = attrs.evolve(report.releases[0], count=3, lifted_event="gaussian(noise_multiplier=0.5)")
    md = render_markdown(attrs.evolve(report, releases=(row,)))
    assert "gaussian(noise_multiplier=1.0) × 3 → gaussian(noise_multiplier=0.5)" in md


def test_no_guarantee_replaces_the_bracket() -> None:
    bound = {"epsilon": "inf", "epsilon_lower": 0.0, "delta": 1e-5, "method": "closed_form"}
    md = render_markdown(minimal_report(bound=bound))
    assert f"No accountant certifies a bound: {NO_GUARANTEE}." in md
    assert "Certified bracket" not in md


def test_figures_sections_audit_and_runtime() -> None:
    audit = {
        "verdict": "consistent",
        "confidence": 0.95,
        "n_test": 1000,
        "score": "s",
        "audits": [
            {
                "delta": 1e-2,
                "claimed_epsilon": 1.0000001,
                "epsilon_lower": 0.5000009,
                "ceiling": 3.0,
                "verdict": "ok",
            }
        ],
        "description": "a Gaussian",
    }
    runtime = {
        "method": "m",
        "verified": False,
        "seed": "not published",
        "secure_seed": True,
        "recorded_bound": {"epsilon": 1.5, "delta": 1e-5, "method": "pld"},
        "outputs": ["a", "b"],
    }
    report = minimal_report(
        audit=audit,
        runtime=runtime,
        sections=(ExtraSection("s", "Plugin notes", "  some **text**  \n", "p"),),
    )
    md = render_markdown(report, {"A caption": "r-privacy_profile.png"})
    assert "Verdict: **consistent** at confidence 0.95 (n_test = 1000, score s)." in md
    assert "| 0.01 | 1.00001 | 0.500000 | 3.00000 | ok |" in md
    assert "Audited: a Gaussian" in md
    runtime_text = _section(md, "Runtime ledger")
    assert "- ledger verified (every executed step covered by the declaration): NO" in runtime_text
    assert "- recorded at run time: ε ≤ 1.50000 at δ = 1e-05 (pld)" in runtime_text
    assert "- outputs: a, b" in runtime_text
    assert "\n## Figures\n\n![A caption](r-privacy_profile.png)\n" in md
    assert md.endswith("## Plugin notes\n\n(section by plugin p)\n\nsome **text**\n")


@pytest.mark.parametrize("brackets", [(), (Bracket("pld", None, "failed"),)])
def test_brackets_absent_or_unavailable(brackets: tuple[Bracket, ...]) -> None:
    md = render_markdown(minimal_report(brackets=brackets, unavailable=(("prv", "skipped"),)))
    text = _section(md, "Accountants side by side")
    if brackets:
        assert "| pld | - | - | - | - | failed |" in text
    else:
        assert "Brackets were not computed." in text
    assert "- prv: skipped" in text
