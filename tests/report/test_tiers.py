"""Trust tiers in reports come from the plugin host and the proof records a method names."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from dpledger.cli import main
from dpledger.core.specs import ProofRef
from dpledger.proofs_checks.registry import RECORDS, tier_of
from dpledger.report.tiers import release_tier
from dpledger.runtime.plugin_manager import PluginHost

PIPELINE = (
    'delta = 1e-6\n[[sources]]\nname = "visits"\n'
    '[[releases]]\nid = "count"\ninput = "visits"\n'
    'method = "laplace_mechanism"\nparams = {sensitivity = 1.0, noise_multiplier = 10.0}\n'
)


def test_a_builtin_method_has_the_tier_plugins_lists(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "p.toml"
    path.write_text(PIPELINE)
    assert main(["plugins", "--json"]) == 0
    listed = json.loads(capfd.readouterr().out)
    entry = next(p for p in listed["plugins"] if "laplace_mechanism" in p["methods"])
    assert entry["tier"] == "contrib"
    assert (
        main(
            [
                "report",
                str(path),
                "--format",
                "json",
                "--no-figures",
                "--out",
                str(tmp_path / "r.json"),
            ]
        )
        == 0
    )
    report = json.loads((tmp_path / "r.json").read_text())
    row = report["releases"][0]
    assert (row["method"], row["tier"], row["distribution"]) == (
        "laplace_mechanism",
        "contrib",
        "dpledger",
    )
    assert not any("unverified" in w and "laplace_mechanism" in w for w in report["warnings"])


def test_named_proof_records_can_only_lower_the_tier() -> None:
    spec = PluginHost.create().method("laplace_mechanism")
    assert release_tier(spec, None) == "contrib"
    current = [r.target for r in RECORDS if tier_of(r.target) != "unverified"]
    assert current, "the registry holds current records"
    named = attrs.evolve(spec, proof=ProofRef(spec.proof.citation, records=(current[0],)))
    assert release_tier(named, None) == "contrib"  # a record never lifts a contrib plugin
    missing = attrs.evolve(
        spec, proof=ProofRef(spec.proof.citation, records=("dpledger.core.events.NoSuchThing",))
    )
    assert release_tier(missing, None) == "unverified"
    assert release_tier(None, None) == "unverified"
