"""Methods looked up by name, and the plugins listed with what they register and their
problems (``dpledger plugins``), from the specs the plugins register."""

from __future__ import annotations

from typing import Any

import attrs

from dpledger.core.specs import AnySpec, MechanismSpec, MethodSpec, ReportSectionSpec
from dpledger.runtime.plugin_demand import OnDemandLoader
from dpledger.runtime.plugin_loading import PluginProblem, failed_to_load, not_found, trust_tier
from dpledger.runtime.plugin_specs import SpecCollector, certify, conflict_error

__all__ = ["PluginDirectory", "PluginInfo"]


@attrs.frozen
class PluginInfo:
    """One plugin as listed by ``dpledger plugins``."""

    name: str
    distribution: str | None
    version: str | None
    tier: str
    methods: tuple[str, ...]
    mechanisms: tuple[str, ...]
    report_sections: tuple[str, ...]
    problems: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in attrs.asdict(self).items()}


class PluginDirectory:
    """Answers for the plugins of ``specs``: a method by name (loading a third-party
    distribution through ``loader`` for a name no loaded plugin provides), and the listing."""

    def __init__(self, specs: SpecCollector, loader: OnDemandLoader) -> None:
        self.specs = specs
        self.loader = loader

    def method(self, name: str) -> MethodSpec:
        """The method called ``name``; the error lists the available ones.

        Refuses (:class:`~dpledger.core.errors.IntegrityError`) when a plugin has changed
        dpledger's code, and (:class:`~dpledger.core.errors.PluginConflictError`) when two
        third-party plugins register ``name``.
        """
        methods = self.specs.methods()
        if (
            name not in methods
            and name not in self.specs.clashes("dpledger_register_methods")
            and (self.loader.load(methods=[name]))
        ):
            methods = self.specs.methods()
        certify(self.specs.pm)
        claimants = self.specs.clashes("dpledger_register_methods").get(name)
        if claimants:
            raise conflict_error("method", f"method {name!r}", claimants)
        if name not in methods:
            failed = failed_to_load(self.specs.problems(), self.specs.pm.origins)
            raise not_found("method", f"method named {name!r}", methods, failed)
        return methods[name]

    def plugins(self) -> list[PluginInfo]:
        """Every registered plugin, and every plugin that failed to load, with its problems."""
        problems = self.specs.problems()
        by_plugin: dict[str, list[AnySpec]] = {}
        collected = (s for t in self.specs.collect().values() for s in t.values())
        for spec in [*collected, *self.specs.clashed()]:
            assert spec.provenance is not None
            listed = by_plugin.setdefault(spec.provenance.plugin, [])
            if spec not in listed:
                listed.append(spec)
        names = [n for n, _ in self.specs.ordered_plugins()]
        names += sorted({p.plugin for p in problems} - set(names))
        return [self._info(name, by_plugin.get(name, []), problems) for name in names]

    def _info(
        self, name: str, specs: list[AnySpec], problems: tuple[PluginProblem, ...]
    ) -> PluginInfo:
        origin = self.specs.pm.origins.get(name)
        mine = [p for p in problems if p.plugin == name]
        first = mine[0] if mine else None
        dist = origin.distribution if origin else (first.distribution if first else None)
        return PluginInfo(
            name=name,
            distribution=dist,
            version=origin.version if origin else (first.version if first else None),
            tier=origin.tier if origin else trust_tier(False),
            methods=tuple(s.name for s in specs if isinstance(s, MethodSpec)),
            mechanisms=tuple(s.name for s in specs if isinstance(s, MechanismSpec)),
            report_sections=tuple(s.name for s in specs if isinstance(s, ReportSectionSpec)),
            problems=tuple(f"[{p.stage}] {p.message}" for p in mine),
        )
