"""Each method's results page shows the numbers its documented command prints.

Fast tests compare a page with the stored output of its command (JSON or markdown written by
the command); the ``slow`` tests run the command and compare what it prints with the page.
Every test of a paper reproduction is in the ``experiments`` tier, but the smoke tests (the
regeneration commands list their commands) and the check of a page against the product's own
bound.
"""

from __future__ import annotations

import json
import math
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).parents[2]
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e-?\d+)?")


def _run(*cmd: str, timeout: int = 3000) -> str:
    out = subprocess.run(
        [sys.executable, *cmd],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return out.stdout


def _table_lines(text: str) -> list[str]:
    rows = (ln.strip() for ln in text.splitlines())
    return [ln for ln in rows if ln.startswith("| ") and not ln.startswith("|---")]


def _same_at_page_precision(page_cell: str, exact_cell: str) -> bool:
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


# -- PATH (paper C) --------------------------------------------------------------------------
PATH_RESULTS = ROOT / "experiments" / "path" / "RESULTS.md"
PATH_NAMES = {
    "AIM": "aim",
    "DIRECT (Acr.)": "direct_across",
    "DIRECT (Markov = Indep)": "direct_markov",
    "PATH (GPT-2 tiny)": "path",
    "PATH, public pre-training only": "path_public",
    "REAL (200 fresh tables)": "real",
}


#: the main table's metric columns, in the page's order
COLUMN_KEYS = ("mauve", "hmm_loglik_w1", "tdcr_jsd", "marginal_w1", "state_frobenius")


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
    for line in _table_lines(PATH_RESULTS.read_text()):
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
    printed = _run(
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


def _summary_lines(printed: str) -> list[str]:
    """The table rows ``table2 --summarize`` printed (without its header line)."""
    rows = (ln for ln in printed.splitlines() if ln.count("|") > 5)
    return [ln for ln in rows if not ln.startswith("ε | method | ")]


def _not_on_page(lines: list[str], page: str) -> list[str]:
    """The printed rows the page does not show verbatim (as a table row)."""
    return [ln for ln in lines if f"| {ln} |" not in page]


@pytest.mark.experiments
def test_path_table2_baseline_seeds_page_equals_summary() -> None:
    """The page's rows of AIM, Direct, AIM and Direct without privacy and REAL per seed are
    what ``table2 --summarize`` prints for the stored runs, means and spreads included; every
    method has seeds 0, 1 and 2 at each of its epsilons."""
    printed = _run(
        "-m", "experiments.path.table2", "--summarize", *_table2_baseline_files(), timeout=120
    )
    lines = _summary_lines(printed)
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
    assert _not_on_page(lines, page) == []


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
        for ln in _table_lines(PATH_RESULTS.read_text())
        if "| AIM non-private (ε = 1e5) | – | mean ± sd (0, 1, 2) |" in ln
    )
    assert f"| {mean:.2f} ± {sd:.2f} |" in row


@pytest.mark.experiments
def test_path_page_check_catches_an_edited_number() -> None:
    """The page checks above fail when one printed number on the page is changed: editing the
    non-private AIM mean's HMM likelihood W1 on a copy of the page makes that row unmatched."""
    printed = _run(
        "-m", "experiments.path.table2", "--summarize", *_table2_baseline_files(), timeout=120
    )
    lines = _summary_lines(printed)
    page = PATH_RESULTS.read_text()
    target = next(ln for ln in lines if ln.startswith("∞ | AIM non-private (ε = 1e5) | – | mean"))
    cells = target.split(" | ")
    hmm = cells[6].split(" ± ")
    edited_cell = f"{float(hmm[0]) + 0.01:.2f} ± {hmm[1]}"
    edited = page.replace(target, " | ".join([*cells[:6], edited_cell, *cells[7:]]))
    assert edited != page
    assert _not_on_page(lines, edited) == [target]


SIDE_BY_SIDE_TITLE = "## Paper, ours and without privacy, side by side"
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


def _section_table(page: str, title: str) -> list[str]:
    """The table lines (header and rows) of the page's section ``title``."""
    section = page[page.index(title) :]
    return _table_lines(section[: section.index("\n## ", 1)])


def _side_by_side_printed(page: str) -> list[str]:
    printed = _run(*_side_by_side_command(page), timeout=120)
    return [f"| {ln} |" for ln in printed.splitlines() if ln.strip()]


@pytest.mark.experiments
def test_path_side_by_side_page_equals_command() -> None:
    """The side-by-side table is exactly what the page's ``table2 --side-by-side`` command
    prints (header and every row, in order): for each epsilon, private method and metric, the
    paper's number, ours and the method's non-private baseline, each over seeds 0, 1 and 2."""
    page = PATH_RESULTS.read_text()
    printed = _side_by_side_printed(page)
    assert _section_table(page, SIDE_BY_SIDE_TITLE) == printed
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
        for ln in _section_table(page, SIDE_BY_SIDE_TITLE)[1:]
    ]
    means = {}
    for ln in _table_lines(page):
        c = [x.strip() for x in ln.strip("|").split("|")]
        if len(c) == 11 and c[3] == "mean ± sd (0, 1, 2)":
            means[(c[0], c[1], c[2])] = dict(
                zip((*COLUMN_KEYS, "classifier_auc"), c[5:], strict=True)
            )
    paper = {}
    for ln in _table_lines(page):
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
    assert _section_table(page, SIDE_BY_SIDE_TITLE) == printed
    assert _section_table(edited, SIDE_BY_SIDE_TITLE) != printed


