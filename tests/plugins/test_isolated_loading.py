"""Broken plugins are recorded as problems naming the culprit; everything else keeps working."""

from __future__ import annotations

import json

import pytest

from dpledger.cli import main
from dpledger.core.errors import PluginConflictError
from dpledger.runtime.plugin_manager import PluginHost, make_plugin_manager

GOOD = """
import attrs
from dpledger.core.events import LaplaceEvent
from dpledger.core.hookspecs import hookimpl
from dpledger.core.specs import MethodSpec
from dpledger.core.validation import positive_finite

@attrs.frozen
class P:
    noise_multiplier: float = attrs.field(validator=positive_finite)

def run(params, data, ledger, rng):
    return {"release": ledger.laplace(data, 1.0, params.noise_multiplier, step="count")}

SPEC = MethodSpec(name="{method}", params=P, declare=lambda p, a: LaplaceEvent(p.noise_multiplier),
                  run=run, description="a noisy count", proof="Dwork et al. 2006, Prop. 1")

@hookimpl
def dpledger_register_methods(register):
    register(SPEC)
"""

RAISES_ON_IMPORT = "raise RuntimeError('boom at import')\n"

MISSPELLED = """
from dpledger.core.hookspecs import hookimpl

@hookimpl
def dpledger_register_method(register):
    pass
"""

UNMARKED = """
def dpledger_register_methods(register):
    pass
"""

MALFORMED = """
import attrs
from dpledger.core.hookspecs import hookimpl
from dpledger.core.specs import MethodSpec

@hookimpl
def dpledger_register_methods(register):
    register(MethodSpec(name="Bad Name!", params=dict, declare=None, run=None,
                        description="", proof=""))
"""

WRONG_TYPE = """
from dpledger.core.hookspecs import hookimpl

@hookimpl
def dpledger_register_methods(register):
    register({"name": "not_a_spec"})
"""


def _install_all(make_dist) -> None:  # type: ignore[no-untyped-def]
    make_dist(
        "good-plugin",
        "1.0",
        {"good_mod": GOOD.replace("{method}", "good_count")},
        {"good": "good_mod"},
    )
    make_dist(
        "dup-plugin", "2.0", {"dup_mod": GOOD.replace("{method}", "good_count")}, {"dup": "dup_mod"}
    )
    make_dist("boom-plugin", "0.1", {"boom_mod": RAISES_ON_IMPORT}, {"boom": "boom_mod"})
    make_dist("typo-plugin", "0.2", {"typo_mod": MISSPELLED}, {"typo": "typo_mod"})
    make_dist("unmarked-plugin", "0.3", {"unmarked_mod": UNMARKED}, {"unmarked": "unmarked_mod"})
    make_dist(
        "malformed-plugin", "0.4", {"malformed_mod": MALFORMED}, {"malformed": "malformed_mod"}
    )
    make_dist(
        "wrongtype-plugin", "0.5", {"wrongtype_mod": WRONG_TYPE}, {"wrongtype": "wrongtype_mod"}
    )
    make_dist("missing-plugin", "0.6", {}, {"missing": "no_such_module_anywhere"})


