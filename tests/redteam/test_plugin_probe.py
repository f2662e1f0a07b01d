"""A third-party plugin that ends the process, hangs, or raises anything while it is imported or
registered is named, never imported by dpledger itself, and every other plugin keeps working;
commands load only the third-party distributions they need."""

from __future__ import annotations

import json
import types
from importlib import metadata
from pathlib import Path

import pytest

from dpledger.cli import main
from dpledger.core.events import GaussianEvent
from dpledger.core.hookspecs import hookimpl
from dpledger.runtime.plugin_loading import load_entry_points
from dpledger.runtime.plugin_manager import PluginHost
from dpledger.runtime.plugin_probe import ProbeTarget, probe

#: every planted module first notes who imports it: the check's subprocess or a host process
MARK = """
import os, sys
_frame, _where = sys._getframe(), "host"
while _frame is not None:
    if _frame.f_globals.get("__name__") == "dpledger.runtime.plugin_probe":
        _where = "probe"
    _frame = _frame.f_back
with open(os.path.join(os.environ["RT_PROBE_MARKS"], __name__), "a") as _f:
    _f.write(_where + "\\n")
"""

GOOD = (
    MARK
    + """
import attrs
from dpledger.core.events import LaplaceEvent
from dpledger.core.hookspecs import hookimpl
from dpledger.core.specs import MethodSpec


@attrs.frozen
class P:
    noise_multiplier: float = 2.0


@hookimpl
def dpledger_register_methods(register):
    register(MethodSpec(name="{method}", params=P,
                        declare=lambda p, a: LaplaceEvent(p.noise_multiplier),
                        run=lambda p, d, ledger, rng: {{}}, description="a count",
                        proof="Dwork et al. 2006, Prop. 1"))
"""
)

EXITS = MARK + "import os\nprint('leaving now')\nos._exit(0)\n"
INTERRUPTS = MARK + "raise KeyboardInterrupt('pressed inside the plugin')\n"
HANGS = MARK + "import time\ntime.sleep(3600)\n"
HOOK_RAISES = (
    MARK
    + """
from dpledger.core.hookspecs import hookimpl


@hookimpl
def dpledger_register_methods(register):
    raise SystemExit(3)
"""
)
HOOK_EXITS = HOOK_RAISES.replace("raise SystemExit(3)", "import os\n    os._exit(5)")

BAD = {
    "exiter": ("exit-plugin", "0.1", "rt_probe_exit", EXITS),
    "interrupter": ("interrupt-plugin", "0.2", "rt_probe_interrupt", INTERRUPTS),
    "hanger": ("hang-plugin", "0.3", "rt_probe_hang", HANGS),
    "hookraiser": ("hook-raiser", "0.4", "rt_probe_hook", HOOK_RAISES),
}
PIPELINE = """delta = 1e-5
[[sources]]
name = "db"
[[releases]]
id = "r"
input = "db"
method = "{method}"
"""


@pytest.fixture
def marks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "marks"
    where.mkdir()
    monkeypatch.setenv("RT_PROBE_MARKS", str(where))
    monkeypatch.setenv("DPLEDGER_PLUGINS_TIMEOUT", "2")
    return where


def _imported(marks: Path) -> dict[str, set[str]]:
    """module -> where it was imported ("probe", "host")."""
    return {p.name: set(p.read_text().split()) for p in marks.iterdir()}


@pytest.fixture
def planted(make_dist, marks: Path, monkeypatch: pytest.MonkeyPatch) -> Path:  # type: ignore[no-untyped-def]
    for entry, (dist, version, module, source) in BAD.items():
        make_dist(dist, version, {module: source}, {entry: module})
    good = GOOD.replace("{method}", "rt_probe_count")
    make_dist("good-probe", "1.0", {"rt_probe_good": good}, {"good": "rt_probe_good"})
    monkeypatch.setenv("DPLEDGER_PLUGINS_ALLOW", ",".join(["dpledger", *BAD, "good"]))
    return marks