@pytest.mark.experiments
def test_path_regenerate_lists_every_stored_cell() -> None:
    """``regenerate --list`` names every stored row of the page's runs once: each table2 file's
    rows (not the methods its command listed but never finished), each sweep (method, cell,
    seed) once, and not the repeat of the public-only control."""
    listed = _run("-m", "experiments.path.regenerate", "--list", timeout=120).splitlines()
    cells = [tuple(ln.split(" ")) for ln in listed]
    folder = ROOT / "experiments" / "path"
    expected = set()
    for f in folder.glob("table2_*.json"):
        if f.name == "table2_path_public_check.json":
            continue
        stored = json.loads(f.read_text())
        for r in stored["rows"]:
            eps = "inf" if math.isinf(r["epsilon"]) else f"{r['epsilon']:g}"
            expected.add((f.name, r["method"], eps, str(stored["args"]["seed"])))
    sweep_rows = {
        (r["method"], r["cell"], str(r["seed"]))
        for f in folder.glob("sweep_*.json")
        for r in json.loads(f.read_text())["rows"]
    }
    table2_cells = {c for c in cells if c[0].startswith("table2_")}
    sweep_cells = [c[1:] for c in cells if c[0].startswith("sweep_")]
    assert table2_cells == expected
    assert len(table2_cells) + len(sweep_cells) == len(cells)
    assert sorted(sweep_cells) == sorted(sweep_rows)
    assert ("table2_baselines.json", "direct_markov", "2", "0") in table2_cells
    assert not any(c[:2] == ("table2_baselines.json", "direct_across") for c in cells)


@pytest.mark.experiments
@pytest.mark.parametrize(
    "argv",
    [
        ["--cell", "table2_nothing.json"],
        ["--cell", "table2_baselines.json:aim"],
        ["--cell", "table2_baselines.json:direct_markov:3"],
        ["--cell", "table2_baselines.json:direct_markov:2"],  # no --out
        ["--out", "x", "--threads", "0", "--cell", "table2_aim.json"],
    ],
)
def test_path_regenerate_refuses_bad_input_in_one_line(argv: list[str]) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "experiments.path.regenerate", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "error:" in out.stderr, out.stderr


def _regenerated_tables(out: Path, cell: str) -> str:
    """What the page's regeneration command prints for one stored ``cell``, re-run from scratch
    into ``out``, from its tables on."""
    printed = _run(
        "-m", "experiments.path.regenerate", "--out", str(out), "--cell", cell, timeout=3000
    )
    return printed[printed.index("# regenerated tables") :]


def _regenerated_side_by_side(printed: str) -> list[str]:
    """The side-by-side section of the regeneration command's tables, as page rows."""
    section = printed[printed.index(SIDE_BY_SIDE_TITLE) :].split("\n## ")[0]
    return [f"| {ln} |" for ln in section.splitlines()[1:] if ln.strip()]


@pytest.mark.experiments
def test_path_regenerate_prints_the_page_side_by_side_table() -> None:
    """The regeneration command's tables end with the side-by-side table of the files it
    regenerated; for the stored files it is exactly the page's table."""
    code = (
        "from experiments.path import regenerate as r; r.print_tables("
        "[f for f in sorted(r.FOLDER.glob('table2_*.json')) if f.name not in r.REPEATS])"
    )
    printed = _run("-c", code, timeout=300)
    page = PATH_RESULTS.read_text()
    assert _regenerated_side_by_side(printed) == _section_table(page, SIDE_BY_SIDE_TITLE)


