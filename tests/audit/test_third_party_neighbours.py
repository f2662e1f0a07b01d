"""A third-party method is audited through its own neighbouring-dataset rule.

The planted distribution is installed in a real temporary environment (see
``tests/cleanroom/conftest.py``) and audited with ``dpledger audit METHOD`` as a subprocess of
it. Its data is a histogram (bin counts), not a set of records: the generic canary would append
a count (a release of another size), while the plugin's rule adds one record to a bin.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tests.cleanroom.conftest import PlantedEnv, planted_env  # noqa: F401 (a fixture)

#: a noisy histogram released from the bin counts, with the plugin's own neighbour rule
COUNTS = """
import attrs
import numpy as np
from dpledger.plugin import GaussianEvent, MethodSpec, NeighbourPair, hookimpl


@attrs.frozen
class CountsParams:
    noise_multiplier: float = 1.0


def release(params, data, ledger, rng):
    counts = np.asarray(data, dtype=float)
    return {"counts": ledger.gaussian(counts, 1.0, params.noise_multiplier, step="counts")}


def one_more_record(params, data, adjacency):
    counts = np.asarray(data, dtype=float)
    moved = counts.copy()
    moved[0] += 1.0
    if adjacency.relation == "add_remove":
        text = "tp counts: one record added to bin 0"
    else:
        moved[1] -= 1.0
        text = "tp counts: one record moved from bin 1 to bin 0"
    return NeighbourPair(counts, moved, adjacency.relation, text)


SPEC = MethodSpec(name="tp_counts", params=CountsParams,
                  declare=lambda p, a: GaussianEvent(p.noise_multiplier), run=release,
                  description="noisy histogram of bin counts", proof="Balle and Wang 2018",
                  neighbours=one_more_record)


@hookimpl
def dpledger_register_methods(register):
    register(SPEC)
"""


def test_a_third_party_method_is_audited_through_its_own_rule(
    planted_env: PlantedEnv,  # noqa: F811 (the fixture)
    tmp_path: Path,
) -> None:
    planted_env.install("tp-counts", {"tp_counts": COUNTS}, {"counts": "tp_counts"})
    np.save(tmp_path / "counts.npy", np.array([4.0, 7.0, 2.0]))
    (tmp_path / "audit.toml").write_text('data = "counts.npy"\n[params]\nnoise_multiplier = 1.0\n')
    args = ("--runs", "200", "--delta", "1e-3", "--seed", "3", "--relation", "both", "--json")
    done = planted_env.dpledger("audit", "tp_counts", "--config", "audit.toml", *args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["method"] == "tp_counts" and out["verdict"] == "no violation found"
    assert [(r["relation"], r["neighbours"]) for r in out["relations"]] == [
        ("add_remove", "tp counts: one record added to bin 0"),
        ("replace_one", "tp counts: one record moved from bin 1 to bin 0"),
    ]
    for relation in out["relations"]:
        [row] = relation["audits"]
        assert row["verdict"] == "no violation found"
        assert row["epsilon_lower"] <= row["claimed_epsilon"]
