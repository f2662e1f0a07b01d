"""A real temporary Python environment with planted plugin distributions installed in it.

The environment is a virtual environment whose ``site-packages`` links to the one running the
tests (a ``.pth`` line, processed by ``site`` as any installed package's would be), so that
dpledger and its dependencies are importable; planted distributions are written into it as
installers write them (module, ``dist-info`` with entry points, optional ``.pth`` file).
Commands run as separate processes of that environment's interpreter.
"""

from __future__ import annotations

import math
import os
import subprocess
import sysconfig
import textwrap
import venv
from collections.abc import Mapping
from pathlib import Path

import attrs
import pytest

from tests.redteam.conftest import balle_wang_epsilon


@attrs.frozen
class PlantedEnv:
    """A virtual environment for planted distributions."""

    root: Path

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    @property
    def site(self) -> Path:
        found = sorted((self.root / "lib").glob("python3*/site-packages"))
        assert found, self.root
        return found[0]

    def install(
        self,
        name: str,
        modules: Mapping[str, str],
        entry_points: Mapping[str, str],
        *,
        pth: str | None = None,
        version: str = "1.0",
    ) -> None:
        """Install a distribution as an installer would: modules, metadata, a ``.pth``."""
        for module, source in modules.items():
            (self.site / f"{module}.py").write_text(textwrap.dedent(source))
        info = self.site / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        lines = "".join(f"{k} = {v}\n" for k, v in entry_points.items())
        (info / "entry_points.txt").write_text(f"[dpledger]\n{lines}" if lines else "")
        if pth is not None:
            (self.site / f"{name.replace('-', '_')}.pth").write_text(pth)

    def dpledger(
        self, *args: str, cwd: Path, env: Mapping[str, str] | None = None, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        """``dpledger ARGS`` run by the environment's interpreter."""
        environ = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        environ.update(env or {})
        return subprocess.run(
            [str(self.python), "-m", "dpledger", *args],
            cwd=cwd,
            env=environ,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


@pytest.fixture
def planted_env(tmp_path: Path) -> PlantedEnv:
    """A fresh environment that sees the tests' packages and nothing planted yet."""
    root = tmp_path / "env"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(root)
    env = PlantedEnv(root)
    here = sysconfig.get_paths()["purelib"]
    (env.site / "00_tests_site.pth").write_text(f"import site; site.addsitedir({here!r})\n")
    return env


#: exact epsilon(delta) of the Gaussian mechanism under add/remove (Balle and Wang 2018)
gaussian_epsilon = balle_wang_epsilon


def composed_sigma(*sigmas: float) -> float:
    """Composing Gaussian mechanisms is one Gaussian mechanism of this noise multiplier."""
    return 1.0 / math.sqrt(sum(1.0 / s**2 for s in sigmas))
