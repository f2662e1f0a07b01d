"""Reports of run directories, and the input dispatch (a pipeline file or a run directory).

A run directory (``ledger.json`` written by ``dpledger run``) becomes a one-release graph (its
declared event under the recorded adjacency), or, when the ledger names a ``pipeline`` file
beside it, that pipeline; the record's runtime section (declared, executed and accounted
events, steps) goes into the report as it was recorded.

A run dpledger observed rather than ran (:data:`OBSERVED_METHODS`: an Opacus training loop
tracked by :mod:`dpledger.integrations.opacus`) has no ledger that verified it, no seed and no
noise drawn by dpledger: its runtime section says it was observed, and carries the framework's
own figure with the record's explanation of how it relates to the certified bracket.
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
from dpledger.report import prose

#: default delta of a pipeline that states neither delta nor epsilon (as ``dpledger account``)
from dpledger.report.build import (
    BuiltReport,
    build_report,
    report_pipeline_file,
    resolve_query,
)
from dpledger.report.method_unit import method_unit, with_method_unit
from dpledger.report.numbers import fmt_down, fmt_exact, fmt_up
from dpledger.runtime.graph import CompositionGraph
from dpledger.runtime.run_record import RECORD_FILE, RunRecord, private_dir

LEDGER_FILE = RECORD_FILE
AUDIT_FILE = "audit.json"
#: runs dpledger observed rather than ran (``dpledger.cleanroom.verify_room.OBSERVED_METHODS``),
#: with the framework that ran each
OBSERVED_METHODS: dict[str, str] = {"opacus_dp_sgd": "Opacus"}


def _read_json(path: Path, field: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidParameterError(
            field, f"cannot read {path.name}: {exc}", "pass a run directory written by dpledger"
        ) from None


def _describe(value: Any) -> str | None:
    """An event dict as its description (its JSON when it is not a known event)."""
    if not isinstance(value, Mapping):
        return None
    try:
        return str(event_from_dict(value).describe())
    except DPLedgerError:
        return json.dumps(value, sort_keys=True)


def _recorded_bound(record: RunRecord) -> dict[str, Any] | None:
    keys = ("epsilon", "epsilon_lower", "delta", "delta_lower", "method")
    return {k: v for k, v in record.privacy.items() if k in keys} or None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def observed_section(record: RunRecord, framework: str) -> dict[str, Any]:
    """The runtime facts of an observed run: what dpledger read from the framework, and the
    framework's own figure with the record's explanation (no ledger, seed or noise of
    dpledger's took part)."""
    params = record.params
    own = _mapping(params.get("opacus"))
    batching = _mapping(params.get("batching"))
    accountant = str(own.get("accountant") or "unknown")
    recorded = _recorded_bound(record) or {}
    delta = recorded.get("delta")
    epsilon = own.get("epsilon")
    executed = _describe(record.ledger.get("executed"))
    lower_event = params.get("lower_event")
    observed: dict[str, Any] = {
        "framework": framework,
        "how": (
            f"observed, not run under the dpledger ledger: dpledger read each noisy step from "
            f"{framework}'s optimizer and the batch construction from its data loader; it drew "
            "no noise and enforced no declaration"
        ),
        "noise": (
            f"drawn by {framework}, not by dpledger: dpledger keeps no seed and no private "
            f"file for this run ({framework} secure mode: "
            f"{'on' if record.ledger.get('secure_seed') else 'off'})"
        ),
        "batching": batching.get("kind"),
        "steps": params.get("steps"),
        "epochs": params.get("epochs"),
        "complete_epochs": params.get("complete_epochs"),
        "accountant": accountant,
        "epsilon": epsilon,
        "delta": delta,
        "status": own.get("status"),
        "figure": prose.framework_figure(
            framework, accountant, None if epsilon is None else float(epsilon), delta
        ),
        "accountants": prose.framework_accountants(framework, accountant),
        **_framework_figures(own, framework, accountant, delta),
        "explanation": params.get("explanation"),
        "notes": list(params.get("notes") or []),
        "poisson_same_relation": params.get("poisson_same_relation"),
        "lower_event": _describe(lower_event),
        "epsilon_lower": recorded.get("epsilon_lower"),
    }
    if lower_event != record.ledger.get("executed"):
        observed["bracket_note"] = _bracket_note(recorded, lower_event is not None)
    return {
        "method": record.method,
        "observed": observed,
        "steps": params.get("steps"),
        "recorded_bound": recorded or None,
        "executed": executed,
        "outputs": _outputs(record),
    }


def _framework_figures(
    own: Mapping[str, Any], framework: str, accountant: str, delta: Any
) -> dict[str, Any]:
    """The figure and accountants texts of a record that holds each of the framework's
    accountants' figures (none for an older record, which holds the engine's one only)."""
    raw = own.get("accountants")
    figures = [_mapping(f) for f in raw] if isinstance(raw, list) else []
    if not figures:
        return {}
    difference = str(own.get("difference") or "")
    return {
        "figures": figures,
        "difference": difference,
        "figure": prose.framework_figures(framework, figures, delta),
        "accountants": prose.framework_accountants_held(framework, accountant, figures, difference),
    }


def _bracket_note(recorded: Mapping[str, Any], has_lower: bool) -> str:
    """Why the report's bracket is not the bracket of what ran (a partial epoch or a dropped
    last batch: the recorded event covers the run from above only)."""
    delta = recorded.get("delta")
    at = f" at δ = {fmt_exact(delta)}" if delta is not None else ""
    if has_lower and recorded.get("epsilon_lower"):
        low = fmt_down(recorded["epsilon_lower"])
        lower = f"the certified lower bound for what ran is ε ≥ {low}{at}"
    else:
        lower = "no lower bound is certified for what ran"
    return (
        "the bracket above is that of the recorded event, which covers the run from above (a "
        f"partial epoch counted in full, or a dropped last batch kept); {lower}"
    )


def _outputs(record: RunRecord) -> list[str]:
    files = record.outputs.get("files", {})
    values = record.outputs.get("values", {})
    return sorted([*files, *values])


def runtime_section(record: RunRecord) -> dict[str, Any]:
    """The runtime-ledger facts a report shows (from ``ledger.json``)."""
    if record.method in OBSERVED_METHODS:
        return observed_section(record, OBSERVED_METHODS[record.method])
    out: dict[str, Any] = {
        "method": record.method,
        "verified": record.verified,
        # the seed undoes the noise: a run record keeps it in its private diagnostics only
        "seed": "not published (private diagnostics)",
        "secure_seed": record.ledger.get("secure_seed"),
        "steps": len(record.ledger.get("steps", [])),
        "recorded_bound": _recorded_bound(record),
    }
    for key, value in (
        ("declared_core", record.declared_core),
        ("executed", record.ledger.get("executed")),
    ):
        described = _describe(value)
        if described is not None:
            out[key] = described
    out["outputs"] = _outputs(record)
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
        # the pipeline's releases are the run's declared steps, verified by its ledger
        ran = record.method if record.verified else None
        built = report_pipeline_file(
            pfile,
            delta=delta,
            epsilon=epsilon,
            audit=audit,
            runtime=runtime,
            run_method=ran,
            **kwargs,
        )
    else:
        built = _report_ledger(run, record, runtime, delta, epsilon, audit, **kwargs)
        protects = method_unit(record, kwargs.get("host"))
        if protects is not None:  # the unit the method bounds itself, as the run line names it
            built = with_method_unit(built, protects)
    warnings = (
        *built.report.warnings,
        *_recorded_mismatch(runtime, built.report.bound),
        *_private_inside(run),
    )
    framework = OBSERVED_METHODS.get(record.method)
    if framework is not None:
        warnings = prose.observed_warnings(warnings, record.method, record.method, framework)
    if warnings != built.report.warnings:
        built = attrs.evolve(built, report=attrs.evolve(built.report, warnings=warnings))
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
    title = f"run of {method}"
    framework = OBSERVED_METHODS.get(method)
    if framework is not None:
        title = f"{framework} run of {method}, observed by dpledger"
        descriptions[method] = (
            f"{framework} run observed by dpledger (its noisy steps, as read from the "
            f"optimizer and the data loader: {event.describe()})"
        )
    return build_report(
        graph,
        title=title,
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
