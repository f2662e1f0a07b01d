"""The report section of an aggregation, in the words of PipelineDP's ``explain_computation``.

It reads the report's data only: each release of ``aggregate`` and its declared event (one
Gaussian or Laplace release per metric vector, in the order count, sum, centred sum,
histogram). The
bounds, the engine and the partitions are the run's plan, published in its outputs
(``outputs.json``, key ``plan``) and in the notes of its ledger steps.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["explain_section"]

METHOD_NAME = "aggregate"


def _leaves(event: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    if event.get("kind") == "composed":
        return [leaf for e in event.get("events", []) for leaf in _leaves(e)]
    if event.get("kind") == "self_composed":
        return _leaves(event.get("event", {})) * int(event.get("count", 1))
    return [event]


def _mechanism(leaf: Mapping[str, Any]) -> str:
    kind = str(leaf.get("kind", "?"))
    if kind == "partition_selection":
        return (
            f"private partition selection ({leaf.get('mechanism')} rule, ε = "
            f"{leaf.get('epsilon')}, δ = {leaf.get('delta')}, at most "
            f"{leaf.get('max_partitions')} partitions per unit)"
        )
    m = leaf.get("noise_multiplier")
    name = {"gaussian": "Gaussian", "laplace": "Laplace"}.get(kind, kind)
    scale = "standard deviation" if kind == "gaussian" else "scale"
    return f"{name} mechanism, noise {scale} = {m} × the sensitivity of one unit"


def _has_histogram(context: Mapping[str, Any]) -> bool:
    """Whether the run released a histogram (its outputs, in a run directory's report)."""
    runtime = context.get("runtime")
    outputs = runtime.get("outputs") if isinstance(runtime, Mapping) else None
    return isinstance(outputs, list) and "histogram" in outputs


def explain_section(context: Mapping[str, Any]) -> str:
    """Markdown: the computation's stages and each release's noise (empty if no release)."""
    releases = [
        r
        for r in context.get("releases", [])
        if isinstance(r, Mapping) and r.get("method") == METHOD_NAME
    ]
    if not releases:
        return ""
    events = context.get("release_events", {})
    lines = [
        "Computation graph (each stage runs as dpledger's code inside the engine; the engine "
        "returns bounded aggregates only):",
        "",
        "1. Per-partition contribution bounding: for each privacy unit, randomly (by a keyed "
        "hash of its own rows) select at most max_rows_per_partition rows per partition "
        "(L∞) and at most max_partitions_per_unit partitions (L0).",
        "2. Clip each value to [lower, upper] and round it to the fixed-point grid; sum "
        "integers per partition (exact in any order).",
        "3. Partition keys: public keys are kept and released (keys absent from the data "
        "are released with noise alone); otherwise a key is released only if its number of "
        "units passes a noisy threshold (private partition selection, booked first).",
        "4. Adding noise (on the driver, after the ledger booked the release):",
    ]
    if _has_histogram(context):
        lines[4:4] = [
            "   A histogram counts the kept rows of each partition in the public bins of the "
            "value column (values outside the declared edges in the end bins): one vector over "
            "every partition's bins, moved by one unit as a count is (C = 1).",
        ]
    for release in releases:
        node = str(release.get("node"))
        for i, leaf in enumerate(_leaves(events.get(node, {})), start=1):
            lines.append(f"   * `{node}` release {i}: {_mechanism(leaf)}")
    lines += [
        "",
        "The sensitivity of one unit is sqrt(L0)·L∞·C for Gaussian noise and L0·L∞·C for "
        "Laplace noise (C: what one row moves the aggregate; 1 for a count and a histogram). The "
        "plan with its numbers is in the run's outputs (`plan`).",
    ]
    return "\n".join(lines)
