"""Writing a report: one format per file, Markdown figures beside it, HTML figures inline."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpledger.core.errors import InvalidParameterError
from dpledger.report.figures import Figure
from dpledger.report.render_html import data_uri, render_html
from dpledger.report.render_json import render_json
from dpledger.report.render_md import render_markdown
from dpledger.report.write import FORMATS, figure_file, render, write_report

from .cases import gaussian_report

PNG = b"\x89PNG\r\n\x1a\nnot really an image"
FIGURES = [
    Figure("privacy_profile", "Privacy profile", PNG),
    Figure("composition_graph", "Graph", PNG + b"2"),
]


def test_formats_and_figure_files() -> None:
    assert FORMATS == ("md", "html", "json")
    assert figure_file(Path("out/report.md"), "privacy_profile") == Path(
        "out/report-privacy_profile.png"
    )


@pytest.mark.parametrize("fmt", ["pdf", "MD", "", "markdown"])
def test_an_unknown_format_names_the_field(fmt: str, tmp_path: Path) -> None:
    out = tmp_path / "new" / "r.txt"
    with pytest.raises(InvalidParameterError) as info:
        write_report(gaussian_report(), fmt, out, figures=FIGURES)
    assert info.value.field == "--format"
    assert repr(fmt) in info.value.problem and "md" in info.value.fix
    assert str(info.value).startswith("--format: unknown format")
    assert not out.parent.exists()  # refused before anything is written
    with pytest.raises(InvalidParameterError, match=r"^--format: "):
        render(gaussian_report(), fmt)


def test_json_and_html_are_one_file() -> None:
    built = gaussian_report()
    assert render(built, "json", figures=FIGURES) == (render_json(built.report), {})
    text, files = render(built, "html", Path("r.html"), figures=FIGURES)
    assert files == {}
    assert text == render_html(built.report, {"Privacy profile": PNG, "Graph": PNG + b"2"})
    assert data_uri(PNG) in text and data_uri(PNG + b"2") in text


def test_markdown_figures_are_files_beside_the_report() -> None:
    built = gaussian_report()
    out = Path("dir/report.md")
    text, files = render(built, "md", out, figures=FIGURES)
    assert files == {
        Path("dir/report-privacy_profile.png"): PNG,
        Path("dir/report-composition_graph.png"): PNG + b"2",
    }
    assert text == render_markdown(
        built.report,
        {"Privacy profile": "report-privacy_profile.png", "Graph": "report-composition_graph.png"},
    )
    assert "![Privacy profile](report-privacy_profile.png)" in text
    # without a path there is nowhere to put them: no figures, no links
    assert render(built, "md", None, figures=FIGURES) == (render_markdown(built.report), {})


def test_write_report_writes_every_file_and_returns_them(tmp_path: Path) -> None:
    built = gaussian_report()
    out = tmp_path / "a" / "b" / "report.md"
    said: list[str] = []
    written = write_report(built, "md", out, figures=FIGURES, progress=said.append)
    assert written == [
        out.with_name("report-privacy_profile.png"),
        out.with_name("report-composition_graph.png"),
        out,
    ]
    assert written[0].read_bytes() == PNG and written[1].read_bytes() == PNG + b"2"
    assert out.read_text(encoding="utf-8") == render(built, "md", out, figures=FIGURES)[0]
    assert said == [str(out)]
    assert sorted(p.name for p in out.parent.iterdir()) == sorted(p.name for p in written)


def test_an_existing_report_is_replaced(tmp_path: Path) -> None:
    built = gaussian_report()
    out = tmp_path / "report.json"
    out.write_text("an older, longer report " * 100, encoding="utf-8")
    assert write_report(built, "json", out) == [out]
    assert out.read_text(encoding="utf-8") == render_json(built.report)
