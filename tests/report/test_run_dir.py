from __future__ import annotations

import json
from pathlib import Path

from dpledger.accountant.select import account
from dpledger.audit import audit_event
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import GaussianEvent, SelfComposedEvent
from dpledger.report import render_markdown, report_input


def _run_dir(tmp_path: Path, event: SelfComposedEvent, adjacency: Adjacency) -> Path:
    """A run directory laid out as ``dpledger run`` writes it."""
    sel = account(event, adjacency, delta=1e-6)
    run = tmp_path / "run"
    run.mkdir()
    ledger = {
        "dpledger_version": "0.1.0",
        "method": "private_mean",
        "provenance": {
            "plugin": "bounded_mean",
            "distribution": "dpledger",
            "version": "0.1.0",
            "tier": "contrib",
        },
        "params": {"radius": 1.0, "noise_multiplier": 2.0, "n": 100},
        "seed": 3,
        "declared": event.to_dict(),
        "executed": event.to_dict(),
        "adjacency": adjacency.to_dict(),
        "secure_seed": False,
        "steps": [{"step": "mean.sum"}],
        "declared_core": event.to_dict(),
        "verified": True,
        "privacy": {
            **sel.bound.to_dict(),
            "candidates": [c.to_dict() for c in sel.candidates],
            "unavailable": [],
        },
        "outputs": {"files": {"mean": "mean.npy"}, "values": {}},
    }
    (run / "ledger.json").write_text(json.dumps(ledger))
    return run


def test_run_directory_report_matches_the_recorded_account(
    tmp_path: Path, empty_host: object
) -> None:
    event = SelfComposedEvent(GaussianEvent(2.0), 3)
    adjacency = Adjacency(relation="replace_one")
    run = _run_dir(tmp_path, event, adjacency)
    audit = audit_event(
        GaussianEvent(2.0), adjacency, deltas=(1e-2,), n_search=2_000, n_test=20_000, rng=1
    )
    (run / "audit.json").write_text(json.dumps(audit.to_dict()))
    built = report_input(run, host=empty_host)
    r = built.report
    expected = account(event, adjacency, delta=1e-6).bound
    assert r.bound["epsilon"] == expected.epsilon and r.bound["delta"] == 1e-6
    assert r.input_kind == "run" and r.adjacency == "replace-one of one row (event level)"
    row = r.releases[0]
    assert (row.node, row.plugin, row.distribution, row.tier) == (
        "private_mean",
        "bounded_mean",
        "dpledger",
        "unverified",
    )  # no host record for it
    assert r.runtime is not None and r.runtime["verified"] is True
    assert r.audit is not None and r.audit["audits"][0]["ceiling"] > 0
    md = render_markdown(r)
    assert "ceiling for n" in md and "empirical ε lower" in md
    assert "| mean | postprocess | private_mean |" in md
    # the audit's claim is the certified bound of one Gaussian, below the empirical ceiling
    claimed = r.audit["audits"][0]["claimed_epsilon"]
    assert claimed == account(GaussianEvent(2.0), adjacency, delta=1e-2).bound.epsilon


def test_private_files_inside_a_run_directory_are_warned_of(
    tmp_path: Path, empty_host: object
) -> None:
    run = _run_dir(tmp_path, SelfComposedEvent(GaussianEvent(2.0), 3), Adjacency())
    assert not [w for w in report_input(run, host=empty_host).report.warnings if "PRIVATE" in w]
    (run / "PRIVATE-diagnostics.json").write_text("{}")  # the layout of older runs
    warnings = [w for w in report_input(run, host=empty_host).report.warnings if "PRIVATE" in w]
    assert len(warnings) == 1
    assert "must not be published" in warnings[0] and warnings[0].endswith("run.private")
