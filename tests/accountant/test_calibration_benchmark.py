"""A small run of the calibration benchmark beside Opacus (timings are printed, not asserted)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _benchmark() -> ModuleType:
    spec = importlib.util.spec_from_file_location("calibration", ROOT / "benchmarks/calibration.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_calibration_benchmark_row_needs_the_least_noise() -> None:
    bench = _benchmark()
    name, q, steps, target, delta = bench.SETTINGS[1]
    line = bench.row(name, q, steps, target, delta, 1)
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[0] == "q 0.01, 1000 steps"
    ours = float(cells[1].split()[0])
    grid = float(cells[2].split()[0])
    opacus = [float(cells[i].split()[0]) for i in (3, 4)]
    # the least certified noise (to 1e-4), its three-digit ceiling, and Opacus's above both
    assert ours <= grid < ours * 1.01
    assert all(sigma > ours for sigma in opacus)
    assert cells[3].endswith("(meets)") and cells[4].endswith("(meets)")
    assert re.fullmatch(r"rdp [0-9.]+, prv [0-9.]+", cells[5])