def test_each_broken_plugin_is_named_and_the_good_one_works(make_dist) -> None:  # type: ignore[no-untyped-def]
    _install_all(make_dist)
    host = PluginHost(
        make_plugin_manager(
            allow=["good", "dup", "boom", "typo", "unmarked", "malformed", "wrongtype", "missing"]
        )
    )
    problems = {p.plugin: p for p in host.problems()}
    assert problems["boom"].stage == "load"
    assert problems["boom"].distribution == "boom-plugin" and problems["boom"].version == "0.1"
    assert "boom at import" in problems["boom"].message
    assert problems["missing"].stage == "load"
    assert "ModuleNotFoundError" in problems["missing"].message
    assert problems["typo"].stage == "register"
    assert "dpledger_register_method is not a dpledger hook" in problems["typo"].message
    assert "not marked with @hookimpl" in problems["unmarked"].message
    assert problems["malformed"].stage == "hook"
    assert "InvalidParameterError" in problems["malformed"].message
    assert problems["wrongtype"].stage == "spec"
    # duplicate method name of two third-party plugins: neither wins, both are told, and using
    # the name is an error naming both plugins and both distributions
    duplicates = {p.plugin: p for p in host.problems() if p.stage == "duplicate"}
    assert set(duplicates) == {"good", "dup"}
    assert "'dup' (dup-plugin 2.0)" in duplicates["good"].message
    assert "'good' (good-plugin 1.0)" in duplicates["dup"].message
    assert host.methods() == {}
    with pytest.raises(PluginConflictError) as info:
        host.method("good_count")
    assert "'dup' (dup-plugin 2.0) and 'good' (good-plugin 1.0)" in str(info.value)
    assert info.value.field == "method" and "--plugins-block" in info.value.fix
    assert set(problems) == {
        "boom",
        "missing",
        "typo",
        "unmarked",
        "malformed",
        "wrongtype",
        "good",
        "dup",
    }
    # with one of them blocked, the other one's method is used
    host = PluginHost(make_plugin_manager(allow=["good", "dup"], block=["dup-plugin"]))
    spec = host.method("good_count")
    assert spec.provenance is not None
    assert (
        spec.provenance.plugin,
        spec.provenance.distribution,
        spec.provenance.version,
        spec.provenance.tier,
    ) == ("good", "good-plugin", "1.0", "unverified")


def test_plugins_command_lists_culprits(make_dist, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _install_all(make_dist)
    monkeypatch.setenv("DPLEDGER_PLUGINS_ALLOW", "good,boom,typo,malformed")
    assert main(["plugins", "--json"]) == 1  # some plugins have problems
    payload = json.loads(capsys.readouterr().out)
    by_name = {p["name"]: p for p in payload["plugins"]}
    assert by_name["good"]["methods"] == ["good_count"]
    assert by_name["good"]["distribution"] == "good-plugin"
    assert by_name["good"]["tier"] == "unverified"
    assert by_name["boom"]["problems"] and by_name["boom"]["methods"] == []
    culprits = {p["plugin"]: p["distribution"] for p in payload["problems"]}
    assert culprits == {
        "boom": "boom-plugin",
        "typo": "typo-plugin",
        "malformed": "malformed-plugin",
    }
    assert main(["plugins"]) == 1
    text = capsys.readouterr().out
    assert "good_count" in text
    assert "boom (boom-plugin 0.1) [load]" in text
    assert "typo (typo-plugin 0.2) [register]" in text


def test_block_list_and_cli_flags(make_dist, capsys) -> None:  # type: ignore[no-untyped-def]
    _install_all(make_dist)
    assert (
        main(
            ["plugins", "--json", "--plugins-allow", "good,boom", "--plugins-block", "boom-plugin"]
        )
        == 0
    )
    payload = json.loads(capsys.readouterr().out)
    assert [p["name"] for p in payload["plugins"]] == ["good"]
    assert {"plugin": "boom", "reason": "blocked"} in payload["skipped"]


def test_empty_allow_list_loads_nothing(make_dist, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _install_all(make_dist)
    monkeypatch.setenv("DPLEDGER_PLUGINS_ALLOW", "")
    host = PluginHost(make_plugin_manager())
    assert host.methods() == {} and host.problems() == ()


def test_trace_mode_writes_to_stderr(make_dist, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _install_all(make_dist)
    monkeypatch.setenv("DPLEDGER_PLUGINS_TRACE", "1")
    host = PluginHost(make_plugin_manager(allow=["good"]))
    assert "good_count" in host.methods()
    err = capsys.readouterr().err
    assert "registered 'good' from good-plugin" in err
    assert "dpledger_register_methods" in err


@pytest.mark.parametrize("var", ["DPLEDGER_PLUGINS_BLOCK"])
def test_block_from_environment(make_dist, monkeypatch, var) -> None:  # type: ignore[no-untyped-def]
    _install_all(make_dist)
    monkeypatch.setenv(var, "good,dup")
    host = PluginHost(make_plugin_manager(allow=["good", "dup"]))
    assert host.methods() == {}
    assert sorted(n for n, r in host.pm.skipped if r == "blocked") == ["dup", "good"]
