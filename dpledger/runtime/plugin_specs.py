"""The specs the plugins register, collected through the hooks: each plugin's hook called on its
own, each spec checked and given its provenance, a name a builtin plugin registered kept for it,
and a name (or event kind) two third-party plugins register set aside and named when used.

The specs of third-party plugins are guarded (:mod:`dpledger.runtime.integrity`): a change to
dpledger's code made in a method's ``declare``/``run``/``example`` or while a mechanism's curve
is evaluated is attributed to the plugin.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import attrs

from dpledger.core.errors import PluginConflictError
from dpledger.core.hookspecs import HOOK_NAMES
from dpledger.core.specs import (
    CHARACTERISATIONS,
    AnySpec,
    Example,
    MechanismSpec,
    MethodSpec,
    Provenance,
    ReportSectionSpec,
)
from dpledger.runtime import integrity
from dpledger.runtime.plugin_loading import (
    BUILTIN_DISTRIBUTION,
    BUILTIN_TIER,
    DPLedgerPluginManager,
    PluginProblem,
    trust_tier,
)
from dpledger.runtime.plugin_probe import describe_exception

__all__ = ["SpecCollector", "certify", "conflict_error"]

S = TypeVar("S", MethodSpec, MechanismSpec, ReportSectionSpec)


def certify(pm: DPLedgerPluginManager) -> None:
    """Raise :class:`~dpledger.core.errors.IntegrityError` if any plugin has changed
    dpledger's code (under ``pm`` or earlier in this process)."""
    guard = pm.guard
    if guard is not None:
        guard.certify()


