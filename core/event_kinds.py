"""The registry of event kinds: ``kind -> event class``, which event tables are parsed with.

The core kinds are those of the classes of :mod:`dpledger.core.events`, frozen once that module
has loaded (the registry imports it when first read); plugins add their own kinds by defining
event classes.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from dpledger.core.errors import InvalidParameterError

if TYPE_CHECKING:
    from dpledger.core.events import Event

__all__ = ["EVENT_KINDS", "EventKinds"]

#: the module that defines the core event classes
_CORE_MODULE = "dpledger.core.events"


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _is_bound(cls: type) -> bool:
    """Whether ``cls`` is what its module currently binds at its qualified name."""
    obj: Any = sys.modules.get(cls.__module__)
    for part in cls.__qualname__.split("."):
        obj = getattr(obj, part, None)
    return obj is cls


class EventKinds(Mapping[str, "type[Event]"]):
    """The read-only registry ``kind -> event class`` that event tables are parsed with.

    Only :meth:`Event.__init_subclass__` adds to it. The kinds of the classes defined in
    :mod:`dpledger.core.events` (the module of ``Event``) are frozen once it has loaded
    (:data:`~dpledger.core.events.CORE_EVENT_KINDS`): looking up a core kind
    always gives the core class, and a class defined anywhere else can never take one. Other
    kinds are keyed by the defining class's module and qualified name: a class of a taken kind
    is an error naming both classes, unless it is the same definition executed again (the
    class attrs rebuilds with slots, or a fresh import of the same module).
    """

    __slots__ = ("_core", "_frozen", "_plugin")

    def __init__(self) -> None:
        self._core: Mapping[str, type[Event]] = {}
        self._plugin: dict[str, type[Event]] = {}
        self._frozen = False

    def __getitem__(self, kind: str) -> type[Event]:
        cls = self.core.get(kind)
        return cls if cls is not None else self._plugin[kind]

    def __iter__(self) -> Iterator[str]:
        yield from self.core
        yield from self._plugin

    def __len__(self) -> int:
        return len(self.core) + len(self._plugin)

    def __repr__(self) -> str:
        return f"EventKinds({sorted(self)})"

    @property
    def core(self) -> Mapping[str, type[Event]]:
        """The core kinds and their classes (read before the core classes are loaded, it loads
        them)."""
        if self._frozen is False:
            importlib.import_module(_CORE_MODULE)
        return self._core

    def _register(self, cls: type[Event], base: type[Event]) -> None:
        """Add ``cls`` (a subclass of ``base``, the class ``Event``) under its own kind."""
        kind = cls.__dict__["kind"]
        where = _qualified(cls)
        if not isinstance(kind, str) or not kind:
            raise InvalidParameterError(
                "kind", f"{where} has kind {kind!r}", "set kind: ClassVar[str] to a non-empty name"
            )
        core = self._core.get(kind)
        if core is not None or kind == base.kind or self._frozen is not True:
            owner = _qualified(core) if core is not None else _qualified(base)
            if self._frozen is not False or cls.__module__ != base.__module__:
                raise InvalidParameterError(
                    "kind",
                    f"event kind {kind!r} is already defined by the core class {owner}; {where} "
                    "cannot take it (core event kinds are frozen)",
                    "choose a new kind name prefixed with your plugin's name",
                )
            assert isinstance(self._core, dict)
            self._core[kind] = cls  # a core class (or its slotted rebuild) while its module loads
            return
        existing = self._plugin.get(kind)
        if (
            existing is not None
            and existing is not cls
            and (_qualified(existing) != where or _is_bound(existing))
        ):
            raise InvalidParameterError(
                "kind",
                f"event kind {kind!r} is already defined by {_qualified(existing)}; {where} "
                "cannot take it",
                "choose a new kind name prefixed with your plugin's name",
            )
        self._plugin[kind] = cls

    def _freeze_core(self) -> None:
        self._core = MappingProxyType(dict(self._core))
        self._frozen = True


#: every event kind: the core ones (frozen) and those of imported plugins
EVENT_KINDS = EventKinds()
