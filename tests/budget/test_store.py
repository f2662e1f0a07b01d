"""The store: bookings against a total, the hash chain, edits named, bad input refused."""

from __future__ import annotations

import json
import math
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.budget import rules, store
from dpledger.budget.status import status, verify
from dpledger.cli import main
from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import (
    ComposedEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
)

ROOT = Path(__file__).resolve().parents[2]


def _fill(location: str, source: str, sigma: float = 8.0) -> int:
    n = 0
    while True:
        try:
            store.book(location, source, GaussianEvent(sigma), run_id=f"r{n}")
        except rules.BudgetRefused:
            return n
        n += 1


def test_gdp_store_books_until_the_total_and_refuses_the_next(sqlite_store: str) -> None:
    store.declare(sqlite_store, "patients", epsilon=1.0, delta=1e-6, rule="gdp")
    n = _fill(sqlite_store, "patients")
    mu = rules.default_params("gdp", 1.0, 1e-6)["mu"]
    assert n == math.floor(mu**2 * 64)
    report = status(sqlite_store)
    assert report["chain"]["ok"] and report["chain"]["entries"] == n + 1
    (budget,) = report["budgets"]
    assert budget["bookings"] == n and [r["run_id"] for r in budget["runs"]] == [
        f"r{i}" for i in range(n)
    ]
    assert "Smith & Thakurta" in budget["theorem"]
    assert budget["spent"]["epsilon"] <= 1.0


