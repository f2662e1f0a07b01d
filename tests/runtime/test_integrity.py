"""The fingerprint of dpledger's code: what counts as a change, and who is blamed for it."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dpledger.accountant.select as select
import dpledger.runtime.ledger as ledger
from dpledger.core.errors import IntegrityError, LedgerViolationError
from dpledger.runtime import integrity
from dpledger.runtime.integrity import Change, Fingerprint, IntegrityGuard, diff, guarded_call


def test_each_kind_of_change_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    before = Fingerprint.take()
    monkeypatch.setattr(select, "CONSISTENCY_SLACK", 0.5)  # a constant
    monkeypatch.setattr(ledger, "sum", lambda xs: 0.0, raising=False)  # shadows a builtin
    monkeypatch.setattr(select.account, "__defaults__", None)  # adjacency had a default
    monkeypatch.setattr(ledger.PrivacyLedger.verify, "__code__", (lambda self: None).__code__)
    monkeypatch.delattr(ledger.PrivacyLedger, "matches_exactly")
    monkeypatch.setattr(np.random, "default_rng", lambda *a: None)
    monkeypatch.setattr(np, "rt_new_attribute", 1, raising=False)  # libraries may gain names
    changes = set(diff(before, before.retake()))
    # every module that imported ``select.account`` sees the same function modified: which
    # modules those are depends on what else the process has loaded
    aliases = {c for c in changes if c.where.endswith(".account")}
    assert aliases >= {
        Change("dpledger.accountant.select.account", "modified in place"),
        Change("dpledger.accountant.calibrate.account", "modified in place"),
    }
    assert all(c.how == "modified in place" for c in aliases)
    assert changes - aliases == {
        Change("dpledger.accountant.select.CONSISTENCY_SLACK", "replaced"),
        Change("dpledger.runtime.ledger.sum", "added"),
        Change("dpledger.runtime.ledger.PrivacyLedger.verify", "modified in place"),
        Change("dpledger.runtime.ledger.PrivacyLedger.matches_exactly", "removed"),
        Change("numpy.random.default_rng", "replaced"),
    }


def test_contents_of_core_containers_and_objects(monkeypatch: pytest.MonkeyPatch) -> None:
    from dpledger.core import adjacency
    from dpledger.runtime import plugin_manager

    before = Fingerprint.take()
    monkeypatch.setitem(plugin_manager._SPEC_TYPES, "dpledger_register_methods", object)
    object.__setattr__(adjacency.ROW_ADD_REMOVE, "relation", "replace_one")
    try:
        where = {c.where for c in diff(before, before.retake())}
    finally:
        object.__setattr__(adjacency.ROW_ADD_REMOVE, "relation", "add_remove")
    assert where == {
        "dpledger.runtime.plugin_manager._SPEC_TYPES",
        "dpledger.core.adjacency.ROW_ADD_REMOVE",
    }


def test_a_change_is_blamed_once_and_outlives_its_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    guard = IntegrityGuard()
    assert guard.check("clean", None, None, "hook") is None
    original = math.erfc
    monkeypatch.setattr(math, "erfc", lambda x: 0.0)
    first = guard.check("culprit", "bad-dist", "1.0", "import")
    assert first is not None and first.changes == (Change("math.erfc", "replaced"),)
    assert guard.check("bystander", None, None, "hook") is None  # already attributed
    with pytest.raises(IntegrityError, match=r"'culprit' \(distribution bad-dist 1\.0\)") as info:
        guard.certify()
    assert info.value.plugin == "culprit" and "--plugins-block culprit" in str(info.value)
    later = IntegrityGuard()  # e.g. a second host in the same process
    assert [v.plugin for v in later.violations] == ["culprit"]
    math.erfc = original
    assert IntegrityGuard().violations == ()
    assert not integrity.tainted()


def test_guarded_call_blames_after_the_call_and_keeps_the_cause() -> None:
    calls: list[str] = []

    def after() -> None:
        calls.append("after")
        if len(calls) > 1:
            raise IntegrityError("changed", plugin="p", distribution=None)

    def boom() -> None:
        raise LedgerViolationError("too much noise spent")

    wrapped = guarded_call(lambda x: x + 1, after)
    assert wrapped(1) == 2 and calls == ["after"]
    with pytest.raises(IntegrityError) as info:
        guarded_call(boom, after)()
    assert isinstance(info.value.__cause__, LedgerViolationError)


def test_a_first_warning_of_a_core_module_is_not_a_change() -> None:
    """Python adds ``__warningregistry__`` to a module the first time code in it warns; that
    is not a plugin changing the core (which test runs first decided whether it was seen)."""
    import warnings

    import dpledger.runtime.ledger as module

    before = Fingerprint.take()
    had = module.__dict__.pop("__warningregistry__", None)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")
            exec(  # a warning attributed to the module, as its own code would raise it
                compile(
                    "__import__('warnings').warn('first', UserWarning)", module.__file__, "exec"
                ),
                module.__dict__,
            )
        assert [str(w.message) for w in caught] == ["first"]
        assert "__warningregistry__" in module.__dict__
        assert diff(before, before.retake()) == ()
    finally:
        if had is not None:
            module.__dict__["__warningregistry__"] = had
