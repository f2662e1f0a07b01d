"""Each hook, called through the host with a throwaway plugin (one test_hook_<name> per hook)."""

from __future__ import annotations

import inspect
import types
from typing import Any, ClassVar

import attrs

from dpledger.core import hookspecs
from dpledger.core.events import Event, GaussianEvent, PureDPEvent, SelfComposedEvent
from dpledger.core.hookspecs import HOOK_NAMES, hookimpl
from dpledger.core.specs import MechanismSpec, MethodSpec, ReportSectionSpec
from dpledger.core.validation import positive_finite
from dpledger.plugins.primitives import gaussian
from dpledger.runtime import testing as _testing
from dpledger.runtime.plugin_manager import PluginHost

# fixtures (also provided by the pytest11 plugin once dpledger is installed)
dpledger_pm = _testing.dpledger_pm
dpledger_register = _testing.dpledger_register


def _plugin(**hooks: Any) -> types.ModuleType:
    mod = types.ModuleType("throwaway")
    for name, fn in hooks.items():
        setattr(mod, name, hookimpl(fn))
    return mod


def test_hookspecs_are_module_level_typed_and_documented() -> None:
    specs = [
        n
        for n, f in vars(hookspecs).items()
        if inspect.isfunction(f) and hasattr(f, "dpledger_spec")
    ]
    assert sorted(specs) == sorted(HOOK_NAMES)
    for name in HOOK_NAMES:
        fn = getattr(hookspecs, name)
        assert "Example::" in (fn.__doc__ or "")
        assert list(inspect.signature(fn).parameters) == ["register"]
        assert fn.__annotations__["return"] == "None"


def test_hook_dpledger_register_methods(dpledger_register) -> None:  # type: ignore[no-untyped-def]
    renamed = attrs.evolve(gaussian.SPEC, name="gaussian_copy")
    plugin = _plugin(
        dpledger_register_methods=lambda register: [register(gaussian.SPEC), register(renamed)]
    )
    with dpledger_register(plugin, name="two-methods") as host:
        assert sorted(host.methods()) == ["gaussian_copy", "gaussian_mechanism"]
        assert isinstance(host.methods()["gaussian_copy"], MethodSpec)


@attrs.frozen
class HookPureEvent(Event):
    """A pure epsilon-DP leaf for the mechanism hook test."""

    kind: ClassVar[str] = "test_hook_pure"
    epsilon: float = attrs.field(validator=positive_finite)


def test_hook_dpledger_register_mechanisms(dpledger_register) -> None:  # type: ignore[no-untyped-def]
    spec = MechanismSpec(
        name="hook_pure",
        event_class=HookPureEvent,
        description="pure DP leaf",
        proof="Dwork & Roth 2014, Definition 2.4",
        to_core=lambda e: PureDPEvent(e.epsilon),
    )  # type: ignore[attr-defined]
    plugin = _plugin(dpledger_register_mechanisms=lambda register: register(spec))
    with dpledger_register(plugin, name="mech-plugin") as host:
        registered = host.mechanisms()["hook_pure"]
        assert registered.kind == "test_hook_pure"
        assert host.lower(SelfComposedEvent(HookPureEvent(0.25), 4)) == SelfComposedEvent(
            PureDPEvent(0.25), 4
        )


def test_hook_dpledger_register_report_sections(dpledger_register) -> None:  # type: ignore[no-untyped-def]
    section = ReportSectionSpec(
        name="notes", title="Notes", render=lambda ctx: f"{len(ctx['methods'])} method(s)"
    )
    plugin = _plugin(dpledger_register_report_sections=lambda register: register(section))
    with dpledger_register(plugin, name="notes-plugin") as host:
        spec = host.report_sections()["notes"]
        assert spec.render({"methods": ["a", "b"]}) == "2 method(s)"
        assert spec.provenance is not None and spec.provenance.plugin == "notes-plugin"


def test_register_rejects_a_plugin_that_sets_provenance(dpledger_pm) -> None:  # type: ignore[no-untyped-def]
    from dpledger.core.specs import Provenance

    forged = attrs.evolve(gaussian.SPEC, provenance=Provenance("x", "dpledger", "0", "vetted"))
    host = PluginHost(dpledger_pm)
    host.register(_plugin(dpledger_register_methods=lambda register: register(forged)), name="f")
    assert host.methods() == {}
    assert "sets provenance" in host.problems()[0].message
    assert GaussianEvent(1.0) == gaussian.SPEC.declare(
        gaussian.SPEC.make_params({"sensitivity": 1.0, "noise_multiplier": 1.0}), None
    )  # type: ignore[arg-type]
