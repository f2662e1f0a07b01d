"""Trust tiers: the weakest of the plugin's tier and its proof records'; one row per release."""

from __future__ import annotations

from types import SimpleNamespace

import attrs
import pytest

from dpledger.accountant.graph_account import account_graph
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import GaussianEvent, LaplaceEvent
from dpledger.core.specs import MethodSpec, ProofRef, Provenance
from dpledger.proofs_checks import registry
from dpledger.report.tiers import TIER_ORDER, release_rows, release_tier
from dpledger.runtime.graph import CompositionGraph
from dpledger.runtime.jsonform import json_safe
from dpledger.runtime.plugin_manager import PluginHost

#: a code object with a current proof record (tier contrib)
RECORDED = "dpledger.core.events.ComposedEvent"  # a contrib record
VERIFIED = "dpledger.core.events.GaussianEvent"  # a record that meets the verified rule


@pytest.fixture(scope="module")
def laplace() -> MethodSpec:
    return PluginHost.create().method("laplace_mechanism")


def _with(spec: MethodSpec, tier: str, records: tuple[str, ...] = ()) -> MethodSpec:
    assert spec.provenance is not None
    return attrs.evolve(
        spec,
        provenance=attrs.evolve(spec.provenance, tier=tier),
        proof=ProofRef(spec.proof.citation, "docs/proof.md", records),
    )


def test_tiers_strongest_first() -> None:
    assert TIER_ORDER == ("vetted", "verified", "contrib", "unverified")
    assert registry.tier_of(RECORDED) == "contrib"
    assert registry.tier_of(VERIFIED) == "verified"


def test_a_vetted_plugin_keeps_its_tier_unless_a_record_is_weaker(laplace: MethodSpec) -> None:
    assert release_tier(_with(laplace, "vetted"), None) == "vetted"
    assert release_tier(_with(laplace, "vetted", (RECORDED,)), None) == "contrib"
    assert release_tier(_with(laplace, "vetted", (VERIFIED,)), None) == "verified"
    assert release_tier(_with(laplace, "vetted", (RECORDED, "no.such.Thing")), None) == (
        "unverified"
    )


def test_an_unverified_plugin_or_provenance_is_unverified(laplace: MethodSpec) -> None:
    assert release_tier(_with(laplace, "unverified", (RECORDED,)), None) == "unverified"
    vetted = Provenance("p", "dist", "1.0", "vetted")
    assert release_tier(_with(laplace, "unverified"), vetted) == "vetted"  # the given one counts
    assert release_tier(None, vetted) == "unverified"  # no spec: nothing says what runs
    assert release_tier(attrs.evolve(laplace, provenance=None), None) == "unverified"


def test_a_registry_that_fails_counts_as_no_record(
    laplace: MethodSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(target: str) -> str:
        raise RuntimeError("broken registry")

    monkeypatch.setattr(registry, "tier_of", broken)
    assert release_tier(_with(laplace, "vetted", (RECORDED,)), None) == "unverified"
    monkeypatch.setattr(registry, "tier_of", lambda target: "gold")  # not a tier
    assert release_tier(_with(laplace, "vetted", (RECORDED,)), None) == "unverified"
    assert release_tier(_with(laplace, "vetted"), None) == "vetted"  # no record named


def test_release_rows(laplace: MethodSpec) -> None:
    g = CompositionGraph()
    g.add_source("db", Adjacency(unit="user", unit_key="u", max_contributions=2))
    g.add_release("count", LaplaceEvent(10.0), "db", method="laplace_mechanism")
    g.add_release("other", GaussianEvent(4.0), "db", count=3, method="elsewhere", plugin="theirs")
    g.add_release("given", LaplaceEvent(10.0), "db", method="laplace_mechanism")
    account = account_graph(g, delta=1e-5, backends=["closed_form", "rdp"], per_release=True)
    host = SimpleNamespace(methods=lambda: {"laplace_mechanism": _with(laplace, "vetted")})
    override = Provenance("mine", "my-dist", "2.0", "contrib")
    rows = {r.node: r for r in release_rows(account, host, {"given": override})}
    count, other, given = rows["count"], rows["other"], rows["given"]
    assert (count.plugin, count.distribution, count.version, count.tier) == (
        "primitives.laplace",
        "dpledger",
        "0.1.0",
        "vetted",
    )
    assert (count.proof, count.proof_location) == (laplace.proof.citation, "docs/proof.md")
    assert count.event == "laplace(noise_multiplier=10.0)"
    assert count.lifted_event == "laplace(noise_multiplier=5.0)"  # two rows per user
    assert count.lift_rules == ("laplace_l1_sensitivity_xk",) and count.declared_unit == "row"
    assert count.bound == json_safe(account.release_bounds["count"].to_dict())
    assert (other.plugin, other.distribution, other.tier, other.proof) == (
        "theirs",
        None,
        "unverified",
        None,
    )
    assert other.count == 3 and other.method == "elsewhere"
    assert (given.plugin, given.distribution, given.version, given.tier) == (
        "mine",
        "my-dist",
        "2.0",
        "contrib",
    )
