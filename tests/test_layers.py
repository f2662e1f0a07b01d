"""Imports go one way: kernel <- accountant <- orchestration <- plugin API <- plugins <- products
<- CLI.

The executable checks of proof records sit between products and the CLI. A module's layer is
the folder it lives in:

| folder | installed as | layer |
|---|---|---|
| ``core/`` | ``dpledger.core`` | kernel |
| ``accountant/``, ``proofs_checks/registry.py`` | ``dpledger.accountant``, ... | accountant |
| ``dpledger/runtime/`` | ``dpledger.runtime`` | orchestration |
| ``dpledger/plugin.py`` | ``dpledger.plugin`` | plugin API |
| ``plugins/`` | ``dpledger.plugins`` | plugins |
| ``dpledger/{report,audit,integrations}/`` | ``dpledger.report``, ... | products |
| ``proofs_checks/<proof>/`` | ``dpledger.proofs_checks.<proof>`` | checks |
| the rest of ``dpledger/`` | ``dpledger``, ``dpledger.commands``, ... | CLI |
| ``examples/plugin_template/`` | (a distribution of its own) | plugins |
| the rest of ``examples/`` | ``dpledger.examples`` | examples |

The plugin API is one module, the only one classified on its own: it re-exports the kernel's
vocabulary and the few accountant and runtime functions a plugin uses.

Every module of the package and of ``examples/`` is parsed (no import is executed), modules in
folders named ``tests`` included, and each ``dpledger`` import it makes, at module level or
inside a function, is checked against the layer rule below: ``import``, ``from X import Y``
(``X.Y`` when ``X`` is a package, since ``Y`` may be a module) and a string passed to
``importlib.import_module`` or ``__import__`` (an f-string by its literal prefix). Imports in
the body of an ``if TYPE_CHECKING:`` are for annotations only and are not checked (its
``else`` and any other condition are). The old import paths of modules that left
``dpledger.core`` (:data:`dpledger.core.moved.MOVED`) are no files, only names a finder answers
for: they belong to no layer, and no module may use one.
"""

from __future__ import annotations

