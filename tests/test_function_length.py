"""No function of the package is longer than :data:`LIMIT` lines (decorators and docstring
included), except the few listed in :data:`ALLOWED`: split a long function along its natural
steps into small named helpers instead of raising the limit."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("core", "accountant", "dpledger", "plugins")
LIMIT = 60
#: functions allowed over the limit (``path:qualname``): none; one added here must say why
ALLOWED: frozenset[str] = frozenset()


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, ast.AST]]:
    """(qualified name, node) of every function, methods and nested functions included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            name = f"{prefix}{node.name}"
            if not isinstance(node, ast.ClassDef):
                yield name, node
            yield from _functions(node, name + ".")
        else:
            yield from _functions(node, prefix)


def lengths() -> dict[str, int]:
    """``path:qualname`` -> lines, for every function of the package's source folders."""
    out: dict[str, int] = {}
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if "tests" in rel.parts or any(p.startswith(".") for p in rel.parts):
                continue
            for name, node in _functions(ast.parse(path.read_text(), filename=str(path))):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])  # type: ignore[attr-defined]
                out[f"{rel.as_posix()}:{name}"] = node.end_lineno - first + 1  # type: ignore[attr-defined]
    return out


def test_no_function_is_longer_than_the_limit() -> None:
    long = {k: n for k, n in lengths().items() if n > LIMIT and k not in ALLOWED}
    assert not long, f"functions over {LIMIT} lines (split them into named helpers):\n" + "\n".join(
        f"  {k}: {n} lines" for k, n in sorted(long.items(), key=lambda kv: -kv[1])
    )


def test_allowed_functions_are_still_long() -> None:
    found = lengths()
    stale = sorted(k for k in ALLOWED if found.get(k, 0) <= LIMIT)
    assert not stale, f"within the limit or gone now: remove from ALLOWED: {stale}"


def test_the_measure_counts_decorators_and_nested_functions(tmp_path: Path) -> None:
    source = "@attrs.frozen\nclass A:\n    def f(self):\n        def g():\n            pass\n"
    found = dict(_functions(ast.parse(source)))
    assert set(found) == {"A.f", "A.f.g"}
