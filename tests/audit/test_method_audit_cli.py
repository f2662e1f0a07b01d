"""``dpledger audit METHOD --config FILE``: whole-method audits on canary neighbours through
the command line: its JSON fields, its text output, and its exit code 2 with a one-line error
for bad input, data that is not per record and a method without a privacy guarantee.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dpledger.audit import stats
from dpledger.audit.auditor import NO_VIOLATION
from dpledger.audit.reference import gaussian_epsilon
from dpledger.cli import main

from .method_audit_inputs import RNG, ROWS, audit_json, write_config


def test_json_fields(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    cfg = write_config(
        tmp_path, np.array([2.0, -1.0]), {"sensitivity": 1.0, "noise_multiplier": 1.0}
    )
    code, out = audit_json(
        capfd,
        "gaussian_mechanism",
        "--config",
        str(cfg),
        "--relation",
        "both",
        "--runs",
        "250",
        "--delta",
        "1e-3",
        "1e-2",
        "--seed",
        "5",
        "--plugins-allow",
        "primitives.gaussian",
    )
    assert code == 0
    assert out["method"] == "gaussian_mechanism" and out["runs"] == 250 and out["seed"] == 5
    assert out["verdict"] == NO_VIOLATION and out["alpha"] == 0.05
    claims = {
        ("add_remove", 1e-3): gaussian_epsilon(1.0, 1e-3),
        ("add_remove", 1e-2): gaussian_epsilon(1.0, 1e-2),
        ("replace_one", 1e-3): gaussian_epsilon(2.0, 1e-3),
        ("replace_one", 1e-2): gaussian_epsilon(2.0, 1e-2),
    }
    assert [r["relation"] for r in out["relations"]] == ["add_remove", "replace_one"]
    for rel in out["relations"]:
        # a 2-vector release: a fifth trains the discriminant, a fifth searches, the rest tests
        assert (rel["n_search"], rel["n_test"]) == (50, 150)
        assert rel["alpha"] == 0.025  # Bonferroni over the two relations
        assert rel["neighbours"].startswith(
            "query answer vs the answer moved by "
            + ("1" if rel["relation"] == "add_remove" else "2")
        )
        for a in rel["audits"]:
            assert a["relation"] == rel["relation"]
            claim = claims[(a["relation"], a["delta"])]
            # certified (at least the exact value, up to the reference's bisection) and tight
            assert claim * (1 - 1e-9) <= a["claimed_epsilon"] <= claim * (1 + 1e-3)
            assert a["ceiling"] == pytest.approx(stats.ceiling(150, 150, a["delta"], 0.0125))
            assert 0 <= a["epsilon_lower"] <= a["ceiling"]
            assert a["verdict"] == NO_VIOLATION


def test_text_output(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    cfg = write_config(
        tmp_path,
        RNG.integers(0, 3, size=10).astype(float),
        {"num_bins": 3, "noise_multiplier": 2.0},
        {"relation": "replace_one"},
    )
    code = main(
        [
            "audit",
            "private_histogram",
            "--config",
            str(cfg),
            "--runs",
            "100",
            "--plugins-allow",
            "primitives.histogram",
        ]
    )
    out = capfd.readouterr().out
    assert code == 0
    assert "relation: replace_one" in out and "relation: add_remove" not in out  # the config's
    assert "record 0 replaced by the canary" in out and "verdict: no violation found" in out


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["no_such_method", "--config", "{cfg}"], "no method named 'no_such_method'"),
        (["gaussian_mechanism", "--config", "{nodata}"], "data: is missing"),
        (
            ["gaussian_mechanism", "--config", "{cfg}", "--runs", "many"],
            "--runs: must be an integer",
        ),
        (
            ["gaussian_mechanism", "--config", "{cfg}", "--runs", "20"],
            "runs: must be an integer >= 50",
        ),
        (
            ["gaussian_mechanism", "--config", "{cfg}", "--runs", "1e3"],
            "--runs: must be an integer",
        ),
        (["gaussian_mechanism"], "--config: is required"),
        (["gaussian_mechanism", "--config", "{missing}"], "--config: cannot read"),
        (["gaussian_mechanism", "--config", "{cfg}", "--mechanism", "gaussian"], "both given"),
        (["--noise-multiplier", "1.0"], "METHOD: is missing"),
        (
            ["gaussian_mechanism", "--config", "{cfg}", "--noise-multiplier", "1"],
            "--noise-multiplier: does not apply to a METHOD audit",
        ),
        (
            ["--mechanism", "gaussian", "--noise-multiplier", "1", "--runs", "100"],
            "--runs: does not apply to a --mechanism audit",
        ),
        (["gaussian_mechanism", "--config", "{cfg}", "--data", "{missing}"], "does not exist"),
        (["gaussian_mechanism", "--config", "{badadj}"], "adjacency: "),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    argv: list[str], field: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    cfg = write_config(tmp_path, np.array([1.0]), {"sensitivity": 1.0, "noise_multiplier": 1.0})
    nodata = tmp_path / "nodata.toml"
    nodata.write_text("[params]\nsensitivity = 1.0\nnoise_multiplier = 1.0\n")
    badadj = tmp_path / "badadj.toml"
    badadj.write_text(
        "[params]\nsensitivity = 1.0\nnoise_multiplier = 1.0\n[adjacency]\n"
        "relashun = 'replace_one'\n"
    )
    paths = {
        "cfg": str(cfg),
        "nodata": str(nodata),
        "missing": str(tmp_path / "nope.toml"),
        "badadj": str(badadj),
    }
    code = main(
        ["audit", *[a.format(**paths) for a in argv], "--plugins-allow", "primitives.gaussian"]
    )
    err = capfd.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("dpledger audit: error: "), err
    assert field in err


def test_generic_data_that_is_not_per_record_is_refused(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    cfg = write_config(
        tmp_path,
        {"records": ROWS, "candidates": ROWS[:5]},
        {"radius": 1.0, "noise_multiplier": 1.0, "n": 12},
    )
    code = main(
        [
            "audit",
            "private_mean",
            "--config",
            str(cfg),
            "--runs",
            "100",
            "--plugins-allow",
            "primitives.bounded_mean",
        ]
    )
    err = capfd.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "different lengths" in err and "register a neighbour rule" in err


def test_a_method_without_a_guarantee_has_no_claim_to_audit(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    cfg = write_config(
        tmp_path,
        np.array([0.0, 0.1]),
        {
            "t": 1.0,
            "beta": 1.0,
            "n": 2,
            "solver": "particles",
            "n_particles": 8,
            "particle_dt": 0.1,
            "n_samples": 1,
        },
        {},
    )
    for relation in ("add_remove", "both"):
        code = main(
            [
                "audit",
                "shk",
                "--config",
                str(cfg),
                "--relation",
                relation,
                "--runs",
                "200",
                "--plugins-allow",
                "shk",
            ]
        )
        err = capfd.readouterr().err
        assert code == 2 and "declares no privacy guarantee" in err, err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1
