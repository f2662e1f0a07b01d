"""The unit a pipeline's method release bounds itself, as ``dpledger account`` states it.

A method that enforces its own unit (``MethodSpec.protects``: the aggregation keeps at most L0
partitions and L∞ rows in each of every value of its unit column) reads a row-level source,
and its declared events are stated for that unit. The accountant composes those events under
the source's row-level adjacency; the bound holds for one unit of the method when every
release of the source bounds that same unit (the same statement ``dpledger run`` prints), and
otherwise for one row of the source only, each such release's events alone holding for its
unit. The accounted graph itself is unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dpledger.core.errors import DPLedgerError

if TYPE_CHECKING:
    from dpledger.accountant.graph_account import GraphAccount
    from dpledger.runtime.pipeline import Pipeline

__all__ = ["adjacency_lines", "method_units", "source_units", "unit_text", "with_method_units"]


def method_units(pipeline: Pipeline, result: GraphAccount, host: Any) -> dict[str, str]:
    """Per release id: the unit its method states it bounds itself under its source's
    adjacency (``PluginHost.protected_unit``); releases whose method states none are left
    out, and so are releases behind a transform and everything without the plugin host."""
    if host is None:
        return {}
    adjacency = {s.reduction.source: s.reduction.adjacency for s in result.sources}
    out: dict[str, str] = {}
    for r in result.releases:
        # a transform between (a partition's cells, a subsample) changes what one unit can
        # reach: the unit's statement is the method's for the source's rows as read
        params = pipeline.method_params.get(r.release_id)
        if r.path or params is None or r.source not in adjacency:
            continue
        if r.method is None or r.method not in host.methods():
            continue
        try:
            unit = host.protected_unit(r.method, params, adjacency[r.source])
        except DPLedgerError:
            continue
        if unit is not None:
            out[r.release_id] = str(unit)
    return out


def source_units(result: GraphAccount, units: Mapping[str, str]) -> dict[str, str]:
    """Per source: the unit every one of its releases bounds, when they all bound the same."""
    by_source: dict[str, set[str | None]] = {}
    for r in result.releases:
        by_source.setdefault(r.source, set()).add(units.get(r.release_id))
    return {
        source: next(iter(found))  # type: ignore[misc]
        for source, found in by_source.items()
        if len(found) == 1 and None not in found
    }


def _accounted(result: GraphAccount) -> str:
    return result.adjacency_description()


def adjacency_lines(result: GraphAccount, covered: Mapping[str, str]) -> list[str]:
    """The summary's adjacency: the methods' unit when it covers every source, with what was
    accounted; else the sources' adjacency."""
    sources = [s.reduction.source for s in result.sources]
    if not sources or any(s not in covered for s in sources):
        return [f"adjacency: {_accounted(result)}"]
    return [
        f"adjacency: {'; '.join(sorted({covered[s] for s in sources}))}",
        "accounted: the method's events, stated for that unit, composed under the source's "
        f"adjacency ({_accounted(result)})",
    ]


def unit_text(release: Any, units: Mapping[str, str], covered: Mapping[str, str]) -> str:
    """A release's line on the unit its method bounds (and, when its source's other releases
    do not bound it, that the source's bound holds for one row only)."""
    unit = units[release.release_id]
    if release.source in covered:
        return unit
    return (
        f"{unit}; this release's events alone hold for that unit, the source's bound for its "
        "own adjacency only (other releases of the source do not bound the unit)"
    )


def with_method_units(
    out: dict[str, Any], result: GraphAccount, units: Mapping[str, str]
) -> dict[str, Any]:
    """``dpledger account --json``'s dictionary with the methods' units: per release
    ``protects``; per source, and at the top when every source is covered,
    ``adjacency_description`` names the unit and ``accounted_adjacency_description`` keeps the
    adjacency the events were composed under (``adjacency`` stays the accounted one)."""
    if not units:
        return out
    covered = source_units(result, units)
    for entry in out.get("releases", []):
        if entry.get("id") in units:
            entry["protects"] = units[entry["id"]]
    for entry in out.get("sources", []):
        if entry.get("source") in covered:
            entry["accounted_adjacency_description"] = entry.get("adjacency_description")
            entry["adjacency_description"] = covered[entry["source"]]
    sources = [s.reduction.source for s in result.sources]
    if sources and all(s in covered for s in sources):
        out["accounted_adjacency_description"] = out.get("adjacency_description")
        out["adjacency_description"] = "; ".join(sorted({covered[s] for s in sources}))
    return out