def test_plugins_names_each_plugin_that_exits_hangs_or_raises(planted: Path, capfd) -> None:  # type: ignore[no-untyped-def]
    assert main(["plugins", "--json"]) == 1
    payload = json.loads(capfd.readouterr().out)
    problems = {p["plugin"]: p for p in payload["problems"]}
    assert set(problems) == set(BAD)
    for entry, (dist, version, _, _) in BAD.items():
        assert (problems[entry]["distribution"], problems[entry]["version"]) == (dist, version)
    assert problems["exiter"]["stage"] == "load"
    assert (
        "ended the process (exit code 0) while importing rt_probe_exit"
        in (problems["exiter"]["message"])
    )
    assert "KeyboardInterrupt: pressed inside the plugin" in problems["interrupter"]["message"]
    assert (
        "did not finish within 2 s while importing rt_probe_hang" in (problems["hanger"]["message"])
    )
    assert "--plugins-timeout" in problems["hanger"]["message"]
    assert problems["hookraiser"]["stage"] == "hook"
    assert "dpledger_register_methods raised SystemExit: 3" in problems["hookraiser"]["message"]
    by_name = {p["name"]: p for p in payload["plugins"]}
    assert by_name["good"]["methods"] == ["rt_probe_count"] and not by_name["good"]["problems"]
    assert set(by_name) >= set(BAD)
    # only the good plugin ran in this process; the others ran in their check only
    imported = _imported(planted)
    assert imported.pop("rt_probe_good") == {"probe", "host"}
    assert all(where == {"probe"} for where in imported.values()), imported
    assert main(["plugins"]) == 1
    text = capfd.readouterr().out
    assert "exiter (exit-plugin 0.1) [load]: ended the process" in text
    assert "hookraiser (hook-raiser 0.4) [hook]" in text


def test_account_and_run_needing_a_failed_plugin_fail_in_one_line(planted: Path, capfd) -> None:  # type: ignore[no-untyped-def]
    path = planted.parent / "missing.toml"
    path.write_text(PIPELINE.format(method="rt_probe_missing"))
    config = planted.parent / "run.toml"
    config.write_text("[params]\n")
    run = ["run", "rt_probe_missing", "--config", str(config), "--out", "never"]
    for args in (["account", str(path)], run):
        assert main(args) == 2
        err = capfd.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err, err
        assert "no method named 'rt_probe_missing'" in err
        for entry, (dist, version, _, _) in BAD.items():
            assert f"{entry} ({dist} {version})" in err
        assert "--plugins-block exiter,hanger,hookraiser,interrupter" in err
    assert not (planted.parent / "never").exists()


def test_the_good_plugin_keeps_working_beside_them(planted: Path, capfd) -> None:  # type: ignore[no-untyped-def]
    path = planted.parent / "good.toml"
    path.write_text(
        PIPELINE.format(method="rt_probe_count") + "params = { noise_multiplier = 2.0 }\n"
    )
    assert main(["account", str(path)]) == 0, capfd.readouterr().err
    assert "epsilon <= 0.49" in capfd.readouterr().out  # Laplace of scale 2
    imported = _imported(planted)
    assert "host" in imported["rt_probe_good"]
    assert all(where == {"probe"} for m, where in imported.items() if m != "rt_probe_good")


def test_a_hook_that_exits_is_named_with_its_hook(make_dist, marks: Path) -> None:  # type: ignore[no-untyped-def]
    make_dist("hook-exits", "0.5", {"rt_probe_hook_exit": HOOK_EXITS}, {"hookexit": "x"})
    good = GOOD.replace("{method}", "rt_probe_after")
    make_dist("good-after", "1.1", {"rt_probe_after": good}, {"after": "rt_probe_after"})
    targets = [
        ProbeTarget("hookexit", "rt_probe_hook_exit", "hook-exits", "0.5"),
        ProbeTarget("after", "rt_probe_after", "hook-exits", "0.5"),  # the next one still runs
    ]
    failed, after = probe(targets, timeout=30)
    assert (failed.ok, failed.stage) == (False, "hook")
    assert failed.problem is not None
    assert "ended the process (exit code 5) while running its registration hook" in failed.problem
    assert after.ok and after.methods == ("rt_probe_after",)


def test_base_exceptions_raised_in_this_process_are_caught(  # type: ignore[no-untyped-def]
    make_dist, marks: Path, dpledger_pm
) -> None:
    make_dist("interrupt-plugin", "0.2", {"rt_probe_interrupt": INTERRUPTS}, {})
    entry = metadata.EntryPoint("interrupter", "rt_probe_interrupt", "dpledger")
    load_entry_points(dpledger_pm, entry_points=[entry], which="third_party", check=False)
    [problem] = dpledger_pm.problems
    assert (problem.plugin, problem.stage) == ("interrupter", "load")
    assert "KeyboardInterrupt: pressed inside the plugin" in problem.message

    def methods(register):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt

    def mechanisms(register):  # type: ignore[no-untyped-def]
        raise SystemExit(1)

    module = types.ModuleType("rt_probe_inline")
    module.dpledger_register_methods = hookimpl(methods)  # type: ignore[attr-defined]
    module.dpledger_register_mechanisms = hookimpl(mechanisms)  # type: ignore[attr-defined]
    host = PluginHost(dpledger_pm)
    assert host.register(module, name="inline")
    hooks = {p.message for p in host.problems() if p.plugin == "inline"}
    assert hooks == {
        "dpledger_register_methods raised KeyboardInterrupt",
        "dpledger_register_mechanisms raised SystemExit: 1",
    }


