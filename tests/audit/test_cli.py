"""``dpledger audit`` command line."""

from __future__ import annotations

import json

import pytest

from dpledger.audit.reference import gaussian_epsilon
from dpledger.cli import main


def test_json_output_with_given_claim(capfd: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "audit",
            "--mechanism",
            "gaussian",
            "--noise-multiplier",
            "1.0",
            "--delta",
            "1e-2",
            "1e-3",
            "--claimed-epsilon",
            "2.5",
            "--samples",
            "300000",
            "--seed",
            "1",
            "--json",
        ]
    )
    data = json.loads(capfd.readouterr().out)
    by_delta = {a["delta"]: a for a in data["audits"]}
    assert by_delta[1e-2]["verdict"] == "no violation found"
    assert by_delta[1e-2]["epsilon_lower"] <= gaussian_epsilon(1.0, 1e-2)
    assert data["event"] == {"kind": "gaussian", "noise_multiplier": 1.0}
    assert data["n_test"] == 300_000 and data["n_search"] == 60_000
    # 2.5 is below the true 3.139 at 1e-3: exit code 1 iff the audit caught it
    assert code == (1 if by_delta[1e-3]["verdict"] == "violation" else 0)
    assert by_delta[1e-3]["ceiling"] > 10


def test_text_output_names_the_limits(capfd: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "audit",
            "--mechanism",
            "laplace",
            "--noise-multiplier",
            "1.0",
            "--adjacency",
            "replace_one",
            "--delta",
            "0",
            "--claimed-epsilon",
            "2.0",
            "--samples",
            "100000",
            "--seed",
            "0",
        ]
    )
    out = capfd.readouterr().out
    assert code == 0
    assert "no violation found" in out and "ceiling" in out and "not 'verified'" in out


def test_planted_under_claim_exits_1(capfd: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "audit",
            "--mechanism",
            "laplace",
            "--noise-multiplier",
            "1.0",
            "--adjacency",
            "replace_one",
            "--delta",
            "0",
            "--claimed-epsilon",
            "1.0",
            "--samples",
            "200000",
            "--seed",
            "0",
        ]
    )
    assert code == 1
    assert "violation" in capfd.readouterr().out


def test_bad_input_exits_2(capfd: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--mechanism", "gaussian", "--noise-multiplier", "-1"]) == 2
    assert "noise_multiplier" in capfd.readouterr().err
    assert main(["audit", "--mechanism", "randomized_response"]) == 2
    assert "--epsilon" in capfd.readouterr().err
