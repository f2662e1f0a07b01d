"""HTML rendering: one well-formed, self-contained page holding the report's statements."""

from __future__ import annotations

import base64
import html
from html.parser import HTMLParser

import pytest

from dpledger.report.model import NO_GUARANTEE, ExtraSection, PrivacyReport
from dpledger.report.numbers import fmt_up
from dpledger.report.render_html import data_uri, e, render_html
from dpledger.report.render_md import render_markdown

from .cases import DELTA, SIGMA, analytic_gaussian_epsilon, gaussian_report, minimal_report

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
#: elements without an end tag
VOID = frozenset({"meta", "img", "br", "hr", "input", "link", "col", "area", "base", "source"})


class _Checker(HTMLParser):
    """Records tags that do not close in order, every URL attribute and the page's text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.problems: list[str] = []
        self.urls: list[tuple[str, str, str]] = []
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.urls.extend((tag, k, v or "") for k, v in attrs if k in ("src", "href", "action"))
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.stack.pop()

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.problems.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
            return
        self.stack.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parse(page: str) -> _Checker:
    checker = _Checker()
    checker.feed(page)
    checker.close()
    assert checker.problems == [] and checker.stack == [], (checker.problems, checker.stack)
    return checker


def _self_contained(checker: _Checker) -> None:
    for tag, key, value in checker.urls:
        assert value.startswith(("data:", "#")), (tag, key, value)
    assert "script" not in checker.tags and "link" not in checker.tags


def _full_report() -> PrivacyReport:
    audit = {
        "verdict": "consistent",
        "confidence": 0.95,
        "n_test": 1000,
        "audits": [{"delta": 1e-2, "claimed_epsilon": 1.0, "epsilon_lower": 0.5, "verdict": "ok"}],
    }
    runtime = {"method": "m", "verified": True, "outputs": ["a"], "declared_core": "gaussian"}
    section = ExtraSection("s", "Plugin notes", "A **bold** claim.\n\n| a | b |\n|---|---|\n", "p")
    return minimal_report(audit=audit, runtime=runtime, sections=(section,))


def test_the_gaussian_page_is_well_formed_and_self_contained() -> None:
    report = gaussian_report().report
    page = render_html(report, {"Privacy profile": PNG, "Steps": PNG})
    assert page.startswith("<!DOCTYPE html>\n")
    checker = _parse(page)
    _self_contained(checker)
    assert checker.tags.count("html") == checker.tags.count("body") == 1
    images = [v for tag, k, v in checker.urls if tag == "img"]
    assert images == [data_uri(PNG)] * 2
    assert base64.b64decode(images[0].split(",", 1)[1]) == PNG


def test_the_gaussian_page_states_headline_unit_adjacency_method_assumptions() -> None:
    report = gaussian_report().report
    text = "".join(_parse(render_html(report)).text)
    headline = fmt_up(analytic_gaussian_epsilon(SIGMA, DELTA))
    assert report.statement in text
    assert f"ε = {headline} (certified upper bound, method closed_form)" in text
    assert f"Certified bracket: 4.37717 ≤ ε ≤ {headline}" in text
    assert "unit of privacy: one row (record) of source 'db'" in text
    assert "adjacency: add/remove of one row (event level)" in text
    assert "reported by: closed_form" in text
    for assumption in report.assumptions:
        assert assumption in text
    for warning in report.warnings:
        assert warning in text


def test_html_and_markdown_show_the_same_numbers() -> None:
    report = gaussian_report().report
    text = "".join(_parse(render_html(report)).text)
    md = render_markdown(report)
    for bracket in report.brackets:
        assert bracket.bound is not None
        upper = fmt_up(bracket.bound["epsilon"])
        assert upper in text and upper in md


def test_text_is_escaped() -> None:
    hostile = '<script>alert(1)</script> & "quotes"'
    report = minimal_report(title=hostile, statement=hostile, warnings=(hostile,))
    page = render_html(report)
    checker = _parse(page)
    assert "script" not in checker.tags
    assert "".join(checker.text).count(hostile) == 4  # <title>, <h1>, statement, warning
    assert html.escape(hostile, quote=True) in page


def test_audit_runtime_and_sections_stay_well_formed() -> None:
    page = render_html(_full_report(), {"c": PNG})
    checker = _parse(page)
    _self_contained(checker)
    text = "".join(checker.text)
    assert "Verdict: consistent at confidence 0.95 (n_test = 1000)" in text
    assert "ledger verified (every executed step covered by the declaration): yes" in text
    assert "(section by plugin p)" in text and "<strong>bold</strong>" in page


def test_no_guarantee_replaces_the_bracket() -> None:
    bound = {"epsilon": "inf", "epsilon_lower": 0.0, "delta": 1e-5, "method": "closed_form"}
    text = "".join(_parse(render_html(minimal_report(bound=bound))).text)
    assert f"No accountant certifies a bound: {NO_GUARANTEE}." in text
    assert "Certified bracket" not in text


def test_escaped_cells() -> None:
    assert [e(v) for v in (None, "", [], (), ["a", "b"], "<b>")] == [
        "-",
        "-",
        "-",
        "-",
        "a, b",
        "&lt;b&gt;",
    ]


def test_a_plugin_section_cannot_bring_an_external_url() -> None:
    pytest.importorskip("markdown_it")  # without it a section is shown as escaped text
    section = ExtraSection("s", "S", "![x](https://example.org/a.png) [l](http://example.org)", "p")
    _self_contained(_parse(render_html(minimal_report(sections=(section,)))))


def test_numeric_cells_never_wrap() -> None:
    from dpledger.report.render_html import CSS, _table

    html_text = _table(("backend", "ε lower", "ε upper"), [("pld", "2.37540", "2.38000e-05")])
    assert '<td class="num">2.37540</td>' in html_text
    assert '<td class="num">2.38000e-05</td>' in html_text
    assert "<td>pld</td>" in html_text
    for word in ("none", "inf", "14040"):
        assert f'<td class="num">{word}</td>' in _table(("x",), [(word,)])
    assert "td.num { white-space: nowrap;" in CSS
