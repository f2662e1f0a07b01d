"""Loading plugins in isolation: the pluggy manager, entry points, registration and its problems.

:func:`make_plugin_manager` builds a pluggy manager for the ``"dpledger"`` entry-point group.
Builtin plugins load first, from a fixed list in this module (:data:`BUILTIN_PLUGINS`, which
``pyproject.toml`` also announces): never from installed metadata, which any package can
imitate. Third-party entry points are first checked in a short-lived subprocess
(:mod:`dpledger.runtime.plugin_probe`): a plugin that ends the process, exceeds the time limit or
raises anything while it is imported, registered or its registration hooks run is recorded as a
problem and never imported here. The check also reports the names each plugin registers, so a
caller can ask for the distributions that provide one name only (``wanted``). Each plugin is
then loaded, registered and checked on its own: an import error, a misspelled hook or a
malformed spec becomes a :class:`PluginProblem` naming the plugin and its distribution, and
every other plugin keeps working.

Environment: ``DPLEDGER_PLUGINS_ALLOW`` (comma-separated plugin or distribution names; only
those load; an empty value loads none), ``DPLEDGER_PLUGINS_BLOCK`` (never load these),
``DPLEDGER_PLUGINS_TRACE`` (``1`` traces loading and hook calls to stderr) and
``DPLEDGER_PLUGINS_TIMEOUT`` (seconds the check of one distribution may take, default 30).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Container, Iterable, Sequence
from importlib import metadata
from typing import Any

import attrs
import pluggy

from dpledger import __version__
from dpledger.core import hookspecs
from dpledger.core.errors import (
    InvalidParameterError,
)
from dpledger.core.hookspecs import HOOK_NAMES, PROJECT_NAME
from dpledger.runtime import integrity
from dpledger.runtime.plugin_probe import (
    ProbeResult,
    ProbeTarget,
    describe_exception,
    probe,
    timeout_from,
)

ENTRY_POINT_GROUP = PROJECT_NAME
ENV_ALLOW = "DPLEDGER_PLUGINS_ALLOW"
ENV_BLOCK = "DPLEDGER_PLUGINS_BLOCK"
ENV_TRACE = "DPLEDGER_PLUGINS_TRACE"
#: the distribution whose plugins are builtin (trust tier ``contrib`` rather than ``unverified``)
BUILTIN_DISTRIBUTION = "dpledger"
#: the trust tier of builtin plugins
BUILTIN_TIER = "contrib"


@attrs.frozen
class PluginProblem:
    """One thing that went wrong with one plugin; the plugin's other parts may still work."""

    plugin: str
    distribution: str | None
    version: str | None
    stage: str  # load | register | hook | spec | duplicate | integrity
    message: str

    def describe(self) -> str:
        dist = f"{self.distribution} {self.version or ''}".strip() if self.distribution else "-"
        return f"{self.plugin} ({dist}) [{self.stage}]: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.frozen
class PluginOrigin:
    """Where a registered plugin came from."""

    name: str
    distribution: str | None
    version: str | None
    entry_point: str | None
    tier: str

    @property
    def builtin(self) -> bool:
        return self.tier == BUILTIN_TIER


def trust_tier(builtin: bool) -> str:
    """``contrib`` for plugins shipped with dpledger, ``unverified`` for everyone else."""
    return BUILTIN_TIER if builtin else "unverified"


#: dpledger's own plugins (entry-point name -> module). They are loaded from this list, never
#: from installed metadata: any package can call itself ``dpledger`` and hide or imitate the
#: real distribution's entry points. ``pyproject.toml`` announces the same list (a test checks).
BUILTIN_PLUGINS: dict[str, str] = {
    "aggregate": "dpledger.plugins.aggregate.plugin",
    "primitives.bounded_mean": "dpledger.plugins.primitives.bounded_mean",
    "primitives.dp_sgd": "dpledger.plugins.primitives.dp_sgd",
    "primitives.gaussian": "dpledger.plugins.primitives.gaussian",
    "primitives.histogram": "dpledger.plugins.primitives.histogram",
    "primitives.laplace": "dpledger.plugins.primitives.laplace",
    "primitives.nn_voting": "dpledger.plugins.primitives.nn_voting",
    "primitives.selection": "dpledger.plugins.primitives.selection",
    "path": "dpledger.plugins.path.plugin",
    "path_baselines": "dpledger.plugins.path.baselines_plugin",
    "shk": "dpledger.plugins.shk.plugin",
    "swflow": "dpledger.plugins.swflow.plugin",
    "trajectories": "dpledger.plugins.trajectories.plugin",
}


def builtin_entry_points() -> list[metadata.EntryPoint]:
    """The builtin plugins as entry points of the ``dpledger`` group."""
    return [metadata.EntryPoint(n, m, ENTRY_POINT_GROUP) for n, m in BUILTIN_PLUGINS.items()]


