"""Spill directories: a killed run's rows do not stay on disk past the next bounding."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from dpledger.runtime.engines import spill_dirs
from dpledger.runtime.engines.spill_dirs import PREFIX, make_spill_dir, sweep_orphans


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _orphan(parent: Path, pid: int, host: str, files: tuple[str, ...] = ("spill-0.bin",)) -> Path:
    path = parent / f"{PREFIX}{pid}@{host}-abc123"
    path.mkdir()
    for name in files:
        (path / name).write_bytes(b"private rows")
    return path


def test_only_dead_processes_directories_of_this_host_are_swept(tmp_path: Path) -> None:
    host = spill_dirs._host()
    dead = _orphan(tmp_path, _dead_pid(), host)
    live = _orphan(tmp_path, os.getpid(), host)
    elsewhere = _orphan(tmp_path, _dead_pid(), host + "x")
    foreign = _orphan(tmp_path, _dead_pid(), host, ("spill-0.bin", "notes.txt"))
    unrelated = tmp_path / "dpledger-buckets-junk"
    unrelated.mkdir()
    assert sweep_orphans(tmp_path) == [dead]
    assert not dead.exists()
    assert live.exists() and elsewhere.exists() and foreign.exists() and unrelated.exists()
    assert (foreign / "notes.txt").exists()


def test_a_new_spill_directory_sweeps_and_names_its_process(tmp_path: Path) -> None:
    dead = _orphan(tmp_path, _dead_pid(), spill_dirs._host())
    made = Path(make_spill_dir(str(tmp_path)))
    assert not dead.exists()
    assert made.name.startswith(f"{PREFIX}{os.getpid()}@{spill_dirs._host()}-")
    spill_dirs.remove_spill_dir(made)
    assert list(tmp_path.iterdir()) == []


_KILLED_RUN = """
import os, signal, sys
import dask, numpy as np
from dpledger.runtime.engines import aggregation_request, dask_engine

real = dask_engine.write_blocks
def write_then_die(*args, **kwargs):
    out = real(*args, **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)  # killed with spill files on disk
    return out
dask_engine.write_blocks = write_then_die
dask.config.set({"temporary_directory": sys.argv[1], "scheduler": "sync"})
rng = np.random.default_rng(0)
table = {
    "user": rng.integers(0, 50, 300),
    "day": rng.choice(np.array(["mon", "tue"], dtype=object), 300),
    "spend": rng.exponential(4.0, 300),
}
params = dict(
    partition_column="day", value_column="spend", unit_column="user",
    max_partitions_per_unit=2, max_rows_per_partition=2, lower=0.0, upper=10.0,
    metrics=["count"], noise_multiplier=2.0, public_partitions=["mon", "tue"], engine="dask",
)
plan = dask_engine.DaskEngine().bound_contributions(table, aggregation_request(params).query, None)
plan.compute()
"""


def test_a_run_killed_while_spilling_leaves_rows_only_until_the_next_bounding(
    tmp_path: Path,
) -> None:
    script = tmp_path / "killed.py"
    script.write_text(_KILLED_RUN)
    spill_parent = tmp_path / "spill"
    spill_parent.mkdir()
    done = subprocess.run([sys.executable, str(script), str(spill_parent)], check=False)
    assert done.returncode == -signal.SIGKILL
    left = list(spill_parent.glob(f"{PREFIX}*"))
    assert len(left) == 1 and list(left[0].glob("spill-*.bin"))
    made = make_spill_dir(str(spill_parent))
    assert not left[0].exists()
    assert [p.name for p in spill_parent.iterdir()] == [Path(made).name]
