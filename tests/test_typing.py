"""Strict mypy on the whole package, run on the import namespace the package installs.

The source folders are mapped onto ``dpledger.*`` by setuptools ``package-dir``; mypy cannot
follow that mapping, so the test builds the same namespace from symbolic links in a temporary
folder and checks there, strictly, the kernel (``dpledger.core``), ``dpledger.accountant``, the
orchestration (``dpledger.runtime``), the plugins, the commands, the clean room, the products
(``dpledger.report``, ``dpledger.audit``, ``dpledger.integrations``), the checks of the proofs
(``dpledger.proofs_checks``), the CLI and the demo, the examples (``dpledger.examples``) and the
plugin template, a distribution of its own (``examples/plugin_template``, on mypy's path).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAPPED = ("core", "accountant", "plugins", "proofs_checks", "examples")
#: the plugin template: its own distribution, checked as the top-level package it installs
TEMPLATE = ROOT / "examples" / "plugin_template"
#: packages checked with all their modules
PACKAGES = (
    "dpledger.core",
    "dpledger.runtime",
    "dpledger.accountant",
    "dpledger.report",
    "dpledger.audit",
    "dpledger.integrations",
    "dpledger.plugins",
    "dpledger.commands",
    "dpledger.cleanroom",
    "dpledger.proofs_checks",
    "dpledger_plugin_template",
)
#: single modules: the root package, the CLI, the demo and the examples (``-p dpledger.examples``
#: would walk into the template folder and its build output)
MODULES = (
    "dpledger",
    "dpledger.__main__",
    "dpledger.cli",
    "dpledger.demo",
    *(
        "dpledger.examples" + ("" if p.stem == "__init__" else f".{p.stem}")
        for p in sorted((ROOT / "examples").glob("*.py"))
    ),
)


def _namespace(tmp: Path) -> Path:
    pkg = tmp / "dpledger"
    pkg.mkdir()
    for folder in MAPPED:
        (pkg / folder).symlink_to(ROOT / folder, target_is_directory=True)
    for entry in (ROOT / "dpledger").iterdir():
        if entry.name != "__pycache__":
            (pkg / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    return tmp


def test_the_package_passes_strict_mypy(tmp_path: Path) -> None:
    pytest.importorskip("mypy")
    if os.name == "nt":
        pytest.skip("symbolic links need privileges on Windows")
    where = _namespace(tmp_path)
    targets = [arg for p in PACKAGES for arg in ("-p", p)]
    targets += [arg for m in MODULES for arg in ("-m", m)]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(tmp_path / ".mypy_cache"),
            "--strict",
            *targets,
        ],
        cwd=where,
        env={**os.environ, "MYPYPATH": str(TEMPLATE)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_example_module_is_checked() -> None:
    """Every module of the examples folder is checked (one module per file, no subpackage)."""
    assert "dpledger.examples" in MODULES and "dpledger.examples.opacus_digits" in MODULES
    assert not any(p.name == "__init__.py" for p in (ROOT / "examples").glob("*/*.py"))