def _is_builtin(ep: metadata.EntryPoint) -> bool:
    return BUILTIN_PLUGINS.get(ep.name) == ep.value


class DPLedgerPluginManager(pluggy.PluginManager):
    """A pluggy manager that also keeps plugin origins and the problems met while loading."""

    def __init__(self) -> None:
        super().__init__(PROJECT_NAME)
        self.add_hookspecs(hookspecs)
        self.problems: list[PluginProblem] = []
        self.origins: dict[str, PluginOrigin] = {}
        self.skipped: list[tuple[str, str]] = []
        #: the allow and block lists this manager was made with (for loading on demand)
        self.allow: list[str] | None = None
        self.block: list[str] = []
        #: the time limit of a third-party plugin's check (None: the environment, else 30 s)
        self.timeout: str | float | None = None
        #: (entry point, target, distribution) -> what its check in a subprocess found
        self.probed: dict[tuple[str, str, str | None], ProbeResult] = {}
        #: the entry points this manager has tried to load (each is loaded once)
        self.attempted: set[tuple[str, str, str | None]] = set()
        self._guard: integrity.IntegrityGuard | None = None

    @property
    def guard(self) -> integrity.IntegrityGuard | None:
        """The integrity guard, once third-party code is about to run (or has run before)."""
        if self._guard is None and integrity.tainted():
            self._guard = integrity.IntegrityGuard()
        return self._guard

    def watch(self) -> integrity.IntegrityGuard:
        """The integrity guard, fingerprinting dpledger's code now if there is none yet."""
        if self._guard is None:
            self._guard = integrity.IntegrityGuard()
        return self._guard

    def check_integrity(self, plugin: str, stage: str) -> None:
        """Attribute any change to dpledger's code since the last check to ``plugin``."""
        guard = self.guard
        if guard is None:
            return
        origin = self.origins.get(plugin)
        dist, version = (origin.distribution, origin.version) if origin else (None, None)
        guard.check(plugin, dist, version, stage)


def _env_names(var: str) -> list[str] | None:
    raw = os.environ.get(var)
    if raw is None:
        return None
    return [n.strip() for n in raw.split(",") if n.strip()]


def _env_flag(var: str) -> bool:
    return os.environ.get(var, "").strip().lower() in {"1", "true", "yes", "on"}


def make_plugin_manager(
    *,
    load_entrypoints: bool = True,
    allow: Sequence[str] | None = None,
    block: Sequence[str] | None = None,
    trace: bool = False,
    builtin_only: bool = False,
    timeout: str | float | None = None,
) -> DPLedgerPluginManager:
    """A fresh manager; ``allow``/``block``/``trace``/``timeout`` default to the environment
    variables.

    ``builtin_only`` loads only the entry points of the builtin distribution (see
    :meth:`PluginHost.on_demand` for the rest).
    """
    pm = DPLedgerPluginManager()
    pm.allow = list(allow) if allow is not None else _env_names(ENV_ALLOW)
    pm.block = list(block) if block is not None else (_env_names(ENV_BLOCK) or [])
    pm.timeout = timeout
    if trace or _env_flag(ENV_TRACE):
        pm.trace.root.setwriter(sys.stderr.write)
        pm.enable_tracing()
    if load_entrypoints:
        load_entry_points(
            pm, allow=pm.allow, block=pm.block, which="builtin" if builtin_only else "all"
        )
    return pm


def _dist_of(ep: metadata.EntryPoint) -> tuple[str | None, str | None]:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return None, None
    try:
        return str(dist.metadata["Name"]), str(dist.version)
    except (KeyError, TypeError):  # pragma: no cover - malformed metadata
        return None, None


Loaded = list[tuple[metadata.EntryPoint, str | None, str | None]]
Wanted = Callable[[ProbeResult], bool]


