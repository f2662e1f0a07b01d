"""A third-party method's run executes in a worker process; the ledger stays in dpledger's.

Planted distributions are installed in a real temporary environment (see conftest.py) and run
with ``dpledger run`` as a subprocess of it. Honest methods give the certified bound of their
declaration and, for a seed, the same outputs as the same code run in-process; hostile ones
cannot make dpledger's process draw less noise, and one that exits or hangs is named.
"""

from __future__ import annotations

import json
import os
import threading
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpledger.accountant import select
from dpledger.cleanroom.ledger_channel import LedgerProxy, LedgerServer
from dpledger.cleanroom.wire import Link, WireError
from dpledger.core.adjacency import Adjacency
from dpledger.core.declaration import Declaration
from dpledger.core.errors import LedgerViolationError, PluginError
from dpledger.core.events import (
    ComposedEvent,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    ReportNoisyMaxEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
)
from dpledger.plugins.primitives import gaussian as builtin_gaussian
from dpledger.runtime.ledger import PrivacyLedger
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
    ("behaviour", "expect"),
    [
        ("    import os\n    os._exit(7)", "exited with code 7"),
        ("    time.sleep(60)", "did not finish its run within 3 s"),
        ("    ledger.rng.normal()", "uses ledger.rng, which is not available"),
    ],
)
def test_a_run_that_exits_hangs_or_reaches_past_the_ledger_is_named(
    planted_env: PlantedEnv, tmp_path: Path, behaviour: str, expect: str
) -> None:
    source = HOSTILE.format(attack=behaviour, after="    pass")
    planted_env.install("tp-hostile", {"tp_hostile": source}, {"hostile": "tp_hostile"})
    _write_run(tmp_path, DATA, "noise_multiplier = 2.0")
    done = _run(planted_env, tmp_path, "tp_hostile", DPLEDGER_RUN_TIMEOUT="3")
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


# ---------------------------------------------------------------------------------------------
# the channel itself, in this process (a thread serves the ledger)
# ---------------------------------------------------------------------------------------------
def _pair() -> tuple[Link, Link]:
    down_r, down_w = os.pipe()
    up_r, up_w = os.pipe()
    return Link(up_r, down_w), Link(down_r, up_w)


def test_the_wire_carries_arrays_and_tables_exactly() -> None:
    parent, child = _pair()
    structured = np.array([(1, 2.5), (3, -1.0)], dtype=[("uid", "<i8"), ("v", "<f4")])
    message = {
        "floats": np.arange(6.0).reshape(2, 3).T,  # not contiguous
        "ints": np.array([[1, 2]], dtype=">i2"),
        "names": np.array(["ab", "c"]),
        "empty": np.zeros((0, 4)),
        "scalar": np.float32(1.5),
        "rows": structured,
        "nested": [{"$a": 0, "x": (1, None, True, "s", float("inf"))}],
    }
    child.send(message)
    got = parent.receive()
    for key in ("floats", "ints", "names", "empty", "rows"):
        np.testing.assert_array_equal(got[key], message[key])
        assert got[key].dtype == message[key].dtype and got[key].flags.writeable
    assert got["scalar"] == 1.5 and isinstance(got["scalar"], float)
    assert got["nested"] == [{"$a": 0, "x": [1, None, True, "s", float("inf")]}]
    with pytest.raises(WireError, match="array of Python objects"):
        child.send({"x": np.array([object()])})
    with pytest.raises(WireError, match="is a set"):
        child.send({"x": {1, 2}})
    os.write(child.outbox, b"\x00" * 7 + b"\x06" + b"\x00\x00\x00\x02{}")
    with pytest.raises(WireError, match="header is not a table with a list of arrays"):
        parent.receive()


