"""``dpledger.cleanroom.certify_pipeline``: the Python API's call through the clean room."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpledger.cleanroom import certify_pipeline
from dpledger.core.errors import DPLedgerError

ROOT = Path(__file__).resolve().parents[2]
#: dp-accounting 0.6's PLD epsilon of the DP-SGD example (sigma 1.1, q 256/60000, 14040 steps,
#: delta 1e-5), computed independently; the certified bracket must hold it
DP_ACCOUNTING_EPSILON = 2.379555


def test_the_example_dpsgd_bracket_holds_an_independent_value() -> None:
    result = certify_pipeline(ROOT / "examples" / "pipelines" / "dpsgd.toml")
    assert result["delta"] == 1e-5 and result["method"] == "pld"
    assert result["epsilon_lower"] <= DP_ACCOUNTING_EPSILON <= result["epsilon"]
    assert result["epsilon"] - result["epsilon_lower"] < 0.01
    assert "rests_on" not in result  # builtin only


def test_a_refused_file_raises(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("delta = 2\n")
    with pytest.raises(DPLedgerError, match="refused to certify"):
        certify_pipeline(bad)
    assert "delta" in capfd.readouterr().err