@pytest.mark.experiments
@pytest.mark.slow
def test_path_regenerate_reproduces_a_stored_cell(tmp_path: Path) -> None:
    """The page's regeneration command, restricted to one full-size cell (Direct-Markov, seed 0,
    epsilon 2: 800 private users, L = 10, 16 bins, 1000 Private-PGM iterations), re-runs it from
    scratch and prints the row the page shows, at the page's digits; it equals the stored
    run's row."""
    tables = _regenerated_tables(tmp_path, "table2_baselines.json:direct_markov:2")
    assert "## AIM, Direct, their non-private versions and REAL per seed" in tables
    lines = _summary_lines(tables[: tables.index(SIDE_BY_SIDE_TITLE)])
    assert lines == [lines[0]] and lines[0].startswith("2 | DIRECT (Markov = Indep) | – | 0 | ")
    assert _not_on_page(lines, PATH_RESULTS.read_text()) == []
    stored = _run(
        "-m",
        "experiments.path.table2",
        "--summarize",
        str(ROOT / "experiments" / "path" / "table2_baselines.json"),
        "--only",
        "direct_markov",
        timeout=120,
    )
    assert lines[0] in _summary_lines(stored)
    # the side-by-side table of the one regenerated run: its six metrics, one seed, no baseline
    side = _regenerated_side_by_side(tables)
    assert len(side) == 1 + 6
    assert all(r.startswith("| 2 | DIRECT (Markov = Indep) | – | ") for r in side[1:])
    assert all("(n = 1)" in r for r in side[1:])
    fresh = json.loads((tmp_path / "table2_baselines.json").read_text())["rows"]
    assert [(r["method"], r["epsilon"]) for r in fresh] == [("direct_markov", 2.0)]


@pytest.mark.experiments
@pytest.mark.slow
def test_path_regenerate_reproduces_an_aim_cell(tmp_path: Path) -> None:
    """AIM at epsilon 2, seed 0, re-run from scratch by the page's regeneration command (its
    sigma_0 calibrated by today's accountant on the three-digit grid), prints the page's row,
    at the page's digits (about 5 CPU-minutes)."""
    tables = _regenerated_tables(tmp_path, "table2_aim.json:aim:2")
    lines = _summary_lines(tables[: tables.index(SIDE_BY_SIDE_TITLE)])
    assert len(lines) == 1 and lines[0].startswith("2 | AIM | – | 0 | ")
    assert _not_on_page(lines, PATH_RESULTS.read_text()) == []
    fresh = json.loads((tmp_path / "table2_aim.json").read_text())["rows"]
    assert [r["info"]["sigma0"] for r in fresh] == [20.2]


@pytest.mark.experiments
@pytest.mark.slow
def test_path_page_regenerates_from_one_command(tmp_path: Path) -> None:
    """Every stored cell of the page re-run from scratch by its regeneration command in one
    process (about 10 CPU-hours on one thread), then its tables: every per-seed row is on the
    page at the page's digits, and the side-by-side and sweep tables are the page's."""
    printed = _run("-m", "experiments.path.regenerate", "--out", str(tmp_path), timeout=24 * 3600)
    tables = printed[printed.index("# regenerated tables") :]
    page = PATH_RESULTS.read_text()
    lines = _summary_lines(tables[: tables.index(SIDE_BY_SIDE_TITLE)])
    assert len(lines) > 20 and _not_on_page(lines, page) == []
    assert _regenerated_side_by_side(tables) == _section_table(page, SIDE_BY_SIDE_TITLE)
    sweep_rows = [
        ln
        for ln in tables[tables.index("## sweep") :].splitlines()
        if ln.count("|") > 3 and "±" in ln
    ]
    assert len(sweep_rows) >= 6
    assert [ln for ln in sweep_rows if f"| {ln} |" not in page] == []


@pytest.mark.experiments
def test_path_rebuilt_pretraining_reproduces_the_stored_runs() -> None:
    """The pre-trained model made anew by the regeneration command gives exactly the stored
    public-only control and the metrics of the stored PATH run at epsilon 2, seed 1. That run
    was made again since with the noise on the three-digit grid (1.73 and 7.87 for 1.7343 and
    7.8663), which left every metric and the counts of candidates unchanged; its certified
    epsilon and noise are the new ones."""
    folder = ROOT / "experiments" / "path"
    metrics = [*COLUMN_KEYS, "classifier_auc", "n_synthetic"]
    for name in ("table2_path_public.json", "table2_path_eps2_s1.json"):
        (stored,) = json.loads((folder / name).read_text())["rows"]
        rebuilt = json.loads((folder / "rebuild_check" / name).read_text())
        assert rebuilt["args"]["model_dir"] == "DIR/PRE"
        (row,) = rebuilt["rows"]
        assert row["method"] == stored["method"] and row["epsilon"] == stored["epsilon"]
        for k in metrics:
            assert row[k] == stored[k], (name, k)
        if name == "table2_path_public.json":
            assert row["epsilon_certified"] == stored["epsilon_certified"]
            assert row["info"] == stored["info"], name
        else:
            before = (row["info"]["noise_multiplier"], row["info"]["selection_noise_multiplier"])
            after = (
                stored["info"]["noise_multiplier"],
                stored["info"]["selection_noise_multiplier"],
            )
            assert [round(x, 4) for x in before] == [1.7343, 7.8663] and after == (1.73, 7.87)
            for k in ("n_candidates", "n_valid_candidates", "n_selected"):
                assert row["info"][k] == stored["info"][k]


