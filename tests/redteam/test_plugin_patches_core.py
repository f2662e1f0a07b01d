"""A plugin that rewrites dpledger's core or accountant is refused by name, never believed."""

from __future__ import annotations

import json
import re
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest

import dpledger.accountant.select as select
from dpledger.cli import main
from dpledger.core.errors import IntegrityError
from dpledger.core.hookspecs import hookimpl
from dpledger.runtime.integrity import Fingerprint, diff
from dpledger.runtime.plugin_manager import PluginHost, make_plugin_manager

pytestmark = pytest.mark.usefixtures("restore_core")

#: registers nothing; when imported, adds 10x less noise and prints a 100x smaller epsilon
PATCHER = """
import attrs
import dpledger.accountant.select as select
from dpledger.runtime.ledger import PrivacyLedger

_gaussian = PrivacyLedger.gaussian
_account = select.account


def gaussian(self, values, sensitivity, noise_multiplier, *, step):
    return _gaussian(self, values, sensitivity / 10.0, noise_multiplier, step=step)


def account(*args, **kwargs):
    selection = _account(*args, **kwargs)
    bound = attrs.evolve(selection.bound, epsilon=selection.bound.epsilon / 100.0,
                         epsilon_lower=selection.bound.epsilon_lower / 100.0)
    return attrs.evolve(selection, bound=bound)


PrivacyLedger.gaussian = gaussian
select.account = account
"""

#: an honest third-party method (Gaussian noise on a sum of values in [0, 1])
HONEST = """
import attrs
import numpy as np
from dpledger.core.events import GaussianEvent
from dpledger.core.hookspecs import hookimpl
from dpledger.core.specs import MethodSpec


@attrs.frozen
class P:
    noise_multiplier: float = 2.0


def run(params, data, ledger, rng):
    return {"sum": ledger.gaussian(np.clip(data, 0.0, 1.0).sum(), 1.0, params.noise_multiplier,
                                   step="sum")}


@hookimpl
def dpledger_register_methods(register):
    register(MethodSpec(name="rt_honest_sum", params=P,
                        declare=lambda p, a: GaussianEvent(p.noise_multiplier), run=run,
                        description="noisy sum", proof="Balle & Wang 2018, Theorem 8"))
"""

#: a method whose run() rewrites the ledger (and leaves it rewritten)
RUN_PATCHER = HONEST.replace("rt_honest_sum", "rt_sneaky_sum").replace(
    "def run(params, data, ledger, rng):\n",
    "def run(params, data, ledger, rng):\n"
    "    from dpledger.runtime.ledger import PrivacyLedger\n"
    "    original = PrivacyLedger.gaussian\n"
    "    PrivacyLedger.gaussian = lambda self, v, s, m, *, step: original(self, v, s / 10, m,"
    " step=step)\n",
)

#: a method whose declare() rewrites the backend selection
DECLARE_PATCHER = (
    HONEST.replace("rt_honest_sum", "rt_sneaky_declare")
    .replace("declare=lambda p, a: GaussianEvent(p.noise_multiplier)", "declare=declare")
    .replace(
        "def run(",
        """def declare(params, adjacency):
    import attrs
    import dpledger.accountant.select as select
    original = select.account

    def account(*args, **kwargs):
        sel = original(*args, **kwargs)
        return attrs.evolve(sel, bound=attrs.evolve(sel.bound, epsilon=sel.bound.epsilon / 100))

    select.account = account
    return GaussianEvent(params.noise_multiplier)


def run(""",
    )
)

CONFIG = 'data = "data.npy"\ndelta = 1e-5\n[params]\nnoise_multiplier = 2.0\n'
GAUSSIAN_CONFIG = (
    'data = "data.npy"\ndelta = 1e-5\n[params]\nsensitivity = 1.0\nnoise_multiplier = 2.0\n'
)


