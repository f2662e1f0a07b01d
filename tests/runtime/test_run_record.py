"""The run record: one type written by ``run`` and ``demo`` and read by ``report``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dpledger.cli import main
from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import GaussianEvent
from dpledger.runtime.run_record import SCHEMA, RunRecord


def _record() -> RunRecord:
    return RunRecord(
        method="gaussian_mechanism",
        ledger={
            "declared": GaussianEvent(2.0).to_dict(),
            "declared_unit": "row",
            "adjacency": {"relation": "add_remove", "unit": "row"},
            "steps": [],
        },
        declared_core=GaussianEvent(2.0).to_dict(),
        privacy={"epsilon": 2.5, "delta": 1e-5, "method": "closed_form"},
        params={"sensitivity": 1.0, "noise_multiplier": 2.0},
    ).with_outputs({"values": "values.npy"}, {})


def test_json_round_trip() -> None:
    record = _record()
    data = json.loads(json.dumps(record.to_json()))
    assert data["schema"] == SCHEMA and data["declared_unit"] == "row"
    again = RunRecord.from_json(data)
    assert again == record
    assert again.core_event() == GaussianEvent(2.0)
    assert again.adjacency.relation == "add_remove"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"schema": "dpledger.run/99"}, "ledger.json: schema"),
        ({"method": None}, "ledger.json: method"),
        ({"declared_core": [1]}, "ledger.json: declared_core"),
    ],
)
def test_a_bad_record_names_the_field(change: dict[str, object], field: str) -> None:
    data = _record().to_json()
    for key, value in change.items():
        if value is None:
            del data[key]
        else:
            data[key] = value
    with pytest.raises(InvalidParameterError) as err:
        RunRecord.from_json(data)
    assert err.value.field == field


def test_run_writes_and_report_reads_the_same_record(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    import numpy as np

    np.save(tmp_path / "x.npy", np.array([0.5, 0.25]))
    config = tmp_path / "run.toml"
    config.write_text('data = "x.npy"\n[params]\nsensitivity = 1.0\nnoise_multiplier = 2.0\n')
    out = tmp_path / "out"
    assert (
        main(
            ["run", "gaussian_mechanism", "--config", str(config), "--out", str(out), "--seed", "3"]
        )
        == 0
    )
    record = RunRecord.from_json(json.loads((out / "ledger.json").read_text()))
    assert record.schema == SCHEMA and record.method == "gaussian_mechanism"
    assert record.accounted is not None and record.outputs["files"]
    capfd.readouterr()
    assert main(["report", str(out), "--format", "json"]) == 0
    report = json.loads(capfd.readouterr().out)
    assert report["bound"]["epsilon"] == record.privacy["epsilon"]
