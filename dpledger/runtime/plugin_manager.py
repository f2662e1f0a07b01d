"""The plugin host: the typed facade the rest of dpledger uses (loading in
:mod:`dpledger.runtime.plugin_loading`, collection of the specs in
:mod:`dpledger.runtime.plugin_specs`, loading on demand in :mod:`dpledger.runtime.plugin_demand`,
method lookup and the listing in :mod:`dpledger.runtime.plugin_lookup`, lowering of plugin
events in :mod:`dpledger.runtime.plugin_lowering` and :mod:`dpledger.runtime.lowering`).

:func:`make_plugin_manager` builds a pluggy manager for the ``"dpledger"`` entry-point group.
Builtin plugins are announced by dpledger's own ``pyproject.toml`` in the same group, so they go
through exactly the same path as third-party ones, but first: a third-party plugin can never
take a builtin plugin's name, method name or mechanism kind. Each plugin is loaded, registered
and checked on its own: an import error, a misspelled hook, a malformed spec or a duplicate
name becomes a :class:`PluginProblem` naming the plugin and its distribution, and every other
plugin keeps working. A name (or event kind) that two third-party plugins register is refused
when it is used, naming both. :class:`PluginHost` collects the specs (once, validated, with
provenance; its spec collector is the only place that calls hooks). ``PluginHost()`` and
:meth:`PluginHost.on_demand` load the builtin plugins only, and a third-party distribution only
when a method or event kind that no builtin provides is asked for, and then only the
distributions whose plugins register it (every third-party plugin is first checked in a
subprocess, :mod:`dpledger.runtime.plugin_probe`, which reports the names it registers).

Third-party code is watched (:mod:`dpledger.runtime.integrity`): a plugin that changes dpledger's
own code when imported, in a hook, or in its method's ``declare``/``run`` is reported as a
problem of stage ``integrity``, and the host then refuses to certify anything.

Environment: ``DPLEDGER_PLUGINS_ALLOW`` (comma-separated plugin or distribution names; only
those load; an empty value loads none), ``DPLEDGER_PLUGINS_BLOCK`` (never load these) and
``DPLEDGER_PLUGINS_TRACE`` (``1`` traces loading and hook calls to stderr).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dpledger.core.adjacency import Adjacency
from dpledger.core.events import PROFILE_DELTA, Event
from dpledger.core.specs import MechanismSpec, MethodSpec, ReportSectionSpec
from dpledger.runtime.lowering import PROFILE_EPSILONS, profile_to_core
from dpledger.runtime.plugin_demand import OnDemandLoader
from dpledger.runtime.plugin_loading import (
    BUILTIN_DISTRIBUTION,
    BUILTIN_TIER,
    ENTRY_POINT_GROUP,
    ENV_ALLOW,
    ENV_BLOCK,
    ENV_TRACE,
    DPLedgerPluginManager,
    PluginOrigin,
    PluginProblem,
    load_entry_points,
    make_plugin_manager,
    register_plugin,
    trust_tier,
)
from dpledger.runtime.plugin_lookup import PluginDirectory, PluginInfo
from dpledger.runtime.plugin_lowering import MechanismLowering
from dpledger.runtime.plugin_specs import SpecCollector, certify
from dpledger.runtime.runner import declare_checked

__all__ = [
    "BUILTIN_DISTRIBUTION",
    "BUILTIN_TIER",
    "ENTRY_POINT_GROUP",
    "ENV_ALLOW",
    "ENV_BLOCK",
    "ENV_TRACE",
    "PROFILE_DELTA",
    "PROFILE_EPSILONS",
    "DPLedgerPluginManager",
    "PluginHost",
    "PluginInfo",
    "PluginOrigin",
    "PluginProblem",
    "host_from_options",
    "load_entry_points",
    "make_plugin_manager",
    "profile_to_core",
    "register_plugin",
    "trust_tier",
]

_SPEC_TYPES: dict[str, type[Any]] = {
    "dpledger_register_methods": MethodSpec,
    "dpledger_register_mechanisms": MechanismSpec,
    "dpledger_register_report_sections": ReportSectionSpec,
}


class PluginHost:
    """The typed facade over the plugin manager: validated specs with provenance.

    Without ``pm`` the host loads the builtin plugins and third-party ones on demand (see
    :meth:`on_demand`); :meth:`create` loads every plugin. The work is done by its parts: the
    specs are collected by a :class:`~dpledger.runtime.plugin_specs.SpecCollector`, third-party
    distributions loaded on demand by an :class:`~dpledger.runtime.plugin_demand.OnDemandLoader`,
    methods looked up and plugins listed by a
    :class:`~dpledger.runtime.plugin_lookup.PluginDirectory`, and events lowered by a
    :class:`~dpledger.runtime.plugin_lowering.MechanismLowering`.
    """

    def __init__(self, pm: DPLedgerPluginManager | None = None) -> None:
        self.pm = pm if pm is not None else make_plugin_manager(builtin_only=True)
        self._specs = SpecCollector(self.pm, _SPEC_TYPES)
        self._loader = OnDemandLoader(self.pm, self._specs, pending=pm is None)
        self._directory = PluginDirectory(self._specs, self._loader)
        self._lowering = MechanismLowering(self._specs, self._loader)

    @classmethod
    def create(cls, **kwargs: Any) -> PluginHost:
        """``PluginHost(make_plugin_manager(**kwargs))``."""
        return cls(make_plugin_manager(**kwargs))

    @classmethod
    def on_demand(
        cls,
        *,
        allow: Sequence[str] | None = None,
        block: Sequence[str] | None = None,
        trace: bool = False,
        timeout: str | float | None = None,
    ) -> PluginHost:
        """A host that loads the builtin distribution now and a third-party distribution only
        when asked for a method, or to lower an event kind, that no builtin plugin provides and
        one of its plugins registers (as its check in a subprocess reported)."""
        pm = make_plugin_manager(
            allow=allow, block=block, trace=trace, builtin_only=True, timeout=timeout
        )
        host = cls(pm)
        host._loader.pending = True
        return host

    @property
    def _third_party_pending(self) -> bool:
        """Whether a third-party distribution may still be loaded on demand."""
        return self._loader.pending

    # -- registration (tests and embedding) --------------------------------------------
    def register(self, plugin: object, *, name: str) -> bool:
        """Register a plugin object (e.g. a module) directly, with the same checks."""
        ok = register_plugin(self.pm, plugin, name=name)
        self._specs.invalidate()
        return ok

    def unregister(self, name: str) -> None:
        plugin = self.pm.get_plugin(name)
        if plugin is not None:
            self.pm.unregister(plugin)
        self.pm.origins.pop(name, None)
        self._specs.invalidate()

    # -- queries ------------------------------------------------------------------------
    def methods(self) -> dict[str, MethodSpec]:
        """Every usable method (a name two third-party plugins register is left out)."""
        return self._specs.methods()

    def mechanisms(self) -> dict[str, MechanismSpec]:
        """Every usable mechanism (a name or kind two third-party plugins register is left out)."""
        return self._specs.mechanisms()

    def report_sections(self) -> dict[str, ReportSectionSpec]:
        return self._specs.report_sections()

    def certify(self) -> None:
        """Raise :class:`~dpledger.core.errors.IntegrityError` if any plugin has changed
        dpledger's code (in this host or earlier in this process)."""
        certify(self.pm)

    def method(self, name: str) -> MethodSpec:
        """The method called ``name``; the error lists the available ones.

        Refuses (:class:`~dpledger.core.errors.IntegrityError`) when a plugin has changed
        dpledger's code, and (:class:`~dpledger.core.errors.PluginConflictError`) when two
        third-party plugins register ``name``.
        """
        return self._directory.method(name)

    def resolve_method(
        self, name: str, values: Mapping[str, Any], adjacency: Adjacency
    ) -> tuple[Event, str | None, str]:
        """A method's declaration for one run with ``values`` as its parameters: the event
        mapped onto core events, the plugin that registered the method, and the unit the
        event protects (``"row"`` events are lifted by the core)."""
        spec = self.method(name)
        params = spec.make_params(values)
        declaration = declare_checked(spec, params, adjacency)
        event = self.lower(declaration.event, adjacency)
        return event, spec.provenance.plugin if spec.provenance else None, declaration.unit

    def protected_unit(
        self, name: str, values: Mapping[str, Any], adjacency: Adjacency
    ) -> str | None:
        """The unit a method states it bounds itself (``MethodSpec.protects``), or ``None``."""
        spec = self.method(name)
        if spec.protects is None:
            return None
        unit = spec.protects(spec.make_params(values), adjacency)
        return None if unit is None else str(unit)

    def problems(self) -> tuple[PluginProblem, ...]:
        return self._specs.problems()

    def plugins(self) -> list[PluginInfo]:
        """Every registered plugin, and every plugin that failed to load, with its problems."""
        return self._directory.plugins()

    # -- accounting support ---------------------------------------------------------------
    def lower(self, event: Event, adjacency: Adjacency | None = None) -> Event:
        """Replace every plugin mechanism event by its (at least as lossy) core mapping.

        A mechanism with only a privacy profile becomes its profile tabulated under
        ``adjacency`` (see :func:`profile_to_core`), which the PLD accountant composes as a
        privacy-loss distribution.
        """
        return self._lowering.lower(event, adjacency)


def host_from_options(
    *,
    allow: str | None = None,
    block: str | None = None,
    trace: bool = False,
    factory: Callable[..., DPLedgerPluginManager] = make_plugin_manager,
    on_demand: bool = False,
    timeout: str | None = None,
) -> PluginHost:
    """A host from comma-separated CLI option values (None means: use the environment).

    ``on_demand``: load third-party plugins only when a method or mechanism no builtin
    provides is needed (:meth:`PluginHost.on_demand`). ``timeout``: the time limit of each
    third-party distribution's check in a subprocess, in seconds.
    """

    def names(raw: str | None) -> list[str] | None:
        return None if raw is None else [n.strip() for n in raw.split(",") if n.strip()]

    allowed, blocked = names(allow), names(block)
    if on_demand:
        return PluginHost.on_demand(allow=allowed, block=blocked, trace=trace, timeout=timeout)
    return PluginHost(factory(allow=allowed, block=blocked, trace=trace, timeout=timeout))
