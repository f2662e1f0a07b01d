"""A third-party method's run executes in a worker process; the ledger stays in dpledger's.

Planted distributions are installed in a real temporary environment (see conftest.py) and run
with ``dpledger run`` as a subprocess of it. Honest methods give the certified bound of their
declaration and, for a seed, the same outputs as the same code run in-process; hostile ones
cannot make dpledger's process draw less noise, and one that exits or hangs is named.
"""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpledger.accountant import select
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    GaussianEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
)
from dpledger.plugins.primitives import gaussian as builtin_gaussian
from dpledger.runtime.runner import run_verified
from tests.cleanroom.conftest import PlantedEnv, gaussian_epsilon

#: honest methods: a noisy release (the builtin Gaussian mechanism's ledger call) and DP-SGD
HONEST = """
import os
import sys

import attrs
import numpy as np
from dpledger.core.events import GaussianEvent, PoissonSampledEvent, SelfComposedEvent
from dpledger.core.hookspecs import hookimpl
from dpledger.core.specs import MethodSpec

with open(os.environ["TP_MARKER"], "a") as _marker:  # which processes import this module
    _marker.write(" ".join(sys.argv) + "\\n")


@attrs.frozen
class ReleaseParams:
    noise_multiplier: float = 2.0


def release(params, data, ledger, rng):
    answer = np.atleast_1d(np.asarray(data, dtype=float))
    return {"release": np.atleast_1d(ledger.gaussian(answer, 1.0, params.noise_multiplier,
                                                     step="gaussian"))}


@attrs.frozen
class SGDParams:
    steps: int = 30
    q: float = 0.05
    sigma: float = 1.1
    clip: float = 1.0
    lr: float = 0.5


def declare_sgd(p, a):
    return SelfComposedEvent(PoissonSampledEvent(p.q, GaussianEvent(p.sigma)), p.steps)


def sgd(p, data, ledger, rng):
    x, y = data["x"], data["y"]
    w = np.zeros(x.shape[1])
    start = rng.permutation(x.shape[0])[:1]  # non-private randomness, from run()'s rng
    for t in range(p.steps):
        with ledger.poisson_sample(x.shape[0], p.q, step=f"sample[{t}]") as batch:
            xb, yb = x[batch.indices], y[batch.indices]
            residual = 1.0 / (1.0 + np.exp(-np.clip(xb @ w, -30, 30))) - yb
            noisy = ledger.clipped_sum_gaussian(residual[:, None] * xb, p.clip, p.sigma,
                                                step=f"noise[{t}]")
        w = w - p.lr * np.asarray(noisy) / (p.q * x.shape[0])
    return {"weights": w, "first": int(start[0]), "steps": p.steps}


RELEASE = MethodSpec(name="tp_release", params=ReleaseParams,
                     declare=lambda p, a: GaussianEvent(p.noise_multiplier), run=release,
                     description="noisy release", proof="Balle and Wang 2018, Theorem 8")
SGD = MethodSpec(name="tp_sgd", params=SGDParams, declare=declare_sgd, run=sgd,
                 description="DP-SGD", proof="Abadi et al. 2016")


@hookimpl
def dpledger_register_methods(register):
    register(RELEASE)
    register(SGD)
"""

#: a method declared as the builtin Gaussian mechanism (sigma = 2) whose run() attacks first
HOSTILE = """
import sys
import threading
import time

import attrs
import numpy as np
from dpledger.core.events import GaussianEvent
from dpledger.core.hookspecs import hookimpl
from dpledger.core.specs import MethodSpec


class _Quiet(np.random.Generator):
    def normal(self, loc=0.0, scale=1.0, size=None):
        return super().normal(loc, scale / 10.0, size)


def _patch_class():
    from dpledger.runtime.ledger import PrivacyLedger
    original = PrivacyLedger.gaussian
    PrivacyLedger.gaussian = lambda self, v, s, m, *, step: original(self, v, s / 10.0, m,
                                                                     step=step)


def _restore_class():
    from dpledger.runtime.ledger import PrivacyLedger
    PrivacyLedger.gaussian = PrivacyLedger.__dict__["gaussian"].__closure__[0].cell_contents


def attack(ledger):
{attack}


def after():
{after}


@attrs.frozen
class P:
    noise_multiplier: float = 2.0


def run(params, data, ledger, rng):
    attack(ledger)
    answer = np.atleast_1d(np.asarray(data, dtype=float))
    out = ledger.gaussian(answer, 1.0, params.noise_multiplier, step="gaussian")
    after()  # undone before run() returns: a check of dpledger's code after run() sees nothing
    return {{"release": np.atleast_1d(out)}}


SPEC = MethodSpec(name="tp_hostile", params=P, declare=lambda p, a: GaussianEvent(2.0),
                  run=run, description="noisy release", proof="Balle and Wang 2018")


@hookimpl
def dpledger_register_methods(register):
    register(SPEC)
"""

