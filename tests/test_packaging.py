"""The namespace layout works from a built wheel, and the accountant needs no torch or POT."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    pytest.importorskip("build")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "build",
            "--wheel",
            "--no-isolation",
            "--outdir",
            str(out),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        cwd=out,
    )
    (whl,) = out.glob("dpledger-*.whl")
    return whl


def test_wheel_maps_every_folder_under_the_namespace(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    for module in ("dpledger/core/events.py", "dpledger/accountant/pld.py", "dpledger/cli.py"):
        assert module in names
    assert not any(n.startswith(("core/", "accountant/", "plugins/")) for n in names)


def test_wheel_ships_the_example_pipelines_and_the_proofs(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    examples = ROOT / "examples" / "pipelines"
    for path in examples.glob("*.toml"):
        assert f"dpledger/examples/pipelines/{path.name}" in names
    proofs = sorted((ROOT / "proofs_checks").glob("*/proof.md"))
    assert proofs
    for path in proofs:
        assert f"dpledger/proofs_checks/{path.parent.name}/proof.md" in names
    assert not any("plugin_template" in n for n in names)


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel installed (no dependencies) into a fresh target folder."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-index",
            "--quiet",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
    )
    return target


def test_accountant_imports_from_wheel_without_torch_or_pot(installed: Path) -> None:
    target = installed
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('torch', 'ot'):\n"
        "            raise ImportError('blocked ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        f"sys.path.insert(0, {str(target)!r})\n"
        "import dpledger.accountant.pld as pld, dpledger.core.events as ev\n"
        "assert pld.__file__.startswith(" + repr(str(target)) + ")\n"
        "acc = pld.PLDAccountant(); acc.compose(ev.GaussianEvent(1.0))\n"
        "print(round(acc.get_epsilon(1e-5).epsilon, 3))\n"
    )
    res = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "4.377"


def test_installed_wheel_imports_from_inside_a_checkout(installed: Path) -> None:
    """With the repository root first on sys.path (python run from a checkout), ``./dpledger``
    holds only the CLI; the rest of the package comes from the installed wheel."""
    target = installed
    code = (
        "import sys\n"
        f"sys.path[:0] = [{str(ROOT)!r}, {str(target)!r}]\n"
        "import dpledger, dpledger.core.events as ev\n"
        f"assert dpledger.__file__.startswith({str(ROOT)!r}), dpledger.__file__\n"
        f"assert ev.__file__.startswith({str(target)!r}), ev.__file__\n"
        "print(ev.GaussianEvent(1.0).kind)\n"
    )
    res = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "gaussian"
