"""Write a report in one format: Markdown (+ PNG files beside it), HTML (figures inline), JSON."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from dpledger.core.errors import InvalidParameterError
from dpledger.report.render_html import render_html
from dpledger.report.render_json import render_json
from dpledger.report.render_md import render_markdown

if TYPE_CHECKING:
    from dpledger.report.build import BuiltReport
    from dpledger.report.figures import Figure

FORMATS: tuple[str, ...] = ("md", "html", "json")


def figure_file(out: Path, key: str) -> Path:
    """``report.md`` -> ``report-privacy_profile.png`` in the same directory."""
    return out.with_name(f"{out.stem}-{key}.png")


def render(
    built: BuiltReport,
    fmt: str,
    out: Path | None = None,
    *,
    figures: list[Figure] | None = None,
) -> tuple[str, dict[Path, bytes]]:
    """(text, extra files to write). Markdown figures need ``out`` (they are files beside it)."""
    if fmt not in FORMATS:
        raise InvalidParameterError("--format", f"unknown format {fmt!r}", f"use one of {FORMATS}")
    report = built.report
    if fmt == "json":
        return render_json(report), {}
    if fmt == "html":
        return render_html(report, {f.caption: f.png for f in figures or []}), {}
    files: dict[Path, bytes] = {}
    links: dict[str, str] = {}
    if out is not None:
        for f in figures or []:
            path = figure_file(out, f.key)
            files[path] = f.png
            links[f.caption] = path.name
    return render_markdown(report, links), files


def write_report(
    built: BuiltReport,
    fmt: str,
    out: Path,
    *,
    figures: list[Figure] | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[Path]:
    """Write ``out`` (and, for Markdown, its figures); returns every path written."""
    text, files = render(built, fmt, out, figures=figures)
    out.parent.mkdir(parents=True, exist_ok=True)
    written = []
    for path, data in files.items():
        path.write_bytes(data)
        written.append(path)
    out.write_text(text, encoding="utf-8")
    written.append(out)
    if progress is not None:
        progress(str(out))
    return written
