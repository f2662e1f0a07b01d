"""Every table on a results page that compares with a paper quotes, in each of its cells that
are not the paper's, only numbers that the page's regeneration command prints.

The check parses the tables (not a word search): a table whose header names the paper is a
comparison table; each of its cells outside the paper's columns must consist of numbers found,
at the cell's own rounding, in the regenerated output that ``SOURCES`` names for the table
(stored outputs where the page keeps them, otherwise the cheap command itself). A comparison
table that is neither listed in ``SOURCES`` nor in ``NOT_RESULTS`` (settings and prose tables,
and files that are themselves a command's output) fails, so a new one cannot go unchecked.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?")
#: a column is the paper's when its header starts like one of these (lower case)
PAPER_HEADERS = ("paper", "√paper", "sqrt(paper", "claimed")
PATH_SIDE_BY_SIDE = (
    "table2_aim*.json",
    "table2_baselines*.json",
    "table2_direct_across*.json",
    "table2_nonprivate_baselines_s*.json",
    "table2_path_eps2*.json",
    "table2_path_eps10_share0.1_s*.json",
    "table2_path_nonprivate_s*.json",
)


def _run(*argv: str) -> str:
    done = subprocess.run(
        [sys.executable, *argv], cwd=ROOT, check=True, capture_output=True, text=True, timeout=900
    )
    return done.stdout


def _files(*patterns: str) -> Callable[[], str]:
    def read() -> str:
        paths = [p for pat in patterns for p in sorted(ROOT.glob(pat))]
        assert paths, patterns
        return "\n".join(p.read_text() for p in paths)

    return read


def _path_side_by_side() -> str:
    files = [
        str(p) for pat in PATH_SIDE_BY_SIDE for p in sorted(ROOT.glob(f"experiments/path/{pat}"))
    ]
    return _run("-m", "experiments.path.table2", "--side-by-side", *files)


SWFLOW_RESULTS = "experiments/swflow/results"
#: (page, the start of the table's header) -> the regenerated output its numbers come from
SOURCES: dict[tuple[str, str], Callable[[], str]] = {
    ("docs/methods/shk.md", "| experiment | quantity | paper | reproduced |"): _files(
        "experiments/shk/reproduce_output.md"
    ),
    ("docs/methods/shk.md", "| reading of Exp. 3's 0.2201 |"): _files(
        "experiments/shk/reproduce_output.md"
    ),
    ("docs/methods/swflow.md", "| method | paper FID"): _files(f"{SWFLOW_RESULTS}/digits.md"),
    ("docs/methods/swflow.md", "| reading | σ = 0 |"): _files(f"{SWFLOW_RESULTS}/toy.md"),
    ("docs/methods/swflow.md", "| method | epsilon | FD | no-information"): _files(
        f"{SWFLOW_RESULTS}/digits.md"
    ),
    ("docs/methods/trajectories.md", "| digit | N | T | tau (certified) |"): _files(
        "experiments/trajectories/TABLE1.md"
    ),
    ("docs/methods/trajectories.md", "| digit | seeds | paper |"): _files(
        "experiments/trajectories/SEEDS.md"
    ),
    ("docs/methods/trajectories.md", "| digit | min W2 over the runs |"): _files(
        "experiments/trajectories/W2_FLOOR.md", "experiments/trajectories/TABLE1.md"
    ),
    ("docs/methods/trajectories.md", "| setting | N | T | K (assumed) |"): lambda: _run(
        "experiments/trajectories/table2.py"
    ),
    ("experiments/path/RESULTS.md", "| ε | method | ε_select | metric | paper"): (
        _path_side_by_side
    ),
    ("experiments/path/RESULTS.md", "| ε | method | certified ε (accountant) |"): _files(
        "experiments/path/table2_*.json"
    ),
}
#: tables that name the paper but hold no result to check, and why
NOT_RESULTS: dict[tuple[str, str], str] = {
    ("docs/methods/path.md", "| topic | paper | here |"): "prose: what differs from the paper",
    ("docs/methods/swflow.md", "| issue | paper | reference code |"): "prose: deviations",
    ("docs/methods/trajectories.md", "| issue | paper | here |"): "prose: deviations",
    ("docs/methods/trajectories.md", "| column | paper (caption) | ours |"): "prose: columns",
    ("docs/methods/trajectories.md", "|  | paper (Sec. 5, Fig. 3) | ours |"): "the settings",
}
#: files that are themselves a command's output (written whole by it)
OUTPUT_FILES = (
    "experiments/published_claims/RESULTS.md",
    "experiments/trajectories/RESOLUTION_CONTROL.md",
    "experiments/trajectories/W2_FLOOR.md",
    "experiments/trajectories/TABLE1.md",
    "experiments/trajectories/SEEDS.md",
    "experiments/shk/reproduce_output.md",
    f"{SWFLOW_RESULTS}/digits.md",
    f"{SWFLOW_RESULTS}/toy.md",
    f"{SWFLOW_RESULTS}/generator.md",
    f"{SWFLOW_RESULTS}/paper_claims.md",
)
PAGES = ("docs/methods", "experiments")


def tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """(header cells, body rows) of every markdown table in ``text``."""
    lines = [ln.strip() for ln in text.splitlines()]
    out = []
    for i, ln in enumerate(lines[:-1]):
        if ln.startswith("|") and lines[i + 1].startswith("|---"):
            body = []
            for row in lines[i + 2 :]:
                if not row.startswith("|"):
                    break
                body.append([c.strip() for c in row.strip("|").split("|")])
            out.append(([c.strip() for c in ln.strip("|").split("|")], body))
    return out


def comparison_tables() -> dict[tuple[str, str], tuple[list[str], list[list[str]]]]:
    """Every table of the results pages whose header names the paper, by (page, header)."""
    found = {}
    for folder in PAGES:
        for path in sorted((ROOT / folder).rglob("*.md")):
            rel = path.relative_to(ROOT).as_posix()
            for header, body in tables(path.read_text()):
                line = "| " + " | ".join(header) + " |"
                if "paper" in line.lower() or _key(rel, line, SOURCES) is not None:
                    found[rel, line] = (header, body)
    return found


def _key(page: str, line: str, keys: Iterable[tuple[str, str]]) -> tuple[str, str] | None:
    return next((k for k in keys if k[0] == page and line.startswith(k[1])), None)


@cache
def _numbers(key: tuple[str, str]) -> tuple[float, ...]:
    return tuple(abs(float(x)) for x in NUMBER.findall(SOURCES[key]()))


def _printed(number: str, printed: tuple[float, ...]) -> bool:
    """Whether some printed number rounds to ``number`` at its decimals (or is it exactly)."""
    mantissa, _, exponent = number.lower().partition("e")
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    value = float(number)
    if exponent:
        return any(abs(v - value) <= 0.5 * 10 ** (int(exponent) - decimals) for v in printed)
    return any(f"{v:.{decimals}f}" == mantissa for v in printed)


def unprinted_cells(key: tuple[str, str], header: list[str], body: list[list[str]]) -> list[str]:
    """The cells of a comparison table, outside the paper's columns and the first (the row's
    label), with a number its regenerated output does not print."""
    ours = [k for k, h in enumerate(header) if k and not h.lower().startswith(PAPER_HEADERS)]
    printed = _numbers(key)
    bad = []
    for row in body:
        for k in ours:
            if k < len(row) and not all(_printed(x, printed) for x in NUMBER.findall(row[k])):
                bad.append(f"{header[k]}: {row[k]!r} (row {row[0]!r})")
    return bad


def test_every_comparison_table_is_listed() -> None:
    unlisted = [
        key
        for key in comparison_tables()
        if key[0] not in OUTPUT_FILES
        and _key(*key, SOURCES) is None
        and _key(*key, NOT_RESULTS) is None
    ]
    assert not unlisted, f"comparison tables with no regenerated output named: {unlisted}"
    assert all(any(k[0] == p for k in comparison_tables()) for p, _ in SOURCES)


@pytest.mark.experiments
@pytest.mark.parametrize("key", sorted(SOURCES), ids=lambda k: f"{k[0]}:{k[1][:30]}")
def test_comparison_table_numbers_are_printed_by_its_command(key: tuple[str, str]) -> None:
    matching = [
        (h, b)
        for (page, line), (h, b) in comparison_tables().items()
        if page == key[0] and line.startswith(key[1])
    ]
    assert matching, f"{key}: no such table on the page"
    for header, body in matching:
        assert body, key
        bad = unprinted_cells(key, header, body)
        assert not bad, f"{key[0]}: numbers not printed by the regeneration command: {bad}"


def test_the_check_catches_an_edited_number() -> None:
    printed = (0.220078, 28.4218, 0.19994)
    assert _printed("0.2201", printed) and _printed("28.42", printed)
    assert not _printed("0.2210", printed) and not _printed("27.9", printed)
    assert _printed("2.13e-5", (2.13493e-05,)) and not _printed("2.31e-5", (2.13493e-05,))
