"""The clean room's import path: dpledger and its accounting dependencies, and nothing else.

The clean room is an isolated interpreter (``python -I -S``): no ``site`` processing, so no
``.pth`` file, ``sitecustomize``, user site or entry point runs in it. Its ``sys.path`` is the
standard library and one fresh directory made here, holding links to the packages listed in
:data:`ACCOUNTING_PACKAGES` (and their bundled shared libraries) and a ``dpledger`` package
assembled from the installed one (editable and wheel installs alike). Third-party code that is
installed beside dpledger is not on that path, so nothing in the clean room can import it.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dpledger.core.errors import DPLedgerError

#: top-level packages the clean room may import besides the standard library and dpledger
ACCOUNTING_PACKAGES: tuple[str, ...] = ("numpy", "scipy", "attr", "attrs", "networkx", "pluggy")
#: dpledger's subpackages that setuptools may map from other folders (editable installs)
DPLEDGER_SUBPACKAGES: tuple[str, ...] = (
    "core",
    "accountant",
    "plugins",
    "proofs_checks",
    "examples",
)


class CleanRoomError(DPLedgerError):
    """The clean room cannot be set up or did not answer."""


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    locations = list(spec.submodule_search_locations or []) if spec else []
    if not locations:
        raise CleanRoomError(
            f"the clean room needs the package {name!r}, which is not installed as a package. "
            f"Fix: pip install -e . (or reinstall dpledger)"
        )
    return Path(locations[0]).resolve()


def _link(target: Path, link: Path) -> None:
    os.symlink(target, link, target_is_directory=target.is_dir())


def _dpledger_package(into: Path) -> None:
    """``into/dpledger``: every entry of the installed package, plus the mapped subpackages."""
    root = _package_dir("dpledger")
    pkg = into / "dpledger"
    pkg.mkdir()
    for entry in root.iterdir():
        if entry.name != "__pycache__":
            _link(entry, pkg / entry.name)
    for sub in DPLEDGER_SUBPACKAGES:
        if not (pkg / sub).exists():
            _link(_package_dir(f"dpledger.{sub}"), pkg / sub)


def build(into: Path) -> None:
    """Fill the empty directory ``into`` with the clean room's importable packages."""
    for name in ACCOUNTING_PACKAGES:
        where = _package_dir(name)
        _link(where, into / name)
        bundled = where.parent / f"{name}.libs"  # shared libraries of manylinux wheels
        if bundled.is_dir():
            _link(bundled, into / bundled.name)
    _dpledger_package(into)


@contextmanager
def clean_path() -> Iterator[Path]:
    """A fresh clean-room path directory, removed afterwards."""
    where = Path(tempfile.mkdtemp(prefix="dpledger-cleanroom-"))
    try:
        build(where)
        yield where
    finally:
        shutil.rmtree(where, ignore_errors=True)
