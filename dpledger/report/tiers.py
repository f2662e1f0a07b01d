"""Trust tiers and provenance: the per-release rows of a report and each method's tier."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dpledger.accountant.graph_account import GraphAccount
from dpledger.core.specs import MethodSpec, Provenance
from dpledger.report.model import (
    ReleaseRow,
)
from dpledger.runtime.jsonform import json_safe

#: default delta of a pipeline that states neither delta nor epsilon (as ``dpledger account``)


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
    return tier if tier in TIER_ORDER else None


def release_tier(spec: MethodSpec | None, provenance: Provenance | None) -> str:
    """``unverified`` for third-party or unknown methods; otherwise the weakest of the
    plugin's tier (``contrib`` for builtin methods) and the tiers of the proof records its
    spec names (``ProofRef.records``; a missing or stale record is ``unverified``)."""
    prov = provenance or (spec.provenance if spec is not None else None)
    if spec is None or prov is None or prov.tier == "unverified":
        return "unverified"
    tiers: list[str] = [prov.tier, *(_registry_tier(t) or "unverified" for t in spec.proof.records)]
    return max(tiers, key=TIER_ORDER.index)


#: strongest first (``verified``: a proof record that meets the rule of docs/verification.md)
TIER_ORDER: tuple[str, ...] = ("vetted", "verified", "contrib", "unverified")


def release_rows(
    account: GraphAccount,
    host: Any,
    provenances: Mapping[str, Provenance],
    run_method: str | None = None,
) -> tuple[ReleaseRow, ...]:
    """One row per release. In the report of a verified run whose pipeline file labels its
    releases with the names of the run's own steps (``run_method``'s), a release whose label
    is no registered method is the run method's step: it shows that method's plugin and
    tier."""
    methods: Mapping[str, MethodSpec] = host.methods() if host is not None else {}
    ran = methods.get(run_method) if run_method else None
    rows = []
    for r in account.releases:
        spec = methods.get(r.method) if r.method else None
        if spec is None and ran is not None:
            spec = ran
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
                event_data=json_safe(r.event.to_dict()),
                lifted_event_data=json_safe(r.lifted.to_dict()),
            )
        )
    return tuple(rows)
