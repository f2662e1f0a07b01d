"""The PATH results page (paper C, ``experiments/path/RESULTS.md``) shows what its commands
print: the main table is the stored runs', the per-seed rows are ``table2 --summarize``'s, and
the side-by-side table is ``table2 --side-by-side``'s (and the page checks catch an edited
number). Helpers shared with the other results-page tests: ``results_pages.py``.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from typing import Any

import pytest

from .results_pages import (
    COLUMN_KEYS,
    PATH_RESULTS,
    ROOT,
    SIDE_BY_SIDE_TITLE,
    not_on_page,
    run_command,
    section_table,
    summary_lines,
    table_lines,
)

PATH_NAMES = {
    "AIM": "aim",
    "DIRECT (Acr.)": "direct_across",
    "DIRECT (Markov = Indep)": "direct_markov",
    "PATH (GPT-2 tiny)": "path",
    "PATH, public pre-training only": "path_public",
    "REAL (200 fresh tables)": "real",
}


@pytest.mark.experiments
def test_path_table2_page_equals_stored_runs() -> None:
    """The main table (seed 0, selection share 0.25) shows the stored runs' numbers: the eight
    private rows, the public-only control and REAL (each stored twice, with equal numbers)."""
    rows: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for f in (ROOT / "experiments" / "path").glob("table2_*.json"):
        stored = json.loads(f.read_text())
        if stored["args"]["seed"] != 0 or stored["args"]["selection_share"] != 0.25:
            continue
        for r in stored["rows"]:
            rows.setdefault((r["method"], r["epsilon"]), []).append(r)
    checked = 0
    for line in table_lines(PATH_RESULTS.read_text()):
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) != 9 or cells[1] not in PATH_NAMES:
            continue
        eps = math.inf if cells[0] == "∞" else float(cells[0])
        runs = rows[(PATH_NAMES[cells[1]], eps)]
        assert len(runs) == (2 if PATH_NAMES[cells[1]] in ("path_public", "real") else 1), line
        r = runs[0]
        if math.isinf(r["epsilon_certified"]):
            assert cells[2] == "–", line
        elif r["epsilon_certified"] == 0:
            assert cells[2] == "0 (no private data)", line
        else:
            assert cells[2].startswith(f"{r['epsilon_certified']:.4f} ("), line
        for cell, key, digits in zip(
            cells[3:8],
            COLUMN_KEYS,
            (3, 2, 4, 4, 4),
            strict=True,
        ):
            for run in runs:
                assert cell == f"{run[key]:.{digits}f}", (line, key)
        checked += 1
    assert checked == 10


def _table2_path_files() -> list[str]:
    folder = ROOT / "experiments" / "path"
    files = [*folder.glob("table2_path_eps*.json"), *folder.glob("table2_path_nonprivate_*.json")]
    return sorted(str(p) for p in files)


@pytest.mark.experiments
def test_path_table2_seeds_page_equals_summary() -> None:
    """The page's PATH rows per seed (paper's split at epsilon 10, non-private PATH) are what
    ``table2 --summarize`` prints for the stored runs, means and spreads included."""
    files = _table2_path_files()
    printed = run_command(
        "-m",
        "experiments.path.table2",
        "--summarize",
        *files,
        "--only",
        "path",
        "path_nonprivate",
        timeout=120,
    )
    lines = [ln for ln in printed.splitlines()[1:] if ln.count("|") > 5]
    page = PATH_RESULTS.read_text()
    assert any(ln.startswith("10 | PATH (GPT-2 tiny) | 1 | ") for ln in lines)
    assert any(ln.split(" | ")[1].startswith("PATH non-private") for ln in lines)
    for ln in lines:
        assert f"| {ln} |" in page, ln


def _table2_baseline_files() -> list[str]:
    folder = ROOT / "experiments" / "path"
    patterns = ("table2_aim*.json", "table2_baselines*.json", "table2_direct_across*.json")
    files = [p for pattern in patterns for p in folder.glob(pattern)]
    return sorted(str(p) for p in [*files, *folder.glob("table2_nonprivate_baselines_s*.json")])


@pytest.mark.experiments
def test_path_table2_baseline_seeds_page_equals_summary() -> None:
    """The page's rows of AIM, Direct, AIM and Direct without privacy and REAL per seed are
    what ``table2 --summarize`` prints for the stored runs, means and spreads included; every
    method has seeds 0, 1 and 2 at each of its epsilons."""
    printed = run_command(
        "-m", "experiments.path.table2", "--summarize", *_table2_baseline_files(), timeout=120
    )
    lines = summary_lines(printed)
    page = PATH_RESULTS.read_text()
    means = [ln for ln in lines if " | mean ± sd (0, 1, 2) | " in ln]
    configurations = {tuple(ln.split(" | ")[:2]) for ln in lines}
    assert {m for _, m in configurations} == {
        "AIM",
        "AIM non-private (ε = 1e5)",
        "DIRECT (Acr.)",
        "DIRECT (Markov = Indep)",
        "DIRECT (Acr.) non-private (ε = 1e5)",
        "DIRECT (Markov = Indep) non-private (ε = 1e5)",
        "REAL (200 fresh tables)",
    }
    assert len(means) == len(configurations) == 10
    assert len(lines) == 4 * 10
    assert not_on_page(lines, page) == []


@pytest.mark.experiments
def test_path_nonprivate_aim_rows_hold_the_stored_runs() -> None:
    """Non-private AIM: three stored runs (seeds 0, 1, 2) at epsilon 1e5 with the stored AIM
    runs' settings, certified near 1e5 by RDP, and the page's mean ± sd row is their mean and
    sample sd."""
    folder = ROOT / "experiments" / "path"
    runs = [json.loads((folder / f"table2_aim_nonprivate_s{s}.json").read_text()) for s in range(3)]
    aim = json.loads((folder / "table2_aim_s1.json").read_text())["args"]
    for seed, run in enumerate(runs):
        args = run["args"]
        assert args["seed"] == seed and args["methods"] == ["aim_nonprivate"]
        for k in ("n_users", "length", "bins", "rounds", "aim_iters"):
            assert args[k] == aim[k], k
        (row,) = run["rows"]
        assert row["method"] == "aim_nonprivate" and math.isinf(row["epsilon"])
        assert row["accountant"] == "rdp" and 0.99e5 <= row["epsilon_certified"] <= 1e5
        assert row["info"]["units_spent"] == aim["rounds"]
    hmm = [r["rows"][0]["hmm_loglik_w1"] for r in runs]
    mean, sd = sum(hmm) / 3, math.sqrt(sum((h - sum(hmm) / 3) ** 2 for h in hmm) / 2)
    row = next(
        ln
        for ln in table_lines(PATH_RESULTS.read_text())
        if "| AIM non-private (ε = 1e5) | – | mean ± sd (0, 1, 2) |" in ln
    )
    assert f"| {mean:.2f} ± {sd:.2f} |" in row


@pytest.mark.experiments
def test_path_page_check_catches_an_edited_number() -> None:
    """The page checks above fail when one printed number on the page is changed: editing the
    non-private AIM mean's HMM likelihood W1 on a copy of the page makes that row unmatched."""
    printed = run_command(
        "-m", "experiments.path.table2", "--summarize", *_table2_baseline_files(), timeout=120
    )
    lines = summary_lines(printed)
    page = PATH_RESULTS.read_text()
    target = next(ln for ln in lines if ln.startswith("∞ | AIM non-private (ε = 1e5) | – | mean"))
    cells = target.split(" | ")
    hmm = cells[6].split(" ± ")
    edited_cell = f"{float(hmm[0]) + 0.01:.2f} ± {hmm[1]}"
    edited = page.replace(target, " | ".join([*cells[:6], edited_cell, *cells[7:]]))
    assert edited != page
    assert not_on_page(lines, edited) == [target]


