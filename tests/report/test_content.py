from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from scipy import optimize, stats

from dpledger.cli import main
from dpledger.report import report_pipeline_file
from dpledger.report.numbers import fmt_down, fmt_up
from dpledger.report.render_md import SECTIONS, render_markdown

from .conftest import PIPELINE, write_pipeline


def _cli_json(capfd: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(list(argv)) == 0
    return json.loads(capfd.readouterr().out)


def test_report_numbers_equal_account_json(
    pipeline_file: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    account = _cli_json(capfd, "account", str(pipeline_file), "--json", "--per-release")
    out = tmp_path / "r.json"
    assert main(["report", str(pipeline_file), "--format", "json", "--out", str(out)]) == 0
    capfd.readouterr()
    report = json.loads(out.read_text())
    account.pop("file")
    assert report["account"] == account
    assert report["bound"] == {
        k: account[k] for k in ("epsilon", "epsilon_lower", "delta", "method")
    }
    for row, rel in zip(report["releases"], account["releases"], strict=True):
        assert row["node"] == rel["id"]
        assert row["bound"] == rel["bound"]
    # the reported bound is the smallest upper bound among the side-by-side brackets
    uppers = [b["bound"]["epsilon"] for b in report["brackets"] if b["bound"] is not None]
    assert report["bound"]["epsilon"] == min(uppers)
    assert {b["backend"] for b in report["brackets"]} >= {"closed_form", "pld", "rdp"}


def test_explicit_delta_matches_account(
    pipeline_file: Path, capfd: pytest.CaptureFixture[str], empty_host: object
) -> None:
    account = _cli_json(
        capfd, "account", str(pipeline_file), "--json", "--per-release", "--delta", "1e-3"
    )
    built = report_pipeline_file(pipeline_file, delta=1e-3, host=empty_host, brackets=False)
    account.pop("file")
    assert built.report.to_dict()["account"] == account
    assert built.report.query == ("delta", 1e-3)


def _gaussian_epsilon(mu: float, delta: float) -> float:
    """Exact epsilon of a mu-GDP Gaussian (Balle & Wang 2018, Theorem 8)."""

    def gap(eps: float) -> float:
        return (
            stats.norm.cdf(-eps / mu + mu / 2)
            - math.exp(eps) * stats.norm.cdf(-eps / mu - mu / 2)
            - delta
        )

    return float(optimize.brentq(gap, 0.0, 50.0, xtol=1e-14))


def test_gaussian_only_pipeline_is_the_analytic_gaussian(
    tmp_path: Path, empty_host: object
) -> None:
    data = {**PIPELINE, "releases": [PIPELINE["releases"][0]], "postprocess": []}
    path = write_pipeline(tmp_path / "g.json", data)
    built = report_pipeline_file(path, host=empty_host)
    # four Gaussians of multiplier 3 compose to mu = sqrt(4) / 3
    exact = _gaussian_epsilon(2.0 / 3.0, 1e-5)
    eps = built.report.upper
    assert exact <= eps <= exact * (1 + 1e-6)
    assert built.report.accounting_method == "closed_form"
    assert f"ε = {fmt_up(eps)}" in built.report.statement


def test_markdown_has_every_section_and_the_statement(
    pipeline_file: Path, empty_host: object
) -> None:
    built = report_pipeline_file(pipeline_file, host=empty_host)
    md = render_markdown(built.report)
    for title in SECTIONS:
        assert f"## {title}\n" in md
    r = built.report
    sentence = (
        "The release is (ε, δ)-differentially private with respect to add/remove of one row "
        f"(event level), with ε = {fmt_up(r.upper)} (certified upper bound, method "
        f"{r.accounting_method}) at δ = 1e-05."
    )
    assert sentence in md
    # per-release table: node, method, lifting rule, tier; unregistered methods are unverified
    assert "| counts | gaussian_mechanism |" in md
    assert "unchanged_k1" in md
    assert "Poisson subsampling at rate 0.01" in md
    assert any("gaussian_mechanism" in w and "unverified" in w for w in r.warnings)
    assert any(w.startswith("idealized numerics") for w in r.warnings)


def test_printed_bounds_round_to_the_safe_side() -> None:
    assert fmt_up(0.1234561) == "0.123457"
    assert fmt_down(0.1234569) == "0.123456"
    assert fmt_up(2.0) == "2.00000"  # the same significant digits as every other bound
    assert fmt_up(9.9999991) == "10.0000"
    assert fmt_up(math.inf) == "inf"
    x = 0.6257497135600278
    assert float(fmt_up(x)) >= x and float(fmt_down(x)) <= x


def test_user_level_release_shows_lift_rule(tmp_path: Path, empty_host: object) -> None:
    data = {
        "name": "users",
        "delta": 1e-6,
        "sources": [
            {
                "name": "db",
                "adjacency": {
                    "relation": "add_remove",
                    "unit": "user",
                    "unit_key": "uid",
                    "max_contributions": 4,
                },
            }
        ],
        "releases": [
            {"id": "sum", "input": "db", "event": {"kind": "gaussian", "noise_multiplier": 8.0}},
            {"id": "flag", "input": "db", "event": {"kind": "pure_dp", "epsilon": 0.1}},
        ],
    }
    built = report_pipeline_file(write_pipeline(tmp_path / "u.json", data), host=empty_host)
    rows = {r.node: r for r in built.report.releases}
    assert rows["sum"].lift_rules == ("gaussian_l2_sensitivity_xk",)
    assert rows["sum"].lifted_event == "gaussian(noise_multiplier=2.0)"
    assert rows["flag"].lift_rules == ("pure_group_privacy",)
    assert "one user of source 'db' (identified by 'uid', contributing at most 4 rows)" in (
        built.report.unit_of_privacy
    )
    assert any("pure_group_privacy" in w for w in built.report.warnings)
