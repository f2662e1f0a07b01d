"""An audit whose test event was hit on neither side says it had no power, and what would give
it some (text and JSON of ``dpledger audit``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dpledger.audit.auditor import AuditResult, DeltaAudit, Witness
from dpledger.cli import main
from dpledger.commands.audit import format_result, power_advice

ALLOW = ["--plugins-allow", "primitives.gaussian"]


def _config(tmp_path: Path, sigma: float) -> Path:
    (tmp_path / "answer.json").write_text("[0.0]")
    cfg = tmp_path / "run.toml"
    cfg.write_text(
        f'data = "answer.json"\n[params]\nsensitivity = 1.0\nnoise_multiplier = {sigma}\n'
    )
    return cfg


def _delta_audit(hits_first: int, hits_second: int) -> DeltaAudit:
    witness = Witness("(D, D')", "upper", 3.0, hits_first, hits_second, 40, 40, 0.0)
    return DeltaAudit(1e-3, 0.0, 0.0, 1.0, 2.2, 0.0, witness)


def test_no_power_is_no_hit_on_either_side() -> None:
    assert _delta_audit(0, 0).no_power
    assert not _delta_audit(1, 0).no_power and not _delta_audit(0, 2).no_power
    result = AuditResult((_delta_audit(0, 0),), 0.05, 10, 40, "identity")
    assert result.no_power and result.to_dict()["no_power"] is True
    assert result.to_dict()["audits"][0]["no_power"] is True
    assert "no power at delta 0.001" in format_result(result) and "(0/40 vs 0/40)" in (
        format_result(result)
    )
    powered = AuditResult((_delta_audit(3, 0),), 0.05, 10, 40, "identity")
    assert not powered.no_power and "no power" not in format_result(powered)


def test_the_advice_is_concrete() -> None:
    assert power_advice("--samples", 1000).startswith("for power, rerun with --samples 10000 ")
    assert "noise_multiplier" not in power_advice("--samples", 1000)


def test_a_tiny_method_audit_without_power_says_so(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # sigma = 5 on 50 runs (38 test runs per side): seed 1 chooses an event neither side hits
    cfg = _config(tmp_path, 5.0)
    argv = ["audit", "gaussian_mechanism", "--config", str(cfg), "--runs", "50", "--seed", "1"]
    assert main([*argv, *ALLOW]) == 0
    out = capfd.readouterr().out
    assert "hits 0/38 vs 0/38" in out
    assert "no power at delta 0.001: the test event was hit on neither side" in out
    assert "for power, rerun with --runs 500 " in out and "smaller noise_multiplier" in out
    assert main([*argv, *ALLOW, "--claimed-epsilon", "1", "--json"]) == 0
    data = json.loads(capfd.readouterr().out)
    assert data["no_power"] is True and data["relations"][0]["no_power"] is True
    assert data["relations"][0]["audits"][0]["no_power"] is True
    assert data["power_advice"].startswith("for power, rerun with --runs 500 ")


def test_an_audit_with_power_gives_no_advice(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    cfg = _config(tmp_path, 1.0)
    argv = ["audit", "gaussian_mechanism", "--config", str(cfg), "--runs", "50", "--seed", "0"]
    assert main([*argv, *ALLOW, "--claimed-epsilon", "5", "--json"]) == 0
    data = json.loads(capfd.readouterr().out)
    assert data["no_power"] is False and data["power_advice"] is None
    assert main([*argv, *ALLOW, "--claimed-epsilon", "5"]) == 0
    out = capfd.readouterr().out
    assert "no power" not in out and "for power" not in out
