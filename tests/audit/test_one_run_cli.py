"""``dpledger audit METHOD --config FILE --one-run``: the table, the JSON, the clean room's
confirmation of the certified bounds it prints, and bad input in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dpledger.accountant import select
from dpledger.cli import main
from dpledger.core.events import GaussianEvent

CONFIG = 'data = "values.npy"\n[params]\nsensitivity = 1.0\nnoise_multiplier = 2.0\n'


@pytest.fixture
def config(tmp_path: Path) -> Path:
    np.save(tmp_path / "values.npy", np.zeros(300))
    path = tmp_path / "run.toml"
    path.write_text(CONFIG)
    return path


def _audit(config: Path, *extra: str) -> list[str]:
    return ["audit", "gaussian_mechanism", "--config", str(config), *extra]


def test_one_run_json_holds_each_estimator_beside_the_certified_bound(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = _audit(config, "--one-run", "--canaries", "300", "--seed", "1", "--json")
    assert main([*argv, "--delta", "1e-5"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["certified"] is False and out["verdict"] == "no violation found"
    assert out["canaries"] == 300 and out["confidence"] == pytest.approx(0.95)
    for row in out["deltas"]:
        upper = select.account(GaussianEvent(2.0), delta=row["delta"]).bound.epsilon
        assert row["certified_upper"] == pytest.approx(upper, rel=1e-9)
        names = [e["estimator"] for e in row["estimates"]]
        assert "assumes a Gaussian trade-off" in names[2]
        assert all(0 <= e["epsilon_lower"] <= upper for e in row["estimates"][:2])


@pytest.mark.slow
def test_one_run_table(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = _audit(config, "--one-run", "--canaries", "100", "--seed", "2")
    assert main([*argv, "--delta", "1e-5", "1e-3"]) == 0
    out = capsys.readouterr().out
    assert "certified bracket" in out and "not certified" in out and "confidence 95%" in out


@pytest.mark.parametrize(
    ("extra", "line"),
    [
        (["--one-run", "--canaries", "301"], "--canaries 300 or fewer"),
        (["--one-run", "--canaries", "ten"], "--canaries: must be an integer"),
        (["--canaries", "100"], "--canaries: applies to a one-run audit. Fix: add --one-run"),
        (["--one-run", "--runs", "100"], "--runs: does not apply to a one-run audit"),
        (["--one-run", "--relation", "replace_one"], "add/remove only"),
        (["--one-run", "--canaries", "100", "--mode", "black-box"], "use --mode white-box"),
        (["--one-run", "--claimed-epsilon", "1.0"], "--claimed-epsilon: does not apply"),
        (["--one-run", "--canaries", "100", "--alpha", "1.5"], "alpha: must lie in (0, 1)"),
        (["--one-run", "--canaries", "100", "--seed", "-1"], "seed: must be an integer >= 0"),
    ],
)
def test_bad_input_is_one_line(
    config: Path, capsys: pytest.CaptureFixture[str], extra: list[str], line: str
) -> None:
    assert main(_audit(config, *extra)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and line in err[0]