SIDE_BY_SIDE_METHODS = ("AIM", "DIRECT (Acr.)", "DIRECT (Markov = Indep)", "PATH (GPT-2 tiny)")


def _side_by_side_command(page: str) -> list[str]:
    """The page's side-by-side command (section "Commands", run from the repository root), with
    its file patterns expanded as a shell would."""
    lines = page.splitlines()
    i = next(
        i
        for i, ln in enumerate(lines)
        if ln.startswith("python -m experiments.path.table2 --side-by-side ")
    )
    text = lines[i]
    while text.endswith("\\"):
        i += 1
        text = f"{text[:-1]} {lines[i].strip()}"
    argv = shlex.split(text)
    assert argv[:4] == ["python", "-m", "experiments.path.table2", "--side-by-side"], text
    files = []
    for pattern in argv[4:]:
        hits = sorted(str(p) for p in ROOT.glob(pattern))
        assert hits, pattern
        files.extend(hits)
    return ["-m", "experiments.path.table2", "--side-by-side", *files]


def _side_by_side_printed(page: str) -> list[str]:
    printed = run_command(*_side_by_side_command(page), timeout=120)
    return [f"| {ln} |" for ln in printed.splitlines() if ln.strip()]


@pytest.mark.experiments
def test_path_side_by_side_page_equals_command() -> None:
    """The side-by-side table is exactly what the page's ``table2 --side-by-side`` command
    prints (header and every row, in order): for each epsilon, private method and metric, the
    paper's number, ours and the method's non-private baseline, each over seeds 0, 1 and 2."""
    page = PATH_RESULTS.read_text()
    printed = _side_by_side_printed(page)
    assert section_table(page, SIDE_BY_SIDE_TITLE) == printed
    rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in printed[1:]]
    assert len(rows) == 2 * len(SIDE_BY_SIDE_METHODS) * 6
    assert {(r[0], r[1]) for r in rows} == {
        (eps, m) for eps in ("2", "10") for m in SIDE_BY_SIDE_METHODS
    }
    for r in rows:
        assert r[7] == "0, 1, 2", r
        for cell in r[5:7]:
            assert re.fullmatch(r"\d+\.\d+ ± \d+\.\d+", cell), r
        # the paper reports the five paper metrics, not the classifier AUC
        assert (r[4] == "—") == r[3].startswith("classifier AUC"), r
        if r[1].startswith("PATH"):
            assert r[2] == {"2": "0.5", "10": "1"}[r[0]], r


