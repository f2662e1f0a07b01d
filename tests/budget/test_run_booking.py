"""``dpledger run --budget``: the run's public record holds its booking (the store's id, the
entry and its hash, the run id, source, unit and rule) and ``dpledger budget log`` shows the
run's directory; a third-party method (run out of process) is booked once its worker's
declaration is accounted and before its data is read, and never runs when it does not fit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpledger.budget import store
from dpledger.budget.status import status, verify
from dpledger.cli import main
from dpledger.core.events import GaussianEvent
from dpledger.runtime.run_record import RunRecord
from tests.cleanroom.conftest import PlantedEnv, planted_env  # noqa: F401 (the fixture)

#: a throwaway third-party method: one Gaussian release of the data's sum; run() leaves a mark
PLUGIN = """
import os

import attrs
import numpy as np
from dpledger.core.events import GaussianEvent
from dpledger.core.hookspecs import hookimpl
from dpledger.core.specs import MethodSpec


@attrs.frozen
class P:
    noise_multiplier: float = 4.0


def run(p, data, ledger, rng):
    with open(os.environ["TP_MARKER"], "a") as marker:
        marker.write("ran\\n")
    total = np.atleast_1d(np.asarray(data, dtype=float).sum())
    return {"release": ledger.gaussian(total, 1.0, p.noise_multiplier, step="sum")}


SPEC = MethodSpec(name="tp_booked", params=P,
                  declare=lambda p, a: GaussianEvent(p.noise_multiplier),
                  run=run, description="noisy sum", proof="Balle and Wang 2018")


@hookimpl
def dpledger_register_methods(register):
    register(SPEC)
"""


def _store(tmp_path: Path, epsilon: float) -> str:
    location = str(tmp_path / "budget.db")
    store.init(location)
    store.declare(location, "s", epsilon=epsilon, delta=1e-6, rule="gdp")
    return location


def _booking_matches(out: Path, location: str) -> dict[str, Any]:
    """The record's booking is the store's last entry; the log names the run's directory."""
    booking = json.loads((out / "ledger.json").read_text())["budget"]
    conn = store.open_store(location)
    try:
        first, *_, last = store.entries(conn)
    finally:
        conn.close()
    assert booking == {
        "store_id": first["hash"],
        "entry": last["seq"],
        "entry_hash": last["hash"],
        "run_id": last["run_id"],
        "source": "s",
        "unit": "row",
        "rule": "gdp",
    }
    log = subprocess.run(
        [sys.executable, "-m", "dpledger", "budget", "log", location],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert f"run {last['run_id']}\tdir {out.resolve()}\t" in log[-1]
    return dict(booking)


def test_the_record_keeps_a_booking_and_the_log_shows_a_booked_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Smoke of the slow runs below: the booking survives the record's JSON round trip, and
    the log prints the directory a booking names (and nothing for a booking without one)."""
    booking = {"store_id": "ab", "entry": 2, "run_id": "r", "source": "s", "rule": "gdp"}
    ledger = {"adjacency": {"relation": "add_remove"}}
    record = RunRecord("m", ledger, {"kind": "gaussian"}, {}, budget=booking)
    assert RunRecord.from_json(record.to_json()).budget == booking
    assert "budget" not in RunRecord("m", ledger, {"kind": "gaussian"}, {}).to_json()
    location = _store(tmp_path, 1.0)
    store.book(location, "s", GaussianEvent(9.0), run_id="r1", parameters={"out": "/runs/a"})
    store.book(location, "s", GaussianEvent(9.0), run_id="r2")
    assert main(["budget", "log", location]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "\trun r1\tdir /runs/a\t" in lines[1] and "\tdir " not in lines[2]


@pytest.mark.slow  # a run in the clean room
def test_a_builtin_run_records_its_booking_and_the_log_shows_its_directory(
    tmp_path: Path,
) -> None:
    (tmp_path / "rows.csv").write_text("0.1,0.2\n0.3,0.4\n")
    (tmp_path / "run.toml").write_text(
        'data = "rows.csv"\nsource = "s"\n[params]\nsensitivity = 1.0\nnoise_multiplier = 5.0\n'
    )
    location = _store(tmp_path, 1.0)
    out = tmp_path / "out"
    args = ["run", "gaussian_mechanism", "--config", "run.toml", "--out", str(out)]
    subprocess.run(
        [sys.executable, "-m", "dpledger", *args, "--budget", location],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    _booking_matches(out, location)
    verified = subprocess.run(
        [sys.executable, "-m", "dpledger", "verify", str(out)], capture_output=True, text=True
    )
    assert verified.returncode == 0, verified.stderr  # the sealed record holds the booking


def _third_party(env: PlantedEnv, tmp_path: Path, location: str) -> Any:
    if not (env.site / "tp_booked.py").exists():
        env.install("tp-booked", {"tp_booked": PLUGIN}, {"booked": "tp_booked"})
    (tmp_path / "run.toml").write_text('data = "x.npy"\nsource = "s"\n[params]\n')
    marker = tmp_path / "marker.txt"
    args = ("run", "tp_booked", "--config", "run.toml", "--out", "out", "--budget", location)
    done = env.dpledger(*args, cwd=tmp_path, env={"TP_MARKER": str(marker)})
    return done, marker


@pytest.mark.slow  # a third-party run: a worker and the clean room
def test_a_third_party_run_is_booked_and_records_its_booking(
    planted_env: PlantedEnv,  # noqa: F811
    tmp_path: Path,
) -> None:
    np.save(tmp_path / "x.npy", np.array([0.5, 0.25]))
    location = _store(tmp_path, 2.0)
    done, marker = _third_party(planted_env, tmp_path, location)
    assert done.returncode == 0, done.stderr
    assert "booked run" in done.stderr and marker.read_text() == "ran\n"
    _booking_matches(tmp_path / "out", location)
    (budget,) = status(location)["budgets"]
    assert budget["bookings"] == 1


@pytest.mark.slow  # two more third-party runs
def test_a_third_party_run_is_booked_before_its_data_is_read_and_refused_unbooked(
    planted_env: PlantedEnv,  # noqa: F811
    tmp_path: Path,
) -> None:
    (tmp_path / "x.npy").write_bytes(b"not an array")  # read by the worker after the booking
    location = _store(tmp_path, 2.0)
    done, marker = _third_party(planted_env, tmp_path, location)
    assert done.returncode != 0 and "booked run" in done.stderr
    assert not marker.exists() and not (tmp_path / "out").exists()
    assert verify(location)["ok"] and status(location)["budgets"][0]["bookings"] == 1
    # a run that does not fit: refused before its data is read, nothing booked, never run
    small = tmp_path / "small"
    small.mkdir()
    np.save(small / "x.npy", np.array([0.5]))
    location = _store(small, 0.05)
    done, marker = _third_party(planted_env, small, location)
    assert done.returncode == 2 and "exceeded" in done.stderr, done.stderr
    assert not marker.exists() and not (small / "out").exists()
    assert status(location)["budgets"][0]["bookings"] == 0