def _sweep_files() -> list[str]:
    return sorted(str(p) for p in (ROOT / "experiments" / "path").glob("sweep_*.json"))


@pytest.mark.experiments
def test_path_sweep_page_equals_summary() -> None:
    """The sweep's table on the page is what ``sweep --summarize`` prints for the stored runs."""
    files = _sweep_files()
    assert files
    printed = _run("-m", "experiments.path.sweep", "--summarize", *files, timeout=120)
    page = PATH_RESULTS.read_text()
    lines = [ln for ln in printed.splitlines() if ln.count("|") > 3 and "±" in ln]
    assert len(lines) >= 6
    for ln in lines:
        assert f"| {ln} |" in page, ln


# -- trajectories (paper A) -------------------------------------------------------------------
TRAJ = ROOT / "docs" / "methods" / "trajectories.md"


@pytest.mark.experiments
def test_trajectories_fig3_page_equals_summary() -> None:
    """The page's Fig. 3 table is what ``fig3.py --summarize`` prints for the stored runs."""
    import importlib.util

    script = ROOT / "experiments" / "trajectories" / "fig3.py"
    spec = importlib.util.spec_from_file_location("trajectories_fig3", script)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    folder = ROOT / "experiments" / "trajectories"
    reduced = sorted(folder.glob("fig3_seed*.json"))
    full = sorted(folder.glob("fig3_full_seed*.json"))
    assert len(reduced) == len(full) == 3
    rows = [r for f in [*reduced, *full] for r in json.loads(f.read_text())["rows"]]
    # the full runs: the annealed run at the paper's 1000 / 500 / 500 iterations, both privacy
    # settings, seeds 0, 1, 2 (the warm-started run is the reduced runs', it is not scaled)
    runs = {(r["kind"], r["private"], r["iterations"], r["seed"]) for r in rows}
    iterations = sum(k for k, _, _ in mod.ANNEAL)
    for private in (True, False):
        assert {("annealed", private, iterations, s) for s in (0, 1, 2)} <= runs
    printed = mod.summarize(rows)
    page = TRAJ.read_text()
    lines = _table_lines(printed)
    assert len(lines) == 7  # header, 4 reduced rows, 2 full rows
    for ln in lines:
        assert ln in page, ln


TRAJ_FOLDER = ROOT / "experiments" / "trajectories"
MNIST_STROKES = ROOT.parent / "shared" / "data" / "mnist_strokes" / "mnist_strokes_subset.npz"


def _body_rows(text: str) -> list[str]:
    """Table rows without headers and rules, each without its wall-time column (headed "s"),
    the one cell that differs between runs."""
    lines = [ln.strip() for ln in text.splitlines()]
    rows = []
    timed: set[int] = set()
    for i, ln in enumerate(lines):
        if not ln.startswith("| "):
            continue
        cells = ln.split("|")
        if i + 1 < len(lines) and lines[i + 1].startswith("|---"):
            timed = {k for k, c in enumerate(cells) if c.strip() == "s"}
            continue
        rows.append("|".join(c for k, c in enumerate(cells) if k not in timed))
    return rows


def _regenerate_trajectories(out: Path, *sections: str) -> str:
    if not MNIST_STROKES.is_file():
        pytest.skip("MNIST-stroke subset not present beside the repository")
    only = ["--only", *sections] if sections else []
    return _run(
        "experiments/trajectories/regenerate.py",
        "--out",
        str(out),
        "--data",
        str(MNIST_STROKES),
        *only,
        timeout=6 * 3600,
    )


@pytest.mark.experiments
@pytest.mark.slow
def test_trajectories_regenerate_privacy_sections_equal_the_page(tmp_path: Path) -> None:
    """The page's regeneration command, restricted to its two accounting sections (no flow is
    run), prints exactly the replace-one table and Table 2 of the page."""
    printed = _regenerate_trajectories(tmp_path / "run", "replace_one", "table2")
    page = set(_body_rows(TRAJ.read_text()))
    rows = _body_rows(printed)
    assert len(rows) == 6 + 48  # six digits; Table 2 and Fig. 1's rows at each assumed K
    assert [r for r in rows if r not in page] == []