@pytest.fixture
def site(make_dist, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    make_dist("core-patcher", "0.1", {"rt_core_patcher": PATCHER}, {"patcher": "rt_core_patcher"})
    make_dist("honest-plugin", "1.0", {"rt_honest": HONEST}, {"honest": "rt_honest"})
    np.save(tmp_path / "data.npy", np.linspace(0.0, 1.0, 11))
    (tmp_path / "honest.toml").write_text(CONFIG)
    (tmp_path / "gaussian.toml").write_text(GAUSSIAN_CONFIG)
    return tmp_path


def _epsilon(stdout: str) -> float:
    match = re.search(r"epsilon <= ([0-9.e+-]+)", stdout)
    assert match, stdout
    return float(match.group(1))


def _run_sum(site: Path, method: str, out: Path) -> int:
    config = str(site / "honest.toml")
    return main(["run", method, "--config", config, "--out", str(out), "--seed", "1"])


def test_import_time_patcher_refuses_a_third_party_run(make_dist, site, capfd) -> None:  # type: ignore[no-untyped-def]
    # a method of another distribution does not import the patcher: the run is honest
    sys.modules.pop("rt_core_patcher", None)
    assert _run_sum(site, "rt_honest_sum", site / "honest-out") == 0, capfd.readouterr().err
    # the method's run executed in a worker process: dpledger's process imported no plugin
    assert "rt_core_patcher" not in sys.modules and "rt_honest" not in sys.modules
    capfd.readouterr()
    # a method of the patcher's own distribution loads that distribution whole: refused
    bundled = HONEST.replace("rt_honest_sum", "rt_bundled_sum")
    make_dist(
        "patching-bundle",
        "0.2",
        {"rt_bundled": bundled},
        {"bundled": "rt_bundled", "zpatcher": "rt_core_patcher"},
    )
    out = site / "out"
    code = _run_sum(site, "rt_bundled_sum", out)
    err = capfd.readouterr().err
    assert code == 2, err
    assert "'zpatcher'" in err and "patching-bundle 0.2" in err
    assert "dpledger.runtime.ledger.PrivacyLedger.gaussian" in err
    assert "dpledger.accountant.select.account" in err
    assert "--plugins-block zpatcher" in err
    assert not out.exists()


def test_builtin_run_loads_no_third_party_plugin(  # type: ignore[no-untyped-def]
    site, capfd, honest_gaussian_epsilon
) -> None:
    sys.modules.pop("rt_core_patcher", None)
    out = site / "out"
    assert (
        main(
            [
                "run",
                "gaussian_mechanism",
                "--config",
                str(site / "gaussian.toml"),
                "--out",
                str(out),
                "--seed",
                "5",
            ]
        )
        == 0
    )
    assert "rt_core_patcher" not in sys.modules
    eps = _epsilon(capfd.readouterr().out)
    honest = honest_gaussian_epsilon(2.0, 1e-5)
    # the printed value is rounded up to 6 significant digits: never below the honest one
    assert honest <= eps <= honest * (1 + 1e-5)
    record = json.loads((out / "ledger.json").read_text())
    assert honest * (1 - 1e-9) <= record["privacy"]["epsilon"] <= honest * (1 + 1e-9)
    # the same seed without any third-party distribution gives the same (full-noise) release
    clean = site / "clean"
    assert (
        main(
            [
                "run",
                "gaussian_mechanism",
                "--config",
                str(site / "gaussian.toml"),
                "--out",
                str(clean),
                "--seed",
                "5",
                "--plugins-allow",
                "dpledger",
            ]
        )
        == 0
    )
    released = np.load(out / "release.npy")
    np.testing.assert_array_equal(released, np.load(clean / "release.npy"))
    data = np.linspace(0.0, 1.0, 11)
    assert np.std(released - data) > 0.5  # noise of std 2, not 0.2


def test_full_host_refuses_even_a_builtin_method(site) -> None:  # type: ignore[no-untyped-def]
    host = PluginHost(make_plugin_manager())
    with pytest.raises(IntegrityError) as info:
        host.method("gaussian_mechanism")
    message = str(info.value)
    assert "'patcher'" in message and "core-patcher" in message
    assert "PrivacyLedger.gaussian" in message and "select.account" in message
    assert info.value.plugin == "patcher" and info.value.distribution == "core-patcher"


def test_plugins_command_lists_the_patcher(site, capfd) -> None:  # type: ignore[no-untyped-def]
    assert main(["plugins", "--json"]) == 1
    payload = json.loads(capfd.readouterr().out)
    [problem] = [p for p in payload["problems"] if p["plugin"] == "patcher"]
    assert problem["stage"] == "integrity" and problem["distribution"] == "core-patcher"
    assert "dpledger.runtime.ledger.PrivacyLedger.gaussian" in problem["message"]
    [info] = [p for p in payload["plugins"] if p["name"] == "patcher"]
    assert any(p.startswith("[integrity]") for p in info["problems"])
    assert main(["plugins"]) == 1
    assert "patcher (core-patcher 0.1) [integrity]" in capfd.readouterr().out


def test_patch_during_run_is_attributed_to_the_method(make_dist, site, capfd) -> None:  # type: ignore[no-untyped-def]
    make_dist("run-patcher", "0.2", {"rt_run_patcher": RUN_PATCHER}, {"sneaky": "rt_run_patcher"})
    out = site / "out"
    code = main(
        [
            "run",
            "rt_sneaky_sum",
            "--config",
            str(site / "honest.toml"),
            "--out",
            str(out),
            "--seed",
            "1",
            "--plugins-allow",
            "run-patcher",
        ]
    )
    err = capfd.readouterr().err
    assert code == 2, err
    assert "'sneaky'" in err and "run-patcher 0.2" in err and "run" in err
    assert "dpledger.runtime.ledger.PrivacyLedger.gaussian" in err
    assert not out.exists()


def test_patch_during_declare_is_refused_by_account(  # type: ignore[no-untyped-def]
    make_dist, site, capfd, monkeypatch
) -> None:
    make_dist(
        "declare-patcher",
        "0.3",
        {"rt_declare_patcher": DECLARE_PATCHER},
        {"sneaky_declare": "rt_declare_patcher"},
    )
    monkeypatch.setenv("DPLEDGER_PLUGINS_ALLOW", "declare-patcher")
    path = site / "pipeline.toml"
    path.write_text(
        '[[sources]]\nname = "db"\n[[releases]]\nid = "r"\ninput = "db"\n'
        'method = "rt_sneaky_declare"\n'
    )
    assert main(["account", str(path)]) == 2
    err = capfd.readouterr().err
    assert "'sneaky_declare'" in err and "declare-patcher" in err
    assert "dpledger.accountant.select.account" in err


def _module(name: str, **hooks: object) -> types.ModuleType:
    module = types.ModuleType(name)
    for key, fn in hooks.items():
        setattr(module, key, hookimpl(fn))
    return module


def test_patch_in_a_hook_is_attributed_to_its_plugin(dpledger_pm) -> None:  # type: ignore[no-untyped-def]
    from dpledger.accountant.closed_form import ClosedFormAccountant
    from dpledger.plugins.primitives import laplace

    def methods(register):  # type: ignore[no-untyped-def]
        ClosedFormAccountant._epsilon = lambda self, delta: None  # type: ignore[method-assign]

    host = PluginHost(dpledger_pm)
    host.register(laplace, name="lap")
    host.register(_module("rt_hook_patcher", dpledger_register_methods=methods), name="hooky")
    with pytest.raises(IntegrityError, match="'hooky'") as info:
        host.method("laplace_mechanism")
    assert "dpledger.accountant.closed_form.ClosedFormAccountant._epsilon" in str(info.value)
    stages = {(p.plugin, p.stage) for p in host.problems()}
    assert ("hooky", "integrity") in stages and ("lap", "integrity") not in stages


def test_patch_in_an_example_diagnose_is_attributed_to_its_plugin(  # type: ignore[no-untyped-def]
    dpledger_pm, tmp_path: Path
) -> None:
    import attrs

    from dpledger.accountant.closed_form import ClosedFormAccountant
    from dpledger.core.events import GaussianEvent
    from dpledger.core.specs import Example, MethodSpec

    @attrs.frozen
    class P:
        noise_multiplier: float = 2.0

    def patch(outputs, out):  # type: ignore[no-untyped-def]
        ClosedFormAccountant._epsilon = lambda self, delta: None  # type: ignore[method-assign]
        return {}

    spec = MethodSpec(
        name="rt_example_patcher",
        params=P,
        declare=lambda p, adjacency: GaussianEvent(p.noise_multiplier),
        run=lambda p, data, ledger, rng: {},
        description="d",
        proof="p",
        example=lambda options: Example(data=[0.0, 1.0], diagnose=patch),
    )
    host = PluginHost(dpledger_pm)
    host.register(
        _module("rt_example", dpledger_register_methods=lambda register: register(spec)), name="exy"
    )
    example = host.method("rt_example_patcher").example({})  # type: ignore[misc]
    assert example.data == [0.0, 1.0]
    with pytest.raises(IntegrityError, match="'exy'"):
        example.diagnose({}, tmp_path)


def test_code_object_swap_is_detected(dpledger_pm) -> None:  # type: ignore[no-untyped-def]
    def methods(register):  # type: ignore[no-untyped-def]
        select._upper.__code__ = (lambda b: 0.0).__code__

    host = PluginHost(dpledger_pm)
    host.register(_module("rt_code_swap", dpledger_register_methods=methods), name="swap")
    with pytest.raises(IntegrityError, match=r"dpledger\.accountant\.select\._upper"):
        host.method("anything")


def test_patch_of_a_library_the_accountant_uses_is_detected(dpledger_pm) -> None:  # type: ignore[no-untyped-def]
    import math

    def methods(register):  # type: ignore[no-untyped-def]
        math.exp = lambda x: 1.0

    host = PluginHost(dpledger_pm)
    host.register(_module("rt_math_patch", dpledger_register_methods=methods), name="mathy")
    with pytest.raises(IntegrityError, match=r"math\.exp"):
        host.method("anything")


def test_a_patch_made_by_an_earlier_host_taints_later_hosts(site) -> None:  # type: ignore[no-untyped-def]
    PluginHost(make_plugin_manager()).problems()  # imports the patcher once
    later = PluginHost(make_plugin_manager(allow=["honest"]))
    with pytest.raises(IntegrityError, match="'patcher'"):
        later.method("rt_honest_sum")


def test_clean_host_has_no_integrity_problem() -> None:
    host = PluginHost(make_plugin_manager())
    assert not [p for p in host.problems() if p.stage == "integrity"]
    assert host.method("gaussian_mechanism").name == "gaussian_mechanism"


def test_fingerprint_is_cheap() -> None:
    """The per-call check (a retake and its diff) stays cheap: 0.02 s idle, 0.06 s beside a
    parallel suite (a first, cold take is about 0.4 s); the bound leaves room for load and
    still fails if the check grew an order of magnitude."""
    baseline = Fingerprint.take()
    timings = []
    for _ in range(10):  # CPU time: other processes on the machine do not count
        start = time.process_time()
        changes = diff(baseline, baseline.retake())
        timings.append(time.process_time() - start)
    assert changes == ()
    assert min(timings) < 0.2, timings
    assert len(baseline) > 1000  # functions, classes, methods and bindings of the core


def _counting_sum_plugin(patch_on_call: int | None) -> types.ModuleType:
    """An in-process method plugin (a noisy sum) whose ``patch_on_call``-th run() rewrites the
    closed-form accountant."""
    import attrs

    from dpledger.accountant.closed_form import ClosedFormAccountant
    from dpledger.core.events import GaussianEvent
    from dpledger.core.specs import MethodSpec

    @attrs.frozen
    class P:
        noise_multiplier: float = 2.0

    calls = [0]

    def run(params, data, ledger, rng):  # type: ignore[no-untyped-def]
        calls[0] += 1
        if calls[0] == patch_on_call:
            ClosedFormAccountant._epsilon = lambda self, delta: 0.0  # type: ignore[method-assign]
        return {
            "sum": ledger.gaussian(
                float(np.clip(data, 0.0, 1.0).sum()), 1.0, params.noise_multiplier, step="sum"
            )
        }

    def methods(register):  # type: ignore[no-untyped-def]
        register(
            MethodSpec(
                name="rt_counted_sum",
                params=P,
                declare=lambda p, a: GaussianEvent(p.noise_multiplier),
                run=run,
                description="noisy sum",
                proof="Balle & Wang 2018, Theorem 8",
            )
        )

    return _module("rt_counted_sum", dpledger_register_methods=methods)


def test_audit_batch_checks_once_and_refuses_a_patch_made_in_any_run(  # type: ignore[no-untyped-def]
    dpledger_pm, monkeypatch
) -> None:
    from dpledger.audit.method_audit import method_sampler
    from dpledger.core.adjacency import Adjacency
    from dpledger.runtime import integrity

    checks = []
    original = integrity.IntegrityGuard.check

    def counted(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        checks.append(args)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(integrity.IntegrityGuard, "check", counted)
    data = np.array([0.2, 0.7])
    honest = PluginHost(dpledger_pm)
    honest.register(_counting_sum_plugin(None), name="counted")
    spec = honest.method("rt_counted_sum")
    sample = method_sampler(spec, spec.make_params({}), Adjacency())
    checks.clear()
    assert sample(data, 20, np.random.default_rng(0)).shape == (20,)
    # one check per kind of call for the whole batch, not one per run
    assert sorted(c[-1] for c in checks) == ["declare", "run"]
    honest.unregister("counted")

    sneaky = PluginHost(dpledger_pm)
    sneaky.register(_counting_sum_plugin(7), name="sneaky_sum")
    spec = sneaky.method("rt_counted_sum")
    sample = method_sampler(spec, spec.make_params({}), Adjacency())
    with pytest.raises(IntegrityError, match="'sneaky_sum'") as info:
        sample(data, 20, np.random.default_rng(0))  # the patch of run 7 stops the whole batch
    assert "ClosedFormAccountant._epsilon" in str(info.value)
    assert "declare() or run() during repeated runs" in str(info.value)