#: (what run() does before it calls the ledger, what it does after)
ATTACKS = {
    "patches PrivacyLedger": ("    _patch_class()", "    _restore_class()"),
    "sys.setprofile swaps the generator": (
        """
    def _profile(frame, event, arg):
        owner = frame.f_locals.get("self") if event == "call" else None
        rng = getattr(owner, "__dict__", {}).get("rng")
        if rng is not None and not isinstance(rng, _Quiet):
            quiet = _Quiet(type(rng.bit_generator)())
            quiet.bit_generator.state = rng.bit_generator.state
            owner.rng = quiet
    sys.setprofile(_profile)""",
        "    sys.setprofile(None)",
    ),
    "a thread patches the ledger later": (
        """
    def _later():
        time.sleep(0.2)
        _patch_class()
        time.sleep(0.6)
        _restore_class()
    threading.Thread(target=_later).start()
    time.sleep(0.6)""",
        "    time.sleep(0.6)",
    ),
}

#: replaces the instance's verify, then leaves a sample open (which only verify refuses)
OPEN_SAMPLE = """
    ledger.verify = lambda: None
    ledger.poisson_sample(5, 0.5, step="left_open").__enter__()"""

DATA = np.linspace(-1.0, 1.0, 4000)


def _write_run(tmp_path: Path, data: Any, params: str, extra: str = "") -> Path:
    if isinstance(data, dict):
        np.savez(tmp_path / "data.npz", **data)
        name = "data.npz"
    else:
        np.save(tmp_path / "data.npy", data)
        name = "data.npy"
    config = tmp_path / "run.toml"
    config.write_text(f'data = "{name}"\ndelta = 1e-5\n{extra}[params]\n{params}\n')
    return config


def _run(env: PlantedEnv, tmp_path: Path, method: str, **environ: str) -> Any:
    return env.dpledger(
        "run",
        method,
        "--config",
        "run.toml",
        "--out",
        "out",
        "--seed",
        "3",
        cwd=tmp_path,
        env={"TP_MARKER": str(tmp_path / "marker.txt"), **environ},
    )


def _honest_module() -> types.ModuleType:
    module = types.ModuleType("tp_honest_in_process")
    exec(compile(HONEST, "tp_honest", "exec"), module.__dict__)  # the tests' own code
    return module


@pytest.fixture
def honest_env(planted_env: PlantedEnv) -> PlantedEnv:
    planted_env.install("tp-honest", {"tp_honest": HONEST}, {"honest": "tp_honest"})
    return planted_env