class SpecCollector:
    """The validated specs of the plugins registered with ``pm``, with provenance, collected
    once (again after :meth:`invalidate`); ``spec_types`` names the spec class of each hook."""

    def __init__(self, pm: DPLedgerPluginManager, spec_types: Mapping[str, type[Any]]) -> None:
        self.pm = pm
        self._spec_types = spec_types
        self._specs: dict[str, dict[str, AnySpec]] | None = None
        self._problems: list[PluginProblem] = []
        #: per hook, names (and ``kind:<kind>`` for mechanisms) two third-party plugins claim
        self._clashes: dict[str, dict[str, list[AnySpec]]] = {}

    def invalidate(self) -> None:
        """Collect the specs again when next asked (plugins were loaded or unregistered)."""
        self._specs = None

    def methods(self) -> dict[str, MethodSpec]:
        """Every usable method (a name two third-party plugins register is left out)."""
        return _typed(self.collect()["dpledger_register_methods"], MethodSpec)

    def mechanisms(self) -> dict[str, MechanismSpec]:
        """Every usable mechanism (a name or kind two third-party plugins register is left out)."""
        return _typed(self.collect()["dpledger_register_mechanisms"], MechanismSpec)

    def report_sections(self) -> dict[str, ReportSectionSpec]:
        """Every usable report section."""
        return _typed(self.collect()["dpledger_register_report_sections"], ReportSectionSpec)

    def clashes(self, hook_name: str) -> dict[str, list[AnySpec]]:
        """The names (``kind:<kind>`` for event kinds) of ``hook_name`` that two third-party
        plugins claim, each with its claimants."""
        self.collect()
        return self._clashes[hook_name]

    def clashed(self) -> list[AnySpec]:
        """Every spec set aside because another plugin claims its name or kind."""
        self.collect()
        return [s for c in self._clashes.values() for group in c.values() for s in group]

    def problems(self) -> tuple[PluginProblem, ...]:
        """Every problem: of loading (the manager's), of collecting, and of tampering."""
        self.collect()
        guard = self.pm.guard
        tampering = tuple(
            PluginProblem(v.plugin, v.distribution, v.version, "integrity", v.describe())
            for v in (guard.violations if guard is not None else ())
        )
        return (*self.pm.problems, *self._problems, *tampering)

    def ordered_plugins(self) -> list[tuple[str, object]]:
        items = [(n, p) for n, p in self.pm.list_name_plugin() if p is not None]

        def key(item: tuple[str, object]) -> tuple[int, str]:
            origin = self.pm.origins.get(item[0])
            builtin = origin is not None and origin.builtin
            return (0 if builtin else 1, item[0])

        return sorted(items, key=key)

    def collect(self) -> dict[str, dict[str, AnySpec]]:
        if self._specs is not None:
            return self._specs
        specs: dict[str, dict[str, AnySpec]] = {h: {} for h in HOOK_NAMES}
        kinds: dict[str, AnySpec] = {}
        self._problems = []
        self._clashes = {h: {} for h in HOOK_NAMES}
        plugins = self.ordered_plugins()
        for hook_name in HOOK_NAMES:
            for name, plugin in plugins:
                hook = getattr(self.pm.hook, hook_name)
                if not any(impl.plugin is plugin for impl in hook.get_hookimpls()):
                    continue
                got = self._call_one(hook_name, name, plugin, [p for _, p in plugins])
                origin = self.pm.origins.get(name)
                if origin is None or not origin.builtin:
                    self.pm.check_integrity(name, "hook")
                for spec in got:
                    self._accept(hook_name, name, spec, specs[hook_name], kinds)
        self._specs = specs
        return specs

    def _problem(self, plugin: str, stage: str, message: str) -> None:
        origin = self.pm.origins.get(plugin)
        dist, version = (origin.distribution, origin.version) if origin else (None, None)
        self._problems.append(PluginProblem(plugin, dist, version, stage, message))

    def _call_one(
        self, hook_name: str, name: str, plugin: object, all_plugins: list[object]
    ) -> list[AnySpec]:
        expected = self._spec_types[hook_name]
        got: list[AnySpec] = []

        def register(spec: Any) -> None:
            if not isinstance(spec, expected):
                self._problem(
                    name,
                    "spec",
                    f"{hook_name} registered {type(spec).__name__}, expected a {expected.__name__}",
                )
                return
            if spec.provenance is not None:
                self._problem(name, "spec", f"{spec.name!r} sets provenance; the host sets it")
                return
            got.append(spec)

        caller = self.pm.subset_hook_caller(
            hook_name, remove_plugins=[p for p in all_plugins if p is not plugin]
        )
        try:
            caller(register=register)
        except BaseException as exc:  # KeyboardInterrupt and SystemExit from a hook included
            self._problem(name, "hook", f"{hook_name} raised {describe_exception(exc)}")
            return []
        return got

    def _accept(
        self,
        hook_name: str,
        plugin: str,
        spec: AnySpec,
        table: dict[str, AnySpec],
        kinds: dict[str, AnySpec],
    ) -> None:
        spec = self._with_provenance(plugin, spec)
        clashes = self._clashes[hook_name]
        claims = [spec.name]
        if isinstance(spec, MechanismSpec):
            claims.append(f"kind:{spec.kind}")
        for claim in claims:
            existing = kinds.get(claim[5:]) if claim.startswith("kind:") else table.get(claim)
            if claim in clashes:
                existing = clashes[claim][0]
            if existing is None:
                continue
            assert existing.provenance is not None
            what = f"event kind {claim[5:]!r}" if claim.startswith("kind:") else f"{spec.name!r}"
            if existing.provenance.tier == BUILTIN_TIER:
                self._problem(
                    plugin,
                    "duplicate",
                    (
                        f"{what} is already registered by builtin plugin "
                        f"{existing.provenance.plugin!r} ({BUILTIN_DISTRIBUTION}); builtin names "
                        "cannot be taken, so this one is ignored"
                    ),
                )
                return
            self._clash(hook_name, claim, what, existing, spec, table, kinds)
            return
        if isinstance(spec, MechanismSpec):
            kinds[spec.kind] = spec
        table[spec.name] = spec

    def _clash(
        self,
        hook_name: str,
        claim: str,
        what: str,
        existing: AnySpec,
        spec: AnySpec,
        table: dict[str, AnySpec],
        kinds: dict[str, AnySpec],
    ) -> None:
        """Two third-party plugins claim one name or kind: neither is used; both are told."""
        claimants = self._clashes[hook_name].setdefault(claim, [existing])
        name = existing.name
        if table.get(name) is existing:
            del table[name]
        if isinstance(existing, MechanismSpec):
            kind = existing.kind
            if kinds.get(kind) is existing:
                del kinds[kind]
        for other in claimants:
            assert other.provenance is not None
            self._problem(
                other.provenance.plugin,
                "duplicate",
                (
                    f"{what} is also registered by plugin {_who(spec)}; it cannot be used until "
                    "one of them is blocked"
                ),
            )
        self._problem(
            _plugin_of(spec),
            "duplicate",
            (
                f"{what} is also registered by plugin {_who(claimants[0])}; it cannot be used "
                "until one of them is blocked"
            ),
        )
        claimants.append(spec)
        for mechanism in (existing, spec):
            if isinstance(mechanism, MechanismSpec):
                # neither mapping is used, so an event of either class is refused, not left as is
                self._clashes[hook_name].setdefault(f"kind:{mechanism.kind}", claimants)

    def _with_provenance(self, plugin: str, spec: AnySpec) -> AnySpec:
        origin = self.pm.origins.get(plugin)
        provenance = Provenance(
            plugin=plugin,
            distribution=origin.distribution if origin else None,
            version=origin.version if origin else None,
            tier=origin.tier if origin else trust_tier(False),
        )
        spec = attrs.evolve(spec, provenance=provenance)
        if provenance.tier == BUILTIN_TIER:
            return spec
        if isinstance(spec, MethodSpec):  # a patch made in declare(), run() ... is attributed
            example = spec.example
            return attrs.evolve(
                spec,
                declare=integrity.guarded_call(spec.declare, self._after(plugin, "declare")),
                run=integrity.guarded_call(spec.run, self._after(plugin, "run")),
                example=None
                if example is None
                else _guarded_example(example, self._after(plugin, "example")),
            )
        if isinstance(spec, MechanismSpec):  # so is a patch made while a curve is evaluated
            after = self._after(plugin, "mechanism")
            guarded = {
                name: integrity.guarded_call(fn, after)
                for name in CHARACTERISATIONS
                if (fn := getattr(spec, name)) is not None
            }
            return attrs.evolve(spec, **guarded)
        return spec

    def _after(self, plugin: str, stage: str) -> Callable[[], None]:
        def check() -> None:
            self.pm.check_integrity(plugin, stage)
            certify(self.pm)

        return check


