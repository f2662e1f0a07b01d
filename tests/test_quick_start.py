"""The README's two Quick-start commands, run as written on a fresh clone (the runs: slow tier).

Each command runs in a fresh virtual environment inside a clone of this repository's committed
state, with its wall time printed: the demo command must finish (it writes the report) within
3 minutes, and the test command must pass within 8 minutes, installs included.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: wall-time limits of the demo command and of the test command, installs included
LIMIT_SECONDS = (180.0, 480.0)


def quick_start_commands(readme: str) -> list[str]:
    """The shell commands of the README's Quick start, in order."""
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", section, flags=re.S)]


def test_the_readme_has_exactly_two_quick_start_commands() -> None:
    commands = quick_start_commands((ROOT / "README.md").read_text())
    assert len(commands) == 2
    assert "dpledger demo" in commands[0] and "pytest" in commands[1]


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    where = tmp_path_factory.mktemp("clone") / "dpledger"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(where)], check=True)
    shared = ROOT.parent / "shared"
    if shared.exists() and not (where.parent / "shared").exists():
        (where.parent / "shared").symlink_to(shared, target_is_directory=True)
    return where


@pytest.mark.slow
@pytest.mark.parametrize("index", [0, 1], ids=["demo", "tests"])
def test_quick_start_command_works_on_a_fresh_clone(clone: Path, index: int) -> None:
    command = quick_start_commands((clone / "README.md").read_text())[index]
    venv = clone.parent / f"venv{index}"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    script = f". {venv}/bin/activate && cd {clone} && {command}"
    start = time.monotonic()
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=False)
    seconds = time.monotonic() - start
    print(f"quick-start command {index + 1}: {seconds:.0f} s (exit {result.returncode})")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert seconds < LIMIT_SECONDS[index], f"took {seconds:.0f} s"
    if index == 0:
        assert (clone / "dpledger-demo" / "report.html").is_file()
