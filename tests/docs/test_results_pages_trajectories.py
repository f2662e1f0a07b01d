"""The trajectories results page (paper A, ``docs/methods/trajectories.md``) shows what its
commands print: the Fig. 3 table is ``fig3.py --summarize``'s, and (slow tier) the regeneration
command's sections print the page's rows.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .results_pages import (
    ROOT,
    run_command,
    table_lines,
)

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
    lines = table_lines(printed)
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
    return run_command(
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