import ast
import sys
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
    "examples": "dpledger.examples",
}
#: a plugin distribution of its own (not part of the package): the plugins layer
THIRD_PARTY = {"examples/plugin_template": "plugins"}
#: folders that hold no source (build output, caches; ignored by version control)
NOT_SOURCE = frozenset({"build", "dist", "__pycache__"})
#: (layer, the packages (folders) that make it up), lowest first; the longest prefix wins
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("kernel", ("dpledger.core",)),
    (
        "accountant",
        (
            "dpledger.accountant",
            "dpledger.proofs_checks",  # the package itself
            "dpledger.proofs_checks.registry",
            "dpledger.proofs_checks.registry_cli",
            "dpledger.proofs_checks.records",
            "dpledger.proofs_checks.records_exp_mech",
            "dpledger.proofs_checks.records_pld",
            "dpledger.proofs_checks.records_cells",
            "dpledger.proofs_checks.records_blocks",
            "dpledger.proofs_checks.records_kernel",
            "dpledger.proofs_checks.proof_record",
            "dpledger.proofs_checks.check_registry",
        ),
    ),
    ("orchestration", ("dpledger.runtime", "dpledger.budget")),
    # the public plugin API: the kernel's vocabulary and what it re-exports from lower layers
    ("plugin_api", ("dpledger.plugin",)),
    ("plugins", ("dpledger.plugins",)),
    ("products", ("dpledger.report", "dpledger.audit", "dpledger.integrations")),
    # the executable checks of proof records verify plugins' own code (and use the auditor)
    ("checks", ("dpledger.proofs_checks.",)),
    ("cli", ("dpledger",)),
    # example programs: they use dpledger as any program does
    ("examples", ("dpledger.examples",)),
)
ORDER = [name for name, _ in LAYERS]
#: folders (relative to the repository) and the layer of every module in them
FOLDERS: dict[str, str] = {
    "core": "kernel",
    "accountant": "accountant",
    "dpledger/runtime": "orchestration",
    "dpledger/budget": "orchestration",
    "plugins": "plugins",
    "dpledger/report": "products",
    "dpledger/audit": "products",
    "dpledger/integrations": "products",
    "dpledger/commands": "cli",
    "examples": "examples",
    "examples/plugin_template": "plugins",
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


def _third_party(rel: Path) -> str | None:
    """The folder of the plugin distribution of its own that ``rel`` is in, if any."""
    return next((f for f in THIRD_PARTY if rel.as_posix().startswith(f + "/")), None)


def _module_name(path: Path) -> str:
    """The dotted name ``path`` is imported as (in a distribution of its own: from its root)."""
    rel = path.relative_to(ROOT)
    parts = list(rel.with_suffix("").parts)
    third = _third_party(rel)
    if third is not None:
        base, rest = [], parts[len(Path(third).parts) :]
    else:
        base, rest = PACKAGES[parts[0]].split("."), parts[1:]
    if rest and rest[-1] == "__init__":
        rest = rest[:-1]
    return ".".join(base + rest)


def module_layer(module: str, path: Path) -> str:
    """The layer of the module at ``path`` (named ``module``)."""
    third = _third_party(path.relative_to(ROOT))
    return THIRD_PARTY[third] if third is not None else layer_of(module)


def _source_files(folder: Path) -> Iterator[Path]:
    """Every Python file under ``folder``, ``tests`` folders included, build output not."""
    for path in sorted(folder.rglob("*.py")):
        dirs = path.relative_to(folder).parts[:-1]
        if NOT_SOURCE & set(dirs) or any(d.endswith(".egg-info") for d in dirs):
            continue
        if not path.name.startswith("."):
            yield path


def _modules() -> Iterator[tuple[str, Path]]:
    for folder in PACKAGES:
        for path in _source_files(ROOT / folder):
            yield _module_name(path), path


def _is_type_checking(test: ast.expr) -> bool:
    """``TYPE_CHECKING`` or ``typing.TYPE_CHECKING``, and nothing else (not its negation)."""
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                out.update(id(n) for n in ast.walk(child))
    return out


def _is_package(module: str) -> bool:
    """Whether ``module`` is a package (a folder) of the repository: ``from module import name``
    may then import the module ``module.name``."""
    parts = module.split(".")
    for folder, name in sorted(PACKAGES.items(), key=lambda kv: -len(kv[1])):
        prefix = name.split(".")
        if parts[: len(prefix)] == prefix:
            return ROOT.joinpath(folder, *parts[len(prefix) :]).is_dir()
    return False


#: functions that import the module named by their first argument
IMPORT_FUNCTIONS = frozenset({"import_module", "__import__"})


def _string_import(node: ast.Call) -> str | None:
    """The module a call to ``importlib.import_module`` or ``__import__`` names by a string (of
    an f-string: the package its literal prefix names), if any."""
    func = node.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    if name not in IMPORT_FUNCTIONS or not node.args:
        return None
    arg = node.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if not isinstance(arg, ast.JoinedStr):
        return None
    prefix = ""
    for part in arg.values:
        if not (isinstance(part, ast.Constant) and isinstance(part.value, str)):
            return prefix.rpartition(".")[0] or None
        prefix += part.value
    return prefix


def _from_targets(node: ast.ImportFrom, package: str) -> Iterator[str]:
    """What ``from X import Y`` imports: ``X.Y`` for each ``Y`` if ``X`` is a package, else
    ``X``."""
    if node.level:
        base = package.split(".")
        base = base[: len(base) - node.level + 1]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if _is_package(target):
        for alias in node.names:  # from dpledger.proofs_checks import gaussian
            yield f"{target}.{alias.name}"
    else:
        yield target


def imports_in(source: str, module: str, *, is_package: bool = False) -> Iterator[tuple[int, str]]:
    """``(line, module)`` of every import the source of ``module`` makes outside the body of an
    ``if TYPE_CHECKING:``."""
    tree = ast.parse(source)
    skip = _type_checking_nodes(tree)
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            for target in _from_targets(node, package):
                yield node.lineno, target
        elif isinstance(node, ast.Call):
            named = _string_import(node)
            if named is not None:
                yield node.lineno, named


def _imports(module: str, path: Path) -> Iterator[tuple[int, str]]:
    return imports_in(path.read_text(), module, is_package=path.name == "__init__.py")


def check(module: str, here: str, imports: Iterator[tuple[int, str]], where: str) -> list[str]:
    """The imports of ``module`` (in layer ``here``, at ``where``) against the layer rule."""
    out = []
    for line, target in imports:
        if not target.startswith("dpledger.") or target in METADATA:
            continue
        at = f"{where}:{line}"
        if _old_path(target):
            out.append(f"{at}: {module} imports {target}: an old path (see dpledger.core.moved)")
            continue
        if any(module == m and (target == t or target.startswith(t + ".")) for m, t in KNOWN):
            continue
        there = layer_of(target)
        what = f"{at}: {module} ({here}) imports {target}"
        if ORDER.index(there) > ORDER.index(here):
            out.append(f"{what} ({there}): a lower layer may not import a higher one")
        elif there == "plugins" and here in NO_DIRECT_PLUGIN_IMPORT:
            out.append(f"{what}: products and the CLI reach plugins through the host")
    return out


def violations() -> list[str]:
    out = []
    for module, path in _modules():
        where = str(path.relative_to(ROOT))
        out += check(module, module_layer(module, path), _imports(module, path), where)
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
    """A module's layer is its folder's (the deepest listed): no module but the plugin API is
    classified on its own."""
    wrong = []
    for module, path in _modules():
        rel = path.relative_to(ROOT).parent.as_posix()
        folders = [f for f in FOLDERS if rel == f or rel.startswith(f + "/")]
        folder = max(folders, key=len, default=None)
        layer = module_layer(module, path)
        if folder is not None and layer != FOLDERS[folder]:
            wrong.append(f"{module}: {layer}, its folder {folder}/ is {FOLDERS[folder]}")
    assert not wrong, wrong


def test_the_plugin_api_is_its_own_layer() -> None:
    """Between the orchestration it re-exports from and the plugins that import it."""
    assert layer_of("dpledger.plugin") == "plugin_api"
    assert layer_of("dpledger.plugins") == layer_of("dpledger.plugins.path.plugin") == "plugins"
    assert ORDER.index("orchestration") < ORDER.index("plugin_api") < ORDER.index("plugins")


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


# -- the rule has no holes: each way around it is planted and caught ------------------------------
def _caught(source: str, module: str) -> list[str]:
    """The violations of ``source`` as the module ``module`` (in the layer of its name)."""
    return check(module, layer_of(module), imports_in(source, module), "planted.py")


def _plant(root: Path, files: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The violations of a repository made of ``files`` only."""
    for rel, source in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(source)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", root)
    return violations()


def test_only_an_if_type_checking_body_is_exempt() -> None:
    upward = "    from dpledger.runtime.ledger import PrivacyLedger\n"
    head = "from typing import TYPE_CHECKING\n"
    assert not _caught(head + "if TYPE_CHECKING:\n" + upward, "dpledger.core.events")
    assert not _caught("import typing\nif typing.TYPE_CHECKING:\n" + upward, "dpledger.core.events")
    for guarded in (
        "if not TYPE_CHECKING:\n" + upward,
        "if TYPE_CHECKING or True:\n" + upward,
        "if TYPE_CHECKING:\n    pass\nelse:\n" + upward,
    ):
        found = _caught(head + guarded, "dpledger.core.events")
        assert found and "dpledger.runtime.ledger" in found[0], guarded


@pytest.mark.parametrize(
    "call",
    [
        'importlib.import_module("dpledger.runtime.ledger")',
        'import_module("dpledger.runtime.ledger")',
        '__import__("dpledger.runtime.ledger")',
        'importlib.import_module(f"dpledger.runtime.{name}")',
        'importlib.import_module(f"dpledger.runtime.ledger")',
    ],
)
def test_a_string_import_is_checked(call: str) -> None:
    head = "import importlib\nfrom importlib import import_module\n"
    source = f"{head}\n\ndef f(name):\n    {call}\n"
    found = _caught(source, "dpledger.core.events")
    assert found and "imports dpledger.runtime" in found[0], found


def test_from_a_package_import_a_module_is_that_module() -> None:
    """``from X import Y`` imports the module ``X.Y`` when ``X`` is a package, whatever ``X``."""
    found = _caught("from dpledger.proofs_checks import x\n", "dpledger.accountant.pld")
    assert found and "dpledger.proofs_checks.x (checks)" in found[0], found
    assert not _caught("from dpledger.proofs_checks import registry\n", "dpledger.accountant.pld")
    assert _caught("from dpledger.plugins.path import plugin\n", "dpledger.report.build")
    assert _caught("from dpledger import commands\n", "dpledger.runtime.runner")
    assert _caught("from dpledger.core import ledger\n", "dpledger.runtime.runner")  # old path
    assert not _caught("from dpledger import __version__\n", "dpledger.core.events")
    assert not _caught("from dpledger.core.events import Event\n", "dpledger.accountant.pld")


def test_modules_in_tests_folders_are_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    upward = "from dpledger.runtime.ledger import PrivacyLedger\n"
    found = _plant(tmp_path, {"core/tests/test_events.py": upward}, monkeypatch)
    assert len(found) == 1 and "core/tests/test_events.py:1" in found[0], found


def test_examples_are_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The examples, and the plugin template as a plugin (its tests included); not build
    output."""
    found = _plant(
        tmp_path,
        {
            "examples/demo.py": "from dpledger.core.testing import MethodPluginContract\n",
            "examples/plugin_template/pkg/plugin.py": "from dpledger.commands import run\n",
            "examples/plugin_template/tests/test_plugin.py": "import dpledger.report.build\n",
            "examples/plugin_template/build/lib/pkg/plugin.py": "import dpledger.commands.run\n",
        },
        monkeypatch,
    )
    assert len(found) == 3, found
    assert "examples/demo.py:1" in found[0] and "an old path" in found[0]
    assert "pkg.plugin (plugins) imports dpledger.commands (cli)" in found[1]
    assert "tests.test_plugin (plugins) imports dpledger.report.build (products)" in found[2]


def test_the_repository_scan_reaches_tests_folders_and_examples() -> None:
    scanned = {path.relative_to(ROOT).as_posix() for _, path in _modules()}
    assert "examples/plugin_template/tests/test_plugin.py" in scanned
    assert "examples/plugin_template/dpledger_plugin_template/plugin.py" in scanned
    assert "examples/opacus_digits.py" in scanned
    assert not any("/build/" in rel for rel in scanned)