def test_a_noisy_release_out_of_process_is_the_builtin_release(
    honest_env: PlantedEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write_run(tmp_path, DATA, "noise_multiplier = 2.0")
    done = _run(honest_env, tmp_path, "tp_release")
    assert done.returncode == 0, done.stderr
    honest = gaussian_epsilon(2.0, 1e-5)
    record = json.loads((tmp_path / "out" / "ledger.json").read_text())
    assert honest * (1 - 1e-9) <= record["privacy"]["epsilon"] <= honest * (1 + 1e-6)
    assert record["provenance"] == {
        "plugin": "honest",
        "distribution": "tp-honest",
        "version": "1.0",
        "tier": "unverified",
    }
    assert record["params"] == {"noise_multiplier": 2.0}
    # the builtin Gaussian mechanism, run in this process with the same seed, releases the same
    builtin = run_verified(
        builtin_gaussian.SPEC,
        builtin_gaussian.GaussianParams(1.0, 2.0),
        DATA,
        seed=3,
    )
    released = np.load(tmp_path / "out" / "release.npy")
    np.testing.assert_array_equal(released, builtin.outputs["release"])
    assert 1.9 < float(np.std(released - DATA)) < 2.1
    # only worker processes imported the plugin, never dpledger's own (the one that ran `run`)
    importers = (tmp_path / "marker.txt").read_text().splitlines()
    assert importers and not any("--config" in line for line in importers), importers
    monkeypatch.setenv("TP_MARKER", str(tmp_path / "in-process.txt"))
    module = _honest_module()
    in_process = run_verified(module.RELEASE, module.ReleaseParams(), DATA, seed=3)
    np.testing.assert_array_equal(released, in_process.outputs["release"])


def test_dp_sgd_out_of_process_matches_in_process_and_its_bound(
    honest_env: PlantedEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = np.random.default_rng(11)
    x = rng.normal(size=(400, 3))
    data = {"x": x, "y": (x @ np.array([1.0, -2.0, 0.5]) > 0).astype(float)}
    _write_run(tmp_path, data, "steps = 30\nq = 0.05\nsigma = 1.1")
    done = _run(honest_env, tmp_path, "tp_sgd")
    assert done.returncode == 0, done.stderr
    record = json.loads((tmp_path / "out" / "ledger.json").read_text())
    declared = SelfComposedEvent(PoissonSampledEvent(0.05, GaussianEvent(1.1)), 30)
    expected = select.account(declared, Adjacency(), delta=1e-5).bound.epsilon
    assert record["privacy"]["epsilon"] == pytest.approx(expected, rel=1e-9)
    assert record["declared_core"] == declared.to_dict()
    steps = [s["step"] for s in record["steps"]]
    assert steps[:2] == ["sample[0]", "sample[1]"] and len(steps) == 30  # Poisson draws
    monkeypatch.setenv("TP_MARKER", str(tmp_path / "in-process.txt"))
    module = _honest_module()
    in_process = run_verified(module.SGD, module.SGDParams(), data, seed=3)
    weights = np.load(tmp_path / "out" / "weights.npy")
    np.testing.assert_array_equal(weights, in_process.outputs["weights"])
    outputs = json.loads((tmp_path / "out" / "outputs.json").read_text())
    assert outputs == {"first": in_process.outputs["first"], "steps": 30}
    assert float(np.linalg.norm(weights)) > 0.1


def _in_process_noise(env: PlantedEnv, tmp_path: Path) -> str:
    """The same hostile code run in-process (a ledger in the plugin's own process): the noise
    std it releases, or the error that stopped it."""
    script = (
        "import numpy as np, tp_hostile\n"
        "from dpledger.runtime.runner import run_verified\n"
        "data = np.load('data.npy')\n"
        "try:\n"
        "    out = run_verified(tp_hostile.SPEC, tp_hostile.P(), data, seed=3)\n"
        "    print(float(np.std(out.outputs['release'] - data)))\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__)\n"
    )
    import subprocess

    done = subprocess.run(
        [str(env.python), "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_run_that_attacks_the_ledger_cannot_lower_the_noise(
    planted_env: PlantedEnv, tmp_path: Path, attack: str
) -> None:
    before, after = ATTACKS[attack]
    source = HOSTILE.format(attack=before, after=after)
    planted_env.install("tp-hostile", {"tp_hostile": source}, {"hostile": "tp_hostile"})
    _write_run(tmp_path, DATA, "noise_multiplier = 2.0")
    # in the plugin's own process the attack works: a tenth of the noise
    assert 0.15 < float(_in_process_noise(planted_env, tmp_path)) < 0.25
    done = _run(planted_env, tmp_path, "tp_hostile")
    assert done.returncode == 0, done.stderr
    released = np.load(tmp_path / "out" / "release.npy")
    builtin = run_verified(
        builtin_gaussian.SPEC, builtin_gaussian.GaussianParams(1.0, 2.0), DATA, seed=3
    )
    np.testing.assert_array_equal(released, builtin.outputs["release"])
    assert 1.9 < float(np.std(released - DATA)) < 2.1
    honest = gaussian_epsilon(2.0, 1e-5)
    record = json.loads((tmp_path / "out" / "ledger.json").read_text())
    assert honest * (1 - 1e-9) <= record["privacy"]["epsilon"] <= honest * (1 + 1e-6)


def test_a_run_that_replaces_verify_is_still_verified(
    planted_env: PlantedEnv, tmp_path: Path
) -> None:
    source = HOSTILE.format(attack=OPEN_SAMPLE, after="    pass")
    planted_env.install("tp-hostile", {"tp_hostile": source}, {"hostile": "tp_hostile"})
    _write_run(tmp_path, DATA, "noise_multiplier = 2.0")
    # in-process, replacing verify on the instance lets the open sample through
    assert float(_in_process_noise(planted_env, tmp_path)) > 1.9
    done = _run(planted_env, tmp_path, "tp_hostile")
    assert done.returncode == 2, done.stdout
    assert "step 'left_open': a sample is still open" in done.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.private").exists()


@pytest.mark.parametrize(
    ("behaviour", "limit", "expect"),
    [
        ("    import os\n    os._exit(7)", "3", "exited with code 7"),
        # run() hangs before anything else: stopped at the run's limit whatever it is
        ("    time.sleep(60)", "1", "did not finish its run within 1 s"),
        ("    ledger.rng.normal()", "3", "uses ledger.rng, which is not available"),
    ],
)
def test_a_run_that_exits_hangs_or_reaches_past_the_ledger_is_named(
    planted_env: PlantedEnv, tmp_path: Path, behaviour: str, limit: str, expect: str
) -> None:
    source = HOSTILE.format(attack=behaviour, after="    pass")
    planted_env.install("tp-hostile", {"tp_hostile": source}, {"hostile": "tp_hostile"})
    _write_run(tmp_path, DATA, "noise_multiplier = 2.0")
    done = _run(planted_env, tmp_path, "tp_hostile", DPLEDGER_RUN_TIMEOUT=limit)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == "" and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "method 'tp_hostile'" in lines[0] and "hostile (tp-hostile 1.0)" in lines[0]
    assert expect in lines[0] and lines[0].count("Fix:") == 1, lines[0]
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.private").exists()


def test_a_bad_run_timeout_is_named(honest_env: PlantedEnv, tmp_path: Path) -> None:
    _write_run(tmp_path, DATA, "noise_multiplier = 2.0")
    done = _run(honest_env, tmp_path, "tp_release", DPLEDGER_RUN_TIMEOUT="soon")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "dpledger run: error: DPLEDGER_RUN_TIMEOUT: is 'soon'. Fix: set a number of seconds, "
        "e.g. 3600, or unset it"
    )
