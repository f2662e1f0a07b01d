"""The trajectories and swflow regeneration commands list their commands, and refuse bad input
(no --out, an unknown section, a directory that is not empty, an unknown option) in one line.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from .results_pages import (
    ROOT,
    run_command,
)


@pytest.mark.experiments
@pytest.mark.parametrize(
    "script", ["experiments/trajectories/regenerate.py", "experiments/swflow/regenerate.py"]
)
@pytest.mark.parametrize(
    "argv", [[], ["--out", "x", "--only", "nope"], ["--out", "experiments"], ["--bogus"]]
)
def test_regenerate_commands_refuse_bad_input_in_one_line(script: str, argv: list[str]) -> None:
    """No --out, an unknown section, a directory that is not empty, an unknown option: one line
    on stderr naming the field, exit code 2, nothing written."""
    out = subprocess.run(
        [sys.executable, script, *argv], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "error:" in out.stderr, out.stderr
    assert not (ROOT / "x").exists()


@pytest.mark.parametrize(
    ("script", "count"),
    [
        ("experiments/trajectories/regenerate.py", 1 + 6 + 1 + 1 + 1 + 4 + 7),
        ("experiments/swflow/regenerate.py", 4),
    ],
)
def test_regenerate_commands_list_their_commands(script: str, count: int) -> None:
    listed = run_command(script, "--list", timeout=120).splitlines()
    assert len(listed) == count and all(" python experiments/" in ln for ln in listed)