def load_entry_points(
    pm: DPLedgerPluginManager,
    *,
    allow: Sequence[str] | None = None,
    block: Sequence[str] = (),
    entry_points: Iterable[metadata.EntryPoint] | None = None,
    which: str = "all",
    wanted: Wanted | None = None,
    check: bool = True,
) -> None:
    """Load the builtin plugins and the installed ``dpledger`` entry points, each in isolation
    (problems are recorded).

    ``which`` is ``"all"``, ``"builtin"`` (:data:`BUILTIN_PLUGINS` only) or ``"third_party"``.
    Builtin plugins always load first, so that they keep their names; dpledger's code is
    fingerprinted before the first third-party plugin is imported, and checked after each.
    ``entry_points`` replaces the installed ones (the builtin list is not affected); an
    installed entry point that is exactly a builtin one (dpledger's own metadata) is skipped.

    Third-party entry points are checked in a subprocess first (``check``; each once per
    manager): one that fails there is a problem and is not imported. ``wanted`` picks, by what
    the check found, the plugins needed: every distribution one of whose plugins is wanted is
    loaded whole, and no other. An entry point is loaded at most once per manager.
    """
    if which not in ("all", "builtin", "third_party"):
        raise InvalidParameterError(
            "which", f"unknown value {which!r}", "use 'all', 'builtin' or 'third_party'"
        )
    if which != "third_party":
        builtin: Loaded = [(ep, BUILTIN_DISTRIBUTION, __version__) for ep in builtin_entry_points()]
        for ep, dist, version in _admitted(pm, builtin, allow, block):
            _load_once(pm, ep, dist, version, builtin=True)
    if which != "builtin":
        others = _admitted(pm, _installed(entry_points), allow, block)
        for ep, dist, version in _checked(pm, others, wanted) if check else others:
            _load_once(pm, ep, dist, version, builtin=False)
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:  # pragma: no cover - caught per plugin above
        pm.problems.append(PluginProblem("?", None, None, "register", str(exc)))


def _installed(entry_points: Iterable[metadata.EntryPoint] | None) -> Loaded:
    """The third-party entry points (each once; dpledger's own metadata left out)."""
    if entry_points is None:
        entry_points = metadata.entry_points(group=ENTRY_POINT_GROUP)
    seen: set[tuple[str, str, str | None]] = set()
    others: Loaded = []
    for ep in sorted(entry_points, key=lambda e: (e.name, e.value)):
        dist, version = _dist_of(ep)
        key = (ep.name, ep.value, dist)
        if key in seen or _is_builtin(ep):  # found twice on sys.path; dpledger's own
            continue
        seen.add(key)
        others.append((ep, dist, version))
    return others


def _admitted(
    pm: DPLedgerPluginManager, group: Loaded, allow: Sequence[str] | None, block: Sequence[str]
) -> Loaded:
    """The entry points the allow and block lists let through; the others are recorded."""
    out: Loaded = []
    for ep, dist, version in group:
        reason = None
        if ep.name in block or (dist is not None and dist in block):
            reason = "blocked"
        elif allow is not None and ep.name not in allow and dist not in allow:
            reason = "not in the allow list"
        if reason is None:
            out.append((ep, dist, version))
        elif (ep.name, reason) not in pm.skipped:
            pm.skipped.append((ep.name, reason))
    return out


def _key(ep: metadata.EntryPoint, dist: str | None) -> tuple[str, str, str | None]:
    return (ep.name, ep.value, dist)


def _checked(pm: DPLedgerPluginManager, others: Loaded, wanted: Wanted | None) -> Loaded:
    """The entry points that passed their check in a subprocess and are wanted (with every
    other plugin of a wanted plugin's distribution)."""
    new = [(ep, dist, version) for ep, dist, version in others if _key(ep, dist) not in pm.probed]
    if new:
        targets = [ProbeTarget(ep.name, ep.value, dist, version) for ep, dist, version in new]
        results = probe(targets, timeout=timeout_from(pm.timeout, "--plugins-timeout"))
        for (ep, dist, version), result in zip(new, results, strict=True):
            pm.probed[_key(ep, dist)] = result
            pm.trace.get("load")(f"checked {ep.name!r} in a subprocess: {_summary(result)}")
            if not result.ok:
                problem = result.problem or "unknown problem"
                pm.problems.append(
                    PluginProblem(ep.name, dist, version, result.stage or "load", problem)
                )
    passed = [item for item in others if pm.probed[_key(item[0], item[1])].ok]
    if wanted is None:
        return passed
    units = {dist or ep.name for ep, dist, _ in passed if wanted(pm.probed[_key(ep, dist)])}
    return [(ep, dist, version) for ep, dist, version in passed if (dist or ep.name) in units]


def _summary(result: ProbeResult) -> str:
    if not result.ok:
        return f"[{result.stage}] {result.problem}"
    return f"ok (methods {list(result.methods)}, mechanisms {list(result.mechanisms)})"


def _load_once(
    pm: DPLedgerPluginManager,
    ep: metadata.EntryPoint,
    dist: str | None,
    version: str | None,
    *,
    builtin: bool,
) -> None:
    if _key(ep, dist) in pm.attempted:
        return
    pm.attempted.add(_key(ep, dist))
    _load_one(pm, ep, dist, version, builtin=builtin)


