"""The old import paths of the modules that left ``dpledger.core``.

``dpledger.core`` is the kernel. The orchestration modules that used to sit beside it (the
composition graph, pipeline files, the ledger, the runner, the plugin host, the run record, the
pytest plugin, ...) live in ``dpledger.runtime``, and the accounting of a reduced graph in
``dpledger.accountant.graph_account``. Plugins written against the old paths keep working:

    from dpledger.core.ledger import PrivacyLedger  # DeprecationWarning; the same class

A finder on ``sys.meta_path`` answers for every name in :data:`MOVED`: it emits a
``DeprecationWarning`` naming the new path and binds the old name to the moved module itself
(the same module object, so a monkeypatch through the old name reaches the code that runs).
``dpledger.core.graph``, split in several modules, is a module of its own that re-exports
their public names. No file sits at an old path, so version control follows each move.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
import warnings
from collections.abc import Sequence

#: old module -> the modules its names now live in (the first one is named in the warning)
MOVED: dict[str, tuple[str, ...]] = {
    **{
        f"dpledger.core.{name}": (f"dpledger.runtime.{name}",)
        for name in (
            "coverage",
            "integrity",
            "ledger",
            "lowering",
            "pipeline",
            "plugin_loading",
            "plugin_manager",
            "run_record",
            "runner",
            "testing",
        )
    },
    "dpledger.core.graph": (
        "dpledger.runtime.graph",
        "dpledger.runtime.graph_validation",
        "dpledger.runtime.reduction",
        "dpledger.accountant.alternatives",
        "dpledger.accountant.graph_account",
    ),
}


def message(old: str) -> str:
    """The deprecation message for an import of ``old``."""
    new = MOVED[old]
    where = new[0] if len(new) == 1 else ", ".join(new)
    return f"{old} moved to {where}; import it from there ({old} will be removed)"


class _AliasLoader(importlib.abc.Loader):
    """Binds an old module name to the module (or the union of modules) it moved to."""

    def __init__(self, targets: Sequence[str]) -> None:
        self.targets = tuple(targets)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return None  # a placeholder; exec_module puts the real module in its place

    def exec_module(self, module: types.ModuleType) -> None:
        name = module.__name__
        warnings.warn(message(name), DeprecationWarning, stacklevel=2)
        modules = [importlib.import_module(t) for t in self.targets]
        if len(modules) == 1:
            sys.modules[name] = modules[0]  # the import statement binds the moved module
            return
        module.__doc__ = f"Deprecated: the names of {', '.join(self.targets)}."
        for source in modules:
            for key, value in vars(source).items():
                if not key.startswith("_"):
                    setattr(module, key, value)


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        targets = MOVED.get(fullname)
        if targets is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(targets), origin=__file__)


def is_alias(name: str, module: object) -> bool:
    """Whether ``module`` is what an import of the old name ``name`` binds (see :data:`MOVED`)."""
    targets = MOVED.get(name)
    if targets is None or not isinstance(module, types.ModuleType):
        return False
    if len(targets) == 1:
        return module is sys.modules.get(targets[0])
    spec = getattr(module, "__spec__", None)
    return isinstance(getattr(spec, "loader", None), _AliasLoader)


def install() -> None:
    """Put the finder on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedFinder())
