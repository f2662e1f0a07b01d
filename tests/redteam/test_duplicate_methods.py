"""Two plugins claiming one name: dpledger refuses to choose; builtin names cannot be taken."""

from __future__ import annotations

import json
import re
import types
from pathlib import Path
from typing import Any, ClassVar

import attrs
import numpy as np
import pytest

from dpledger.cli import main
from dpledger.core.errors import PluginConflictError
from dpledger.core.events import Event, GaussianEvent, PureDPEvent
from dpledger.core.hookspecs import hookimpl
from dpledger.core.specs import MechanismSpec
from dpledger.core.validation import positive_finite
from dpledger.runtime.plugin_manager import PluginHost, make_plugin_manager

METHOD = """
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


def spec(name, factor):
    return MethodSpec(name=name, params=P,
                      declare=lambda p, a: GaussianEvent(p.noise_multiplier * factor), run=run,
                      description="noisy sum", proof="Balle & Wang 2018, Theorem 8")


@hookimpl
def dpledger_register_methods(register):
    for name in NAMES:
        register(spec(name, FACTOR))
"""

#: registers the builtin name with a run that adds no noise at all
SHADOW = """
import attrs
from dpledger.core.events import GaussianEvent
from dpledger.core.hookspecs import hookimpl
from dpledger.core.specs import MethodSpec


@attrs.frozen
class P:
    sensitivity: float = 1.0
    noise_multiplier: float = 1.0


SPEC = MethodSpec(name="gaussian_mechanism", params=P,
                  declare=lambda p, a: GaussianEvent(p.noise_multiplier),
                  run=lambda p, data, ledger, rng: {"release": data},
                  description="Gaussian noise (not really)", proof="none")


@hookimpl
def dpledger_register_methods(register):
    register(SPEC)
"""


def _method_module(names: list[str], factor: float) -> str:
    return f"NAMES = {names!r}\nFACTOR = {factor!r}\n" + METHOD


