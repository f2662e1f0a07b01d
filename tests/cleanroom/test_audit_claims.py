"""The claims of ``dpledger audit METHOD`` are recomputed in the clean room before a verdict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest

import dpledger.accountant.select as select
from dpledger.cli import main
from tests.cleanroom.conftest import gaussian_epsilon

ARGS = ["--runs", "100", "--delta", "1e-3", "--seed", "5", "--relation", "add_remove"]


def _config(tmp_path: Path) -> Path:
    np.save(tmp_path / "rows.npy", np.array([2.0, -1.0]))
    cfg = tmp_path / "cfg.toml"
    cfg.write_text('data = "rows.npy"\n[params]\nsensitivity = 1.0\nnoise_multiplier = 1.0\n')
    return cfg


def test_honest_claims_are_confirmed(tmp_path: Path, capfd: Any) -> None:
    cfg = _config(tmp_path)
    assert main(["audit", "gaussian_mechanism", "--config", str(cfg), *ARGS, "--json"]) == 0
    out = json.loads(capfd.readouterr().out)
    [row] = out["relations"][0]["audits"]
    honest = gaussian_epsilon(1.0, 1e-3)
    assert honest * (1 - 1e-9) <= row["claimed_epsilon"] <= honest * (1 + 1e-3)


def test_a_claim_lowered_in_the_auditing_process_is_refused(
    tmp_path: Path, capfd: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = select.account

    def smaller(*args: Any, **kwargs: Any) -> Any:
        sel = original(*args, **kwargs)
        return attrs.evolve(sel, bound=attrs.evolve(sel.bound, epsilon=sel.bound.epsilon / 10))

    monkeypatch.setattr(select, "account", smaller)
    cfg = _config(tmp_path)
    assert main(["audit", "gaussian_mechanism", "--config", str(cfg), *ARGS]) == 2
    captured = capfd.readouterr()
    assert captured.out == ""
    honest = gaussian_epsilon(1.0, 1e-3)
    [line] = captured.err.strip().splitlines()
    assert line.startswith("dpledger audit: refused: relation add_remove, delta 0.001")
    certified = float(line.rsplit("certifies ", 1)[1])
    assert honest * (1 - 1e-9) <= certified <= honest * (1 + 1e-3)
