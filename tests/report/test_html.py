from __future__ import annotations

import base64
from html.parser import HTMLParser
from pathlib import Path

import pytest

from dpledger.cli import main


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs.extend((tag, k, v or "") for k, v in attrs)


def test_html_embeds_figures_and_references_nothing_external(
    pipeline_file: Path, tmp_path: Path, capfd: object
) -> None:
    out = tmp_path / "report.html"
    assert main(["report", str(pipeline_file), "--format", "html", "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    parser = _Collector()
    parser.feed(text)
    parser.close()
    imgs = [v for tag, k, v in parser.attrs if tag == "img" and k == "src"]
    assert len(imgs) == 3  # profile, steps (sgd repeats 20 times), composition graph
    for src in imgs:
        assert src.startswith("data:image/png;base64,")
        png = base64.b64decode(src.split(",", 1)[1], validate=True)
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
    for _tag, key, value in parser.attrs:
        if key in ("src", "href", "action", "data"):
            assert not value.lower().startswith(("http://", "https://", "//")), value
    assert "script" not in parser.tags and "link" not in parser.tags
    assert "http://" not in text and "https://" not in text
    assert "Formal statement" in text and "Accountants side by side" in text


def test_markdown_figures_are_files_beside_it(pipeline_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "md" / "report.md"
    assert main(["report", str(pipeline_file), "--out", str(out)]) == 0
    md = out.read_text(encoding="utf-8")
    for key in ("privacy_profile", "epsilon_vs_steps", "composition_graph"):
        png = out.with_name(f"report-{key}.png")
        assert png.read_bytes()[:4] == b"\x89PNG"
        assert f"](report-{key}.png)" in md


@pytest.mark.parametrize("fmt", ["html", "md"])
def test_without_matplotlib_the_report_is_written_without_figures(
    fmt: str,
    pipeline_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    import sys

    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    out = tmp_path / f"report.{fmt}"
    assert main(["report", str(pipeline_file), "--format", fmt, "--out", str(out)]) == 0
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "matplotlib is not installed" in err
    assert "dpledger[reports]" in err and "Traceback" not in err
    text = out.read_text()
    assert "Formal statement" in text and "<img" not in text and ".png" not in text


def test_plugin_sections_are_html_and_only_where_they_apply(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    from dpledger.report.render_html import markdown_html

    html_text = markdown_html("A **bold** claim.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n")
    assert "<strong>bold</strong>" in html_text and "<table>" in html_text
    assert "**" not in html_text and "|---|" not in html_text
    assert "<script>" not in markdown_html("<script>alert(1)</script>")  # raw HTML escaped
    # a pipeline with no SHK or Poisson release gets neither plugin's section
    path = tmp_path / "p.toml"
    path.write_text(
        'delta = 1e-6\n[[sources]]\nname = "s"\n[[releases]]\nid = "count"\ninput = "s"\n'
        'event = { kind = "laplace", noise_multiplier = 10.0 }\n'
    )
    out = tmp_path / "r.html"
    assert main(["report", str(path), "--format", "html", "--no-figures", "--out", str(out)]) == 0
    text = out.read_text()
    assert "SHK sampling" not in text and "No release of this report" not in text
    assert "asymptotic GDP" not in text
    assert '<div class="wide"><table>' in text
