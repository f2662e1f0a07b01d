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
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path

from dpledger.core.errors import DPLedgerError

#: top-level packages the clean room may import besides the standard library and dpledger
ACCOUNTING_PACKAGES: tuple[str, ...] = (
    "numpy",
    "scipy",
    "attr",
    "attrs",
    "networkx",
    "pluggy",
    "threadpoolctl",
)
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


def _accounting_location(name: str) -> Path:
    """The package directory, or the single-module file, of accounting dependency ``name``."""
    where = _top_level_path(name)
    if where is None:
        return _package_dir(name)  # raises the one-line error naming the fix
    return where


def _top_level_path(name: str) -> Path | None:
    """The directory of package ``name`` or the file of module ``name``, if installed."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations))).resolve()
    return Path(spec.origin).resolve() if spec.origin and spec.has_location else None


def _requirement_names(dist: str) -> list[str]:
    """The distributions ``dist`` requires unconditionally (no extra, no environment marker)."""
    try:
        requires = metadata.requires(dist) or []
    except metadata.PackageNotFoundError:
        return []
    names = []
    for line in requires:
        if ";" in line:
            continue
        match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", line)
        if match:
            names.append(match.group(0))
    return names


def dependency_closure(dists: tuple[str, ...]) -> tuple[str, ...]:
    """Top-level import names of the installed distributions ``dists`` and everything they
    require unconditionally (what their code may import), sorted."""
    providers: dict[str, list[str]] = {}
    for top, owners in metadata.packages_distributions().items():
        for owner in owners:
            providers.setdefault(normal_name(owner), []).append(top)
    seen: set[str] = set()
    todo = [normal_name(d) for d in dists]
    while todo:
        dist = todo.pop()
        if dist in seen:
            continue
        seen.add(dist)
        todo += [normal_name(r) for r in _requirement_names(dist)]
    return tuple(sorted({t for d in seen for t in providers.get(d, ()) if t.isidentifier()}))


def normal_name(dist: str) -> str:
    """A distribution's name normalised (PEP 503)."""
    return re.sub(r"[-_.]+", "-", dist).lower()


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


def _link_extra(name: str, into: Path) -> None:
    where = _top_level_path(name)
    if where is None or (into / where.name).exists():
        return
    _link(where, into / where.name)
    bundled = where.parent / f"{name}.libs"
    if bundled.is_dir() and not (into / bundled.name).exists():
        _link(bundled, into / bundled.name)


def build(into: Path, extra: tuple[str, ...] = ()) -> None:
    """Fill the empty directory ``into`` with the clean room's importable packages (and the
    top-level packages or modules ``extra``, where installed)."""
    for name in extra:
        if name not in ACCOUNTING_PACKAGES and name != "dpledger":
            _link_extra(name, into)
    for name in ACCOUNTING_PACKAGES:
        where = _accounting_location(name)
        _link(where, into / where.name)
        bundled = where.parent / f"{name}.libs"  # shared libraries of manylinux wheels
        if bundled.is_dir():
            _link(bundled, into / bundled.name)
    if extra:
        _link_metadata((*ACCOUNTING_PACKAGES, *extra), into)
    _dpledger_package(into)


def _link_metadata(names: tuple[str, ...], into: Path) -> None:
    """The ``.dist-info`` folders of the distributions that provide ``names`` (metadata only:
    a method's library that reads its dependencies' versions, as dask does, finds them)."""
    providers = metadata.packages_distributions()
    for dist in sorted({d for n in names for d in providers.get(n, ())}):
        try:
            where = getattr(metadata.distribution(dist), "_path", None)
        except metadata.PackageNotFoundError:
            continue
        named = isinstance(where, Path) and where.suffix == ".dist-info"
        if named and isinstance(where, Path) and not (into / where.name).exists():
            _link(where, into / where.name)


@contextmanager
def clean_path(extra: tuple[str, ...] = ()) -> Iterator[Path]:
    """A fresh clean-room path directory, removed afterwards."""
    where = Path(tempfile.mkdtemp(prefix="dpledger-cleanroom-"))
    try:
        build(where, extra)
        yield where
    finally:
        shutil.rmtree(where, ignore_errors=True)


#: ``name[>=x]; extra == "NAME"``: a requirement of one of dpledger's extras
_EXTRA_REQUIREMENT = re.compile(
    r"""^\s*([A-Za-z0-9][A-Za-z0-9._-]*)[^;]*;\s*extra\s*==\s*["']([^"']+)["']"""
)


def extra_distributions(extra: str) -> tuple[str, ...]:
    """The distributions dpledger's extra ``extra`` names (dpledger itself left out; none for
    an extra dpledger does not have)."""
    try:
        requires = metadata.requires("dpledger") or []
    except metadata.PackageNotFoundError:
        return ()
    matches = [_EXTRA_REQUIREMENT.match(line) for line in requires]
    return tuple(
        m.group(1)
        for m in matches
        if m and m.group(2) == extra and normal_name(m.group(1)) != "dpledger"
    )


def extras_closure(extras: tuple[str, ...]) -> tuple[str, ...]:
    """Top-level import names of what dpledger's ``extras`` install (the distributions they
    name and everything those require), sorted; nothing for an extra dpledger does not have."""
    return dependency_closure(tuple(d for e in extras for d in extra_distributions(e)))