def test_large_messages_go_through_spill_files_removed_at_close() -> None:
    from dpledger.cleanroom import wire

    parent, child = _pair()
    rng = np.random.default_rng(0)
    before = set(os.listdir(wire._SPILL_DIR))
    for _ in range(3):  # a request and its answer, each large, three times
        big = rng.standard_normal((2000, 100))  # 1.6 MB > SPILL_ABOVE
        child.send({"grads": big})
        np.testing.assert_array_equal(parent.receive()["grads"], big)
        parent.send({"back": -big})
        np.testing.assert_array_equal(child.receive()["back"], -big)
    assert big.nbytes > wire.SPILL_ABOVE
    assert len(set(os.listdir(wire._SPILL_DIR)) - before) == 2  # one file per side, reused
    # two large messages before any answer: the second takes a new file, both arrive intact
    first, second = rng.standard_normal((1000, 100)), rng.standard_normal((1000, 100))
    child.send({"x": first})
    child.send({"x": second})
    np.testing.assert_array_equal(parent.receive()["x"], first)
    np.testing.assert_array_equal(parent.receive()["x"], second)
    # a spilled frame may only name a file of the channel (never a path elsewhere)
    header = (1 << 63) | 128
    os.write(child.outbox, header.to_bytes(8, "big") + b"../../etc/passwd".ljust(46, b" "))
    with pytest.raises(WireError, match="names no file of the channel"):
        parent.receive()
    parent.close()
    child.close()
    assert set(os.listdir(wire._SPILL_DIR)) == before


def test_large_messages_cross_through_sealed_shared_regions() -> None:
    from dpledger.cleanroom import wire

    regions = wire.shared_regions()
    if regions is None:
        pytest.skip("no sealed shared memory on this system")
    down_r, down_w = os.pipe()
    up_r, up_w = os.pipe()
    parent = Link(up_r, down_w, (regions[1], regions[0]))
    child = Link(down_r, up_w, (os.dup(regions[0]), os.dup(regions[1])))
    before = set(os.listdir(wire._SPILL_DIR))
    rng = np.random.default_rng(1)
    sent, got = [], []
    for _ in range(3):  # no file: each side writes its region, the other copies it
        sent.append(rng.standard_normal((2000, 100)))
        child.send({"grads": sent[-1]})
        got.append(parent.receive()["grads"])
        parent.send({"back": -sent[-1]})
        np.testing.assert_array_equal(child.receive()["back"], -sent[-1])
    for a, b in zip(sent, got, strict=True):  # each read is a copy of its own
        np.testing.assert_array_equal(a, b)
    assert set(os.listdir(wire._SPILL_DIR)) == before
    # two large messages before any answer: the second goes through a file, both arrive
    first, second = rng.standard_normal((1000, 100)), rng.standard_normal((1000, 100))
    child.send({"x": first})
    child.send({"x": second})
    np.testing.assert_array_equal(parent.receive()["x"], first)
    np.testing.assert_array_equal(parent.receive()["x"], second)
    # the regions cannot be resized by either side
    with pytest.raises(PermissionError):
        os.ftruncate(regions[1], 4096)
    parent.close()
    child.close()
    assert set(os.listdir(wire._SPILL_DIR)) == before
    # a side without regions refuses a frame said to be in one
    plain_parent, plain_child = _pair()
    os.write(plain_child.outbox, ((1 << 62) | (1 << 20)).to_bytes(8, "big"))
    with pytest.raises(WireError, match="shared region the channel does not have"):
        plain_parent.receive()
    plain_parent.close()
    plain_child.close()


def test_a_region_that_can_be_resized_is_not_used() -> None:
    from dpledger.cleanroom import wire

    if wire.shared_regions() is None:
        pytest.skip("no sealed shared memory on this system")
    unsealed = [os.memfd_create("x") for _ in range(2)]
    for fd in unsealed:
        os.ftruncate(fd, wire.REGION_SIZE)
    down_r, down_w = os.pipe()
    up_r, up_w = os.pipe()
    parent = Link(up_r, down_w, (unsealed[0], unsealed[1]))
    child = Link(down_r, up_w)
    big = np.arange(100_000.0)
    parent.send({"x": big})  # through a file instead
    np.testing.assert_array_equal(child.receive()["x"], big)
    parent.close()
    child.close()
    for fd in unsealed:
        os.close(fd)


