"""Small runs of the clean room's benchmarks (the timings themselves are read, not asserted)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_clean_room_account_benchmark_runs() -> None:
    out = _run("benchmarks/cleanroom_account.py", "--repeats", "1")
    assert re.search(r"added by the clean room: [+-][0-9.]+ s \(target <= 0.4 s\)", out), out


@pytest.mark.slow  # four CLI runs; the same weights in and out of process are checked in the
# default tier by ``test_run_out_of_process.py::test_dp_sgd_out_of_process_matches_in_process``
def test_the_out_of_process_run_benchmark_runs() -> None:
    out = _run("benchmarks/run_out_of_process.py", "--quick")
    assert "same weights: True" in out
    assert re.search(r"ratio out/in \(command paths\): +[0-9.]+x", out), out
