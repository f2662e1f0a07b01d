"""Shared report cases: one Gaussian release (σ = 1, δ = 1e-5) with its exact ε, and a
hand-made report.

The certified ε is the analytic Gaussian value of Balle & Wang (2018), computed here
independently: the ε at which Φ(1/(2σ) − εσ) − e^ε Φ(−1/(2σ) − εσ) = δ, found by bisection.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from scipy.stats import norm

from dpledger.core.adjacency import Adjacency
from dpledger.core.events import GaussianEvent
from dpledger.report.build import BuiltReport, build_report
from dpledger.report.model import Bracket, DataAccess, PrivacyReport, Released, ReleaseRow
from dpledger.runtime.graph import CompositionGraph
from dpledger.runtime.plugin_manager import PluginHost, make_plugin_manager

__all__ = [
    "DELTA",
    "PIPELINE",
    "SIGMA",
    "analytic_gaussian_epsilon",
    "gaussian_report",
    "graph",
    "minimal_report",
]

SIGMA = 1.0
DELTA = 1e-5
#: the same pipeline as a file
PIPELINE: dict[str, Any] = {
    "name": "one-gaussian",
    "delta": DELTA,
    "sources": [{"name": "db", "adjacency": {"relation": "add_remove", "unit": "row"}}],
    "releases": [
        {"id": "q", "input": "db", "event": {"kind": "gaussian", "noise_multiplier": SIGMA}}
    ],
}


def analytic_gaussian_epsilon(sigma: float, delta: float) -> float:
    """The exact ε of one Gaussian of sensitivity 1 and scale ``sigma`` (bisection, from above)."""

    def excess(eps: float) -> float:
        a = norm.cdf(1 / (2 * sigma) - eps * sigma)
        b = norm.cdf(-1 / (2 * sigma) - eps * sigma)
        return float(a - math.exp(eps) * b) - delta

    lo, hi = 0.0, 50.0
    while hi - lo > 1e-15 * hi:
        mid = (lo + hi) / 2
        if excess(mid) > 0:
            lo = mid
        else:
            hi = mid
    return hi


def graph() -> CompositionGraph:
    """The pipeline as a graph: one row-level source, one Gaussian release."""
    g = CompositionGraph()
    g.add_source("db", Adjacency())
    g.add_release("q", GaussianEvent(SIGMA), "db")
    return g


@functools.cache
def gaussian_report() -> BuiltReport:
    """The report of :func:`graph` at δ = 1e-5, every backend's bracket included (built once)."""
    host = PluginHost(make_plugin_manager(load_entrypoints=False))
    return build_report(
        graph(),
        title="one Gaussian",
        input_kind="pipeline",
        input_name="gaussian.json",
        delta=DELTA,
        host=host,
        pipeline_name="one-gaussian",
    )


def minimal_report(**changes: Any) -> PrivacyReport:
    """A hand-made report (no accounting): one source, one release, ε ≤ 1.5 at δ = 1e-5."""
    bound = {"epsilon": 1.5, "epsilon_lower": 1.25, "delta": 1e-5, "method": "pld"}
    adjacency = "add/remove of one row (event level)"
    fields: dict[str, Any] = {
        "title": "hand made",
        "dpledger_version": "0.0.0",
        "input_kind": "pipeline",
        "input_name": "hand.json",
        "query": ("delta", 1e-5),
        "setting": "Central model.",
        "data_accesses": (DataAccess("db", adjacency, "add_remove", "row", ("q",), ()),),
        "released": (Released("q", "release", ("db",), "gaussian(noise_multiplier=1.0)"),),
        "unit_of_privacy": "one row (record) of source 'db'",
        "adjacency": adjacency,
        "accounting_method": "pld",
        "combined": "single source",
        "assumptions": ("an assumption",),
        "statement": "A statement.",
        "bound": bound,
        "releases": (
            ReleaseRow(
                node="q",
                source="db",
                method=None,
                plugin=None,
                distribution=None,
                version=None,
                event="gaussian(noise_multiplier=1.0)",
                count=1,
                declared_unit="row",
                lifted_event="gaussian(noise_multiplier=1.0)",
                lift_rules=("unchanged_k1",),
                tier="unverified",
                proof=None,
                proof_location=None,
                bound=bound,
            ),
        ),
        "brackets": (Bracket("pld", bound), Bracket("rdp", None, "not installed: x")),
        "unavailable": (),
        "warnings": ("a warning",),
        "account": {"epsilon": 1.5},
    }
    fields.update(changes)
    return PrivacyReport(**fields)
