"""``dpledger audit --opacus SCRIPT.py --one-run``: a training script's run audited in one run
from the command line (each estimator beside the certified bracket, the clean room's
confirmation of the bounds printed), and bad input in one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dpledger.accountant import select
from dpledger.cli import main
from dpledger.core.events import GaussianEvent, PoissonSampledEvent, SelfComposedEvent

pytest.importorskip("torch")
pytest.importorskip("opacus")

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

SCRIPTS = Path(__file__).parent / "opacus_scripts"
TINY = SCRIPTS / "tiny.py"


def _audit(script: str, *extra: str) -> list[str]:
    return ["audit", "--opacus", script, "--one-run", *extra]


def test_a_training_script_is_audited_in_one_run(capsys: pytest.CaptureFixture[str]) -> None:
    argv = _audit(str(TINY), "--canaries", "30", "--seed", "3", "--delta", "1e-5", "--json")
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["method"] == "opacus tiny.py" and out["mode"] == "white-box"
    assert out["canaries"] == 30 and out["confidence"] == pytest.approx(0.95)
    assert out["verdict"] == "no violation found"
    # three Poisson steps at rate 1/3 (60 records, batches of 20) at noise multiplier 1
    event = SelfComposedEvent(PoissonSampledEvent(1 / 3, GaussianEvent(1.0)), 3)
    (row,) = out["deltas"]
    upper = select.account(event, delta=1e-5).bound.epsilon
    assert row["certified_upper"] == pytest.approx(upper, rel=1e-9)
    assert all(0 <= e["epsilon_lower"] <= upper for e in row["estimates"][:2])
    assert "assumes a Gaussian trade-off" in row["estimates"][2]["estimator"]


@pytest.mark.parametrize(
    ("script", "extra", "line"),
    [
        (f"{TINY}:opacus_training", ["--canaries", "61"], "pass at most 60"),
        (f"{TINY}:plain_model", [], "computes no per-sample gradients"),
        (f"{TINY}:plain_optimizer", [], "pass the DPOptimizer that make_private returned"),
        (f"{TINY}:shuffled", [], "poisson_sampling=True"),
        (f"{TINY}:no_step", [], "took no optimizer step"),
        (f"{TINY}:three", [], "returning (model, optimizer, data_loader, train)"),
        (f"{TINY}:missing", [], "tiny.py has no function missing()"),
        (str(SCRIPTS / "absent.py"), [], "is not a Python file"),
        (str(TINY), ["--mode", "black-box"], "use --mode white-box"),
        (str(TINY), ["--runs", "10"], "--runs: does not apply"),
        (str(TINY), ["--samples", "10"], "--samples: does not apply"),
        (str(TINY), ["--delta", "0"], "--delta: must lie in (0, 1)"),
        (str(TINY), ["--alpha", "1.5"], "alpha: must lie in (0, 1)"),
        (str(TINY), ["--seed", "-1"], "seed: must be an integer >= 0"),
    ],
)
def test_bad_input_is_one_line(
    capsys: pytest.CaptureFixture[str], script: str, extra: list[str], line: str
) -> None:
    assert main(_audit(script, "--canaries", "20", *extra)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and line in err[0], err


def test_without_one_run_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--opacus", str(TINY)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "add --one-run" in err[0]


def test_a_script_without_the_function_names_the_form(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "train.py"
    script.write_text("def main():\n    pass\n")
    assert main(_audit(str(script))) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "has no function opacus_training()" in err[0]
    assert "define opacus_training() returning (model, optimizer, data_loader, train)" in err[0]


@pytest.mark.slow
def test_the_digits_example_from_the_command_line(
    capsys: pytest.CaptureFixture[str], record_property: Any
) -> None:
    pytest.importorskip("sklearn")
    script = Path(__file__).resolve().parents[2] / "examples" / "opacus_digits.py"
    argv = _audit(str(script), "--canaries", "1000", "--seed", "100", "--delta", "1e-5")
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (row,) = out["deltas"]
    # Opacus's Poisson loader: rate 1/29 (29 batches of 64 in 1797 records), 29 steps an
    # epoch, 3 epochs, noise multiplier 1 (the example's defaults)
    event = SelfComposedEvent(PoissonSampledEvent(1 / 29, GaussianEvent(1.0)), 87)
    assert row["certified_upper"] == pytest.approx(
        select.account(event, delta=1e-5).bound.epsilon, rel=1e-9
    )
    assert out["verdict"] == "no violation found" and not row["curve_rejected"]
    steinke = row["estimates"][0]["epsilon_lower"]
    assert 0 < steinke < row["certified_upper"]
    for e in row["estimates"]:
        record_property(
            e["estimator"], (e["epsilon_lower"], e["epsilon_lower"] / row["certified_upper"])
        )


def test_a_script_that_fails_to_import_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "broken.py"
    script.write_text("raise RuntimeError('no data here\\nsecond line')\n")
    assert main(_audit(f"{script}:train")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "importing broken.py raised RuntimeError: no data here" in err[0]
