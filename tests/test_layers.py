"""Imports go one way: kernel <- accountant <- orchestration <- plugins <- products <- CLI.

The executable checks of proof records sit between products and the CLI. A module's layer is
the folder it lives in:

| folder | installed as | layer |
|---|---|---|
| ``core/`` | ``dpledger.core`` | kernel |
| ``accountant/``, ``proofs_checks/registry.py`` | ``dpledger.accountant``, ... | accountant |
| ``dpledger/runtime/`` | ``dpledger.runtime`` | orchestration |
| ``plugins/`` | ``dpledger.plugins`` | plugins |
| ``dpledger/{report,audit,integrations}/`` | ``dpledger.report``, ... | products |
| ``proofs_checks/<proof>/`` | ``dpledger.proofs_checks.<proof>`` | checks |
| the rest of ``dpledger/`` | ``dpledger``, ``dpledger.commands``, ... | CLI |

Every module of the package is parsed (no import is executed) and each ``dpledger`` import it
makes, at module level or inside a function, is checked against the layer rule below. Imports
under ``if TYPE_CHECKING:`` are for annotations only and are not checked. The old import paths
of modules that left ``dpledger.core`` (:data:`dpledger.core.moved.MOVED`) are no files, only
names a finder answers for: they belong to no layer, and no module of the package may use one.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from dpledger.core.moved import MOVED

ROOT = Path(__file__).resolve().parents[1]
#: package folders of the repository and the names they are installed under
PACKAGES = {
    "core": "dpledger.core",
    "accountant": "dpledger.accountant",
    "plugins": "dpledger.plugins",
    "proofs_checks": "dpledger.proofs_checks",
    "dpledger": "dpledger",
}
#: (layer, the packages (folders) that make it up), lowest first; the longest prefix wins
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("kernel", ("dpledger.core",)),
    (
        "accountant",
        (
            "dpledger.accountant",
            "dpledger.proofs_checks",  # the package itself
            "dpledger.proofs_checks.registry",
            "dpledger.proofs_checks.check_registry",
        ),
    ),
    ("orchestration", ("dpledger.runtime",)),
    ("plugins", ("dpledger.plugins",)),
    ("products", ("dpledger.report", "dpledger.audit", "dpledger.integrations")),
    # the executable checks of proof records verify plugins' own code (and use the auditor)
    ("checks", ("dpledger.proofs_checks.",)),
    ("cli", ("dpledger",)),
)
ORDER = [name for name, _ in LAYERS]
#: folders (relative to the repository) and the layer of every module in them
FOLDERS: dict[str, str] = {
    "core": "kernel",
    "accountant": "accountant",
    "dpledger/runtime": "orchestration",
    "plugins": "plugins",
    "dpledger/report": "products",
    "dpledger/audit": "products",
    "dpledger/integrations": "products",
    "dpledger/commands": "cli",
}
#: the root package holds only its version, which every layer may read
METADATA = frozenset({"dpledger.__version__"})
#: products and the CLI reach methods through the plugin host, never by importing a plugin
NO_DIRECT_PLUGIN_IMPORT = ("products", "cli")
#: known exceptions, each with its reason; a fixed one must be removed from this list
KNOWN: dict[tuple[str, str], str] = {}


def _old_path(module: str) -> bool:
    """Whether ``module`` is (inside) an old import path of a module that left the kernel."""
    return any(module == old or module.startswith(old + ".") for old in MOVED)


def layer_of(module: str) -> str:
    """The layer of a dotted module name (longest matching prefix wins)."""
    best, best_len = "cli", -1
    for name, prefixes in LAYERS:
        for prefix in prefixes:
            exact = module == prefix  # a prefix ending in "." matches nested modules only
            nested = module.startswith(prefix if prefix.endswith(".") else prefix + ".")
            if (exact or nested) and len(prefix) > best_len:
                best, best_len = name, len(prefix)
    return best


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT)
    parts = list(rel.with_suffix("").parts)
    base = PACKAGES[parts[0]].split(".")
    rest = parts[1:]
    if rest and rest[-1] == "__init__":
        rest = rest[:-1]
    return ".".join(base + rest)


def _modules() -> Iterator[tuple[str, Path]]:
    for folder in PACKAGES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "tests" in path.parts or path.name.startswith("."):
                continue
            yield _module_name(path), path


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                out.update(id(n) for n in ast.walk(child))
    return out


def _imports(module: str, path: Path) -> Iterator[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    skip = _type_checking_nodes(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target in ("dpledger", "dpledger.core", "dpledger.accountant", "dpledger.runtime"):
                for alias in node.names:  # from dpledger.core import ledger
                    yield node.lineno, f"{target}.{alias.name}"
            else:
                yield node.lineno, target


def violations() -> list[str]:
    out = []
    for module, path in _modules():
        here = layer_of(module)
        for line, target in _imports(module, path):
            if not target.startswith("dpledger.") or target in METADATA:
                continue
            if _old_path(target):
                where = f"{path.relative_to(ROOT)}:{line}: {module} imports {target}"
                out.append(f"{where}: an old path (see dpledger.core.moved); import the new one")
                continue
            there = layer_of(target)
            known = any(
                module == m and (target == t or target.startswith(t + ".")) for m, t in KNOWN
            )
            if known:
                continue
            where = f"{path.relative_to(ROOT)}:{line}: {module} ({here}) imports {target}"
            if ORDER.index(there) > ORDER.index(here):
                out.append(f"{where} ({there}): a lower layer may not import a higher one")
            elif there == "plugins" and here in NO_DIRECT_PLUGIN_IMPORT:
                out.append(f"{where}: products and the CLI reach plugins through the host")
    return out


def test_imports_follow_the_layers() -> None:
    """Rule: kernel <- accountant <- orchestration <- plugins <- products <- checks <- CLI."""
    found = violations()
    assert not found, "imports against the layers:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("module", "layer"),
    [
        ("dpledger.core.events", "kernel"),
        ("dpledger.accountant.pld", "accountant"),
        ("dpledger.runtime.ledger", "orchestration"),
        ("dpledger.plugins.path.plugin", "plugins"),
        ("dpledger.report.build", "products"),
        ("dpledger.proofs_checks.registry", "accountant"),
        ("dpledger.proofs_checks.gaussian.check_gaussian", "checks"),
        ("dpledger.proofs_checks", "accountant"),
        ("dpledger.commands.account", "cli"),
    ],
)
def test_layer_of(module: str, layer: str) -> None:
    assert layer_of(module) == layer


def test_the_rule_catches_an_upward_import_inside_a_function(tmp_path: Path) -> None:
    path = tmp_path / "events.py"
    path.write_text("def f():\n    from dpledger.runtime.ledger import PrivacyLedger\n")
    assert list(_imports("dpledger.core.events", path)) == [(2, "dpledger.runtime.ledger")]
    assert ORDER.index(layer_of("dpledger.runtime.ledger")) > ORDER.index(
        layer_of("dpledger.core.events")
    )


def test_the_root_package_imports_nothing_of_its_own() -> None:
    imports = [t for _, t in _imports("dpledger", ROOT / "dpledger" / "__init__.py")]
    assert not [t for t in imports if t.startswith("dpledger")], imports


def test_known_exceptions_still_exist() -> None:
    for module, target in KNOWN:
        path = next(p for m, p in _modules() if m == module)
        assert any(t.startswith(target) for _, t in _imports(module, path)), (
            f"{module} no longer imports {target}: remove it from KNOWN"
        )


def test_every_folder_is_one_layer() -> None:
    """A module's layer is its folder's: no module is classified on its own."""
    wrong = []
    for module, path in _modules():
        rel = path.relative_to(ROOT).parent.as_posix()
        folder = next((f for f in FOLDERS if rel == f or rel.startswith(f + "/")), None)
        if folder is not None and layer_of(module) != FOLDERS[folder]:
            wrong.append(f"{module}: {layer_of(module)}, its folder {folder}/ is {FOLDERS[folder]}")
    assert not wrong, wrong


def test_old_paths_are_no_files_and_their_modules_exist() -> None:
    """An old path is only a name (so version control follows the move) bound to real modules."""
    for old, new in MOVED.items():
        rel = old.removeprefix("dpledger.core.").replace(".", "/")
        assert not (ROOT / "core" / f"{rel}.py").exists(), old
        assert all(layer_of(n) != "kernel" for n in new), (old, new)
        for name in new:
            folder, _, rest = name.removeprefix("dpledger.").partition(".")
            base = ROOT / ("dpledger/" + folder if folder == "runtime" else folder)
            assert (base / f"{rest.replace('.', '/')}.py").is_file(), name


def test_the_rule_catches_an_old_path() -> None:
    assert _old_path("dpledger.core.ledger")
    assert not _old_path("dpledger.core.events")