def _guarded_example(example: Callable[..., Any], after: Callable[[], None]) -> Any:
    """A method's ``example`` guarded like its ``run``, and so is the ``diagnose`` it returns."""

    def make(*args: Any, **kwargs: Any) -> Any:
        made = example(*args, **kwargs)
        if isinstance(made, Example) and made.diagnose is not None:
            return attrs.evolve(made, diagnose=integrity.guarded_call(made.diagnose, after))
        return made

    return integrity.guarded_call(functools.wraps(example)(make), after)


def _plugin_of(spec: AnySpec) -> str:
    return spec.provenance.plugin if spec.provenance is not None else "?"


def _who(spec: AnySpec) -> str:
    prov = spec.provenance
    if prov is None:
        return "'?'"
    dist = f"{prov.distribution} {prov.version or ''}".strip() if prov.distribution else "-"
    return f"{prov.plugin!r} ({dist})"


def conflict_error(field: str, what: str, claimants: Sequence[AnySpec]) -> PluginConflictError:
    names = " and ".join(_who(s) for s in claimants)
    blocks = ", ".join(_plugin_of(s) for s in claimants)
    return PluginConflictError(
        field,
        f"{what} is registered by more than one plugin: {names}; dpledger does not "
        "choose between them",
        f"block all but one with --plugins-block NAME (or DPLEDGER_PLUGINS_BLOCK; one of {blocks})",
    )


def _typed(table: Mapping[str, AnySpec], cls: type[S]) -> dict[str, S]:
    return {k: v for k, v in table.items() if isinstance(v, cls)}
