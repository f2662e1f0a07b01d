"""The experiment scripts' options: seeds and epsilons of digits.py, readings of toy.py."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

EXPERIMENTS = Path(__file__).parents[3] / "experiments" / "swflow"


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"swflow_{name}", EXPERIMENTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_digits_summary_and_epsilon_parsing() -> None:
    mod = _script("digits")
    assert mod.summary([1.0, 3.0], 1) == "2.0 ± 1.4 (1.0–3.0)"  # sample sd (ddof 1): √2
    assert mod.summary([2.5], 2) == "2.50"
    assert mod.parse_epsilons("inf, 10,5") == [None, 10.0, 5.0]
    with pytest.raises(argparse.ArgumentTypeError):
        mod.parse_epsilons("0")
    args = mod.parser().parse_args([])
    assert args.seeds == 3 and args.epsilons[:3] == [None, 10.0, 5.0]


@pytest.mark.experiments
def test_digits_reports_mean_std_over_seeds(tmp_path: Path) -> None:
    """A quick two-seed run: one row per (method, epsilon) with mean ± std (min–max)."""
    mod = _script("digits")
    args = ["--quick", "--seeds", "2", "--epsilons", "inf,10", "--methods", "DPSWflow"]
    mod.main([*args, "--out", str(tmp_path)])
    text = (tmp_path / "digits.md").read_text()
    rows = [r for r in text.splitlines() if r.startswith("| DPSWflow |")]
    assert [r.split("|")[2].strip() for r in rows] == ["inf", "10"]
    for row in rows:
        fd = row.split("|")[6]
        assert "±" in fd and "–" in fd
    assert "over 2 run seeds (0, 1)" in text
    assert "uniform on the latent sphere" in text
    assert (tmp_path / "digits_DPSWflow_eps10.png").exists()
    with pytest.raises(SystemExit):
        mod.main(["--seeds", "0", "--out", str(tmp_path)])


@pytest.mark.experiments
def test_toy_runs_every_reading(tmp_path: Path) -> None:
    mod = _script("toy")
    mod.main(["--n", "40", "--seeds", "2", "--steps", "1,2", "--out", str(tmp_path)])
    text = (tmp_path / "toy.md").read_text()
    for reading in ("absolute", "sensitivity", "fixed-release"):
        assert f"| {reading} | 0.5 |" in text
    assert "SW2^2 after 2 steps" in text
    assert (tmp_path / "toy.png").exists()
    with pytest.raises(SystemExit):
        mod.main(["--readings", "squared", "--out", str(tmp_path)])


@pytest.mark.experiments
def test_generator_diagnosis_quick_run(tmp_path: Path) -> None:
    """A quick run: the held-out reference is closer to the private latents than uniform
    points on the sphere (precision, coverage) and covers the ten digits; the method rows have
    the seven measures; the untrained generator is measured, and early steps at or beyond the
    run's length are skipped (a quick run has 64 steps)."""
    mod = _script("generator")
    args = ["--quick", "--seeds", "2", "--epsilons", "inf", "--methods", "DPSWgen"]
    mod.main([*args, "--early-steps", "40,100", "--out", str(tmp_path)])
    rows = {
        c[0]: c[3:]
        for c in (
            [x.strip() for x in ln.strip().strip("|").split("|")]
            for ln in (tmp_path / "generator.md").read_text().splitlines()
            if ln.startswith("| ") and not ln.startswith("| samples")
        )
    }
    held_out = rows["reference: test split's latents"]
    uniform = rows["reference: uniform on the latent sphere"]
    for k in (0, 3):  # precision, coverage
        assert float(uniform[k].split()[0]) < float(held_out[k])
    assert held_out[4] == "10.0"
    for name in ("DPSWgen", "DPSWgen, untrained (initialisation)"):
        assert len(rows[name]) == len(mod.MEASURES) and all("±" in c for c in rows[name])
    assert "DPSWgen, non-private, after 40 of 64 steps" in rows
    assert not any("after 100" in name for name in rows)
    with pytest.raises(SystemExit):
        mod.main(["--methods", "DPSWflow", "--out", str(tmp_path)])
    with pytest.raises(SystemExit):
        mod.main(["--early-steps", "0", "--out", str(tmp_path)])