@pytest.mark.experiments
@pytest.mark.slow
def test_trajectories_page_regenerates_from_one_command(tmp_path: Path) -> None:
    """Every section of the page's regeneration command (10 to 20 minutes on one core): each
    table row it prints is on the page or in the result file the page cites, but the wall
    times."""
    printed = {}
    out = tmp_path / "run"
    _regenerate_trajectories(out)
    for section in ("table1", "seeds", "replace_one", "table2", "w2_floor", "resolution", "fig3"):
        printed[section] = (out / f"{section}.txt").read_text()
    # Fig. 3: each run prints its own seed's table; the page holds the summary of all six
    printed["fig3"] = printed["fig3"][printed["fig3"].rindex("| run | privacy |") :]
    page = set(_body_rows(TRAJ.read_text()))
    files = {
        "w2_floor": set(_body_rows((TRAJ_FOLDER / "W2_FLOOR.md").read_text())),
        "resolution": set(_body_rows((TRAJ_FOLDER / "RESOLUTION_CONTROL.md").read_text())),
    }
    for section, text in printed.items():
        expected = files.get(section, page)
        missing = [r for r in _body_rows(text) if r not in expected]
        assert missing == [], (section, missing[:3])


@pytest.mark.experiments
@pytest.mark.parametrize(
    "script", ["experiments/trajectories/regenerate.py", "experiments/swflow/regenerate.py"]
)
@pytest.mark.parametrize(
    "argv", [[], ["--out", "x", "--only", "nope"], ["--out", "experiments"], ["--bogus"]]
)
def test_regenerate_commands_refuse_bad_input_in_one_line(script: str, argv: list[str]) -> None:
    """No --out, an unknown section, a directory that is not empty, an unknown option: one line
    on stderr naming the field, exit code 2, nothing written."""
    out = subprocess.run(
        [sys.executable, script, *argv], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "error:" in out.stderr, out.stderr
    assert not (ROOT / "x").exists()


@pytest.mark.parametrize(
    ("script", "count"),
    [
        ("experiments/trajectories/regenerate.py", 1 + 6 + 1 + 1 + 1 + 4 + 7),
        ("experiments/swflow/regenerate.py", 4),
    ],
)
def test_regenerate_commands_list_their_commands(script: str, count: int) -> None:
    listed = _run(script, "--list", timeout=120).splitlines()
    assert len(listed) == count and all(" python experiments/" in ln for ln in listed)


# -- swflow (paper B) -------------------------------------------------------------------------
SWFLOW = ROOT / "docs" / "methods" / "swflow.md"


@pytest.mark.experiments
def test_swflow_digits_page_equals_stored_output() -> None:
    """The page's Fréchet-distance table is ``results/digits.md`` (what ``digits.py`` wrote),
    rounded."""
    exact: dict[tuple[str, str], str] = {}
    for ln in _table_lines((ROOT / "experiments" / "swflow" / "results" / "digits.md").read_text()):
        c = [x.strip() for x in ln.strip("|").split("|")]
        if c[0].startswith("DPSW"):  # the main table, not the one against the reference
            exact.setdefault((c[0], c[1]), c[5])
    eps = ["inf", "10", "5", "2", "1"]
    checked = 0
    for ln in _table_lines(SWFLOW.read_text()):
        c = [x.strip() for x in ln.strip().strip("|").split("|")]
        if len(c) == 6 and c[0] in ("DPSWflow-r", "DPSWflow", "DPSWgen"):
            for e, cell in zip(eps, c[1:], strict=True):
                assert _same_at_page_precision(cell, exact[(c[0], e)]), (c[0], e, cell)
                checked += 1
    assert checked == 15


#: the paper's Table 1, MNIST column, FID at epsilon = inf / 10 / 5
SWFLOW_PAPER_MNIST = {
    "DPSWflow-r": (21.0, 70.0, 114.0),
    "DPSWflow": (73.0, 118.0, 171.0),
    "DPSWgen": (114.0, 124.0, 198.0),
}


@pytest.mark.experiments
def test_swflow_side_by_side_table_holds_the_paper_and_our_cells() -> None:
    """The side-by-side table: the paper's MNIST FIDs, ours as in the page's digits table (the
    same cells, epsilon = inf / 10 / 5) and each one's ratios to its own non-private run."""
    digits: dict[str, list[str]] = {}
    side: dict[str, list[str]] = {}
    for ln in _table_lines(SWFLOW.read_text()):
        c = [x.strip() for x in ln.strip().strip("|").split("|")]
        if len(c) == 6 and c[0] in SWFLOW_PAPER_MNIST:
            digits[c[0]] = [cell.split(" (")[0] for cell in c[1:4]]  # without (min–max)
        elif len(c) == 5 and c[0] in SWFLOW_PAPER_MNIST:
            side[c[0]] = c[1:]
    assert sorted(side) == sorted(SWFLOW_PAPER_MNIST)
    for method, (paper, paper_ratio, ours, ours_ratio) in side.items():
        fid = tuple(float(x) for x in paper.split(" / "))
        assert fid == SWFLOW_PAPER_MNIST[method]
        assert paper_ratio == f"{fid[1] / fid[0]:.1f}× / {fid[2] / fid[0]:.1f}×"
        assert ours.split(" / ") == digits[method]
        means = [float(cell.split(" ± ")[0]) for cell in digits[method]]
        assert ours_ratio == f"{means[1] / means[0]:.1f}× / {means[2] / means[0]:.1f}×"


@pytest.mark.experiments
def test_swflow_toy_table_equals_stored_output() -> None:
    """The page's toy table is ``results/toy.md`` (what ``toy.py`` wrote) after 200 steps: each
    reading's SW2 (and SW2^2) at sigma = 0, 0.5, 1 with its spread, and the ratio."""
    stored: dict[tuple[str, str], list[str]] = {}
    for ln in _table_lines((ROOT / "experiments" / "swflow" / "results" / "toy.md").read_text()):
        c = [x.strip() for x in ln.strip("|").split("|")]
        if c[0] in ("absolute", "sensitivity", "fixed-release"):
            stored[(c[0], c[1])] = c
    assert (
        "mean ± sample sd (ddof = 1) over 3 seeds"
        in (ROOT / "experiments/swflow/results/toy.md").read_text()
    )
    rows: dict[str, list[list[str]]] = {}
    reading = ""
    for ln in _table_lines(SWFLOW.read_text()):
        c = [x.strip() for x in ln.strip().strip("|").split("|")]
        if len(c) == 5 and c[0].startswith("`"):
            reading = c[0].split("`")[1]
            rows[reading] = [c]
        elif len(c) == 5 and c[0] == "same runs, SW₂²":
            rows[reading].append(c)
    assert sorted(rows) == ["absolute", "fixed-release", "sensitivity"]
    checked = 0
    for reading, lines in rows.items():
        for row in lines:
            squared = row[0] == "same runs, SW₂²"
            for sigma, cell in zip(("0", "0.5", "1"), row[1:4], strict=True):
                # sigma = 0 is the same run for the absolute and sensitivity readings
                key = ("absolute" if reading == "sensitivity" and sigma == "0" else reading, sigma)
                if cell == "–":
                    assert key not in stored
                    continue
                assert cell == stored[key][5 if squared else 4], (reading, sigma, squared)
                checked += 1
            ratio = stored[(reading, "0.5")][6].split(" / ")[1 if squared else 0]
            assert row[4] == ratio
    assert checked == 13


SWFLOW_RESULTS = ROOT / "experiments" / "swflow" / "results"


@pytest.mark.experiments
def test_swflow_generator_table_equals_stored_output() -> None:
    """The page's table of the samples' measures is ``results/generator.md`` (what
    ``generator.py`` wrote): each row's noise ratio, precision, recall, coverage, digits present
    and largest share, every digit; and the page's argument holds in the stored numbers (the
    private generator ends with less recall than its untrained start and loses digits,
    DPSWflow-r keeps both)."""
    columns = ("precision", "recall", "coverage", "classes >= 2 %", "largest class share")
    stored: dict[tuple[str, str], dict[str, str]] = {}
    header: list[str] = []
    for ln in _table_lines((SWFLOW_RESULTS / "generator.md").read_text()):
        c = [x.strip() for x in ln.strip("|").split("|")]
        if c[0] == "samples":
            header = c
            continue
        stored[(c[0], c[1])] = dict(zip(header, c, strict=True))
    page = [
        [x.strip() for x in ln.strip("|").split("|")]
        for ln in _table_lines(SWFLOW.read_text().split("| samples | ε |", 1)[1])
        if ln.startswith(("| DPSW", "| uniform on the latent sphere", "| held-out data"))
        and ln.count("|") == 9
    ]
    assert len(page) == 14
    references = {
        "uniform": "reference: uniform on the latent sphere",
        "held-out": "reference: test split's latents",
    }
    for c in page:
        name = references.get(c[0].split()[0], c[0])
        cells = stored[(name, "inf" if c[1] == "∞" else c[1])]
        assert c[2] == cells["noise std / projection spread"], c[:2]
        assert c[3:] == [cells[k] for k in columns], c[:2]

    def mean(method: str, eps: str, column: str) -> float:
        return float(stored[(method, eps)][column].split()[0])

    private = ("1000", "100", "30", "10", "5", "2", "1")
    assert all(
        mean("DPSWgen", e, "recall") < 0.2 < 0.9 < mean("DPSWgen", "inf", "recall") for e in private
    )
    start = mean("DPSWgen, untrained (initialisation)", "-", "recall")
    assert all(mean("DPSWgen", e, "recall") < start for e in private)
    assert all(mean("DPSWflow-r", e, "recall") > 0.99 for e in ("inf", *private))
    assert mean("DPSWgen", "1", "classes >= 2 %") == 1.0
    assert all(mean("DPSWflow-r", e, "classes >= 2 %") == 10.0 for e in private)


@pytest.mark.experiments
@pytest.mark.slow
def test_swflow_regenerate_paper_claims_equals_stored(tmp_path: Path) -> None:
    """The page's regeneration command, its accounting section (seconds): ``paper_claims.md``
    comes out as stored, every character."""
    _run(
        "experiments/swflow/regenerate.py", "--out", str(tmp_path / "run"), "--only", "paper_claims"
    )
    fresh = (tmp_path / "run" / "paper_claims.md").read_text()
    assert fresh == (SWFLOW_RESULTS / "paper_claims.md").read_text()


@pytest.mark.experiments
@pytest.mark.slow
def test_swflow_results_regenerate_from_one_command(tmp_path: Path) -> None:
    """Every section of the page's regeneration command (about 25 CPU-minutes): the toy,
    digits, generator and paper-claims tables come out as stored (but the wall times), and the
    page's tables are checked against the stored files by the default-tier tests above."""
    out = tmp_path / "run"
    _run("experiments/swflow/regenerate.py", "--out", str(out), timeout=4 * 3600)
    for name in ("toy.md", "generator.md", "paper_claims.md"):
        assert _table_lines((out / name).read_text()) == _table_lines(
            (SWFLOW_RESULTS / name).read_text()
        ), name
    fresh = _digits_rows((out / "digits.md").read_text())
    assert fresh == _digits_rows((SWFLOW_RESULTS / "digits.md").read_text())


def _digits_rows(text: str) -> dict[tuple[str, str], list[str]]:
    """(method, epsilon) -> the cells of a ``digits.md`` row without its time column."""
    rows = {}
    for ln in _table_lines(text):
        c = [x.strip() for x in ln.strip("|").split("|")]
        if len(c) == 8 and c[0] != "method":  # the main table (the first of its size)
            rows.setdefault((c[0], c[1]), c[:7])
    return rows


@pytest.mark.experiments
@pytest.mark.slow
def test_swflow_digits_regenerates_a_stored_cell(tmp_path: Path) -> None:
    """The page's regeneration command (``digits.py``), restricted to one cell (DPSWflow-r at
    epsilon 10, its three run seeds, the public models and the reference rows made anew),
    prints the stored ``digits.md`` numbers of those rows, every digit, and writes the same."""
    printed = _run(
        "experiments/swflow/digits.py",
        "--out",
        str(tmp_path),
        "--methods",
        "DPSWflow-r",
        "--epsilons",
        "10",
        timeout=1800,
    )
    fresh = _digits_rows(printed)
    stored = _digits_rows((ROOT / "experiments" / "swflow" / "results" / "digits.md").read_text())
    assert fresh == _digits_rows((tmp_path / "digits.md").read_text())
    assert sorted(fresh) == sorted(
        [(k, "-") for k, _ in stored if k.startswith("reference")] + [("DPSWflow-r", "10")]
    )
    for key, cells in fresh.items():
        assert cells == stored[key], key


# -- SHK (paper D) ----------------------------------------------------------------------------
SHK = ROOT / "docs" / "methods" / "shk.md"


@pytest.mark.experiments
@pytest.mark.slow
def test_shk_page_equals_reproduce_output() -> None:
    """``reproduce.py --markdown`` (N = 192) prints exactly its stored output and the tables on
    the page."""
    printed = _run("experiments/shk/reproduce.py", "--markdown")
    assert printed == (ROOT / "experiments" / "shk" / "reproduce_output.md").read_text()
    page = SHK.read_text()
    lines = _table_lines(printed)
    # header and 35 cells; header and 3 releases of Experiment 3; header and 2 readings of 0.2201
    assert len(lines) == 43
    for ln in lines:
        assert ln in page, ln


@pytest.mark.experiments
def test_shk_page_cells_match_its_command_table() -> None:
    """The page's explained table agrees with the command's table on the page, cell by cell
    (relative differences within the rounding of the explained table)."""
    page = SHK.read_text()
    printed = {}
    for ln in _table_lines(page):
        c = [x.strip() for x in ln.strip("|").split("|")]
        if len(c) == 5 and c[0] in ("table1", "table2", "table3", "table4", "exp3", "exp4"):
            printed[(c[0], c[1])] = (float(c[2]), float(c[3]))
    assert len(printed) == 35
    for (_, _), (paper, ours) in printed.items():
        assert math.isfinite(paper) and math.isfinite(ours)
    # cells off by more than 1 % are exactly the ones the page explains (a)-(d)
    off = sorted(k for k, (p, o) in printed.items() if abs(o - p) / abs(p) > 0.01)
    assert off == sorted(
        [
            ("exp3", "target_bound"),
            ("exp3", "hockey_stick"),
            ("exp4", "shk_log_ratio"),
            ("exp4", "kl_shk"),
        ]
    )


def _half_unit(printed: str) -> float:
    """Half a unit in the last printed digit of a number such as 0.644015, 2.13e-5 or 110722."""
    mantissa, _, exponent = printed.lower().partition("e")
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    return 0.5 * 10.0 ** (-decimals + (int(exponent) if exponent else 0))


@pytest.mark.experiments
def test_shk_explained_table_agrees_with_its_command_table() -> None:
    """Every number in the reproduced column of the page's explained table (rows named Table 1,
    Exp. 3, ...) is a cell of the command's table on the page for the same experiment, both
    being roundings of one value."""
    page = SHK.read_text()
    cells: dict[str, list[str]] = {}
    explained: list[tuple[str, str]] = []
    for ln in _table_lines(page):
        c = [x.strip() for x in ln.strip("|").split("|")]
        if len(c) == 5 and c[0] in ("table1", "table2", "table3", "table4", "exp3", "exp4"):
            cells.setdefault(c[0], []).append(c[3])
        elif len(c) == 5 and re.fullmatch(r"(Table|Exp\.) \d", c[0]):
            name = c[0].replace("Table ", "table").replace("Exp. ", "exp")
            explained.append((name, c[3]))
    assert len(explained) == 17
    number = re.compile(r"\d+(?:\.\d+)?(?:e-?\d+)?")
    for name, reproduced in explained:
        for x in number.findall(reproduced):
            assert any(
                abs(float(x) - float(v)) <= _half_unit(x) + _half_unit(v) for v in cells[name]
            ), (name, x)


def test_shk_page_non_private_baseline_agrees_with_reproduced_cells() -> None:
    """The Experiment 3 table of releases (the SHK flow, pi_D, the non-private ERM) on the page
    agrees with the page's reproduced cells: the flow's row is the reproduced release, pi_D's
    excess is the utility floor, both measured from one minimum, and the ERM has no privacy."""
    from dpledger.plugins.shk import paper

    page = SHK.read_text()
    cells = {}
    releases = {}
    for ln in _table_lines(page):
        c = [x.strip() for x in ln.strip("|").split("|")]
        if len(c) == 5 and c[0] == "exp3":
            cells[c[1]] = float(c[3])
        elif len(c) == 7 and c[0] in paper.EXP3_RELEASES:
            releases[c[0]] = [float(x) for x in c[1:]]
    shk, em, erm = (releases[name] for name in paper.EXP3_RELEASES)
    assert shk[1:3] == [cells["loss"], cells["hockey_stick"]]
    # the flow's certified epsilon is Theorem 3's for the rho_0 it starts from (B = 2 kappa +
    # beta range L = 21), above the bound cell (the paper's 0.2201, a data-dependent envelope)
    from dpledger.plugins.shk import bounds

    b_run = 2 * paper.RHO0_KAPPA + paper.EXP3_BETA * 2.0
    assert shk[0] == float(f"{bounds.epsilon_a1_prime(paper.EXP3_T, 0.2, b_run):.6g}")
    assert shk[0] > cells["bound"]
    # excess over the exact minimum = the cells' utility (grid minimum) + one common offset
    offset = shk[4] - cells["utility"]
    assert 0.0 <= offset <= 1.0 - math.cos(math.pi / paper.N_CELLS)
    assert em[4] - cells["utility_floor"] == pytest.approx(offset, abs=2e-6)
    # the ERM: no privacy, zero excess and distance, and its risk is the minimum both use
    assert erm[:3] == [math.inf, math.inf, 1.0] and erm[4:] == [0.0, 0.0]
    assert erm[3] == pytest.approx(shk[3] - shk[4], abs=1e-6)
    assert erm[3] == pytest.approx(em[3] - em[4], abs=1e-6)
    assert em[1] <= em[0] < shk[0] and shk[1] <= shk[0]