def test_bad_time_limit_is_one_line(planted: Path, capfd, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    assert main(["plugins", "--plugins-timeout", "0"]) == 2
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and "--plugins-timeout: must be a positive number" in err
    monkeypatch.setenv("DPLEDGER_PLUGINS_TIMEOUT", "soon")
    assert main(["plugins"]) == 2
    assert "DPLEDGER_PLUGINS_TIMEOUT: must be a positive number of seconds, got 'soon'" in (
        capfd.readouterr().err
    )


# -- lazy loading --------------------------------------------------------------------------


@pytest.fixture
def two_good(make_dist, marks: Path, monkeypatch: pytest.MonkeyPatch) -> Path:  # type: ignore[no-untyped-def]
    for name in ("alpha", "beta"):
        source = GOOD.replace("{method}", f"rt_{name}_count")
        make_dist(f"{name}-probe", "1.0", {f"rt_probe_{name}": source}, {name: f"rt_probe_{name}"})
    monkeypatch.setenv("DPLEDGER_PLUGINS_ALLOW", "dpledger,alpha,beta")
    return marks


def test_builtin_names_start_no_check_and_import_no_third_party(
    two_good: Path, tmp_path: Path
) -> None:
    host = PluginHost()
    provenance = host.method("laplace_mechanism").provenance
    assert provenance is not None and provenance.distribution == "dpledger"
    assert host.lower(GaussianEvent(1.0)) == GaussianEvent(1.0)
    assert _imported(two_good) == {}  # not even in a subprocess
    config = tmp_path / "audit.toml"
    config.write_text("[params]\nnoise_multiplier = -1.0\n")
    assert main(["audit", "laplace_mechanism", "--config", str(config)]) == 2  # bad params
    path = tmp_path / "builtin.toml"
    path.write_text(
        PIPELINE.format(method="laplace_mechanism")
        + "params = { noise_multiplier = 2.0, sensitivity = 1.0 }\n"
    )
    assert main(["account", str(path)]) == 0
    assert _imported(two_good) == {}


def test_the_demo_loads_no_third_party_plugin(two_good: Path, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from dpledger import demo

    class Stop(Exception):
        pass

    hosts: list[PluginHost] = []
    create = PluginHost.create

    def recording(**kwargs):  # type: ignore[no-untyped-def]
        hosts.append(create(**kwargs))
        return hosts[-1]

    def stop() -> None:
        raise Stop

    monkeypatch.setattr(PluginHost, "create", recording)
    monkeypatch.setattr(demo, "_require_libraries", stop)
    with pytest.raises(Stop):
        demo.run_demo(tmp_path / "demo", quiet=True)
    [host] = hosts
    assert not host._third_party_pending  # it never loads one later either
    with pytest.raises(Exception, match="no method named 'rt_alpha_count'"):
        host.method("rt_alpha_count")
    assert _imported(two_good) == {}


def test_a_third_party_method_imports_only_its_distribution(  # type: ignore[no-untyped-def]
    two_good: Path, tmp_path: Path, capfd
) -> None:
    path = tmp_path / "alpha.toml"
    path.write_text(
        PIPELINE.format(method="rt_alpha_count") + "params = { noise_multiplier = 2.0 }\n"
    )
    assert main(["account", str(path)]) == 0, capfd.readouterr().err
    assert _imported(two_good) == {"rt_probe_alpha": {"probe", "host"}, "rt_probe_beta": {"probe"}}
    config = tmp_path / "audit.toml"
    config.write_text("[params]\nnoise_multiplier = -1.0\n")
    for mark in two_good.iterdir():
        mark.unlink()
    assert main(["audit", "rt_beta_count", "--config", str(config)]) == 2  # bad params
    assert "host" not in _imported(two_good)["rt_probe_alpha"]
    assert "host" in _imported(two_good)["rt_probe_beta"]


LIGHT = """
import json, os, sys
_heavy = sorted(m for m in ("numpy", "scipy", "torch", "networkx", "dpledger.runtime.graph")
                if m in sys.modules)
with open(os.path.join(os.environ["RT_PROBE_MARKS"], "heavy.json"), "w") as _f:
    json.dump(_heavy, _f)
"""


def test_the_check_itself_loads_no_numerical_library(make_dist, marks: Path) -> None:  # type: ignore[no-untyped-def]
    make_dist("light-probe", "1.0", {"rt_probe_light": LIGHT}, {"light": "rt_probe_light"})
    [result] = probe([ProbeTarget("light", "rt_probe_light", "light-probe", "1.0")], timeout=30)
    assert result.ok and (result.methods, result.mechanisms) == ((), ())
    assert json.loads((marks / "heavy.json").read_text()) == []
