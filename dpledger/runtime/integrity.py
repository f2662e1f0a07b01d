"""Catch plugins that rewrite dpledger's own code (monkeypatches of the core or the accountant).

A :class:`Fingerprint` records, by identity, every module-level binding of dpledger's
accounting code, every class and the entries of its ``__dict__`` (methods, properties,
class attributes), and for every function its code object, defaults, keyword defaults and
closure contents; the contents of module-level containers; the ``sys.modules`` entries of these
modules; and the top-level attributes of the numerical libraries they use (``math``,
``numpy``, ``scipy``, ``networkx``, ...) and of ``builtins``. Its scope: every module of
``dpledger.accountant``, of ``dpledger.core`` and of ``dpledger.runtime`` (imported first,
except the ``testing`` pytest plugin, which is covered only when already imported), plus
``dpledger``, ``dpledger.cli``, ``dpledger.commands.*``, the products (``dpledger.report``,
``dpledger.audit``, ``dpledger.integrations``) and the builtin plugin modules when already
imported. Taking and comparing one costs a few milliseconds.

An :class:`IntegrityGuard` takes the fingerprint before third-party plugins are imported and
compares after each plugin's import, hook calls, ``declare`` and ``run``: a change is attributed
to the plugin whose code just ran, and the host then refuses to certify anything
(:class:`~dpledger.core.errors.IntegrityError`). A change outlives the host that saw it: every
later guard in the same process inherits it until the original code is back.

This is tamper *evidence* against a plugin that patches the code dpledger runs, not a sandbox:
see "Trust model" in ``docs/writing-a-plugin.md`` for what it cannot see.
"""

from __future__ import annotations

import builtins
import contextlib
import contextvars
import functools
import importlib
import operator
import os
import pkgutil
import sys
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import attrs

from dpledger.core import moved
from dpledger.core.errors import IntegrityError

#: packages whose every module is imported before the fingerprint is taken
EAGER_PACKAGES: tuple[str, ...] = ("dpledger.core", "dpledger.accountant", "dpledger.runtime")
#: parts of dpledger covered only when already imported (too heavy to import for this)
LAZY_PREFIXES: tuple[str, ...] = ("dpledger.runtime.testing",)
#: other parts of dpledger covered when already imported
IF_LOADED_PREFIXES: tuple[str, ...] = (
    "dpledger.cli",
    "dpledger.plugin",
    "dpledger.commands",
    "dpledger.plugins",
    "dpledger.report",
    "dpledger.audit",
    "dpledger.integrations",
)
#: outside packages whose modules (bound in dpledger's code) have their attributes recorded
LIBRARIES: frozenset[str] = frozenset(
    {
        "math",
        "cmath",
        "operator",
        "functools",
        "itertools",
        "fractions",
        "decimal",
        "heapq",
        "bisect",
        "numpy",
        "scipy",
        "networkx",
        "attrs",
        "attr",
    }
)
#: library modules recorded besides those dpledger's code binds (noise and FFTs)
LIBRARY_EXTRAS: tuple[str, ...] = ("numpy.random", "numpy.linalg", "numpy.fft")
#: shown in an error before "and N more"
MAX_LISTED = 8

_MODULE_SKIP = frozenset(
    {
        "__doc__",
        "__file__",
        "__cached__",
        "__loader__",
        "__spec__",
        "__path__",
        "__package__",
        "__builtins__",
        "__annotations__",
        # Python's record of the warnings a module has shown: added at its first warning
        "__warningregistry__",
    }
)
_CLASS_SKIP = frozenset({"__doc__", "__annotations__", "__dict__", "__weakref__"})
#: this module's own record of what it has seen changes by design
_VOLATILE = frozenset({(__name__, "_TAINTS")})
_EMPTY = object()

Token = tuple[object, ...]


