"""What the results-page tests share: running a documented command, reading a page's tables,
and the PATH page's tables (its main table's columns, the rows ``table2 --summarize`` prints, the
side-by-side section).

Each method's results page shows the numbers its documented command prints. Fast tests compare a
page with the stored output of its command (JSON or markdown written by the command); the
``slow`` tests run the command and compare what it prints with the page. Every test of a paper
reproduction is in the ``experiments`` tier, but the smoke tests (the regeneration commands list
their commands) and the check of a page against the product's own bound.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

__all__ = [
    "COLUMN_KEYS",
    "NUMBER",
    "PATH_RESULTS",
    "ROOT",
    "SIDE_BY_SIDE_TITLE",
    "not_on_page",
    "run_command",
    "same_at_page_precision",
    "section_table",
    "summary_lines",
    "table_lines",
]

ROOT = Path(__file__).parents[2]
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e-?\d+)?")


def run_command(*cmd: str, timeout: int = 3000) -> str:
    """What ``python CMD`` prints, run from the repository root (it must exit 0)."""
    out = subprocess.run(
        [sys.executable, *cmd],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return out.stdout


def table_lines(text: str) -> list[str]:
    """The table rows of ``text`` (headers included, rules not), stripped."""
    rows = (ln.strip() for ln in text.splitlines())
    return [ln for ln in rows if ln.startswith("| ") and not ln.startswith("|---")]


def same_at_page_precision(page_cell: str, exact_cell: str) -> bool:
    """Every number of a page cell equals the exact cell's number at the page's decimals."""
    page = NUMBER.findall(page_cell)
    exact = NUMBER.findall(exact_cell)
    if not page or len(page) > len(exact):
        return False
    for p, e in zip(page, exact, strict=False):
        decimals = len(p.split(".")[1]) if "." in p else 0
        if f"{float(e):.{decimals}f}" != p:
            return False
    return True


# -- the PATH page (paper C) ------------------------------------------------------------------
PATH_RESULTS = ROOT / "experiments" / "path" / "RESULTS.md"
#: the main table's metric columns, in the page's order
COLUMN_KEYS = ("mauve", "hmm_loglik_w1", "tdcr_jsd", "marginal_w1", "state_frobenius")
#: the heading of the page's side-by-side section
SIDE_BY_SIDE_TITLE = "## Paper, ours and without privacy, side by side"


def summary_lines(printed: str) -> list[str]:
    """The table rows ``table2 --summarize`` printed (without its header line)."""
    rows = (ln for ln in printed.splitlines() if ln.count("|") > 5)
    return [ln for ln in rows if not ln.startswith("ε | method | ")]


def not_on_page(lines: list[str], page: str) -> list[str]:
    """The printed rows the page does not show verbatim (as a table row)."""
    return [ln for ln in lines if f"| {ln} |" not in page]


def section_table(page: str, title: str) -> list[str]:
    """The table lines (header and rows) of the page's section ``title``."""
    section = page[page.index(title) :]
    return table_lines(section[: section.index("\n## ", 1)])
