"""The old import paths of modules that left ``dpledger.core`` still work, and warn."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator

import pytest

import dpledger.core
from dpledger.core.moved import MOVED, is_alias, message
from dpledger.runtime.integrity import Fingerprint, diff


@pytest.fixture
def fresh_old_paths() -> Iterator[None]:
    """No old path imported yet; whatever was bound before is put back afterwards."""
    saved = {name: sys.modules.pop(name) for name in list(MOVED) if name in sys.modules}
    attrs = {
        name: vars(dpledger.core).pop(name.rpartition(".")[2])
        for name in MOVED
        if name.rpartition(".")[2] in vars(dpledger.core)
    }
    yield
    for name in MOVED:
        sys.modules.pop(name, None)
        vars(dpledger.core).pop(name.rpartition(".")[2], None)
    sys.modules.update(saved)
    for name, value in attrs.items():
        setattr(dpledger.core, name.rpartition(".")[2], value)


@pytest.mark.usefixtures("fresh_old_paths")
@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_warns_and_gives_the_moved_names(old: str) -> None:
    with pytest.warns(DeprecationWarning, match=f"^{old} moved to {MOVED[old][0]}") as seen:
        module = importlib.import_module(old)
    targets = [importlib.import_module(t) for t in MOVED[old]]
    if len(targets) == 1:
        assert module is targets[0]
    for target in targets:
        public = [k for k in vars(target) if not k.startswith("_")]
        assert all(getattr(module, k) is getattr(target, k) for k in public), target.__name__
    assert is_alias(old, module)
    assert str(seen[0].message) == message(old)


@pytest.mark.usefixtures("fresh_old_paths")
def test_from_imports_through_an_old_path() -> None:
    from dpledger.runtime.ledger import PrivacyLedger

    with pytest.warns(DeprecationWarning, match="dpledger.core.ledger moved") as seen:
        from dpledger.core.ledger import PrivacyLedger as Old
    assert seen[0].filename == __file__  # the warning points at the import statement
    assert Old is PrivacyLedger
    with pytest.warns(DeprecationWarning, match="dpledger.core.testing moved"):
        from dpledger.core import testing
    assert testing is importlib.import_module("dpledger.runtime.testing")


@pytest.mark.usefixtures("fresh_old_paths")
def test_a_plugin_importing_an_old_path_changes_nothing_the_guard_sees() -> None:
    before = Fingerprint.take()
    with pytest.warns(DeprecationWarning):
        for old in MOVED:
            importlib.import_module(old)
    assert diff(before, before.retake()) == ()


def test_a_module_put_in_place_under_an_old_path_is_no_alias() -> None:
    fake = type(sys)("dpledger.core.ledger")
    assert not is_alias("dpledger.core.ledger", fake)
    assert not is_alias("dpledger.core.events", sys.modules["dpledger.core.events"])
