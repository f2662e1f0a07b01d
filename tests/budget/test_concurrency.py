"""Eight processes booking at once against one store, on SQLite and on a real PostgreSQL
server: the granted bookings never exceed the total, and every granted booking is in the
chain exactly once (sequence numbers 1..n, no gap, no duplicate, no entry of a refusal)."""

from __future__ import annotations

import json
import math
import multiprocessing
from typing import Any

import pytest

from dpledger.budget import rules, store
from dpledger.budget.status import verify
from dpledger.core.events import GaussianEvent

WORKERS = 8
ATTEMPTS = 8
SIGMAS = (6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0)


def _worker(location: str, index: int, barrier: Any, out: Any) -> None:
    sigma = SIGMAS[index]
    granted = []
    barrier.wait()
    for attempt in range(ATTEMPTS):
        run_id = f"w{index}-{attempt}"
        try:
            store.book(location, "shared", GaussianEvent(sigma), run_id=run_id)
        except rules.BudgetRefused:
            continue
        granted.append((run_id, sigma))
    out.put(granted)


def _book_at_once(location: str) -> list[tuple[str, float]]:
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(WORKERS), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(location, i, barrier, out)) for i in range(WORKERS)]
    for p in procs:
        p.start()
    # a reader meanwhile: every status it reads is of one consistent snapshot
    while any(p.is_alive() for p in procs) and out.empty():
        assert verify(location)["ok"]
    results = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return [g for r in results for g in r]


def _check(location: str, granted: list[tuple[str, float]]) -> None:
    mu = rules.default_params("gdp", 1.0, 1e-6)["mu"]
    # the total: sum mu_t^2 of what was granted is within mu^2 (the GDP filter's condition)
    assert math.fsum(1 / s**2 for _, s in granted) <= mu**2
    # the budget ran out: some attempts were refused (the contention was real)
    assert 0 < len(granted) < WORKERS * ATTEMPTS
    conn = store.open_store(location)
    try:
        booked = [e for e in store.entries(conn) if e["kind"] == "book"]
    finally:
        conn.close()
    assert sorted(e["run_id"] for e in booked) == sorted(r for r, _ in granted)
    assert [e["seq"] for e in booked] == list(range(2, len(granted) + 2))
    result = verify(location)
    assert result["ok"] and result["entries"] == len(granted) + 1


def test_eight_processes_on_sqlite(sqlite_store: str) -> None:
    store.declare(sqlite_store, "shared", epsilon=1.0, delta=1e-6, rule="gdp")
    _check(sqlite_store, _book_at_once(sqlite_store))


def test_eight_processes_on_postgres(pg_store: str) -> None:
    store.init(pg_store)
    store.declare(pg_store, "shared", epsilon=1.0, delta=1e-6, rule="gdp")
    _check(pg_store, _book_at_once(pg_store))


@pytest.mark.slow  # the eight-process test and the CLI test cover PostgreSQL in the default tier
def test_postgres_store_refuses_what_sqlite_refuses(pg_store: str, sqlite_store: str) -> None:
    """The same schema and rules: the same bookings fit on both."""
    store.init(pg_store)
    counts = []
    for location in (pg_store, sqlite_store):
        store.declare(location, "s", epsilon=1.0, delta=1e-6, rule="renyi")
        n = 0
        while True:
            try:
                store.book(location, "s", GaussianEvent(15.0))
            except rules.BudgetRefused:
                break
            n += 1
        counts.append(n)
        assert verify(location)["ok"]
    assert counts[0] == counts[1] > 0
    import psycopg

    with (
        psycopg.connect(pg_store, autocommit=True) as conn,
        pytest.raises(psycopg.errors.RaiseException, match="append-only"),
    ):
        conn.execute("UPDATE entries SET run_id = 'forged' WHERE seq = 2")


def test_an_unreachable_postgres_store_refuses(tmp_path: Any) -> None:
    pytest.importorskip("psycopg")
    url = f"postgresql://postgres@/none?host={tmp_path}&port=1"
    with pytest.raises(Exception, match="cannot reach the PostgreSQL store"):
        store.book(url, "s", GaussianEvent(5.0))


def _one_big(location: str, index: int, barrier: Any, out: Any) -> None:
    barrier.wait()
    try:
        store.book(location, "pair", GaussianEvent(PAIR_SIGMA), run_id=f"big{index}")
    except rules.BudgetRefused:
        out.put(0)
        return
    out.put(1)


#: one step of this noise takes 60% of the GDP total: each fits alone, two do not
PAIR_SIGMA = 1 / (rules.default_params("gdp", 1.0, 1e-6)["mu"] * math.sqrt(0.6))


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.slow)])
def test_two_runs_that_fit_alone_but_not_together_cannot_both_pass(
    kind: str, request: pytest.FixtureRequest
) -> None:
    location = request.getfixturevalue(f"{'pg' if kind == 'postgres' else 'sqlite'}_store")
    store.init(location)
    store.declare(location, "pair", epsilon=1.0, delta=1e-6, rule="gdp")
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_one_big, args=(location, i, barrier, out)) for i in range(2)]
    for p in procs:
        p.start()
    granted = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert sorted(granted) == [0, 1]
    assert verify(location)["entries"] == 2


def test_the_cli_on_a_postgres_store(pg_store: str, capsys: pytest.CaptureFixture[str]) -> None:
    from dpledger.cli import main

    args = ["--source", "s", "--epsilon", "1", "--delta", "1e-6", "--rule", "approx"]
    assert main(["budget", "init", pg_store, *args]) == 0
    event = '{"kind": "laplace", "noise_multiplier": 20}'
    assert main(["budget", "book", pg_store, "--source", "s", "--event", event]) == 0
    capsys.readouterr()
    assert main(["budget", "status", pg_store, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (budget,) = report["budgets"]
    assert budget["bookings"] == 1 and "Whitehouse" in budget["theorem"]
    assert report["chain"]["ok"] and report["chain"]["entries"] == 2