@pytest.mark.experiments
def test_path_side_by_side_is_the_per_seed_tables() -> None:
    """Each side-by-side value is the mean ± sd row of its per-seed table (the same runs, the
    same computation), the non-private baseline the same at both epsilons, and each paper
    number the one the main table quotes."""
    page = PATH_RESULTS.read_text()
    rows = [
        [c.strip() for c in ln.strip("|").split("|")]
        for ln in section_table(page, SIDE_BY_SIDE_TITLE)[1:]
    ]
    means = {}
    for ln in table_lines(page):
        c = [x.strip() for x in ln.strip("|").split("|")]
        if len(c) == 11 and c[3] == "mean ± sd (0, 1, 2)":
            means[(c[0], c[1], c[2])] = dict(
                zip((*COLUMN_KEYS, "classifier_auc"), c[5:], strict=True)
            )
    paper = {}
    for ln in table_lines(page):
        c = [x.strip() for x in ln.strip("|").split("|")]
        if len(c) == 9 and c[1] in SIDE_BY_SIDE_METHODS:
            models = [m.split(": ") for m in c[8].split("; ")]
            for key, i in zip(COLUMN_KEYS, range(5), strict=True):
                paper[(c[0], c[1], key)] = "; ".join(
                    f"{m[0]} {m[1].split(' / ')[i]}" if len(m) == 2 else m[0].split(" / ")[i]
                    for m in models
                )
    keys = dict(
        zip(
            ("MAUVE", "HMM", "TDCR", "marginal", "state", "classifier"),
            (*COLUMN_KEYS, "classifier_auc"),
            strict=True,
        )
    )
    non_private = {
        "AIM": "AIM non-private (ε = 1e5)",
        "DIRECT (Acr.)": "DIRECT (Acr.) non-private (ε = 1e5)",
        "DIRECT (Markov = Indep)": "DIRECT (Markov = Indep) non-private (ε = 1e5)",
        "PATH (GPT-2 tiny)": "PATH non-private (σ = 0.01)",
    }
    for eps, method, sel, metric, paper_cell, ours, without, _ in rows:
        key = keys[metric.split(" ")[0]]
        assert ours == means[(eps, method, sel)][key], (eps, method, metric)
        assert without == means[("∞", non_private[method], "–")][key], (eps, method, metric)
        if key != "classifier_auc":
            assert paper_cell == paper[(eps, method, key)], (eps, method, metric)


@pytest.mark.experiments
def test_path_side_by_side_check_catches_an_edited_number() -> None:
    """Changing one number of the side-by-side table on a copy of the page makes it differ
    from the command's output."""
    page = PATH_RESULTS.read_text()
    printed = _side_by_side_printed(page)
    target = next(ln for ln in printed if ln.startswith("| 10 | AIM | – | HMM lik. W1"))
    cells = target.split(" | ")
    ours = cells[5]  # "mean ± sd": its first digit moved by one
    cells[5] = str((int(ours[0]) + 1) % 10) + ours[1:]
    edited_line = " | ".join(cells)
    assert edited_line != target
    edited = page.replace(target, edited_line)
    assert section_table(page, SIDE_BY_SIDE_TITLE) == printed
    assert section_table(edited, SIDE_BY_SIDE_TITLE) != printed
