"""Build a :class:`~dpledger.report.model.PrivacyReport` from a pipeline or a run directory.

The bound is computed by :func:`dpledger.accountant.graph_account.account_graph` with
``per_release=True``, exactly as ``dpledger account FILE --json --per-release`` does. Each
accountant's bracket is the same call restricted to that backend. The prose sections come from
:mod:`.prose`, the per-release rows and trust tiers from :mod:`.tiers`; a run directory is read
by :mod:`.run_dir`.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from dpledger import __version__
from dpledger.accountant.alternatives import ReleaseReduction
from dpledger.accountant.graph_account import GraphAccount, account_graph
from dpledger.accountant.select import backend_factories
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import DPLedgerError, InvalidParameterError
from dpledger.core.specs import MethodSpec, Provenance, ReportSectionSpec
from dpledger.core.validation import DEFAULT_DELTA
from dpledger.integrations.dp_accounting import load_pipeline_or_dp_event

#: default delta of a pipeline that states neither delta nor epsilon (as ``dpledger account``)
from dpledger.report import prose
from dpledger.report.model import (
    Bracket,
    DataAccess,
    ExtraSection,
    PrivacyReport,
    Released,
)
from dpledger.report.tiers import release_rows
from dpledger.runtime.graph import CompositionGraph
from dpledger.runtime.jsonform import json_safe
from dpledger.runtime.pipeline import Pipeline


@attrs.frozen(eq=False)
class BuiltReport:
    """A report with what the figures need (the graph, the account, the query)."""

    report: PrivacyReport
    graph: CompositionGraph
    account: GraphAccount
    delta: float | None
    epsilon: float | None
    backends: tuple[str, ...] | None


# -- query and inputs ------------------------------------------------------------------------
def resolve_query(
    pipeline_delta: float | None,
    pipeline_epsilon: float | None,
    delta: float | None = None,
    epsilon: float | None = None,
) -> tuple[float | None, float | None]:
    """The query ``dpledger account`` would use: explicit, else the file's, else delta 1e-5."""
    if delta is not None and epsilon is not None:
        raise InvalidParameterError("delta", "give at most one of delta and epsilon", "drop one")
    if delta is not None or epsilon is not None:
        return delta, epsilon
    if pipeline_epsilon is not None:
        return None, pipeline_epsilon
    return (pipeline_delta if pipeline_delta is not None else DEFAULT_DELTA), None


def file_descriptions(path: str | Path) -> dict[str, str]:
    """``description`` of every source, transform, release and step of a pipeline file."""
    p = Path(path)
    raw = p.read_bytes().decode("utf-8")
    data = tomllib.loads(raw) if p.suffix.lower() == ".toml" else json.loads(raw)
    out: dict[str, str] = {}
    for section, key in (
        ("sources", "name"),
        ("transforms", "id"),
        ("releases", "id"),
        ("postprocess", "id"),
    ):
        for entry in data.get(section, []):
            if isinstance(entry, Mapping) and isinstance(entry.get("description"), str):
                out[str(entry[key])] = str(entry["description"])
    if isinstance(data.get("description"), str):
        out[""] = str(data["description"])
    return out


# -- trust tiers and provenance --------------------------------------------------------------


def _brackets(
    graph: CompositionGraph,
    delta: float | None,
    epsilon: float | None,
    backends: Sequence[str] | None,
    reasons: Mapping[str, str],
) -> tuple[Bracket, ...]:
    out = []
    for name, factory, reason in backend_factories(backends):
        if factory is None:
            out.append(Bracket(name, None, reason))
            continue
        try:
            acc = account_graph(graph, delta=delta, epsilon=epsilon, backends=[name])
        except DPLedgerError as exc:
            out.append(Bracket(name, None, reasons.get(name, str(exc))))
            continue
        out.append(Bracket(name, json_safe(acc.bound.to_dict())))
    return tuple(out)


def _released(
    graph: CompositionGraph, account: GraphAccount, descriptions: Mapping[str, str]
) -> tuple[Released, ...]:
    by_id: dict[str, ReleaseReduction] = {r.release_id: r for r in account.releases}
    out = []
    for node in sorted(graph.nodes_of("release") + graph.nodes_of("postprocess")):
        kind = graph.kind(node)
        inputs = tuple(sorted(graph.g.predecessors(node)))
        if node in descriptions:
            text = descriptions[node]
        elif kind == "release":
            r = by_id[node]
            times = f" repeated {r.count} times" if r.count != 1 else ""
            text = f"{r.event.describe()}{times}"
        else:
            text = "post-processing of releases (no additional privacy cost)"
        out.append(Released(node, kind, inputs, text))
    return tuple(out)


