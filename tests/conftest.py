"""Shared fixtures: throwaway plugin distributions on sys.path (real entry points)."""

from __future__ import annotations

import importlib
import os
import sys
import textwrap
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import pytest

if TYPE_CHECKING:
    from dpledger.demo import DemoResult

#: BLAS threads per test process when tests run in parallel (one process per core)
PARALLEL_BLAS_THREADS = 1


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist each worker takes one core: more BLAS threads per worker than that
    oversubscribe the cores, and OpenBLAS's waiting threads then slow some accountant tests a
    hundredfold. Subprocesses (the clean room, workers) inherit the limit."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        os.environ["OPENBLAS_NUM_THREADS"] = str(PARALLEL_BLAS_THREADS)
        os.environ["OMP_NUM_THREADS"] = str(PARALLEL_BLAS_THREADS)
        from threadpoolctl import threadpool_limits

        threadpool_limits(PARALLEL_BLAS_THREADS)


MakeDist = Callable[[str, str, Mapping[str, str], Mapping[str, str]], Path]


def install_dist(
    site: Path,
    name: str,
    version: str,
    modules: Mapping[str, str],
    entry_points: Mapping[str, str],
) -> Path:
    """Write a distribution into ``site`` (a folder on ``sys.path``) as an installer would."""
    for module, source in modules.items():
        (site / f"{module}.py").write_text(textwrap.dedent(source))
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = "".join(f"{k} = {v}\n" for k, v in entry_points.items())
    (info / "entry_points.txt").write_text(f"[dpledger]\n{lines}")
    importlib.invalidate_caches()
    return site


@pytest.fixture
def make_dist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[MakeDist]:
    """``make_dist(name, version, {module: source}, {entry_point: target})``."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    created: list[str] = []

    def make(
        name: str, version: str, modules: Mapping[str, str], entry_points: Mapping[str, str]
    ) -> Path:
        created.extend(modules)
        return install_dist(site, name, version, modules, entry_points)

    yield make
    for module in created:
        sys.modules.pop(module, None)


#: tests that take tens of seconds on their own: scheduled first, so that under xdist the other
#: worker runs the rest meanwhile instead of waiting for them at the end
LONG_FIRST = ("tests/test_typing.py::test_the_package_passes_strict_mypy",)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: not any(item.nodeid.endswith(n) for n in LONG_FIRST))


@attrs.frozen
class TinyDemo:
    """The demo run once at its tiny size: its published directory and what it returned."""

    out: Path
    result: DemoResult


@pytest.fixture(scope="session")
def tiny_demo(tmp_path_factory: pytest.TempPathFactory) -> TinyDemo:
    """``dpledger demo`` at its tiny size (seeded), run once per test process for the tests that
    read its outputs; a test must not change the directory (its private figure and diagnostics
    are in ``demo.private`` beside it)."""
    pytest.importorskip("torch")
    pytest.importorskip("ot")
    from dpledger.demo import TINY, run_demo

    out = tmp_path_factory.mktemp("tiny-demo") / "demo"
    return TinyDemo(out, run_demo(out, TINY, quiet=True))
