"""Privacy reports: the data (:mod:`.model`), how it is built (:mod:`.build` from a graph,
:mod:`.run_dir` from a run directory; its prose in :mod:`.prose`, trust tiers in :mod:`.tiers`),
its renderings (Markdown, self-contained HTML, deterministic JSON), figures and report diffs."""

from __future__ import annotations

from dpledger.report.build import BuiltReport, build_report, report_pipeline, report_pipeline_file
from dpledger.report.diff import ReportDiff, diff_reports
from dpledger.report.model import SCHEMA_VERSION, PrivacyReport
from dpledger.report.render_html import render_html
from dpledger.report.render_json import render_json
from dpledger.report.render_md import render_markdown
from dpledger.report.run_dir import report_input, report_run_dir
from dpledger.report.write import FORMATS, render, write_report

__all__ = [
    "FORMATS",
    "SCHEMA_VERSION",
    "BuiltReport",
    "PrivacyReport",
    "ReportDiff",
    "build_report",
    "diff_reports",
    "render",
    "render_html",
    "render_json",
    "render_markdown",
    "report_input",
    "report_pipeline",
    "report_pipeline_file",
    "report_run_dir",
    "write_report",
]
