"""The report of a verified run whose pipeline file labels its releases with the run's own steps
(the demo's ``private_mixture_warm_start`` and ``noisy_particle_gd`` steps of ``trajectories``)
shows the run method's plugin and tier on those releases, not ``-`` and ``unverified``."""

from __future__ import annotations

from dpledger.accountant.graph_account import account_graph
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import GaussianEvent
from dpledger.report.tiers import release_rows
from dpledger.runtime.graph import CompositionGraph
from dpledger.runtime.plugin_manager import PluginHost


def _rows(run_method: str | None) -> dict[str, tuple[str | None, str]]:
    graph = CompositionGraph()
    graph.add_source("data", Adjacency())
    graph.add_release("step", GaussianEvent(2.0), "data", method="a_step_of_the_run")
    graph.add_release("count", GaussianEvent(3.0), "data", method="laplace_mechanism")
    account = account_graph(graph, delta=1e-5, per_release=True)
    host = PluginHost.create(builtin_only=True)
    rows = release_rows(account, host, {}, run_method)
    return {r.node: (r.plugin, r.tier) for r in rows}


def test_a_step_of_a_verified_builtin_run_shows_its_plugin_and_tier() -> None:
    host = PluginHost.create(builtin_only=True)
    spec = host.method("gaussian_mechanism")
    assert spec.provenance is not None
    rows = _rows("gaussian_mechanism")
    assert rows["step"] == (spec.provenance.plugin, spec.provenance.tier)
    assert rows["step"][1] != "unverified"
    # a release naming a registered method keeps that method's own plugin
    laplace = host.method("laplace_mechanism").provenance
    assert laplace is not None and rows["count"] == (laplace.plugin, laplace.tier)


def test_without_a_run_the_unknown_label_stays_unverified() -> None:
    assert _rows(None)["step"] == (None, "unverified")