def _load_one(
    pm: DPLedgerPluginManager,
    ep: metadata.EntryPoint,
    dist: str | None,
    version: str | None,
    *,
    builtin: bool,
) -> None:
    origin = PluginOrigin(ep.name, dist, version, ep.value, trust_tier(builtin))
    guard = None if builtin else pm.watch()
    try:
        plugin = ep.load()
    except BaseException as exc:  # KeyboardInterrupt and SystemExit from its import included
        pm.problems.append(
            PluginProblem(
                ep.name,
                dist,
                version,
                "load",
                f"importing {ep.value} failed: {describe_exception(exc)}",
            )
        )
        plugin = None
    if plugin is not None:
        register_plugin(pm, plugin, name=ep.name, origin=origin)
    changed = guard is not None and guard.check(ep.name, dist, version, "import") is not None
    if changed and plugin is not None and pm.origins.get(ep.name) is origin:
        pm.unregister(plugin)  # run none of its hooks
        del pm.origins[ep.name]


def failed_to_load(
    problems: Iterable[PluginProblem], loaded: Container[str]
) -> list[PluginProblem]:
    """The problems that kept a plugin from being loaded at all (it is not in ``loaded``)."""
    return [
        p for p in problems if p.plugin not in loaded and p.stage in ("load", "register", "hook")
    ]


def not_found(
    field: str, what: str, known: Iterable[str], failed: Sequence[PluginProblem]
) -> InvalidParameterError:
    """The error for a method or event kind no loaded plugin provides: it names the plugins
    that could not be loaded (one of them may provide it) and how to go on without them."""
    if not failed:
        return InvalidParameterError(
            field, f"no {what}", f"use one of {sorted(known)} (see `dpledger plugins`)"
        )
    names = ",".join(sorted({p.plugin for p in failed}))
    note = "; ".join(p.describe() for p in failed)
    return InvalidParameterError(
        field,
        f"no {what} (plugins that failed to load: {note})",
        f"fix or uninstall the failing plugin, or block it with --plugins-block {names} (or "
        f"{ENV_BLOCK}={names}), then use one of {sorted(known)}",
    )


def _near_miss_hooks(plugin: object) -> list[str]:
    """Functions that look like hooks but are not registered as hookimpls."""
    out = []
    for attr in dir(plugin):
        if not attr.startswith(f"{PROJECT_NAME}_"):
            continue
        obj = getattr(plugin, attr, None)
        if not callable(obj) or getattr(obj, f"{PROJECT_NAME}_impl", None) is not None:
            continue
        if getattr(obj, "__module__", None) == hookspecs.__name__:
            continue
        if attr in HOOK_NAMES:
            out.append(f"{attr} is not marked with @hookimpl")
        else:
            out.append(f"{attr} is not a dpledger hook (known hooks: {', '.join(HOOK_NAMES)})")
    return out


def _duplicate(pm: DPLedgerPluginManager, plugin: object, name: str) -> str | None:
    """Why ``plugin`` (named ``name``) duplicates a registered one; None if it does not."""
    if pm.has_plugin(name) or name in pm.origins:
        other = pm.origins.get(name)
        where = f" from {other.distribution}" if other and other.distribution else ""
        return f"a plugin named {name!r}{where} is already registered; this one is ignored"
    if pm.is_registered(plugin):
        return f"the same object is already registered as {pm.get_name(plugin)!r}"
    return None


def _unknown_hooks(pm: DPLedgerPluginManager, plugin: object) -> list[str]:
    """The registered plugin's hook implementations that are no dpledger hook (misspelt ones
    included)."""
    pending = [
        f"{hc.name} is not a dpledger hook (known hooks: {', '.join(HOOK_NAMES)})"
        for hc in pm.get_hookcallers(plugin) or []
        if not hc.has_spec()
        and not any(impl.optionalhook for impl in hc.get_hookimpls() if impl.plugin is plugin)
    ]
    return pending + [m for m in _near_miss_hooks(plugin) if m not in pending]


def register_plugin(
    pm: DPLedgerPluginManager,
    plugin: object,
    *,
    name: str,
    origin: PluginOrigin | None = None,
) -> bool:
    """Register one plugin with all checks; on any problem it is recorded and not registered."""
    origin = origin or PluginOrigin(name, None, None, None, trust_tier(False))
    if not origin.builtin:
        pm.watch()  # fingerprint before its first hook call
    duplicate = _duplicate(pm, plugin, name)
    if duplicate is not None:
        pm.problems.append(
            PluginProblem(name, origin.distribution, origin.version, "duplicate", duplicate)
        )
        return False
    try:
        pm.register(plugin, name=name)
    except BaseException as exc:  # anything its registration raises is its problem
        pm.problems.append(
            PluginProblem(
                name,
                origin.distribution,
                origin.version,
                "register",
                describe_exception(exc),
            )
        )
        return False
    pending = _unknown_hooks(pm, plugin)
    if pending:
        pm.unregister(plugin)
        pm.problems.append(
            PluginProblem(name, origin.distribution, origin.version, "register", "; ".join(pending))
        )
        return False
    pm.origins[name] = origin
    pm.trace.get("load")(f"registered {name!r} from {origin.distribution or 'module'}")
    return True
