"""Strict mypy on the accountant core, run on the import namespace the package installs.

The source folders are mapped onto ``dpledger.*`` by setuptools ``package-dir``; mypy cannot
follow that mapping, so the test builds the same namespace from symbolic links in a temporary
folder and checks the kernel (``dpledger.core``), ``dpledger.accountant``, the orchestration
(``dpledger.runtime``), the plugins, the commands, the clean room and the products
(``dpledger.report``, ``dpledger.audit``, ``dpledger.integrations``) there (strict per
pyproject).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAPPED = ("core", "accountant", "plugins", "proofs_checks")


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
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(tmp_path / ".mypy_cache"),
            "-p",
            "dpledger.core",
            "-p",
            "dpledger.runtime",
            "-p",
            "dpledger.accountant",
            "-p",
            "dpledger.report",
            "-p",
            "dpledger.audit",
            "-p",
            "dpledger.integrations",
            "-p",
            "dpledger.plugins",
            "-p",
            "dpledger.commands",
            "-p",
            "dpledger.cleanroom",
        ],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
