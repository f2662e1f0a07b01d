"""The parts of the plugin host: spec collection, loading on demand, lookup, lowering."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dpledger.core.events import GaussianEvent, PoissonSampledEvent
from dpledger.core.hookspecs import hookimpl
from dpledger.core.specs import MethodSpec
from dpledger.runtime import plugin_manager
from dpledger.runtime.plugin_demand import OnDemandLoader
from dpledger.runtime.plugin_lookup import PluginDirectory
from dpledger.runtime.plugin_lowering import MechanismLowering
from dpledger.runtime.plugin_manager import PluginHost, make_plugin_manager
from dpledger.runtime.plugin_specs import SpecCollector


class _Counting:
    """A plugin whose methods hook registers nothing and counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    @hookimpl
    def dpledger_register_methods(self, register: Callable[[MethodSpec], None]) -> None:
        self.calls += 1


def _collector() -> tuple[SpecCollector, _Counting]:
    pm = make_plugin_manager(load_entrypoints=False)
    plugin = _Counting()
    pm.register(plugin, name="counting")
    return SpecCollector(pm, plugin_manager._SPEC_TYPES), plugin


def test_every_public_name_of_the_host_module_imports() -> None:
    for name in plugin_manager.__all__:
        assert getattr(plugin_manager, name) is not None, name


def test_the_specs_are_collected_once_until_invalidated() -> None:
    specs, plugin = _collector()
    assert specs.methods() == {} and specs.mechanisms() == {} and specs.report_sections() == {}
    assert plugin.calls == 1
    specs.invalidate()
    assert specs.clashes("dpledger_register_methods") == {}
    assert plugin.calls == 2
    assert specs.problems() == ()


def test_nothing_is_loaded_when_nothing_is_pending() -> None:
    specs, _ = _collector()
    loader = OnDemandLoader(specs.pm, specs, pending=False)
    assert not loader.load(methods=["no_such_method"], kinds=["no_such_kind"])
    assert not specs.pm.attempted


def test_a_host_is_its_parts() -> None:
    host = PluginHost(make_plugin_manager(load_entrypoints=False))
    assert not host._third_party_pending
    host.register(_Counting(), name="counting")
    directory = PluginDirectory(host._specs, host._loader)
    assert [p.name for p in directory.plugins()] == [p.name for p in host.plugins()]
    assert "counting" in [p.name for p in host.plugins()]
    event = PoissonSampledEvent(0.1, GaussianEvent(1.0))
    lowering = MechanismLowering(host._specs, host._loader)
    assert lowering.lower(event) == host.lower(event) == event


def test_on_demand_leaves_third_party_loading_pending() -> None:
    host: Any = PluginHost.on_demand(allow=[])
    assert host._third_party_pending
    assert isinstance(host.methods(), dict)
