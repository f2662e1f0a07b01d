"""``dpledger run`` on table data: PATH's baselines read the JSON form of the user tables."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dpledger.cli import main
from dpledger.plugins.path.data import hmm_dataset
from dpledger.plugins.path.ddp import tables_to_json

CONFIGS = {
    "direct": "epsilon = 2.0\ndelta = 1e-6\nlength = 3\niters = 50\n",
    "aim": "epsilon = 2.0\ndelta = 1e-6\nnoise_multiplier = 3.0\nrounds = 4\nlength = 3\n",
}


@pytest.mark.parametrize(
    "method",
    # AIM's run (several seconds) is in the slow tier; its declaration and coverage are tested
    # in the default tier (tests/plugins/path/test_aim.py)
    [pytest.param(m, marks=pytest.mark.slow) if m == "aim" else m for m in sorted(CONFIGS)],
)
def test_baseline_runs_on_table_data(
    method: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    tables, _ = hmm_dataset(20, seed=0)
    (tmp_path / "tables.json").write_text(json.dumps(tables_to_json(tables)))
    config = tmp_path / "run.toml"
    config.write_text(f'data = "tables.json"\n[params]\n{CONFIGS[method]}')
    out = tmp_path / "out"
    assert main(["run", method, "--config", str(config), "--out", str(out), "--seed", "1"]) == 0
    assert f"{method}: verified; epsilon <=" in capfd.readouterr().out
    record = json.loads((out / "ledger.json").read_text())
    assert record["verified"] is True
    outputs = json.loads((out / "outputs.json").read_text())
    assert outputs["tables"]["schema"] == tables_to_json(tables)["schema"]
    assert len(outputs["tables"]["users"]) > 0


def test_baseline_refuses_a_list_naming_the_data(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "rows.json").write_text("[[1.0, 2.0]]")
    config = tmp_path / "run.toml"
    config.write_text(f'data = "rows.json"\n[params]\n{CONFIGS["direct"]}')
    assert main(["run", "direct", "--config", str(config), "--out", str(tmp_path / "o")]) == 2
    err = capfd.readouterr().err
    assert "data" in err and "schema" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()