@pytest.mark.slow  # dpledger account in its clean room: seconds
def test_non_adaptive_total_is_what_dpledger_account_prints(
    sqlite_store: str, tmp_path: Path
) -> None:
    """The releases of the heterogeneous example booked in a PLD store: the store's spend is
    the number ``dpledger account`` prints for a pipeline of the same events composed."""
    store.declare(sqlite_store, "patients", epsilon=5.0, delta=1e-5, rule="pld")
    events = [
        GaussianEvent(5.0),
        SelfComposedEvent(PoissonSampledEvent(0.01, GaussianEvent(1.0)), 1000),
        LaplaceEvent(10.0),
    ]
    for event in events:
        store.book(sqlite_store, "patients", event)
    pipeline = {
        "name": "booked",
        "delta": 1e-5,
        "sources": [{"name": "patients", "adjacency": {"relation": "add_remove"}}],
        "releases": [
            {"id": "all", "input": "patients", "event": ComposedEvent(tuple(events)).to_dict()}
        ],
    }
    path = tmp_path / "booked.json"
    path.write_text(json.dumps(pipeline))
    out = subprocess.run(
        [sys.executable, "-m", "dpledger", "account", "--json", str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    printed = json.loads(out.stdout)["epsilon"]
    (budget,) = status(sqlite_store)["budgets"]
    assert budget["spent"] == {"epsilon": printed, "certified": True}
    assert "non-adaptive" in budget["theorem"]


def _sql(path: str, statement: str) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.execute(statement)
        conn.commit()
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        ("UPDATE entries SET event = replace(event, '8.0', '80.0') WHERE seq = 3", "entry 3"),
        ("DELETE FROM entries WHERE seq = 2", "entry 3"),
        ("UPDATE budgets SET epsilon = 100.0", "entry 1"),
        (
            "UPDATE filter_state SET state = replace(state, '\"count\":3', '\"count\":1')",
            "stored state",
        ),
    ],
)
def test_an_edited_history_is_reported_naming_the_entry(
    sqlite_store: str, edit: str, named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store.declare(sqlite_store, "patients", epsilon=1.0, delta=1e-6, rule="gdp")
    for i in range(3):
        store.book(sqlite_store, "patients", GaussianEvent(8.0), run_id=f"r{i}")
    assert verify(sqlite_store)["ok"]
    # the database refuses an update or a deletion of an entry; a writer who drops the
    # triggers can edit, and the chain names the entry
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        _sql(sqlite_store, "DELETE FROM entries WHERE seq = 2")
    _sql(sqlite_store, "DROP TRIGGER entries_append_only_update")
    _sql(sqlite_store, "DROP TRIGGER entries_append_only_delete")
    _sql(sqlite_store, edit)
    result = verify(sqlite_store)
    assert not result["ok"] and named in result["problem"]
    assert main(["budget", "status", sqlite_store]) == 1
    assert named in capsys.readouterr().out


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["init", "{new}", "--source", "s", "--epsilon", "true", "--delta", "1e-6"], "--epsilon"),
        (["init", "{new}", "--source", "s", "--epsilon", "abc", "--delta", "1e-6"], "--epsilon"),
        (["init", "{new}", "--source", "s", "--epsilon", "1", "--delta", "2"], "delta"),
        (["status", "{new}"], "no budget store"),
        (
            [
                "book",
                "{store}",
                "--source",
                "nobody",
                "--event",
                '{"kind": "gaussian", "noise_multiplier": 5}',
            ],
            "no declared budget",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_written(
    tmp_path: Path, argv: list[str], field: str, capsys: pytest.CaptureFixture[str]
) -> None:
    existing = str(tmp_path / "s.db")
    store.init(existing)
    store.declare(existing, "s", epsilon=1.0, delta=1e-6, rule="gdp")
    before = verify(existing)
    args = [a.replace("{new}", str(tmp_path / "new.db")).replace("{store}", existing) for a in argv]
    assert main(["budget", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and field in err and "Fix:" in err
    assert _files(tmp_path) == ["s.db"]
    assert verify(existing) == before


def test_a_total_of_the_wrong_type_is_refused_by_the_api(sqlite_store: str) -> None:
    for bad in ("1.0", True, None, math.nan):
        with pytest.raises(InvalidParameterError, match="epsilon"):
            store.declare(sqlite_store, "s", epsilon=bad, delta=1e-6)
    assert verify(sqlite_store)["entries"] == 0


def test_a_store_of_another_schema_version_is_refused_and_migrated(
    sqlite_store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _sql(sqlite_store, "INSERT INTO schema_version VALUES (99, 'later')")
    assert main(["budget", "status", sqlite_store]) == 2
    assert "schema version 99" in capsys.readouterr().err
    _sql(sqlite_store, "DELETE FROM schema_version WHERE version >= 3")
    _sql(sqlite_store, "DROP TRIGGER entries_append_only_update")
    _sql(sqlite_store, "DROP TRIGGER entries_append_only_delete")
    assert main(["budget", "log", sqlite_store]) == 2
    assert "dpledger budget migrate" in capsys.readouterr().err
    assert main(["budget", "migrate", sqlite_store]) == 0
    assert main(["budget", "log", sqlite_store]) == 0


@pytest.mark.parametrize(
    ("rule", "params"),
    [("gdp", {"mu": 100.0}), ("pld", {"orders": [2]}), ("renyi", {"budget": 9.0})],
)
def test_a_parameter_that_follows_from_the_total_cannot_be_set(
    sqlite_store: str, rule: str, params: dict[str, float]
) -> None:
    with pytest.raises(InvalidParameterError, match="not a parameter"):
        store.declare(sqlite_store, "s", epsilon=1.0, delta=1e-6, rule=rule, params=params)
    assert verify(sqlite_store)["entries"] == 0


def test_an_undeclared_source_books_nothing(sqlite_store: str) -> None:
    with pytest.raises(InvalidParameterError, match="no declared budget"):
        store.book(sqlite_store, "ghost", GaussianEvent(5.0))
    assert verify(sqlite_store)["entries"] == 0


def test_a_gdp_store_refuses_a_laplace_step(sqlite_store: str) -> None:
    store.declare(sqlite_store, "s", epsilon=1.0, delta=1e-6, rule="gdp")
    with pytest.raises(InvalidParameterError, match="only Gaussian"):
        store.book(sqlite_store, "s", LaplaceEvent(5.0))


def test_check_writes_nothing(sqlite_store: str, capsys: pytest.CaptureFixture[str]) -> None:
    store.declare(sqlite_store, "s", epsilon=1.0, delta=1e-6, rule="renyi")
    store.book(sqlite_store, "s", GaussianEvent(10.0))
    event = '{"kind": "gaussian", "noise_multiplier": 0.5}'
    assert main(["budget", "check", sqlite_store, "--source", "s", "--event", event]) == 1
    assert "does NOT fit" in capsys.readouterr().out
    assert verify(sqlite_store)["entries"] == 2


@pytest.mark.slow  # matplotlib
def test_the_report_has_the_rule_the_runs_and_the_plot(sqlite_store: str, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    store.declare(sqlite_store, "s", epsilon=1.0, delta=1e-6, rule="renyi")
    store.book(sqlite_store, "s", GaussianEvent(10.0), run_id="first")
    assert main(["budget", "status", sqlite_store, "--report", str(tmp_path / "r")]) == 0
    assert _files(tmp_path / "r") == ["budget.json", "budget.md", "spend.png"]
    text = (tmp_path / "r" / "budget.md").read_text()
    assert "Feldman & Zrnic" in text and "run first" in text
    assert "| 2 | first |" in text


@pytest.mark.slow  # 1,500 bookings
def test_time_per_booking_does_not_grow_with_the_count(sqlite_store: str) -> None:
    import time

    store.declare(sqlite_store, "s", epsilon=10.0, delta=1e-6, rule="gdp")
    times = []
    for i in range(1500):
        start = time.perf_counter()
        store.book(sqlite_store, "s", GaussianEvent(50.0), run_id=str(i))
        times.append(time.perf_counter() - start)
    first, last = sorted(times[:300])[150], sorted(times[-300:])[150]
    assert last < 3 * first, (first, last)  # medians: a running state, no history scan


@settings(max_examples=4, deadline=None)
@given(st.data())
def test_no_adaptive_sequence_booked_in_a_store_passes_its_budget(data: st.DataObject) -> None:
    """Through the store itself: the analyst picks each next step from the store's answers;
    whatever it picks, the granted Gaussians satisfy the GDP filter's condition, and every
    refusal leaves the chain as it was."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        location = str(Path(folder) / "b.db")
        store.init(location)
        store.declare(location, "s", epsilon=0.5, delta=1e-6, rule="gdp")
        granted: list[float] = []
        for _ in range(8):
            spent = status(location)["budgets"][0]["spent"]["epsilon"]
            low = 3.0 if spent < 0.3 else 1.0  # bolder once little remains
            sigma = data.draw(st.floats(low, 30.0), label="sigma")
            before = verify(location)["entries"]
            try:
                store.book(location, "s", GaussianEvent(sigma))
            except rules.BudgetRefused:
                assert verify(location)["entries"] == before
                continue
            granted.append(sigma)
        mu = rules.default_params("gdp", 0.5, 1e-6)["mu"]
        assert math.fsum(1 / s**2 for s in granted) <= mu**2
        assert status(location)["budgets"][0]["bookings"] == len(granted)


def test_a_pld_store_keeps_its_bookings_grouped_and_their_exact_composition(
    sqlite_store: str,
) -> None:
    """Twelve bookings of three Gaussians: the state counts each distinct event, and the spend
    is the certified bound of all twelve composed, a Gaussian of sigma = (sum sigma^-2)^-1/2
    whose exact epsilon is Balle and Wang's. A state written without groups still books."""
    from tests.redteam.conftest import balle_wang_epsilon

    store.declare(sqlite_store, "s", epsilon=5.0, delta=1e-6, rule="pld")
    sigmas = [(20.0, 30.0, 40.0)[i % 3] for i in range(12)]
    for i, sigma in enumerate(sigmas[:-1]):
        store.book(sqlite_store, "s", GaussianEvent(sigma), run_id=str(i))
    (budget,) = status(sqlite_store)["budgets"]
    assert budget["state"]["groups"] == [
        [GaussianEvent(20.0).to_dict(), 4],
        [GaussianEvent(30.0).to_dict(), 4],
        [GaussianEvent(40.0).to_dict(), 3],
    ]
    legacy = {k: v for k, v in budget["state"].items() if k != "groups"}
    _sql(sqlite_store, f"UPDATE filter_state SET state = '{json.dumps(legacy)}'")
    assert verify(sqlite_store)["ok"]
    store.book(sqlite_store, "s", GaussianEvent(sigmas[-1]), run_id="last")
    exact = balle_wang_epsilon(math.fsum(s**-2 for s in sigmas) ** -0.5, 1e-6)
    (budget,) = status(sqlite_store)["budgets"]
    assert budget["state"]["groups"][2][1] == 4 and budget["bookings"] == 12
    assert exact <= budget["spent"]["epsilon"] <= exact * (1 + 1e-6)
    assert verify(sqlite_store)["ok"]


def test_the_cli_declares_the_odometer_and_labels_the_filter_statistic(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    location = str(tmp_path / "s.db")
    total = ["--source", "s", "--epsilon", "1", "--delta", "1e-6"]
    gdp = ["--rule", "gdp", "--odometer-delta", "1e-7"]
    assert main(["budget", "init", location, *total, *gdp]) == 0
    event = '{"kind": "gaussian", "noise_multiplier": 5}'
    capsys.readouterr()
    assert main(["budget", "book", location, "--source", "s", "--event", event]) == 0
    line = capsys.readouterr().out
    # sum mu^2 = 0.04: the statistic is the mu = 0.2 GDP epsilon at 1e-6 (rounded up), labelled
    assert "spent epsilon 0.834118 (filter statistic, not certified)" in line
    assert "certified spend so far epsilon <=" in line and "at delta = 1e-07" in line
    status = json.loads(_status_json(location, capsys))
    assert status["budgets"][0]["params"]["odometer_delta"] == 1e-7
    pld = str(tmp_path / "p.db")
    assert main(["budget", "init", pld, *total, "--rule", "pld", "--odometer-delta", "1e-7"]) == 2
    assert "odometer_delta: is not a parameter a pld store takes" in capsys.readouterr().err


def _status_json(location: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["budget", "status", location, "--json"]) == 0
    return capsys.readouterr().out