@pytest.fixture
def clash(make_dist, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    make_dist(
        "alpha-plugin",
        "1.0",
        {"rt_alpha": _method_module(["rt_clash", "rt_alpha_only"], 1.0)},
        {"alpha": "rt_alpha"},
    )
    # beta declares 4x less noise under the same name
    make_dist(
        "beta-plugin", "2.0", {"rt_beta": _method_module(["rt_clash"], 0.25)}, {"beta": "rt_beta"}
    )
    np.save(tmp_path / "data.npy", np.linspace(0.0, 1.0, 11))
    (tmp_path / "config.toml").write_text(
        'data = "data.npy"\ndelta = 1e-5\n[params]\nnoise_multiplier = 2.0\n'
    )
    return tmp_path


def _assert_names_both(message: str) -> None:
    assert "'alpha' (alpha-plugin 1.0)" in message
    assert "'beta' (beta-plugin 2.0)" in message


def test_host_refuses_a_name_two_distributions_register(clash) -> None:  # type: ignore[no-untyped-def]
    host = PluginHost(make_plugin_manager(allow=["alpha-plugin", "beta-plugin"]))
    with pytest.raises(PluginConflictError) as info:
        host.method("rt_clash")
    _assert_names_both(str(info.value))
    assert "rt_clash" not in host.methods()
    assert host.method("rt_alpha_only").provenance.plugin == "alpha"  # type: ignore[union-attr]
    problems = {(p.plugin, p.distribution, p.stage) for p in host.problems()}
    assert problems == {
        ("alpha", "alpha-plugin", "duplicate"),
        ("beta", "beta-plugin", "duplicate"),
    }


def test_run_and_account_refuse_the_clash(clash, capfd) -> None:  # type: ignore[no-untyped-def]
    out = clash / "out"
    assert main(["run", "rt_clash", "--config", str(clash / "config.toml"), "--out", str(out)]) == 2
    _assert_names_both(capfd.readouterr().err)
    assert not out.exists()
    path = clash / "pipeline.toml"
    path.write_text(
        '[[sources]]\nname = "db"\n[[releases]]\nid = "r"\ninput = "db"\nmethod = "rt_clash"\n'
    )
    assert main(["account", str(path)]) == 2
    err = capfd.readouterr().err
    _assert_names_both(err)
    assert "releases[0].method" in err


def test_plugins_command_shows_the_clash_on_both(clash, capfd) -> None:  # type: ignore[no-untyped-def]
    assert main(["plugins", "--json", "--plugins-allow", "alpha,beta"]) == 1
    payload = json.loads(capfd.readouterr().out)
    by_name = {p["name"]: p for p in payload["plugins"]}
    for name, other in (("alpha", "beta"), ("beta", "alpha")):
        assert "rt_clash" in by_name[name]["methods"]
        [problem] = by_name[name]["problems"]
        assert problem.startswith("[duplicate]") and f"'{other}'" in problem


def test_third_party_cannot_shadow_a_builtin_method(  # type: ignore[no-untyped-def]
    make_dist, tmp_path, capfd, honest_gaussian_epsilon
) -> None:
    # by method name, and by taking the builtin plugin's own entry-point name
    make_dist("shadow-plugin", "0.1", {"aaa_shadow": SHADOW}, {"shadow": "aaa_shadow"})
    make_dist("name-squat", "0.1", {"aaa_squat": SHADOW}, {"primitives.gaussian": "aaa_squat"})
    host = PluginHost(make_plugin_manager())
    spec = host.method("gaussian_mechanism")
    assert spec.provenance is not None and spec.provenance.distribution == "dpledger"
    stages = {(p.plugin, p.distribution, p.stage) for p in host.problems()}
    assert ("shadow", "shadow-plugin", "duplicate") in stages
    assert ("primitives.gaussian", "name-squat", "duplicate") in stages
    data = np.linspace(0.0, 1.0, 11)
    np.save(tmp_path / "data.npy", data)
    (tmp_path / "g.toml").write_text(
        'data = "data.npy"\ndelta = 1e-5\n[params]\nsensitivity = 1.0\nnoise_multiplier = 2.0\n'
    )
    out = tmp_path / "out"
    assert (
        main(
            [
                "run",
                "gaussian_mechanism",
                "--config",
                str(tmp_path / "g.toml"),
                "--out",
                str(out),
                "--seed",
                "3",
            ]
        )
        == 0
    )
    eps = float(re.search(r"epsilon <= ([0-9.e+-]+)", capfd.readouterr().out).group(1))  # type: ignore[union-attr]
    honest = honest_gaussian_epsilon(2.0, 1e-5)
    # the printed value is rounded up to 6 significant digits: never below the honest one
    assert honest <= eps <= honest * (1 + 1e-5)
    record = json.loads((out / "ledger.json").read_text())
    assert honest * (1 - 1e-9) <= record["privacy"]["epsilon"] <= honest * (1 + 1e-9)
    ledger = json.loads((out / "ledger.json").read_text())
    assert ledger["provenance"]["distribution"] == "dpledger"
    assert np.std(np.load(out / "release.npy") - data) > 0.5  # the noise was added


@attrs.frozen
class RtStairEvent(Event):
    kind: ClassVar[str] = "rt_stair"
    epsilon: float = attrs.field(validator=positive_finite)


def _mechanism(name: str, factor: float) -> MechanismSpec:
    return MechanismSpec(
        name=name,
        event_class=RtStairEvent,
        description="staircase",
        proof="Geng & Viswanath 2014, Theorem 3",
        to_core=lambda e: PureDPEvent(e.epsilon * factor),
    )  # type: ignore[attr-defined]


def _module(name: str, spec: MechanismSpec) -> types.ModuleType:
    module = types.ModuleType(name)

    def mechanisms(register: Any) -> None:
        register(spec)

    module.dpledger_register_mechanisms = hookimpl(mechanisms)  # type: ignore[attr-defined]
    return module


def test_two_plugins_mapping_one_event_kind_are_refused(dpledger_pm) -> None:  # type: ignore[no-untyped-def]
    host = PluginHost(dpledger_pm)
    host.register(_module("rt_mech_honest", _mechanism("rt_stair", 1.0)), name="honest_stair")
    host.register(_module("rt_mech_loose", _mechanism("rt_stair_cheap", 0.01)), name="cheap_stair")
    assert GaussianEvent(1.0) == host.lower(GaussianEvent(1.0))
    with pytest.raises(PluginConflictError) as info:
        host.lower(RtStairEvent(1.0))
    assert "'honest_stair'" in str(info.value) and "'cheap_stair'" in str(info.value)
    assert {p.stage for p in host.problems()} == {"duplicate"}


@attrs.frozen
class RtOtherStairEvent(Event):
    kind: ClassVar[str] = "rt_other_stair"
    epsilon: float = attrs.field(validator=positive_finite)


def test_two_plugins_registering_one_mechanism_name_are_refused(dpledger_pm) -> None:  # type: ignore[no-untyped-def]
    other = MechanismSpec(
        name="rt_stair",
        event_class=RtOtherStairEvent,
        description="other",
        proof="Geng & Viswanath 2014, Theorem 3",
        to_core=lambda e: PureDPEvent(e.epsilon / 100),
    )  # type: ignore[attr-defined]
    host = PluginHost(dpledger_pm)
    host.register(_module("rt_mech_a", _mechanism("rt_stair", 1.0)), name="stair_a")
    host.register(_module("rt_mech_b", other), name="stair_b")
    assert host.mechanisms() == {}
    for event in (RtStairEvent(1.0), RtOtherStairEvent(1.0)):
        with pytest.raises(PluginConflictError, match=r"'stair_a'.*'stair_b'"):
            host.lower(event)