def _in(name: str, prefixes: Iterable[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def import_scope() -> None:
    """Import every module of :data:`EAGER_PACKAGES` (but :data:`LAZY_PREFIXES`)."""
    todo = [importlib.import_module(p) for p in EAGER_PACKAGES]
    while todo:
        package = todo.pop()
        for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
            if _in(info.name, LAZY_PREFIXES):
                continue
            module = importlib.import_module(info.name)
            if info.ispkg:
                todo.append(module)


def _scope_modules() -> list[types.ModuleType]:
    out = []
    for name, module in list(sys.modules.items()):
        if not isinstance(module, types.ModuleType):
            continue
        if name == "dpledger" or _in(name, (*EAGER_PACKAGES, *IF_LOADED_PREFIXES)):
            out.append(module)
    return sorted(out, key=lambda m: m.__name__)


def _function_token(fn: types.FunctionType) -> Token:
    cells = tuple(_cell(c) for c in fn.__closure__ or ())
    kw = tuple((fn.__kwdefaults__ or {}).items())
    return (fn, fn.__code__, fn.__defaults__, *cells, *(v for _, v in kw), *fn.__dict__.values())


def _cell(cell: types.CellType) -> object:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return _EMPTY


def _token(value: object, deep: bool) -> Token:
    """What identifies ``value``; ``deep`` also records the contents of containers and the
    attributes of dpledger's own objects."""
    if isinstance(value, types.FunctionType):
        return _function_token(value)
    if isinstance(value, staticmethod | classmethod):
        inner = value.__func__
        return (
            value,
            *(_function_token(inner) if isinstance(inner, types.FunctionType) else (inner,)),
        )
    if isinstance(value, property):
        return (
            value,
            *(
                t
                for f in (value.fget, value.fset, value.fdel)
                if f is not None
                for t in _token(f, False)
            ),
        )
    if isinstance(value, functools.partial):
        return (value, value.func, *value.args, *value.keywords.values())
    if isinstance(value, type):
        return (value, value.__bases__)
    if not deep:
        return (value,)
    if isinstance(value, dict):
        return (value, *value.keys(), *value.values())
    if isinstance(value, list):
        return (value, *value)
    if isinstance(value, set):
        return (value, frozenset(value))
    if type(value).__module__.startswith("dpledger."):
        state = getattr(value, "__dict__", None)
        slots = [s for c in type(value).__mro__ for s in getattr(c, "__slots__", ())]
        values = [getattr(value, s, _EMPTY) for s in slots if isinstance(s, str)]
        return (value, *(state.values() if isinstance(state, dict) else ()), *values)
    return (value,)


@attrs.frozen
class Change:
    """One thing that differs from the fingerprint."""

    where: str
    how: str  # replaced | modified in place | added | removed

    def describe(self) -> str:
        return f"{self.where} ({self.how})"


@attrs.frozen(eq=False)
class Fingerprint:
    """Identity tokens of dpledger's code; compare two with :func:`diff`."""

    #: container (a module's name, a class's dotted path, or ``sys.modules``) -> name -> token
    own: Mapping[str, Mapping[str, Token]]
    #: library module name -> its attributes
    libraries: Mapping[str, Mapping[str, object]]
    modules: tuple[types.ModuleType, ...]
    library_modules: tuple[types.ModuleType, ...]

    def __len__(self) -> int:
        return sum(len(v) for v in self.own.values()) + sum(len(v) for v in self.libraries.values())

    def token(self, where: str) -> Token | None:
        """The token recorded at ``where`` (None if nothing is)."""
        container, key = _split(where)
        if container in self.own:
            return self.own[container].get(key)
        attributes = self.libraries.get(container)
        return None if attributes is None or key not in attributes else (attributes[key],)

    @classmethod
    def take(cls) -> Fingerprint:
        """Import the scope and fingerprint it."""
        import_scope()
        modules = tuple(_scope_modules())
        libs: dict[str, types.ModuleType] = {"builtins": builtins}
        for module in modules:
            if _in(module.__name__, EAGER_PACKAGES):
                for value in vars(module).values():
                    if isinstance(value, types.ModuleType) and _library(value):
                        libs.setdefault(value.__name__, value)
        for name in LIBRARY_EXTRAS:
            if name.partition(".")[0] in libs and name in sys.modules:
                libs.setdefault(name, sys.modules[name])
        return cls._scan(modules, tuple(libs[n] for n in sorted(libs)))

    def retake(self) -> Fingerprint:
        """A fingerprint of the same modules as they are now."""
        return self._scan(self.modules, self.library_modules)

    @classmethod
    def _scan(
        cls, modules: tuple[types.ModuleType, ...], libraries: tuple[types.ModuleType, ...]
    ) -> Fingerprint:
        own: dict[str, dict[str, Token]] = {}
        own[_SYS_MODULES] = {m.__name__: (sys.modules.get(m.__name__),) for m in modules}
        for module in modules:
            name = module.__name__
            deep = _in(name, EAGER_PACKAGES)
            entries: dict[str, Token] = {}
            own[name] = entries
            for key, value in list(vars(module).items()):
                if key in _MODULE_SKIP or _is_submodule(name, key, value):
                    continue
                entries[key] = _token(value, deep and (name, key) not in _VOLATILE)
                if isinstance(value, type) and value.__module__ == name:
                    _scan_class(own, value, f"{name}.{key}", set())
        libs = {lib.__name__: dict(vars(lib)) for lib in libraries}
        return cls(own, libs, modules, libraries)


def _library(module: types.ModuleType) -> bool:
    return module.__name__.partition(".")[0] in LIBRARIES


def _is_submodule(package: str, key: str, value: object) -> bool:
    return isinstance(value, types.ModuleType) and value.__name__ == f"{package}.{key}"


def _scan_class(out: dict[str, dict[str, Token]], cls: type, path: str, seen: set[int]) -> None:
    if id(cls) in seen or path in out:
        return
    seen.add(id(cls))
    entries: dict[str, Token] = {}
    out[path] = entries
    for key, value in list(vars(cls).items()):
        if key in _CLASS_SKIP:
            continue
        entries[key] = _token(value, False)
        if (
            isinstance(value, type)
            and value.__module__ == cls.__module__
            and value.__qualname__.startswith(cls.__qualname__ + ".")
        ):
            _scan_class(out, value, f"{path}.{key}", seen)


_SYS_MODULES = "sys.modules"


def _split(where: str) -> tuple[str, str]:
    if where.startswith(_SYS_MODULES + "["):
        return _SYS_MODULES, where[len(_SYS_MODULES) + 2 : -2]
    container, _, key = where.rpartition(".")
    return container, key


def _join(container: str, key: str) -> str:
    return f"{_SYS_MODULES}[{key!r}]" if container == _SYS_MODULES else f"{container}.{key}"


def _same(a: Token, b: Token) -> bool:
    return a is b or (len(a) == len(b) and all(map(operator.is_, a, b)))


_OWN_ROOTS: tuple[str, ...] = ()


def _own_roots() -> tuple[str, ...]:
    """The folders dpledger's own modules are loaded from."""
    global _OWN_ROOTS
    if not _OWN_ROOTS:
        import importlib.util

        import dpledger

        roots = {os.path.dirname(os.path.abspath(dpledger.__file__))}
        for name in ("dpledger.core", "dpledger.accountant", "dpledger.plugins"):
            spec = importlib.util.find_spec(name)  # located, not executed
            if spec is not None and isinstance(spec.origin, str):
                roots.add(os.path.dirname(os.path.abspath(spec.origin)))
        _OWN_ROOTS = tuple(sorted(roots))
    return _OWN_ROOTS


def is_own_file(path: str) -> bool:
    """Whether ``path`` lies in one of the folders dpledger's own modules are loaded from."""
    full = os.path.abspath(path)
    return any(full.startswith(root + os.sep) for root in _own_roots())


def _own_import(container: str, key: str, value: object) -> bool:
    """Whether an added entry is a first import of one of dpledger's own modules (loaded from
    dpledger's folders), not a module a plugin put in place."""
    if not isinstance(value, types.ModuleType):
        return False
    name = key if container == _SYS_MODULES else f"{container}.{key}"
    if moved.is_alias(name, value):
        return True  # an old import path bound to the module that moved (see dpledger.core.moved)
    if value.__name__ != name or not name.startswith("dpledger."):
        return False
    origin = getattr(getattr(value, "__spec__", None), "origin", None)
    if not isinstance(origin, str):
        return False
    return is_own_file(origin)


def diff(before: Fingerprint, after: Fingerprint) -> tuple[Change, ...]:
    """What changed from ``before`` to ``after`` (library attributes may be added freely)."""
    out: list[Change] = []
    for container, entries in before.own.items():
        current = after.own.get(container, {})
        for key, token in entries.items():
            now = current.get(key)
            if now is None:
                out.append(Change(_join(container, key), "removed"))
            elif not _same(token, now):
                how = "modified in place" if token[0] is now[0] else "replaced"
                out.append(Change(_join(container, key), how))
        out.extend(
            Change(_join(container, key), "added")
            for key in current.keys() - entries
            if not _own_import(container, key, current[key][0])
        )
    for module, attributes in before.libraries.items():
        present = after.libraries.get(module, {})
        for key, value in attributes.items():
            if key.startswith("_") and (module != "builtins" or key == "_"):
                continue  # private names of libraries; the interpreter's last result
            found = present.get(key, _EMPTY)
            if found is not value:
                out.append(Change(f"{module}.{key}", "removed" if found is _EMPTY else "replaced"))
    return tuple(sorted(out, key=lambda c: c.where))


_STAGES = {
    "import": "when it was imported",
    "hook": "in a registration hook",
    "declare": "in its method's declare()",
    "run": "in its method's run()",
    "mechanism": "in a mechanism mapping",
    "batch": "in its method's declare() or run() during repeated runs",
}


@attrs.frozen(eq=False)
class Violation:
    """Changes to dpledger's code attributed to one plugin."""

    plugin: str
    distribution: str | None
    version: str | None
    stage: str
    changes: tuple[Change, ...]

    def describe(self) -> str:
        """What the plugin changed, and when (no fix)."""
        listed = ", ".join(c.describe() for c in self.changes[:MAX_LISTED])
        more = len(self.changes) - MAX_LISTED
        if more > 0:
            listed += f" and {more} more"
        return f"changed dpledger's own code {_STAGES.get(self.stage, self.stage)}: {listed}"

    def error(self, others: int = 0) -> IntegrityError:
        dist = (
            f"distribution {self.distribution} {self.version or ''}".strip()
            if self.distribution
            else "no distribution"
        )
        also = f" (and {others} other plugin(s) did too)" if others else ""
        return IntegrityError(
            f"plugin {self.plugin!r} ({dist}) {self.describe()}{also}; no privacy bound can be "
            f"certified while it is installed. Fix: uninstall the plugin or block it with "
            f"--plugins-block {self.plugin} (or DPLEDGER_PLUGINS_BLOCK={self.plugin})",
            plugin=self.plugin,
            distribution=self.distribution,
        )


#: changes seen in this process: key -> (culprit, the original token; None if it was added)
_TAINTS: dict[str, tuple[Violation, Token | None]] = {}


def tainted() -> bool:
    """Whether a plugin has changed dpledger's code in this process (and it is not restored)."""
    return bool(_TAINTS)


class IntegrityGuard:
    """Fingerprints dpledger's code now and attributes every later change to a plugin."""

    def __init__(self) -> None:
        self.baseline = Fingerprint.take()
        self._violations: list[Violation] = []
        self._attributed: set[str] = set()
        self._inherit()

    def _inherit(self) -> None:
        """Changes an earlier guard saw stay in force while the original code is not back."""
        for key, (violation, original) in list(_TAINTS.items()):
            now = self.baseline.token(key)
            restored = (
                now is None if original is None else (now is not None and _same(original, now))
            )
            if restored:
                del _TAINTS[key]
                continue
            self._attributed.add(key)
            if violation not in self._violations:
                self._violations.append(violation)

    @property
    def violations(self) -> tuple[Violation, ...]:
        return tuple(self._violations)

    def check(
        self, plugin: str, distribution: str | None, version: str | None, stage: str
    ) -> Violation | None:
        """Attribute every change not yet attributed to ``plugin``."""
        changes = tuple(
            c
            for c in diff(self.baseline, self.baseline.retake())
            if c.where not in self._attributed
        )
        if not changes:
            return None
        if _FLUSHING.get():
            stage = "batch"
        violation = Violation(plugin, distribution, version, stage, changes)
        self._violations.append(violation)
        for change in changes:
            self._attributed.add(change.where)
            _TAINTS[change.where] = (violation, self.baseline.token(change.where))
        return violation

    def certify(self) -> None:
        """Raise :class:`IntegrityError` naming the first culprit if anything was changed."""
        if self._violations:
            first = self._violations[0]
            others = len({v.plugin for v in self._violations} - {first.plugin})
            raise first.error(others)


#: checks postponed by :func:`deferred_checks` (None outside such a block)
_DEFERRED: contextvars.ContextVar[dict[int, Callable[[], None]] | None] = contextvars.ContextVar(
    "dpledger_integrity_deferred", default=None
)
#: whether postponed checks are running (a change is then attributed to the whole batch)
_FLUSHING: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "dpledger_integrity_flushing", default=False
)


@contextlib.contextmanager
def deferred_checks() -> Iterator[None]:
    """Run the checks that follow third-party calls once, when the block ends, instead of after
    every call (for many runs of one method, e.g. an audit). A change made inside the block is
    still attributed to its plugin and raises :class:`IntegrityError` when the block ends,
    before anything computed inside it is returned."""
    pending: dict[int, Callable[[], None]] = {}
    token = _DEFERRED.set(pending)
    try:
        yield
    finally:
        _DEFERRED.reset(token)
        flushing = _FLUSHING.set(True)
        try:
            for after in pending.values():
                after()
        finally:
            _FLUSHING.reset(flushing)


def _check_after(after: Callable[[], None]) -> None:
    pending = _DEFERRED.get()
    if pending is None:
        after()
    else:
        pending.setdefault(id(after), after)


def guarded_call(fn: Any, after: Callable[[], None]) -> Any:
    """``fn`` wrapped so that ``after()`` runs (and may raise) once it has returned or raised
    (at the end of a :func:`deferred_checks` block if one is open)."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:
            try:
                after()
            except IntegrityError as integrity:
                raise integrity from exc
            raise
        _check_after(after)
        return result

    return call