def _serve(link: Link, server: LedgerServer) -> None:
    while True:
        try:
            message = link.receive()
        except EOFError:
            return
        for queued in message.get("queued") or []:
            server.answer(queued)
        answer = server.answer(message)
        if answer is not None:
            link.send(answer)


def _through_proxy(declared: Any, work: Any, adjacency: Adjacency | None = None) -> Any:
    """``work(ledger)`` on a ledger in this process and on a proxy of an identical one served
    by a thread: both results, and the two ledgers' records."""
    adjacency = adjacency or Adjacency()
    direct = PrivacyLedger(Declaration(declared), adjacency, 5)
    served = PrivacyLedger(Declaration(declared), adjacency, 5)
    parent, child = _pair()
    thread = threading.Thread(target=_serve, args=(parent, LedgerServer(served)))
    thread.start()
    try:
        remote = work(LedgerProxy(child, "m"))
    finally:
        child.close()
        thread.join(10)
        parent.close()
    return work(direct), remote, direct.to_dict(), served.to_dict()


def _primitives(ledger: Any) -> list[Any]:
    scores = np.array([0.1, 3.0, 2.0, -1.0])
    out = [ledger.exponential_mechanism(scores, 1.0, 1.0, step="em")]
    out.append(ledger.report_noisy_max(scores, 1.0, 1.0, step="rnm"))
    with ledger.sample_without_replacement(10, 4, step="wor") as sample:
        out.append(sample.indices)
        out.append(ledger.laplace(np.ones(len(sample)), 1.0, 1.0, step="lap"))
    rows = ledger.clip_rows_l2(np.arange(12.0).reshape(4, 3), 1.0, step="clip")
    out.append(rows)
    out.append(ledger.clipped_sum_laplace(rows, 1.0, 2.0, step="sum"))
    out.append(ledger.matches_exactly())
    return out


def test_the_proxy_gives_what_the_ledger_gives() -> None:
    declared = ComposedEvent(
        [
            ExponentialMechanismEvent(1.0),
            ReportNoisyMaxEvent(1.0),
            SampledWithoutReplacementEvent(10, 4, LaplaceEvent(1.0)),
            LaplaceEvent(2.0),
        ]
    )
    direct, remote, direct_record, served_record = _through_proxy(declared, _primitives)
    assert len(direct) == len(remote) == 7
    for a, b in zip(direct, remote, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert direct_record == served_record and direct[-1] is True


def test_the_proxy_raises_the_ledgers_errors_and_names_what_is_not_forwarded() -> None:
    def cheat(ledger: Any) -> Any:
        with pytest.raises(LedgerViolationError, match=r"noise multiplier 1\.0 is smaller"):
            ledger.gaussian(np.ones(3), 1.0, 1.0, step="cheap")
        with pytest.raises(PluginError, match=r"ledger\.sample_certified.*generator"):
            ledger.sample_certified(lambda rng: 1, GaussianEvent(2.0), step="s")
        epoch = ledger.shuffle_batches(6, 4, step="epoch")
        return [len(epoch), [b.indices.tolist() for b in epoch], ledger.adjacency]

    adjacency = Adjacency(relation="replace_one")
    direct, remote, *_ = _through_proxy(
        ComposedEvent([GaussianEvent(2.0)]), _cheat_safely(cheat), adjacency
    )
    assert remote == direct and remote[0] == 2 and remote[2] == adjacency


def _cheat_safely(work: Any) -> Any:
    """``work`` on a real ledger skips what only a proxy refuses."""

    def run(ledger: Any) -> Any:
        if isinstance(ledger, PrivacyLedger):
            epoch = ledger.shuffle_batches(6, 4, step="epoch")
            return [len(epoch), [b.indices.tolist() for b in epoch], ledger.adjacency]
        return work(ledger)

    return run