def section_context(report: PrivacyReport, graph: CompositionGraph) -> dict[str, Any]:
    """What report sections see: the report as plain values, plus every release's declared
    event as an event dict (``release_events``; a release run ``count`` times appears as a
    ``self_composed`` event)."""
    events: dict[str, Any] = {}
    for node in sorted(graph.nodes_of("release")):
        data = graph.g.nodes[node]
        event = data["event"].to_dict()
        count = int(data.get("count", 1))
        events[node] = (
            event if count == 1 else {"kind": "self_composed", "count": count, "event": event}
        )
    plain = report.to_dict()
    # sections read events from ``release_events`` (with their counts); the rows' event tables
    # hold one repetition each and would read as releases of their own
    plain["releases"] = _without_event_tables(plain["releases"])
    account = plain.get("account")
    if isinstance(account, dict):  # ``dpledger account --json``'s tables likewise
        account = {**account, "releases": _without_event_tables(account.get("releases", []))}
        account["sources"] = [
            {**s, "alternatives": _without_event_tables(s.get("alternatives", []))}
            for s in account.get("sources", [])
        ]
        plain["account"] = account
    return {**plain, "release_events": json_safe(events)}


def _without_event_tables(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [
        {k: v for k, v in row.items() if k not in ("event_data", "lifted_event_data")}
        for row in rows
    ]


def released_methods(
    methods: Iterable[str | None], table: Mapping[str, MethodSpec]
) -> list[MethodSpec]:
    """The specs of the registered methods among ``methods`` (a report's releases'), once each."""
    return [table[m] for m in dict.fromkeys(methods) if m is not None and m in table]


def _report_methods(report: PrivacyReport) -> list[str | None]:
    """The methods a report releases: its releases' and, for a run directory, the run's own
    (a run's pipeline file may label its releases with other names)."""
    run = report.runtime.get("method") if report.runtime is not None else None
    return [*(r.method for r in report.releases), run if isinstance(run, str) else None]


def concerned_sections(
    sections: Mapping[str, ReportSectionSpec], released: Sequence[MethodSpec]
) -> list[tuple[str, ReportSectionSpec]]:
    """The sections, by name, of the plugins whose own methods are among ``released``: a
    plugin's section is drawn only for a report with a release of one of its methods."""
    return [
        (name, spec)
        for name, spec in sorted(sections.items())
        if any(spec.concerns(method) for method in released)
    ]


def _extra_sections(
    host: Any, context: Mapping[str, Any], report: PrivacyReport
) -> tuple[list[ExtraSection], list[str]]:
    if host is None:
        return [], []
    sections: list[ExtraSection] = []
    problems: list[str] = []
    released = released_methods(_report_methods(report), host.methods())
    for name, spec in concerned_sections(host.report_sections(), released):
        plugin = spec.provenance.plugin if spec.provenance is not None else None
        try:
            text = spec.render(context)
        except Exception as exc:  # a plugin's section never breaks the report
            problems.append(f"report section {name!r} of plugin {plugin!r} failed: {exc}")
            continue
        if not isinstance(text, str):
            problems.append(f"report section {name!r} of plugin {plugin!r} returned no text")
            continue
        if not text.strip():
            continue  # the section does not concern this report's releases
        sections.append(ExtraSection(name, spec.title, text, plugin))
    return sections, problems


def account_dict(account: GraphAccount, pipeline_name: str | None) -> dict[str, Any]:
    """``dpledger account --json`` output (without ``file``): the same dict, made JSON-safe."""
    out = account.to_dict()
    out["pipeline"] = pipeline_name
    safe: dict[str, Any] = json_safe(out)
    return safe


# -- entry points ----------------------------------------------------------------------------
def _unavailable(account: GraphAccount) -> list[tuple[str, str]]:
    """Every (backend, reason) a source's accounting lists as unavailable, once each."""
    unavailable: list[tuple[str, str]] = []
    for s in account.sources:
        unavailable.extend(u for u in s.unavailable if u not in unavailable)
    return unavailable


def _source_adjacencies(account: GraphAccount) -> list[tuple[str, Adjacency]]:
    return [(s.reduction.source, s.reduction.adjacency) for s in account.sources]


def _data_accesses(account: GraphAccount) -> tuple[DataAccess, ...]:
    """One row per source: its adjacency, its releases and its notes."""
    return tuple(
        DataAccess(
            s.reduction.source,
            s.reduction.adjacency.describe(),
            s.reduction.adjacency.relation,
            s.reduction.adjacency.unit,
            tuple(r.release_id for r in s.reduction.releases),
            s.reduction.notes,
        )
        for s in account.sources
    )


def _with_sections(report: PrivacyReport, host: Any, graph: CompositionGraph) -> PrivacyReport:
    """``report`` with the plugins' extra sections, and a warning for each that failed."""
    sections, problems = _extra_sections(host, section_context(report, graph), report)
    if not (sections or problems):
        return report
    return attrs.evolve(
        report,
        sections=tuple(sections),
        warnings=tuple(dict.fromkeys([*report.warnings, *problems])),
    )


def _query(delta: float | None, epsilon: float | None) -> tuple[str, float]:
    return ("delta", float(delta)) if delta is not None else ("epsilon", float(epsilon or 0.0))


def build_report(
    graph: CompositionGraph,
    *,
    title: str,
    input_kind: str,
    input_name: str,
    delta: float | None = None,
    epsilon: float | None = None,
    backends: Sequence[str] | None = None,
    host: Any = None,
    descriptions: Mapping[str, str] | None = None,
    provenances: Mapping[str, Provenance] | None = None,
    audit: Mapping[str, Any] | None = None,
    runtime: Mapping[str, Any] | None = None,
    extra_warnings: Iterable[str] = (),
    pipeline_name: str | None = None,
    brackets: bool = True,
    run_method: str | None = None,
) -> BuiltReport:
    """Account ``graph`` and assemble the report (``run_method``: see ``release_rows``)."""
    if (delta is None) == (epsilon is None):
        raise InvalidParameterError("delta", "give exactly one of delta or epsilon", "pass one")
    names = list(backends) if backends is not None else None
    account = account_graph(graph, delta=delta, epsilon=epsilon, backends=names, per_release=True)
    eps_query = delta is not None
    bound = json_safe(account.bound.to_dict())
    adjacency = account.adjacency_description()
    rows = release_rows(account, host, provenances or {}, run_method)
    unavailable = _unavailable(account)
    reasons = dict(reversed(unavailable))
    bracket_list = _brackets(graph, delta, epsilon, names, reasons) if brackets else ()
    warnings = [*prose.warnings(rows, account, bracket_list, eps_query), *extra_warnings]
    report = PrivacyReport(
        title=title,
        dpledger_version=_version(),
        input_kind=input_kind,
        input_name=input_name,
        query=_query(delta, epsilon),
        setting=prose.SETTING,
        data_accesses=_data_accesses(account),
        released=_released(graph, account, descriptions or {}),
        unit_of_privacy=prose.unit_of_privacy(_source_adjacencies(account)),
        adjacency=adjacency,
        accounting_method=str(bound["method"]),
        combined=account.combined,
        assumptions=prose.assumptions(account),
        statement=prose.statement(bound, adjacency, eps_query),
        bound=bound,
        releases=rows,
        brackets=bracket_list,
        unavailable=tuple(unavailable),
        warnings=tuple(dict.fromkeys(warnings)),
        account=account_dict(account, pipeline_name),
        audit=json_safe(audit) if audit is not None else None,
        runtime=json_safe(runtime) if runtime is not None else None,
    )
    report = _with_sections(report, host, graph)
    return BuiltReport(
        report, graph, account, delta, epsilon, tuple(names) if names is not None else None
    )


def report_pipeline(
    pipeline: Pipeline,
    *,
    delta: float | None = None,
    epsilon: float | None = None,
    descriptions: Mapping[str, str] | None = None,
    **kwargs: Any,
) -> BuiltReport:
    """A report of a loaded pipeline (query as ``dpledger account`` resolves it)."""
    d, e = resolve_query(pipeline.delta, pipeline.epsilon, delta, epsilon)
    name = Path(pipeline.origin).name
    return build_report(
        pipeline.graph,
        title=pipeline.name or name,
        input_kind="pipeline",
        input_name=name,
        delta=d,
        epsilon=e,
        descriptions=descriptions,
        pipeline_name=pipeline.name,
        **kwargs,
    )


def report_pipeline_file(path: str | Path, **kwargs: Any) -> BuiltReport:
    """Load a ``.toml``/``.json`` pipeline file, or a DpEvent's JSON form, and report it
    (methods resolved by ``host``)."""
    host = kwargs.get("host")
    pipeline = load_pipeline_or_dp_event(path, host.resolve_method if host else None)
    return report_pipeline(pipeline, descriptions=file_descriptions(path), **kwargs)


def _version() -> str:
    return str(__version__)
