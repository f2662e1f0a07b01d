"""Reports of run directories: the declared event (or the pipeline beside it), the runtime section
as recorded, and one-line refusals of what is not a run directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import GaussianEvent, SelfComposedEvent
from dpledger.report.numbers import fmt_up
from dpledger.report.run_dir import report_input, report_run_dir, runtime_section
from dpledger.runtime.run_record import RunRecord

from .cases import PIPELINE
from .conftest import write_pipeline

EVENT = SelfComposedEvent(GaussianEvent(2.0), 3)


def _ledger(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "method": "private_mean",
        "seed": 12345,
        "declared": EVENT.to_dict(),
        "declared_core": EVENT.to_dict(),
        "executed": EVENT.to_dict(),
        "adjacency": Adjacency().to_dict(),
        "secure_seed": True,
        "steps": [{"step": "a"}, {"step": "b"}],
        "verified": True,
        "outputs": {"files": {"z_model": "m.npy"}, "values": {"a_mean": 1.0}},
    }
    data.update(changes)
    return data


def _run(tmp_path: Path, ledger: dict[str, Any], name: str = "run") -> Path:
    run = tmp_path / name
    run.mkdir()
    (run / "ledger.json").write_text(json.dumps(ledger))
    return run


def test_the_runtime_section_is_the_record_s_without_the_seed() -> None:
    record = RunRecord.from_json(
        _ledger(privacy={"epsilon": 1.0, "delta": 1e-6, "method": "pld", "candidates": []})
    )
    section = runtime_section(record)
    assert section == {
        "method": "private_mean",
        "verified": True,
        "seed": "not published (private diagnostics)",
        "secure_seed": True,
        "steps": 2,
        "recorded_bound": {"epsilon": 1.0, "delta": 1e-6, "method": "pld"},
        "declared_core": EVENT.describe(),
        "executed": EVENT.describe(),
        "outputs": ["a_mean", "z_model"],
    }
    assert "12345" not in json.dumps(section)
    odd = runtime_section(RunRecord.from_json(_ledger(executed={"kind": "no_such_kind"})))
    assert odd["executed"] == '{"kind": "no_such_kind"}' and odd["recorded_bound"] is None


def test_a_run_is_its_declared_event_under_the_recorded_adjacency(tmp_path: Path) -> None:
    adjacency = Adjacency(relation="replace_one", unit="user", unit_key="u", max_contributions=2)
    run = _run(tmp_path, _ledger(adjacency=adjacency.to_dict(), declared_unit="user"))
    report = report_input(run, delta=1e-6, brackets=False).report
    assert report.bound["epsilon"] == account(EVENT, adjacency, delta=1e-6).bound.epsilon
    assert (report.input_kind, report.input_name, report.title) == (
        "run",
        "run",
        "run of private_mean",
    )
    assert report.adjacency == adjacency.describe()
    released = {r.node: (r.kind, r.inputs, r.description) for r in report.released}
    assert released == {
        "a_mean": ("postprocess", ("private_mean",), "output 'a_mean' of the run"),
        "private_mean": (
            "release",
            ("data",),
            f"run of method 'private_mean' ({EVENT.describe()})",
        ),
        "z_model": ("postprocess", ("private_mean",), "output 'z_model' of the run"),
    }
    assert report.releases[0].lift_rules == ("declared_user_level",)
    assert report.runtime is not None and report.runtime["seed"].startswith("not published")


def test_a_row_level_declaration_is_lifted_to_the_user(tmp_path: Path) -> None:
    adjacency = Adjacency(unit="user", unit_key="u", max_contributions=2)
    run = _run(tmp_path, _ledger(adjacency=adjacency.to_dict(), declared_unit="row"))
    row = report_input(run, delta=1e-6, brackets=False).report.releases[0]
    assert row.declared_unit == "row"
    assert row.lifted_event == SelfComposedEvent(GaussianEvent(1.0), 3).describe()  # σ / 2
    assert row.lift_rules == ("compose_distributes", "gaussian_l2_sensitivity_xk")


def test_the_query_is_the_recorded_delta_unless_given(tmp_path: Path) -> None:
    recorded = account(EVENT, Adjacency(), delta=1e-7).bound.to_dict()
    run = _run(tmp_path, _ledger(privacy=recorded))
    assert report_run_dir(run, brackets=False).report.query == ("delta", 1e-7)
    assert report_run_dir(run, delta=1e-3, brackets=False).report.query == ("delta", 1e-3)
    by_eps = report_run_dir(run, epsilon=1.0, brackets=False).report
    assert by_eps.query == ("epsilon", 1.0) and not by_eps.reports_epsilon
    bare = _run(tmp_path, _ledger(), "bare")
    assert report_run_dir(bare, brackets=False).report.query == ("delta", 1e-5)


def test_a_recorded_bound_that_differs_is_warned_of(tmp_path: Path) -> None:
    true = account(EVENT, Adjacency(), delta=1e-6).bound.to_dict()
    same = _run(tmp_path, _ledger(privacy=true), "same")
    assert not any("the run recorded" in w for w in report_run_dir(same).report.warnings)
    stale = {**true, "epsilon": true["epsilon"] + 0.5}
    report = report_run_dir(_run(tmp_path, _ledger(privacy=stale), "stale"), brackets=False).report
    assert (
        f"the run recorded ε = {fmt_up(stale['epsilon'])} ({true['method']}) at run time; this "
        f"report recomputes ε = {fmt_up(report.upper)} with the current accountants"
    ) in report.warnings


def test_an_audit_beside_the_record_is_read(tmp_path: Path) -> None:
    run = _run(tmp_path, _ledger())
    (run / "audit.json").write_text(json.dumps({"verdict": "consistent", "audits": []}))
    assert report_run_dir(run, brackets=False).report.audit == {
        "verdict": "consistent",
        "audits": [],
    }
    given = report_run_dir(run, audit={"verdict": "given"}, brackets=False).report
    assert given.audit == {"verdict": "given"}
    (run / "audit.json").write_text("{not json")
    with pytest.raises(InvalidParameterError, match=r"^INPUT: cannot read audit\.json"):
        report_run_dir(run, brackets=False)


def test_a_record_naming_a_pipeline_reports_that_pipeline(tmp_path: Path) -> None:
    run = _run(tmp_path, _ledger(pipeline="pipeline.json"))
    write_pipeline(run / "pipeline.json", PIPELINE)
    report = report_input(run, brackets=False).report
    assert (report.input_kind, report.input_name, report.title) == (
        "pipeline",
        "pipeline.json",
        "one-gaussian",
    )
    assert [r.node for r in report.releases] == ["q"]
    assert report.runtime is not None and report.runtime["method"] == "private_mean"


@pytest.mark.parametrize(
    ("content", "field", "problem"),
    [
        (None, "INPUT", "directory 'run' holds no ledger.json"),
        ("{broken", "INPUT", "cannot read ledger.json"),
        (json.dumps(_ledger(declared_unit="team")), "INPUT", "ledger.json has declared_unit"),
        (json.dumps({"method": "m"}), "ledger.json: adjacency", "is missing"),
    ],
)
def test_what_is_not_a_run_directory_is_refused(
    tmp_path: Path, content: str | None, field: str, problem: str
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    if content is not None:
        (run / "ledger.json").write_text(content)
    with pytest.raises(InvalidParameterError) as info:
        report_input(run, brackets=False)
    assert info.value.field == field and info.value.problem.startswith(problem)
