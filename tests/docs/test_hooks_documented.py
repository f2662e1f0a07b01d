"""Every hookspec is documented with its exact signature and has a test named test_hook_<name>."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from dpledger.core import hookspecs

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "writing-a-plugin.md"


def _signature(name: str) -> str:
    fn = getattr(hookspecs, name)
    params = ", ".join(
        f"{p.name}: {p.annotation}" for p in inspect.signature(fn).parameters.values()
    )
    return f"def {name}({params}) -> {fn.__annotations__['return']}:"


def _all_test_sources() -> str:
    return "\n".join(p.read_text() for p in (ROOT / "tests").rglob("test_*.py"))


@pytest.mark.parametrize("name", hookspecs.HOOK_NAMES)
def test_hook_is_documented_with_its_signature(name: str) -> None:
    text = DOC.read_text()
    assert f"### {name}" in text
    assert _signature(name) in text


@pytest.mark.parametrize("name", hookspecs.HOOK_NAMES)
def test_hook_has_a_test(name: str) -> None:
    assert f"def test_hook_{name}(" in _all_test_sources()


def test_hook_names_match_the_specs() -> None:
    specs = {n for n, f in vars(hookspecs).items() if hasattr(f, "dpledger_spec")}
    assert specs == set(hookspecs.HOOK_NAMES)
