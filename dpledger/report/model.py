"""The privacy report as data: a frozen :class:`PrivacyReport` with a deterministic JSON form.

Every number in a report comes from :func:`dpledger.accountant.graph_account.account_graph` (the
same call ``dpledger account --json --per-release`` makes); ``account`` holds that command's
JSON output verbatim (without the ``file`` key), so the two can be compared exactly. Renderers
(:mod:`.render_md`, :mod:`.render_html`, :mod:`.render_json`) only format these fields.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import attrs

from dpledger.runtime.jsonform import json_safe

#: bump when a key is renamed or removed (adding keys keeps the version)
SCHEMA_VERSION = 1


#: what a report says, instead of a number, when the bound certifies nothing
NO_GUARANTEE = "no privacy guarantee"


def no_guarantee(bound: Mapping[str, Any], eps_query: bool) -> bool:
    """Whether ``bound`` certifies nothing: ε = ∞ (ε query) or δ ≥ 1 (δ query)."""
    if eps_query:
        return float(bound["epsilon"]) == math.inf
    return float(bound["delta"]) >= 1.0


@attrs.frozen
class DataAccess:
    """One protected source: its neighbouring relation and the releases that read it."""

    source: str
    adjacency: str
    relation: str
    unit: str
    releases: tuple[str, ...]
    notes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "adjacency": self.adjacency,
            "relation": self.relation,
            "unit": self.unit,
            "releases": list(self.releases),
            "notes": list(self.notes),
        }


@attrs.frozen
class Released:
    """One published output: a private release or a post-processing step of releases."""

    node: str
    kind: str
    inputs: tuple[str, ...]
    description: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "kind": self.kind,
            "inputs": list(self.inputs),
            "description": self.description,
        }


@attrs.frozen
class ReleaseRow:
    """One row of the per-release table."""

    node: str
    source: str
    method: str | None
    plugin: str | None
    distribution: str | None
    version: str | None
    event: str
    count: int
    declared_unit: str
    lifted_event: str
    lift_rules: tuple[str, ...]
    tier: str
    proof: str | None
    proof_location: str | None
    bound: Mapping[str, Any] | None
    #: the declared and the lifted event as event tables (exact parameters, as a pipeline
    #: file states them); ``event`` and ``lifted_event`` are their descriptions
    event_data: Mapping[str, Any] | None = None
    lifted_event_data: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "source": self.source,
            "method": self.method,
            "plugin": self.plugin,
            "distribution": self.distribution,
            "version": self.version,
            "event": self.event,
            "count": self.count,
            "declared_unit": self.declared_unit,
            "lifted_event": self.lifted_event,
            "lift_rules": list(self.lift_rules),
            "tier": self.tier,
            "proof": self.proof,
            "proof_location": self.proof_location,
            "bound": dict(self.bound) if self.bound is not None else None,
            "event_data": json_safe(self.event_data),
            "lifted_event_data": json_safe(self.lifted_event_data),
        }


@attrs.frozen
class Bracket:
    """One accountant's certified bracket for the whole pipeline, or why it has none."""

    backend: str
    bound: Mapping[str, Any] | None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "bound": dict(self.bound) if self.bound is not None else None,
            "reason": self.reason,
        }


@attrs.frozen
class ExtraSection:
    """A section contributed by a plugin (``dpledger_register_report_sections``)."""

    name: str
    title: str
    markdown: str
    plugin: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "markdown": self.markdown,
            "plugin": self.plugin,
        }


@attrs.frozen(eq=False)
class PrivacyReport:
    """Everything a privacy report states, in a fixed order."""

    title: str
    dpledger_version: str
    input_kind: str
    input_name: str
    query: tuple[str, float]
    setting: str
    data_accesses: tuple[DataAccess, ...]
    released: tuple[Released, ...]
    unit_of_privacy: str
    adjacency: str
    accounting_method: str
    combined: str
    assumptions: tuple[str, ...]
    statement: str
    bound: Mapping[str, Any]
    releases: tuple[ReleaseRow, ...]
    brackets: tuple[Bracket, ...]
    unavailable: tuple[tuple[str, str], ...]
    warnings: tuple[str, ...]
    account: Mapping[str, Any]
    audit: Mapping[str, Any] | None = None
    runtime: Mapping[str, Any] | None = None
    sections: tuple[ExtraSection, ...] = ()
    schema_version: int = SCHEMA_VERSION

    @property
    def reports_epsilon(self) -> bool:
        """True for an epsilon-at-delta query (False: delta at a given epsilon)."""
        return self.query[0] == "delta"

    @property
    def upper(self) -> float:
        """The certified upper bound (epsilon, or delta for an epsilon query)."""
        key = "epsilon" if self.reports_epsilon else "delta"
        return float(self.bound[key])

    @property
    def guaranteed(self) -> bool:
        """False when the bound certifies nothing (ε = ∞, or δ ≥ 1 at the queried ε)."""
        return not no_guarantee(self.bound, self.reports_epsilon)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, stable ordering (lists keep the order of the report)."""
        out = {
            "schema_version": self.schema_version,
            "dpledger_version": self.dpledger_version,
            "title": self.title,
            "input": {"kind": self.input_kind, "name": self.input_name},
            "query": {self.query[0]: self.query[1]},
            "setting": self.setting,
            "data_accesses": [d.to_dict() for d in self.data_accesses],
            "released": [r.to_dict() for r in self.released],
            "unit_of_privacy": self.unit_of_privacy,
            "adjacency": self.adjacency,
            "accounting": {
                "method": self.accounting_method,
                "combined": self.combined,
                "assumptions": list(self.assumptions),
            },
            "statement": self.statement,
            "bound": dict(self.bound),
            "releases": [r.to_dict() for r in self.releases],
            "brackets": [b.to_dict() for b in self.brackets],
            "unavailable": [{"backend": n, "reason": r} for n, r in self.unavailable],
            "audit": dict(self.audit) if self.audit is not None else None,
            "runtime": dict(self.runtime) if self.runtime is not None else None,
            "warnings": list(self.warnings),
            "sections": [s.to_dict() for s in self.sections],
            "account": dict(self.account),
        }
        safe: dict[str, Any] = json_safe(out)
        return safe
