"""Build a :class:`~dpledger.report.model.PrivacyReport` from a pipeline or a run directory.

The bound is computed by :func:`dpledger.accountant.graph_account.account_graph` with
``per_release=True``, exactly as ``dpledger account FILE --json --per-release`` does. Each
accountant's bracket is the same call restricted to that backend. A run directory
(``ledger.json`` written by ``dpledger run``) becomes a one-release graph (its declared event
under the recorded adjacency), or, when the ledger names a ``pipeline`` file beside it, that
pipeline.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from dpledger.accountant.alternatives import ReleaseReduction
from dpledger.accountant.graph_account import GraphAccount, account_graph
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import DPLedgerError, InvalidParameterError
from dpledger.core.events import (
    Event,
    PoissonSampledEvent,
    SampledWithoutReplacementEvent,
    event_from_dict,
)
from dpledger.core.specs import MethodSpec, Provenance
from dpledger.report.model import (
    NO_GUARANTEE,
    Bracket,
    DataAccess,
    ExtraSection,
    PrivacyReport,
    Released,
    ReleaseRow,
    json_safe,
    no_guarantee,
)
from dpledger.report.numbers import fmt_exact, fmt_up
from dpledger.runtime.graph import CompositionGraph
from dpledger.runtime.pipeline import Pipeline
from dpledger.runtime.run_record import RECORD_FILE, RunRecord

#: default delta of a pipeline that states neither delta nor epsilon (as ``dpledger account``)
DEFAULT_DELTA = 1e-5
LEDGER_FILE = RECORD_FILE
AUDIT_FILE = "audit.json"

SETTING = (
    "Central model: a trusted curator holds the raw data of the sources below, runs the listed "
    "releases and publishes only their outputs (and post-processing of them). The guarantee "
    "covers everything published; it does not cover the curator itself, side channels or timing."
)
IDEALIZED_NUMERICS = (
    "idealized numerics: noise is drawn in floating point from a numpy generator; the guarantee "
    "is that of the ideal real-valued mechanisms (floating-point samplers can be porous, and no "
    "timing hardening is claimed)"
)
#: lift rules that change nothing (no warning)
_PLAIN_RULES = frozenset({"unchanged_k1", "declared_user_level", "compose_distributes"})
_GROUP_RULES = frozenset({"pure_group_privacy", "approx_group_privacy"})
#: a bracket wider than this ratio (upper / lower) gets a note
WIDE_BRACKET = 1.25


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
def _registry_tier(target: str) -> str | None:
    """Tier recorded by ``dpledger.proofs_checks.registry.tier_of`` (None when unknown).

    Adapter: the registry is optional; any failure to look a target up means "no record".
    """
    try:
        from dpledger.proofs_checks import registry
    except ImportError:
        return None
    tier_of = getattr(registry, "tier_of", None)
    if tier_of is None:
        return None
    try:
        tier = tier_of(target)
    except Exception:  # a missing record is not an error of the report
        return None
    return tier if tier in ("vetted", "contrib", "unverified") else None


def release_tier(spec: MethodSpec | None, provenance: Provenance | None) -> str:
    """``unverified`` for third-party or unknown methods; otherwise the weakest of the
    plugin's tier (``contrib`` for builtin methods) and the tiers of the proof records its
    spec names (``ProofRef.records``; a missing or stale record is ``unverified``)."""
    prov = provenance or (spec.provenance if spec is not None else None)
    if spec is None or prov is None or prov.tier == "unverified":
        return "unverified"
    tiers: list[str] = [prov.tier, *(_registry_tier(t) or "unverified" for t in spec.proof.records)]
    return max(tiers, key=TIER_ORDER.index)


#: strongest first
TIER_ORDER: tuple[str, ...] = ("vetted", "contrib", "unverified")


# -- pieces of the report --------------------------------------------------------------------
def _statement(bound: Mapping[str, Any], adjacency: str, eps_query: bool) -> str:
    method = bound["method"]
    if no_guarantee(bound, eps_query):
        at = (
            f"no finite ε at δ = {fmt_exact(bound['delta'])}"
            if eps_query
            else f"δ = 1 at ε = {fmt_exact(bound['epsilon'])}"
        )
        return (
            f"The release carries {NO_GUARANTEE} with respect to {adjacency}: it contains a "
            f"non-private step, or its guarantee is vacuous ({at}; method {method})."
        )
    if not eps_query:
        return (
            f"The release is (ε, δ)-differentially private with respect to {adjacency}, with "
            f"δ = {fmt_up(bound['delta'])} (certified upper bound, method {method}) at "
            f"ε = {fmt_exact(bound['epsilon'])}."
        )
    return (
        f"The release is (ε, δ)-differentially private with respect to {adjacency}, with "
        f"ε = {fmt_up(float(bound['epsilon']))} (certified upper bound, method {method}) at "
        f"δ = {fmt_exact(bound['delta'])}."
    )


def _unit_of_privacy(adjacencies: Sequence[tuple[str, Adjacency]]) -> str:
    parts = []
    for source, adj in adjacencies:
        if adj.unit == "row":
            parts.append(f"one row (record) of source {source!r}")
        else:
            what = adj.contribution.replace("_", " ")
            parts.append(
                f"one user of source {source!r} (identified by {adj.unit_key!r}, contributing "
                f"at most {adj.max_contributions} {what})"
            )
    return "; ".join(parts)


def _relation_text(adj: Adjacency) -> str:
    if adj.relation == "add_remove":
        return (
            "add/remove: neighbouring datasets differ by the presence or absence of one unit's data"
        )
    return (
        "replace-one: neighbouring datasets differ by the substitution of one unit's data (the "
        "accountant doubles each per-unit add/remove contribution bound)"
    )


def _sampling(event: Event) -> list[str]:
    out = []
    for e in event.walk():
        if isinstance(e, PoissonSampledEvent):
            out.append(
                f"Poisson subsampling at rate {fmt_exact(e.sampling_probability)}: every record "
                "is included in each step independently with that probability (shuffled or "
                "fixed-size batches are not covered by this analysis)"
            )
        elif isinstance(e, SampledWithoutReplacementEvent):
            out.append(
                f"sampling without replacement: a uniformly random subset of exactly "
                f"{e.sample_size} of the {e.source_size} records per step (the source size is "
                "public)"
            )
    return list(dict.fromkeys(out))


def _assumptions(account: GraphAccount) -> tuple[str, ...]:
    out: list[str] = []
    for s in account.sources:
        red = s.reduction
        out.append(f"source {red.source!r}, neighbouring relation {_relation_text(red.adjacency)}")
        if red.adjacency.unit == "user":
            out.append(
                f"source {red.source!r}: each user contributes at most "
                f"{red.adjacency.max_contributions} {red.adjacency.contribution.replace('_', ' ')}"
                " (the pipeline must enforce this bound; the guarantee fails otherwise)"
            )
        out.append(
            f"source {red.source!r}: its releases compose sequentially and adaptively "
            "(each may depend on earlier outputs)"
        )
        out.extend(f"source {red.source!r}: {n}" for n in red.notes)
        if len(red.alternatives) > 1:
            out.append(
                f"source {red.source!r}: parallel composition, the bound is the worst of "
                f"{len(red.alternatives)} cell combinations"
            )
    for r in account.releases:
        out.extend(f"release {r.release_id!r}: {t}" for t in _sampling(r.lifted))
    out.append(
        "noise is stated relative to each query's per-record (per-unit) contribution bound; "
        "clipping or bounded domains must enforce it"
    )
    if len(account.sources) > 1:
        out.append(f"sources: {account.combined}")
    return tuple(out)


def _brackets(
    graph: CompositionGraph,
    delta: float | None,
    epsilon: float | None,
    backends: Sequence[str] | None,
    reasons: Mapping[str, str],
) -> tuple[Bracket, ...]:
    from dpledger.accountant.select import backend_factories

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


def _release_rows(
    account: GraphAccount,
    host: Any,
    provenances: Mapping[str, Provenance],
) -> tuple[ReleaseRow, ...]:
    methods: Mapping[str, MethodSpec] = host.methods() if host is not None else {}
    rows = []
    for r in account.releases:
        spec = methods.get(r.method) if r.method else None
        prov = provenances.get(r.release_id) or (spec.provenance if spec is not None else None)
        bound = account.release_bounds.get(r.release_id)
        rows.append(
            ReleaseRow(
                node=r.release_id,
                source=r.source,
                method=r.method,
                plugin=prov.plugin if prov is not None else r.plugin,
                distribution=prov.distribution if prov is not None else None,
                version=prov.version if prov is not None else None,
                event=r.event.describe(),
                count=r.count,
                declared_unit=r.declared_unit,
                lifted_event=r.lifted.describe(),
                lift_rules=r.rules,
                tier=release_tier(spec, prov),
                proof=spec.proof.citation if spec is not None else None,
                proof_location=spec.proof.location if spec is not None else None,
                bound=json_safe(bound.to_dict()) if bound is not None else None,
            )
        )
    return tuple(rows)


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


def _warnings(
    rows: Sequence[ReleaseRow],
    account: GraphAccount,
    brackets: Sequence[Bracket],
    eps_query: bool,
) -> list[str]:
    out = [IDEALIZED_NUMERICS]
    bound = account.bound.to_dict()
    upper = float(bound["epsilon" if eps_query else "delta"])
    lower = float(bound["epsilon_lower" if eps_query else "delta_lower"])
    if upper == float("inf"):
        out.append("the bound is infinite: a release is non-private or its guarantee is vacuous")
    elif lower > 0 and upper > WIDE_BRACKET * lower:
        out.append(
            f"the certified bracket is wide (lower {lower:.4g}, upper {fmt_up(upper)}): the "
            "true privacy loss may be well below the reported upper bound, never above it"
        )
    if bound["method"] == "prv":
        out.append(
            "approximation tier: the bound is prv-accountant's error-bounded numerical upper "
            "bound (a cross-check backend whose error analysis is the library's)"
        )
    for row in rows:
        if row.method is None:
            out.append(
                f"release {row.node!r} names no method: its declared event is taken as given "
                "(honest-but-curious)"
            )
        elif row.tier == "unverified":
            out.append(
                f"release {row.node!r}: method {row.method!r} is not a registered builtin "
                "method with a proof record (tier unverified, honest-but-curious: the bound "
                "holds only if the method really executes its declared event)"
            )
        elif row.tier == "contrib":
            out.append(
                f"release {row.node!r}: method {row.method!r} has trust tier contrib (its proof "
                "ships with dpledger but has not been reviewed)"
            )
        for rule in row.lift_rules:
            if rule == "approx_group_privacy_vacuous":
                out.append(
                    f"release {row.node!r}: group privacy over the user's rows is vacuous "
                    "(δ ≥ 1), so the release counts as non-private"
                )
            elif rule in _GROUP_RULES:
                out.append(
                    f"release {row.node!r} is lifted to users by {rule} (valid but usually "
                    "loose; declaring it at user level can be tighter)"
                )
    for b in brackets:
        if b.bound is None and b.reason and b.reason.startswith("not installed"):
            out.append(f"cross-check backend {b.backend!r} is {b.reason}")
    return out


def _section_context(report: PrivacyReport, graph: CompositionGraph) -> dict[str, Any]:
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
    return {**report.to_dict(), "release_events": json_safe(events)}


def _extra_sections(host: Any, context: Mapping[str, Any]) -> tuple[list[ExtraSection], list[str]]:
    if host is None:
        return [], []
    sections: list[ExtraSection] = []
    problems: list[str] = []
    for name, spec in sorted(host.report_sections().items()):
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
) -> BuiltReport:
    """Account ``graph`` and assemble every section of the report."""
    if (delta is None) == (epsilon is None):
        raise InvalidParameterError("delta", "give exactly one of delta or epsilon", "pass one")
    names = list(backends) if backends is not None else None
    account = account_graph(graph, delta=delta, epsilon=epsilon, backends=names, per_release=True)
    eps_query = delta is not None
    bound = json_safe(account.bound.to_dict())
    adjacency = account.adjacency_description()
    rows = _release_rows(account, host, provenances or {})
    unavailable: list[tuple[str, str]] = []
    for s in account.sources:
        unavailable.extend(u for u in s.unavailable if u not in unavailable)
    reasons = dict(reversed(unavailable))
    bracket_list = _brackets(graph, delta, epsilon, names, reasons) if brackets else ()
    warnings = _warnings(rows, account, bracket_list, eps_query)
    warnings.extend(extra_warnings)
    query = ("delta", float(delta)) if delta is not None else ("epsilon", float(epsilon or 0.0))
    report = PrivacyReport(
        title=title,
        dpledger_version=_version(),
        input_kind=input_kind,
        input_name=input_name,
        query=query,
        setting=SETTING,
        data_accesses=tuple(
            DataAccess(
                s.reduction.source,
                s.reduction.adjacency.describe(),
                s.reduction.adjacency.relation,
                s.reduction.adjacency.unit,
                tuple(r.release_id for r in s.reduction.releases),
                s.reduction.notes,
            )
            for s in account.sources
        ),
        released=_released(graph, account, descriptions or {}),
        unit_of_privacy=_unit_of_privacy(
            [(s.reduction.source, s.reduction.adjacency) for s in account.sources]
        ),
        adjacency=adjacency,
        accounting_method=str(bound["method"]),
        combined=account.combined,
        assumptions=_assumptions(account),
        statement=_statement(bound, adjacency, eps_query),
        bound=bound,
        releases=rows,
        brackets=bracket_list,
        unavailable=tuple(unavailable),
        warnings=tuple(dict.fromkeys(warnings)),
        account=account_dict(account, pipeline_name),
        audit=json_safe(audit) if audit is not None else None,
        runtime=json_safe(runtime) if runtime is not None else None,
    )
    sections, problems = _extra_sections(host, _section_context(report, graph))
    if sections or problems:
        report = attrs.evolve(
            report,
            sections=tuple(sections),
            warnings=tuple(dict.fromkeys([*report.warnings, *problems])),
        )
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
    from dpledger.integrations.dp_accounting import load_pipeline_or_dp_event

    host = kwargs.get("host")
    pipeline = load_pipeline_or_dp_event(path, host.resolve_method if host else None)
    return report_pipeline(pipeline, descriptions=file_descriptions(path), **kwargs)


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
    extra = _recorded_mismatch(runtime, built.report.bound)
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


def _version() -> str:
    from dpledger import __version__

    return str(__version__)
