"""The public plugin API (``dpledger.plugin``) is what plugins import, and it holds what it names.

A builtin plugin (``plugins/<package>/``) imports dpledger names only from ``dpledger.plugin`` or
from its own package; the plugin template imports them only from ``dpledger.plugin`` (its tests
also from ``dpledger.runtime.testing``, the testing API), and so does the code of
``docs/writing-a-plugin.md``. Every import counts: at module level, in a function, under
``if TYPE_CHECKING:``, and a string given to ``importlib.import_module`` or ``__import__``.
The runtime ledger implements the kernel's :class:`~dpledger.core.ledger_protocol.Ledger`.
"""

from __future__ import annotations

import ast
import inspect
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import dpledger.plugin as api
from dpledger.core.ledger_protocol import Epoch, Ledger, SampleScope, UnitKeys

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "examples" / "plugin_template"
#: the testing API: pytest fixtures and contract classes (imports pytest, so not re-exported)
TESTING = "dpledger.runtime.testing"
#: known exceptions, each with its reason; a fixed one must be removed from this list
KNOWN: dict[tuple[str, str], str] = {}


# -- the imports of a module -------------------------------------------------------------------
def _package_of(module: str, is_package: bool) -> str:
    return module if is_package else module.rpartition(".")[0]


def _string_import(node: ast.Call) -> str | None:
    func = node.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    if name not in ("import_module", "__import__") or not node.args:
        return None
    arg = node.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr) and arg.values:
        first = arg.values[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            return first.value.rstrip(".") or None
    return None


def imports_of(
    source: str, module: str, *, is_package: bool = False
) -> Iterator[tuple[int, str, tuple[str, ...]]]:
    """``(line, module, names)`` of every import in ``source`` (``names``: of a ``from``
    import), wherever it is, ``if TYPE_CHECKING:`` bodies included."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, ()
        elif isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                base = _package_of(module, is_package).split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            yield node.lineno, target, tuple(a.name for a in node.names)
        elif isinstance(node, ast.Call) and (named := _string_import(node)) is not None:
            yield node.lineno, named, ()


def _inside(target: str, allowed: tuple[str, ...]) -> bool:
    return any(target == a or target.startswith(a + ".") for a in allowed)


def around_the_api(
    source: str, module: str, allowed: tuple[str, ...], *, is_package: bool = False
) -> list[str]:
    """The imports of ``source`` (the module ``module``) that go around the public API: a
    dpledger module other than ``dpledger.plugin`` and ``allowed`` (and their submodules), or a
    name ``dpledger.plugin`` does not list in ``__all__``."""
    out = []
    for line, target, names in imports_of(source, module, is_package=is_package):
        if not (target == "dpledger" or target.startswith("dpledger.")):
            continue
        if target == "dpledger.plugin":
            out += [
                f"{line}: {n} is not in dpledger.plugin.__all__"
                for n in names
                if n not in api.__all__
            ]
            continue
        whole = ("dpledger.plugin", *allowed)
        if _inside(target, allowed) or (
            names and all(_inside(f"{target}.{n}", whole) for n in names)
        ):
            continue  # ``from dpledger import plugin``: the module dpledger.plugin
        out.append(f"{line}: imports {target}: import it from dpledger.plugin")
    return out


# -- who is checked, and against what ------------------------------------------------------------
def _module_name(path: Path, root: Path, base: str) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([base, *parts] if base else parts)


def _sources(folder: Path) -> Iterator[Path]:
    for path in sorted(folder.rglob("*.py")):
        dirs = path.relative_to(folder).parts[:-1]
        if not {"build", "__pycache__"} & set(dirs) and not any(
            d.endswith(".egg-info") for d in dirs
        ):
            yield path


def plugin_modules(root: Path) -> Iterator[tuple[Path, str, tuple[str, ...]]]:
    """``(path, module, allowed)``: each builtin plugin module and each module of the template,
    with the dpledger modules it may import besides ``dpledger.plugin``."""
    for path in _sources(root / "plugins"):
        module = _module_name(path, root / "plugins", "dpledger.plugins")
        rel = path.relative_to(root / "plugins").parts
        own = f"dpledger.plugins.{rel[0]}" if len(rel) > 1 else module
        yield path, module, (own,)
    template = root / "examples" / "plugin_template"
    for path in _sources(template):
        is_test = path.relative_to(template).parts[0] == "tests"
        yield path, _module_name(path, template, ""), (TESTING,) if is_test else ()


def violations(root: Path = ROOT) -> list[str]:
    out = []
    for path, module, allowed in plugin_modules(root):
        rel = path.relative_to(root).as_posix()
        found = around_the_api(
            path.read_text(), module, allowed, is_package=path.name == "__init__.py"
        )
        out += [
            f"{rel}:{v}"
            for v in found
            if not any(rel == f and f"imports {t}:" in v for f, t in KNOWN)
        ]
    return out


def test_plugins_and_the_template_import_only_the_public_api() -> None:
    found = violations()
    assert not found, "imports around dpledger.plugin:\n" + "\n".join(found)


def test_known_exceptions_still_exist() -> None:
    for rel, target in KNOWN:
        imported = [t for _, t, _ in imports_of((ROOT / rel).read_text(), "m")]
        assert target in imported, f"{rel} no longer imports {target}: remove it from KNOWN"


def test_the_check_catches_a_planted_violation(tmp_path: Path) -> None:
    """Each way around the API, planted in a copy of a plugin package, is named."""
    package = tmp_path / "plugins" / "mine"
    package.mkdir(parents=True)
    (package / "plugin.py").write_text(
        textwrap.dedent(
            """\
            import importlib
            from typing import TYPE_CHECKING

            from dpledger.core.events import GaussianEvent
            from dpledger.plugin import Ledger, hookimpl, frozen_copy
            from dpledger.plugins.mine import helpers
            from dpledger.plugins.primitives._common import float_matrix
            from .. import path

            if TYPE_CHECKING:
                from dpledger.runtime.ledger import PrivacyLedger


            def run():
                from dpledger.accountant.calibrate import calibrate_on_grid
                return importlib.import_module("dpledger.runtime.ledger")
            """
        )
    )
    found = violations(tmp_path)
    expected = [
        "4: imports dpledger.core.events",
        "5: frozen_copy is not in dpledger.plugin.__all__",
        "7: imports dpledger.plugins.primitives._common",
        "8: imports dpledger.plugins",
        "11: imports dpledger.runtime.ledger",
        "15: imports dpledger.accountant.calibrate",
        "16: imports dpledger.runtime.ledger",
    ]
    assert len(found) == len(expected), found
    for want in expected:
        assert any(f"plugins/mine/plugin.py:{want}" in f for f in found), (want, found)


def test_the_template_and_its_tests_are_checked(tmp_path: Path) -> None:
    template = tmp_path / "examples" / "plugin_template"
    (template / "pkg").mkdir(parents=True)
    (template / "tests").mkdir()
    (template / "pkg" / "plugin.py").write_text(
        "from dpledger.runtime.testing import forbid_imports\n"
    )
    (template / "tests" / "test_pkg.py").write_text(
        "from dpledger.runtime.testing import MethodPluginContract\n"
        "from dpledger.runtime.runner import run_verified\n"
    )
    found = violations(tmp_path)
    assert len(found) == 2, found
    assert "pkg/plugin.py:1: imports dpledger.runtime.testing" in found[0]
    assert "tests/test_pkg.py:2: imports dpledger.runtime.runner" in found[1]


def test_the_guide_imports_only_the_public_api() -> None:
    """The code of ``docs/writing-a-plugin.md`` imports from dpledger.plugin (tests: also from
    the testing API)."""
    text = (ROOT / "docs" / "writing-a-plugin.md").read_text()
    code = "\n".join(re.findall(r"```python\n(.*?)```", text, flags=re.S))
    pattern = r"^\s*(?:from\s+(\S+)\s+import\s+(\([^)]*\)|[^\n]*)|import\s+(\S+))"
    found = re.findall(pattern, code, flags=re.M)
    imports = [(a or c, b) for a, b, c in found if (a or c).startswith("dpledger")]
    assert imports, "the guide shows its imports"
    for module, names in imports:
        assert module in ("dpledger.plugin", TESTING), module
        listed = {n.strip() for n in names.strip("()").split(",")} - {""}
        if module == "dpledger.plugin":
            assert listed <= set(api.__all__), sorted(listed - set(api.__all__))


# -- dpledger.plugin.__all__ ----------------------------------------------------------------------
def test_every_name_of_the_api_exists() -> None:
    assert api.__all__ == sorted(set(api.__all__), key=api.__all__.index)  # no duplicate
    missing = [n for n in api.__all__ if not hasattr(api, n)]
    assert not missing, missing
    assert all(not n.startswith("_") for n in api.__all__)
    with pytest.raises(AttributeError):
        api.frozen_copy  # noqa: B018  (a kernel name the API does not list)


def test_the_api_reexports_the_objects_themselves() -> None:
    from dpledger.accountant.calibrate import calibrate_on_grid
    from dpledger.core.hookspecs import hookimpl
    from dpledger.core.specs import MethodSpec
    from dpledger.runtime.ledger import PrivacyLedger

    assert api.hookimpl is hookimpl and api.MethodSpec is MethodSpec
    assert api.PrivacyLedger is PrivacyLedger and api.calibrate_on_grid is calibrate_on_grid


def test_importing_the_api_loads_the_kernel_only() -> None:
    """Importing a plugin loads no accountant and no runtime until it uses them."""
    code = "import sys, dpledger.plugin\nprint(sorted(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = [m for m in eval(out.stdout) if m.startswith(("dpledger.", "scipy"))]
    assert not [m for m in loaded if not m.startswith(("dpledger.core", "dpledger.plugin"))], loaded


def test_the_stability_rules_are_stated() -> None:
    doc = api.__doc__ or ""
    for words in ("major version", "DeprecationWarning", "at least one minor release", "__all__"):
        assert words in doc, words


# -- the Ledger protocol ---------------------------------------------------------------------------
def _members(protocol: type) -> dict[str, object]:
    return {
        n: v
        for n, v in vars(protocol).items()
        if (not n.startswith("_") or n in ("__len__", "__iter__", "__enter__", "__exit__"))
        and (callable(v) or isinstance(v, property))
    }


def _parameters(function: object) -> list[tuple[str, object, object, object]]:
    sig = inspect.signature(function)  # type: ignore[arg-type]
    return [(p.name, p.kind, p.default, p.annotation) for p in sig.parameters.values()]


def _check_implements(instance: object, protocol: type) -> None:
    for name, member in _members(protocol).items():
        assert hasattr(instance, name), f"{type(instance).__name__} has no {name}"
        if isinstance(member, property):
            continue
        assert _parameters(getattr(type(instance), name)) == _parameters(member), name


@pytest.fixture
def ledger() -> object:
    from dpledger.core.adjacency import Adjacency
    from dpledger.core.events import GaussianEvent
    from dpledger.runtime.ledger import PrivacyLedger

    return PrivacyLedger(GaussianEvent(1.0), Adjacency(relation="replace_one"), 0)


def test_the_runtime_ledger_implements_the_protocol(ledger: object) -> None:
    """Every member of :class:`Ledger` exists on ``PrivacyLedger``, a method with the same
    parameters (names, kinds, defaults, annotations)."""
    _check_implements(ledger, Ledger)
    _check_implements(ledger.poisson_sample(4, 0.5, step="s"), SampleScope)  # type: ignore[attr-defined]
    epoch = ledger.shuffle_batches(4, 2, step="e")  # type: ignore[attr-defined]
    _check_implements(epoch, Epoch)
    _check_implements(next(iter(epoch)), SampleScope)


def test_the_unit_keys_implement_their_protocol() -> None:
    from dpledger.runtime.units import DataUnits

    _check_implements(DataUnits("user_id", [np.array([1, 1, 2])]), UnitKeys)


def test_the_protocol_covers_what_a_third_party_run_may_call() -> None:
    from dpledger.cleanroom.ledger_channel import ATTRIBUTES, FORWARDED, NOT_FORWARDED

    members = set(_members(Ledger))
    assert members >= FORWARDED | ATTRIBUTES, sorted(FORWARDED | ATTRIBUTES - members)
    assert set(NOT_FORWARDED) - {"log"} <= members


def test_the_runtime_ledger_is_checked_against_the_protocol_by_mypy() -> None:
    """``dpledger/runtime/ledger.py`` returns a ``PrivacyLedger`` as a ``Ledger`` in a function
    that strict mypy checks with the package (``tests/test_typing.py``): a ledger that stops
    implementing the protocol fails that test."""
    tree = ast.parse((ROOT / "dpledger" / "runtime" / "ledger.py").read_text())
    checks = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef)
        and node.name == "_implements_the_ledger_protocol"
        and isinstance(node.returns, ast.Name)
        and node.returns.id == "Ledger"
        and ast.unparse(node.args.args[0].annotation or ast.Name("")) == "PrivacyLedger"
    ]
    assert len(checks) == 1


def test_the_integrity_guard_sees_a_patch_of_the_api(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plugins bind their names from here, so the in-process guard fingerprints this module."""
    from dpledger.runtime.integrity import Change, Fingerprint, diff

    before = Fingerprint.take()
    monkeypatch.setattr(api, "GaussianEvent", object)
    assert Change("dpledger.plugin.GaussianEvent", "replaced") in diff(before, before.retake())
