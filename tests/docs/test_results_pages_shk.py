"""The SHK results page (paper D, ``docs/methods/shk.md``) shows what ``reproduce.py`` prints,
its explained table agrees with the command's table, and its non-private baseline with the
reproduced cells.
"""

from __future__ import annotations

import math
import re

import pytest

from .results_pages import (
    ROOT,
    run_command,
    table_lines,
)

SHK = ROOT / "docs" / "methods" / "shk.md"


@pytest.mark.experiments
@pytest.mark.slow
def test_shk_page_equals_reproduce_output() -> None:
    """``reproduce.py --markdown`` (N = 192) prints exactly its stored output and the tables on
    the page."""
    printed = run_command("experiments/shk/reproduce.py", "--markdown")
    assert printed == (ROOT / "experiments" / "shk" / "reproduce_output.md").read_text()
    page = SHK.read_text()
    lines = table_lines(printed)
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
    for ln in table_lines(page):
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
    for ln in table_lines(page):
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
    for ln in table_lines(page):
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
