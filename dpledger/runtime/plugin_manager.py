"""The plugin host: the typed facade the rest of dpledger uses (loading in
:mod:`dpledger.runtime.plugin_loading`, lowering of plugin events in
:mod:`dpledger.runtime.lowering`).

:func:`make_plugin_manager` builds a pluggy manager for the ``"dpledger"`` entry-point group.
Builtin plugins are announced by dpledger's own ``pyproject.toml`` in the same group, so they go
through exactly the same path as third-party ones, but first: a third-party plugin can never
take a builtin plugin's name, method name or mechanism kind. Each plugin is loaded, registered
and checked on its own: an import error, a misspelled hook, a malformed spec or a duplicate
name becomes a :class:`PluginProblem` naming the plugin and its distribution, and every other
plugin keeps working. A name (or event kind) that two third-party plugins register is refused
when it is used, naming both. :class:`PluginHost` collects the specs (once, validated, with
provenance) and is the only place that calls hooks. ``PluginHost()`` and
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

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import attrs

from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import (
    PluginConflictError,
)
from dpledger.core.events import EVENT_KINDS, PROFILE_DELTA, Event
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
from dpledger.runtime.lowering import PROFILE_EPSILONS, lower_event, profile_to_core
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
    failed_to_load,
    load_entry_points,
    make_plugin_manager,
    not_found,
    register_plugin,
    trust_tier,
)
from dpledger.runtime.plugin_probe import describe_exception
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

S = TypeVar("S", MethodSpec, MechanismSpec, ReportSectionSpec)

_SPEC_TYPES: dict[str, type[Any]] = {
    "dpledger_register_methods": MethodSpec,
    "dpledger_register_mechanisms": MechanismSpec,
    "dpledger_register_report_sections": ReportSectionSpec,
}


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


class PluginHost:
    """The typed facade over the plugin manager: validated specs with provenance.

    Without ``pm`` the host loads the builtin plugins and third-party ones on demand (see
    :meth:`on_demand`); :meth:`create` loads every plugin.
    """

    def __init__(self, pm: DPLedgerPluginManager | None = None) -> None:
        self.pm = pm if pm is not None else make_plugin_manager(builtin_only=True)
        self._specs: dict[str, dict[str, AnySpec]] | None = None
        self._problems: list[PluginProblem] = []
        #: per hook, names (and ``kind:<kind>`` for mechanisms) two third-party plugins claim
        self._clashes: dict[str, dict[str, list[AnySpec]]] = {}
        self._third_party_pending = pm is None

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
        host._third_party_pending = True
        return host

    def _load_third_party(self, methods: Sequence[str] = (), kinds: Sequence[str] = ()) -> bool:
        """On demand: load the third-party distributions that provide one of these method
        names or event kinds; True if any plugin was tried or failed its check."""
        if not self._third_party_pending:
            return False
        before = (len(self.pm.attempted), len(self.pm.problems))
        load_entry_points(
            self.pm,
            allow=self.pm.allow,
            block=self.pm.block,
            which="third_party",
            wanted=lambda found: found.provides(methods, kinds),
        )
        if (len(self.pm.attempted), len(self.pm.problems)) == before:
            return False
        self._specs = None
        return True

    # -- registration (tests and embedding) --------------------------------------------
    def register(self, plugin: object, *, name: str) -> bool:
        """Register a plugin object (e.g. a module) directly, with the same checks."""
        ok = register_plugin(self.pm, plugin, name=name)
        self._specs = None
        return ok

    def unregister(self, name: str) -> None:
        plugin = self.pm.get_plugin(name)
        if plugin is not None:
            self.pm.unregister(plugin)
        self.pm.origins.pop(name, None)
        self._specs = None

    # -- collection ---------------------------------------------------------------------
    def _ordered_plugins(self) -> list[tuple[str, object]]:
        items = [(n, p) for n, p in self.pm.list_name_plugin() if p is not None]

        def key(item: tuple[str, object]) -> tuple[int, str]:
            origin = self.pm.origins.get(item[0])
            builtin = origin is not None and origin.builtin
            return (0 if builtin else 1, item[0])

        return sorted(items, key=key)

    def _collect(self) -> dict[str, dict[str, AnySpec]]:
        if self._specs is not None:
            return self._specs
        specs: dict[str, dict[str, AnySpec]] = {h: {} for h in HOOK_NAMES}
        kinds: dict[str, AnySpec] = {}
        self._problems = []
        self._clashes = {h: {} for h in HOOK_NAMES}
        plugins = self._ordered_plugins()
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
        expected = _SPEC_TYPES[hook_name]
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
            self.certify()

        return check

    def refresh(self) -> None:
        """Collect the specs again (after registering or unregistering plugins)."""
        self._specs = None

    # -- queries ------------------------------------------------------------------------
    def methods(self) -> dict[str, MethodSpec]:
        """Every usable method (a name two third-party plugins register is left out)."""
        return _typed(self._collect()["dpledger_register_methods"], MethodSpec)

    def mechanisms(self) -> dict[str, MechanismSpec]:
        """Every usable mechanism (a name or kind two third-party plugins register is left out)."""
        return _typed(self._collect()["dpledger_register_mechanisms"], MechanismSpec)

    def report_sections(self) -> dict[str, ReportSectionSpec]:
        return _typed(self._collect()["dpledger_register_report_sections"], ReportSectionSpec)

    def certify(self) -> None:
        """Raise :class:`~dpledger.core.errors.IntegrityError` if any plugin has changed
        dpledger's code (in this host or earlier in this process)."""
        guard = self.pm.guard
        if guard is not None:
            guard.certify()

    def method(self, name: str) -> MethodSpec:
        """The method called ``name``; the error lists the available ones.

        Refuses (:class:`~dpledger.core.errors.IntegrityError`) when a plugin has changed
        dpledger's code, and (:class:`~dpledger.core.errors.PluginConflictError`) when two
        third-party plugins register ``name``.
        """
        methods = self.methods()
        if (
            name not in methods
            and name not in self._clashes["dpledger_register_methods"]
            and (self._load_third_party(methods=[name]))
        ):
            methods = self.methods()
        self.certify()
        claimants = self._clashes["dpledger_register_methods"].get(name)
        if claimants:
            raise _conflict("method", f"method {name!r}", claimants)
        if name not in methods:
            failed = failed_to_load(self.problems(), self.pm.origins)
            raise not_found("method", f"method named {name!r}", methods, failed)
        return methods[name]

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

    def problems(self) -> tuple[PluginProblem, ...]:
        self._collect()
        guard = self.pm.guard
        tampering = tuple(
            PluginProblem(v.plugin, v.distribution, v.version, "integrity", v.describe())
            for v in (guard.violations if guard is not None else ())
        )
        return (*self.pm.problems, *self._problems, *tampering)

    def plugins(self) -> list[PluginInfo]:
        """Every registered plugin, and every plugin that failed to load, with its problems."""
        self._collect()
        problems = self.problems()
        by_plugin: dict[str, list[AnySpec]] = {}
        clashed = [s for c in self._clashes.values() for group in c.values() for s in group]
        for spec in [*(s for t in self._collect().values() for s in t.values()), *clashed]:
            assert spec.provenance is not None
            listed = by_plugin.setdefault(spec.provenance.plugin, [])
            if spec not in listed:
                listed.append(spec)
        names = [n for n, _ in self._ordered_plugins()]
        names += sorted({p.plugin for p in problems} - set(names))
        out = []
        for name in names:
            origin = self.pm.origins.get(name)
            mine = [p for p in problems if p.plugin == name]
            first = mine[0] if mine else None
            specs = by_plugin.get(name, [])
            dist = origin.distribution if origin else (first.distribution if first else None)
            out.append(
                PluginInfo(
                    name=name,
                    distribution=dist,
                    version=origin.version if origin else (first.version if first else None),
                    tier=origin.tier if origin else trust_tier(False),
                    methods=tuple(s.name for s in specs if isinstance(s, MethodSpec)),
                    mechanisms=tuple(s.name for s in specs if isinstance(s, MechanismSpec)),
                    report_sections=tuple(
                        s.name for s in specs if isinstance(s, ReportSectionSpec)
                    ),
                    problems=tuple(f"[{p.stage}] {p.message}" for p in mine),
                )
            )
        return out

    # -- accounting support ---------------------------------------------------------------
    def lower(self, event: Event, adjacency: Adjacency | None = None) -> Event:
        """Replace every plugin mechanism event by its (at least as lossy) core mapping.

        A mechanism with only a privacy profile becomes its profile tabulated under
        ``adjacency`` (see :func:`profile_to_core`), which the PLD accountant composes as a
        privacy-loss distribution.
        """
        by_class = {spec.event_class: spec for spec in self.mechanisms().values()}
        unknown = [
            n
            for n in event.walk()
            if EVENT_KINDS.core.get(n.kind) is not type(n) and type(n) not in by_class
        ]
        if unknown and self._load_third_party(kinds=sorted({n.kind for n in unknown})):
            by_class = {spec.event_class: spec for spec in self.mechanisms().values()}
            self._refuse_missing([n for n in unknown if type(n) not in by_class])
        self.certify()
        clashes = self._clashes["dpledger_register_mechanisms"]
        for node in event.walk():
            claimants = clashes.get(f"kind:{node.kind}")
            if claimants and any(
                isinstance(node, c.event_class) for c in claimants if isinstance(c, MechanismSpec)
            ):
                raise _conflict("event", f"event kind {node.kind!r}", claimants)
        return lower_event(event, by_class, depth=0, adjacency=adjacency or Adjacency())

    def _refuse_missing(self, missing: Sequence[Event]) -> None:
        """An event kind still unknown while a third-party plugin failed to load: name it."""
        failed = failed_to_load(self.problems(), self.pm.origins)
        if missing and failed:
            kinds = sorted(m.kind for m in self.mechanisms().values())
            raise not_found("event", f"mechanism for event kind {missing[0].kind!r}", kinds, failed)


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


def _conflict(field: str, what: str, claimants: Sequence[AnySpec]) -> PluginConflictError:
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
