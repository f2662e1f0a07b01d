"""Reports of run directories, and the input dispatch (a pipeline file or a run directory).

A run directory (``ledger.json`` written by ``dpledger run``) becomes a one-release graph (its
declared event under the recorded adjacency), or, when the ledger names a ``pipeline`` file
beside it, that pipeline; the record's runtime section (declared, executed and accounted
events, steps) goes into the report as it was recorded.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from dpledger.core.errors import DPLedgerError, InvalidParameterError
from dpledger.core.events import (
    event_from_dict,
)
from dpledger.core.specs import Provenance

#: default delta of a pipeline that states neither delta nor epsilon (as ``dpledger account``)
from dpledger.report.build import (
    BuiltReport,
    build_report,
    report_pipeline_file,
    resolve_query,
)
from dpledger.report.numbers import fmt_up
from dpledger.runtime.graph import CompositionGraph
from dpledger.runtime.run_record import RECORD_FILE, RunRecord, private_dir

LEDGER_FILE = RECORD_FILE
AUDIT_FILE = "audit.json"


def _read_json(path: Path, field: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidParameterError(
            field, f"cannot read {path.name}: {exc}", "pass a run directory written by dpledger"
        ) from None


def runtime_section(record: RunRecord) -> dict[str, Any]:
    """The runtime-ledger facts a report shows (from ``ledger.json``)."""
    out: dict[str, Any] = {
        "method": record.method,
        "verified": record.verified,
        # the seed undoes the noise: a run record keeps it in its private diagnostics only
        "seed": "not published (private diagnostics)",
        "secure_seed": record.ledger.get("secure_seed"),
        "steps": len(record.ledger.get("steps", [])),
        "recorded_bound": {
            k: v
            for k, v in record.privacy.items()
            if k in ("epsilon", "epsilon_lower", "delta", "delta_lower", "method")
        }
        or None,
    }
    for key, value in (
        ("declared_core", record.declared_core),
        ("executed", record.ledger.get("executed")),
    ):
        if isinstance(value, Mapping):
            try:
                out[key] = event_from_dict(value).describe()
            except DPLedgerError:
                out[key] = json.dumps(value, sort_keys=True)
    files = record.outputs.get("files", {})
    values = record.outputs.get("values", {})
    out["outputs"] = sorted([*files, *values])
    return out


def _recorded_mismatch(runtime: Mapping[str, Any], bound: Mapping[str, Any]) -> list[str]:
    rec = runtime.get("recorded_bound")
    if not rec or "epsilon" not in rec or "epsilon" not in bound:
        return []
    if rec.get("delta") != bound.get("delta") or rec["epsilon"] == bound["epsilon"]:
        return []
    return [
        f"the run recorded ε = {fmt_up(rec['epsilon'])} ({rec.get('method')}) at run time; "
        f"this report recomputes ε = {fmt_up(bound['epsilon'])} with the current accountants"
    ]


def _private_inside(run: Path) -> list[str]:
    """A warning per private file found inside the run directory (an older layout)."""
    return [
        f"{path.name} is inside the run directory {run}: it is private (the noise seed, the raw "
        f"data) and must not be published with it; move it to {private_dir(run)}"
        for path in sorted(run.glob("PRIVATE-*"))
    ]


def report_run_dir(
    path: str | Path,
    *,
    delta: float | None = None,
    epsilon: float | None = None,
    audit: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> BuiltReport:
    """Report a run directory: its ledger's declaration (or the pipeline it names)."""
    run = Path(path)
    record = RunRecord.from_json(_read_json(run / LEDGER_FILE, "INPUT"))
    if audit is None and (run / AUDIT_FILE).is_file():
        audit = _read_json(run / AUDIT_FILE, "INPUT")
    runtime = runtime_section(record)
    recorded = record.privacy
    if delta is None and epsilon is None and "delta" in recorded and "epsilon" in recorded:
        delta = float(recorded["delta"])
    if record.pipeline is not None:
        pfile = run / record.pipeline
        built = report_pipeline_file(
            pfile, delta=delta, epsilon=epsilon, audit=audit, runtime=runtime, **kwargs
        )
    else:
        built = _report_ledger(run, record, runtime, delta, epsilon, audit, **kwargs)
    extra = [*_recorded_mismatch(runtime, built.report.bound), *_private_inside(run)]
    if extra:
        report = attrs.evolve(built.report, warnings=(*built.report.warnings, *extra))
        built = attrs.evolve(built, report=report)
    return built


def _report_ledger(
    run: Path,
    record: RunRecord,
    runtime: Mapping[str, Any],
    delta: float | None,
    epsilon: float | None,
    audit: Mapping[str, Any] | None,
    **kwargs: Any,
) -> BuiltReport:
    adjacency = record.adjacency
    event = record.core_event()
    method = record.method
    prov = Provenance(**record.provenance) if record.provenance is not None else None
    graph = CompositionGraph()
    graph.add_source("data", adjacency)
    unit = record.declared_unit
    if unit not in ("row", "user"):
        raise InvalidParameterError(
            "INPUT", f"{LEDGER_FILE} has declared_unit {unit!r}", "pass a run dir of `dpledger run`"
        )
    graph.add_release(
        method,
        event,
        "data",
        # the declaration's own unit: a row-level declaration is lifted to a user-level source
        declared_unit=unit,
        method=method,
        plugin=prov.plugin if prov is not None else None,
    )
    outputs = runtime.get("outputs") or []
    for name in outputs:
        if name not in (method, "data"):
            graph.add_postprocess(name, [method])
    d, e = resolve_query(None, None, delta, epsilon)
    descriptions = {n: f"output {n!r} of the run" for n in outputs}
    descriptions[method] = f"run of method {method!r} ({event.describe()})"
    return build_report(
        graph,
        title=f"run of {method}",
        input_kind="run",
        input_name=run.name,
        delta=d,
        epsilon=e,
        descriptions=descriptions,
        provenances={method: prov} if prov is not None else {},
        audit=audit,
        runtime=runtime,
        **kwargs,
    )


def report_input(path: str | Path, **kwargs: Any) -> BuiltReport:
    """A pipeline file or a run directory (one holding ``ledger.json``)."""
    p = Path(path)
    if p.is_dir():
        if not (p / LEDGER_FILE).is_file():
            raise InvalidParameterError(
                "INPUT",
                f"directory {p.name!r} holds no {LEDGER_FILE}",
                "pass a pipeline file (.toml/.json) or a run directory of `dpledger run`",
            )
        return report_run_dir(p, **kwargs)
    return report_pipeline_file(p, **kwargs)
