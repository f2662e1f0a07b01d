from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from dpledger.cli import main
from dpledger.core.errors import InvalidParameterError
from dpledger.report import diff_reports
from dpledger.report.numbers import fmt_up

from .conftest import PIPELINE, write_pipeline


def _json_report(tmp_path: Path, name: str, data: dict) -> Path:
    pipeline = write_pipeline(tmp_path / f"{name}.json", data)
    out = tmp_path / f"{name}.report.json"
    assert (
        main(
            [
                "report",
                str(pipeline),
                "--format",
                "json",
                "--out",
                str(out),
                "--backends",
                "closed_form,rdp",
            ]
        )
        == 0
    )
    return out


def test_diff_names_the_change_and_how_epsilon_moved(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    # Gaussian releases only: a Laplace release would give every row a lower bound (its
    # constant-loss event, accountant/product_event_lower.py)
    releases = [PIPELINE["releases"][0], PIPELINE["releases"][2]]
    base = {**PIPELINE, "releases": releases, "postprocess": []}
    more_noise = copy.deepcopy(base)
    more_noise["releases"][0]["event"]["noise_multiplier"] = 6.0
    a = _json_report(tmp_path, "a", base)
    b = _json_report(tmp_path, "b", more_noise)
    capfd.readouterr()
    ra, rb = json.loads(a.read_text()), json.loads(b.read_text())
    d = diff_reports(ra, rb)
    assert d.moved is not None and d.moved < 0
    assert d.moved == rb["bound"]["epsilon"] - ra["bound"]["epsilon"]
    assert d.summary.startswith("ε decreased: ")
    assert ra["bound"]["method"] == rb["bound"]["method"]
    assert d.summary.endswith(f"at δ = 1e-05 (method {ra['bound']['method']})")
    assert (
        "release counts: event gaussian(noise_multiplier=3.0) → gaussian(noise_multiplier=6.0)"
    ) in d.changes
    # the rdp backend certifies no lower bound: "none", as the report's table says, never "0"
    rdp = fmt_up(ra["brackets"][1]["bound"]["epsilon"])
    assert f"accountant rdp: [none, {rdp}] (rdp) → [none, " in "\n".join(d.changes)
    assert not any("[0, " in c for c in d.changes)
    assert not any("{'" in c or "['" in c for c in (d.summary, *d.changes)), "a Python repr"
    assert any(c.startswith("release counts: epsilon alone [") for c in d.changes)
    assert main(["report", "--diff", str(a), str(b)]) == 0
    out = capfd.readouterr().out
    assert out.splitlines()[0] == d.summary
    assert "- release counts: event" in out


def test_identical_reports_have_no_changes(tmp_path: Path) -> None:
    base = {**PIPELINE, "releases": PIPELINE["releases"][:1], "postprocess": []}
    a = json.loads(_json_report(tmp_path, "a", base).read_text())
    d = diff_reports(a, copy.deepcopy(a))
    assert d.identical and d.moved == 0.0
    assert d.lines()[1] == "- nothing else changed"
    assert d.summary.startswith("ε unchanged: ε ≤ ")


def test_diff_refuses_other_files() -> None:
    with pytest.raises(InvalidParameterError, match="not a dpledger JSON report"):
        diff_reports({"epsilon": 1.0}, {"epsilon": 1.0})
    with pytest.raises(InvalidParameterError, match="report schema 2"):
        diff_reports({"schema_version": 2}, {"schema_version": 1})
