"""The swflow results page (paper B, ``docs/methods/swflow.md``) shows what its commands wrote:
the digits, toy and generator tables are the stored results' and the side-by-side table holds the
paper's and our cells; (slow tier) the regeneration commands write the stored results again.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .results_pages import (
    ROOT,
    run_command,
    same_at_page_precision,
    table_lines,
)

SWFLOW = ROOT / "docs" / "methods" / "swflow.md"


@pytest.mark.experiments
def test_swflow_digits_page_equals_stored_output() -> None:
    """The page's Fréchet-distance table is ``results/digits.md`` (what ``digits.py`` wrote),
    rounded."""
    exact: dict[tuple[str, str], str] = {}
    for ln in table_lines((ROOT / "experiments" / "swflow" / "results" / "digits.md").read_text()):
        c = [x.strip() for x in ln.strip("|").split("|")]
        if c[0].startswith("DPSW"):  # the main table, not the one against the reference
            exact.setdefault((c[0], c[1]), c[5])
    eps = ["inf", "10", "5", "2", "1"]
    checked = 0
    for ln in table_lines(SWFLOW.read_text()):
        c = [x.strip() for x in ln.strip().strip("|").split("|")]
        if len(c) == 6 and c[0] in ("DPSWflow-r", "DPSWflow", "DPSWgen"):
            for e, cell in zip(eps, c[1:], strict=True):
                assert same_at_page_precision(cell, exact[(c[0], e)]), (c[0], e, cell)
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
    for ln in table_lines(SWFLOW.read_text()):
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
    for ln in table_lines((ROOT / "experiments" / "swflow" / "results" / "toy.md").read_text()):
        c = [x.strip() for x in ln.strip("|").split("|")]
        if c[0] in ("absolute", "sensitivity", "fixed-release"):
            stored[(c[0], c[1])] = c
    assert (
        "mean ± sample sd (ddof = 1) over 3 seeds"
        in (ROOT / "experiments/swflow/results/toy.md").read_text()
    )
    rows: dict[str, list[list[str]]] = {}
    reading = ""
    for ln in table_lines(SWFLOW.read_text()):
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
    for ln in table_lines((SWFLOW_RESULTS / "generator.md").read_text()):
        c = [x.strip() for x in ln.strip("|").split("|")]
        if c[0] == "samples":
            header = c
            continue
        stored[(c[0], c[1])] = dict(zip(header, c, strict=True))
    page = [
        [x.strip() for x in ln.strip("|").split("|")]
        for ln in table_lines(SWFLOW.read_text().split("| samples | ε |", 1)[1])
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
    run_command(
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
    run_command("experiments/swflow/regenerate.py", "--out", str(out), timeout=4 * 3600)
    for name in ("toy.md", "generator.md", "paper_claims.md"):
        assert table_lines((out / name).read_text()) == table_lines(
            (SWFLOW_RESULTS / name).read_text()
        ), name
    fresh = _digits_rows((out / "digits.md").read_text())
    assert fresh == _digits_rows((SWFLOW_RESULTS / "digits.md").read_text())


def _digits_rows(text: str) -> dict[tuple[str, str], list[str]]:
    """(method, epsilon) -> the cells of a ``digits.md`` row without its time column."""
    rows = {}
    for ln in table_lines(text):
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
    printed = run_command(
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
