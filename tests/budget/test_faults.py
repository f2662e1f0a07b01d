"""A run killed with SIGKILL at each stage leaves the store consistent and its spend booked.

A child process books through the store, then draws noise, then writes its outputs, as a
booked run does; it announces each stage in a marker file and the test kills it there. A kill
inside the booking's transaction (the lock held, the entry not committed) leaves nothing
booked and the store usable. The slow test kills a real ``dpledger run --budget`` as soon as it
has said it booked.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dpledger.budget import store
from dpledger.budget.status import verify
from dpledger.core.events import GaussianEvent

CHILD = """
import sys, time
from pathlib import Path
import numpy as np
from dpledger.budget import rules, store
from dpledger.core.events import GaussianEvent

location, stage, marker = sys.argv[1], sys.argv[2], Path(sys.argv[3])
if stage == "booking":  # stop inside the transaction, after the rule's decision
    decide = rules.decide
    def slow(*args, **kwargs):
        out = decide(*args, **kwargs)
        marker.write_text("booking")
        time.sleep(60)
        return out
    rules.decide = slow
store.book(location, "s", GaussianEvent(10.0), run_id="killed")
marker.write_text("booked")
if stage == "booked":
    time.sleep(60)
rng = np.random.default_rng()
marker.write_text("noise")
deadline = time.time() + 60
while stage == "noise" and time.time() < deadline:
    rng.normal(size=1000)
with open(marker.with_suffix(".out"), "w") as out:
    marker.write_text("writing")
    while time.time() < deadline:
        out.write("0.123\\n")
"""


def _kill_at(location: str, stage: str, tmp_path: Path) -> None:
    marker = tmp_path / f"{stage}.marker"
    child = subprocess.Popen([sys.executable, "-c", CHILD, location, stage, str(marker)])
    deadline = time.time() + 120
    while not (marker.exists() and marker.read_text() == stage):
        assert child.poll() is None and time.time() < deadline, "the child ended early"
        time.sleep(0.02)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()


@pytest.mark.parametrize(
    "stage",
    [
        "booked",
        pytest.param("noise", marks=pytest.mark.slow),
        pytest.param("writing", marks=pytest.mark.slow),
    ],
)
def test_a_run_killed_after_its_booking_keeps_its_spend(
    sqlite_store: str, tmp_path: Path, stage: str
) -> None:
    store.declare(sqlite_store, "s", epsilon=1.0, delta=1e-6, rule="gdp")
    _kill_at(sqlite_store, stage, tmp_path)
    result = verify(sqlite_store)
    assert result["ok"] and result["entries"] == 2
    conn = store.open_store(sqlite_store)
    try:
        (entry,) = [e for e in store.entries(conn) if e["kind"] == "book"]
    finally:
        conn.close()
    assert entry["run_id"] == "killed"
    # the store stays usable, and the next booking is charged after the killed one
    nxt = store.book(sqlite_store, "s", GaussianEvent(10.0))
    assert nxt["seq"] == 3 and nxt["state"]["count"] == 2


def test_a_run_killed_inside_its_booking_books_nothing(sqlite_store: str, tmp_path: Path) -> None:
    store.declare(sqlite_store, "s", epsilon=1.0, delta=1e-6, rule="gdp")
    _kill_at(sqlite_store, "booking", tmp_path)
    assert verify(sqlite_store) == {**verify(sqlite_store), "ok": True, "entries": 1}
    entry = store.book(sqlite_store, "s", GaussianEvent(10.0))
    assert entry["seq"] == 2 and entry["state"]["count"] == 1


@pytest.mark.slow  # two child interpreters
def test_a_killed_booking_on_postgres_books_nothing(pg_store: str, tmp_path: Path) -> None:
    store.init(pg_store)
    store.declare(pg_store, "s", epsilon=1.0, delta=1e-6, rule="gdp")
    _kill_at(pg_store, "booking", tmp_path)
    _kill_at(pg_store, "noise", tmp_path)
    result = verify(pg_store)
    assert result["ok"] and result["entries"] == 2


@pytest.mark.slow  # a real run in the clean room
def test_a_real_run_killed_after_booking_keeps_its_spend(tmp_path: Path) -> None:
    (tmp_path / "rows.csv").write_text("0.1,0.2\n0.3,0.4\n")
    config = tmp_path / "run.toml"
    config.write_text(
        'data = "rows.csv"\nsource = "s"\n[params]\nsensitivity = 1.0\nnoise_multiplier = 5.0\n'
    )
    location = str(tmp_path / "b.db")
    store.init(location)
    store.declare(location, "s", epsilon=1.0, delta=1e-6, rule="gdp")
    cmd = [
        sys.executable,
        "-m",
        "dpledger",
        "run",
        "gaussian_mechanism",
        "--config",
        str(config),
        "--out",
        str(tmp_path / "out"),
        "--budget",
        location,
    ]
    child = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    assert child.stderr is not None
    line = child.stderr.readline()
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    child.stderr.close()
    assert "booked run" in line
    result = verify(location)
    assert result["ok"] and result["entries"] == 2
    assert not (tmp_path / "out").exists()
