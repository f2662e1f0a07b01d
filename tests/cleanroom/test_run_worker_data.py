"""A third-party run's worker reads its data file itself at row level; the ledger still decides.

The method's data is its input, so at row level its worker reads the data file as ``dpledger
run`` would; the ledger, its generator and the unit keys stay in dpledger's process. A worker
that lies about the rows it used cannot lower the accounted cost: rows beyond the sample are
refused by the ledger, and a smaller dataset claimed to the sampler leaves the bound of the
declaration as it is. At user level dpledger's process still bounds the rows per user before
the method sees them (the method never reads the file).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from dpledger.accountant import select
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import GaussianEvent, PoissonSampledEvent, SelfComposedEvent
from tests.cleanroom.conftest import PlantedEnv
from tests.cleanroom.test_run_out_of_process import HONEST

#: DP-SGD steps whose run() lies about the rows it used ({rows}: the rows it passes, {n}: the
#: dataset size it tells the sampler)
LIAR = """
import attrs
import numpy as np
from dpledger.core.events import GaussianEvent, PoissonSampledEvent, SelfComposedEvent
from dpledger.core.hookspecs import hookimpl
from dpledger.core.specs import MethodSpec


@attrs.frozen
class P:
    steps: int = 5
    q: float = 0.1
    sigma: float = 1.1


def run(p, data, ledger, rng):
    x = data["x"]
    total = np.zeros(x.shape[1])
    for t in range(p.steps):
        with ledger.poisson_sample({n}, p.q, step=f"sample[{{t}}]") as batch:
            rows = {rows}
            total += ledger.clipped_sum_gaussian(rows, 1.0, p.sigma, step=f"noise[{{t}}]")
    return {{"total": total}}


SPEC = MethodSpec(name="tp_liar", params=P,
                  declare=lambda p, a: SelfComposedEvent(
                      PoissonSampledEvent(p.q, GaussianEvent(p.sigma)), p.steps),
                  run=run, description="DP-SGD steps", proof="Abadi et al. 2016")


@hookimpl
def dpledger_register_methods(register):
    register(SPEC)
"""

DATA = {"x": np.random.default_rng(5).normal(size=(400, 3))}


def _run(env: PlantedEnv, tmp_path: Path, method: str) -> subprocess.CompletedProcess[str]:
    args = ("run", method, "--config", "run.toml", "--out", "out", "--seed", "3")
    return env.dpledger(*args, cwd=tmp_path, env={"TP_MARKER": str(tmp_path / "marker.txt")})


def _liar(env: PlantedEnv, tmp_path: Path, rows: str, n: str) -> subprocess.CompletedProcess[str]:
    env.install("tp-liar", {"tp_liar": LIAR.format(rows=rows, n=n)}, {"liar": "tp_liar"})
    np.savez(tmp_path / "data.npz", **DATA)
    (tmp_path / "run.toml").write_text('data = "data.npz"\ndelta = 1e-5\n[params]\nsteps = 5\n')
    return _run(env, tmp_path, "tp_liar")


def test_a_worker_that_passes_rows_outside_the_sample_is_refused(
    planted_env: PlantedEnv, tmp_path: Path
) -> None:
    # it has the whole dataset (it read the file): it passes every row, not the sampled ones
    done = _liar(planted_env, tmp_path, rows="x", n="x.shape[0]")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "the contributions have 400 rows, but the open sample 'sample[0]' holds" in done.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.private").exists()


@pytest.mark.parametrize("n", ["10", "x.shape[0] // 4"])
def test_a_worker_that_claims_fewer_rows_cannot_lower_the_bound(
    planted_env: PlantedEnv, tmp_path: Path, n: str
) -> None:
    done = _liar(planted_env, tmp_path, rows="x[batch.indices]", n=n)
    assert done.returncode == 0, done.stderr
    record = json.loads((tmp_path / "out" / "ledger.json").read_text())
    declared = SelfComposedEvent(PoissonSampledEvent(0.1, GaussianEvent(1.1)), 5)
    expected = select.account(declared, Adjacency(), delta=1e-5).bound.epsilon
    assert record["privacy"]["epsilon"] == pytest.approx(expected, rel=1e-9)
    assert [s["step"] for s in record["steps"]][:1] == ["sample[0]"]


def test_at_user_level_the_method_gets_the_rows_bounded_by_dpledger(
    planted_env: PlantedEnv, tmp_path: Path
) -> None:
    planted_env.install("tp-honest", {"tp_honest": HONEST}, {"honest": "tp_honest"})
    uid = np.array([0, 0, 0, 1, 1, 2, 3, 3, 3, 3])
    np.savez(tmp_path / "data.npz", uid=uid, v=np.arange(10.0))
    (tmp_path / "run.toml").write_text(
        'data = "data.npz"\ndelta = 1e-5\n'
        '[adjacency]\nunit = "user"\nunit_key = "uid"\nmax_contributions = 1\n'
        "[params]\nnoise_multiplier = 2.0\n"
    )
    done = _run(planted_env, tmp_path, "tp_release")
    assert done.returncode == 0, done.stderr
    # one row per user (the first), as dpledger's process bounded them: not the file's ten
    assert np.load(tmp_path / "out" / "release.npy").shape == (4,)
