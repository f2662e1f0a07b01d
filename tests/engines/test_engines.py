"""In-memory and Dask engines: the same data and seed give bit-identical releases; the public
record does not depend on the data; bad input is one refusal with nothing booked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpledger.core.errors import InvalidParameterError
from dpledger.runtime.engines import aggregate_table, aggregation_request
from dpledger.runtime.engines import dask_engine as dask_module
from dpledger.runtime.engines.noise import cell_noise
from tests.engines.conftest import PARAMS, ledger

ARRAYS = ("count", "sum", "mean")


def run(source: Any, engine: str = "memory", seed: int = 7, **changes: Any) -> tuple[dict, Any]:
    params = {**PARAMS, **changes, "engine": engine}
    book = ledger(seed, params)
    out = aggregate_table(aggregation_request(params), source, book)
    book.verify()
    return out, book


def same_bits(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a["partitions"] == b["partitions"] and all(
        np.asarray(a[k]).tobytes() == np.asarray(b[k]).tobytes() for k in ARRAYS
    )


def exact(table: dict[str, np.ndarray]) -> dict[str, Any]:
    """The aggregates without noise, computed independently (pure Python, no hashing): valid
    for data whose units all lie within the bounds (nothing is dropped)."""
    counts: dict[str, int] = {}
    sums: dict[str, float] = {}
    for day, spend in zip(table["day"], table["spend"], strict=True):
        counts[day] = counts.get(day, 0) + 1
        sums[day] = sums.get(day, 0.0) + min(max(float(spend), 0.0), 10.0)
    return {"count": counts, "sum": sums}


@pytest.mark.parametrize("form", ["columns", "parquet", "csv"])
def test_memory_and_dask_releases_are_bit_identical(
    form: str, table: dict[str, Any], table_files: dict[str, Path]
) -> None:
    pytest.importorskip("dask.dataframe")
    source = table if form == "columns" else table_files[form]
    mem, mem_ledger = run(source, "memory")
    dsk, dsk_ledger = run(source, "dask")
    assert same_bits(mem, dsk)
    assert mem_ledger.log[0]["note"].replace("memory", "dask") == dsk_ledger.log[0]["note"]
    assert mem["partitions"] == ["fri", "mon", "tue", "wed"]


def test_the_releases_are_the_exact_aggregates_plus_noise_of_the_declared_scale() -> None:
    # every unit within the bounds: one row in one partition, so nothing is dropped
    rng = np.random.default_rng(3)
    n = 400
    table = {
        "user": np.arange(n),
        "day": rng.choice(np.array(["mon", "tue"], dtype=object), n),
        "spend": rng.uniform(0, 12, n),
    }
    truth = exact(table)
    gaps = {m: [] for m in ("count", "sum")}
    for seed in range(200):
        out, _ = run(table, seed=seed, public_partitions=["mon", "tue"])
        for m in gaps:
            gaps[m] += [out[m][i] - truth[m][d] for i, d in enumerate(out["partitions"])]
    # sensitivity sqrt(2)*2 (count) and sqrt(2)*2*10 (sum); noise std = 2 x sensitivity
    for m, scale in (("count", 2 * 2 * np.sqrt(2)), ("sum", 2 * 2 * np.sqrt(2) * 10)):
        z = np.asarray(gaps[m]) / scale
        assert abs(z.mean()) < 4 / np.sqrt(z.size)
        assert abs(z.std() - 1) < 0.1


def test_noise_depends_on_seed_step_and_cell_only() -> None:
    key = np.array([5, 9], dtype=np.uint64)
    names = ["s:a", "s:b", "i:3"]
    forward = cell_noise(key, "aggregate.count", names, "gaussian")
    backward = cell_noise(key, "aggregate.count", names[::-1], "gaussian")
    assert forward.tobytes() == backward[::-1].tobytes()  # order and retries do not matter
    assert not np.array_equal(forward, cell_noise(key, "aggregate.sum", names, "gaussian"))
    other = np.array([5, 10], dtype=np.uint64)
    assert not np.array_equal(forward, cell_noise(other, "aggregate.count", names, "gaussian"))


def test_one_seed_one_release_another_seed_another(table: dict[str, Any]) -> None:
    a, _ = run(table, seed=1)
    b, _ = run(table, seed=1)
    c, _ = run(table, seed=2)
    assert same_bits(a, b) and not same_bits(a, c)


def test_a_secure_ledger_draws_its_key_from_the_os(table: dict[str, Any]) -> None:
    from dpledger.runtime.ledger import PrivacyLedger
    from tests.engines.conftest import declared

    outs = []
    for _ in range(2):
        book = PrivacyLedger(declared(), secure=True)
        outs.append(aggregate_table(aggregation_request(PARAMS), table, book))
    assert not same_bits(*outs)


@pytest.mark.parametrize("engine", ["memory", "dask"])
def test_neighbouring_tables_give_identical_public_records(
    engine: str, table: dict[str, Any]
) -> None:
    pytest.importorskip("dask.dataframe")
    victim = table["user"][0]
    keep = table["user"] != victim
    less = {c: v[keep] for c, v in table.items()}
    out_d, ledger_d = run(table, engine)
    out_e, ledger_e = run(less, engine)
    assert ledger_d.to_dict() == ledger_e.to_dict()
    assert out_d["plan"] == out_e["plan"] and out_d["partitions"] == out_e["partitions"]
    assert ledger_d.public_matches_exactly()


def _bad(table: dict[str, Any], column: str, value: Any) -> dict[str, Any]:
    bad = dict(table)
    bad[column] = np.asarray(table[column], dtype=object)
    bad[column][3] = value
    return bad


@pytest.mark.parametrize("engine", ["memory", "dask"])
@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda t: {c: v for c, v in t.items() if c != "spend"}, "^spend: is not a column"),
        (lambda t: _bad(t, "user", None), "^user: holds missing values"),
        (lambda t: _bad(t, "spend", float("nan")), "^spend: holds NaN"),
        (lambda t: _bad(t, "spend", float("-inf")), "^spend: holds NaN or infinite"),
        (lambda t: _bad(t, "spend", "twelve"), "^spend: holds text"),
    ],
)
def test_bad_input_is_one_refusal_and_nothing_is_booked(
    engine: str, change: Any, words: str, table: dict[str, Any]
) -> None:
    pytest.importorskip("dask.dataframe")
    params = {**PARAMS, "engine": engine}
    book = ledger(7, params)
    with pytest.raises(InvalidParameterError, match=words):
        aggregate_table(aggregation_request(params), change(table), book)
    assert book.log == [] and book.executed_event().to_dict()["events"] == []


def test_an_engine_that_is_not_installed_is_one_line(
    monkeypatch: pytest.MonkeyPatch, table: dict[str, Any]
) -> None:
    real = dask_module.importlib.import_module

    def missing(name: str, *args: Any) -> Any:
        if name.split(".")[0] in ("dask", "pyspark"):
            raise ImportError(name)
        return real(name, *args)

    monkeypatch.setattr(dask_module.importlib, "import_module", missing)
    for engine, fix in (("dask", "dpledger\\[dask\\]"), ("spark", "dpledger\\[spark\\]")):
        params = {**PARAMS, "engine": engine}
        book = ledger(7, params)
        with pytest.raises(InvalidParameterError, match=f"^engine: .*not installed.*{fix}"):
            aggregate_table(aggregation_request(params), table, book)
        assert book.log == []


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"metrics": ["median"]}, "^metrics:"),
        ({"engine": "beam"}, "^engine:"),
        ({"public_partitions": None}, "^public_partitions: is missing"),
        ({"unit_column": None}, "^max_partitions_per_unit:"),
        ({"lower": 3.0, "upper": 1.0}, "^lower:"),
        ({"value_column": None}, "^value_column:"),
        ({"max_rows_per_partition": 0}, "^max_rows:"),
    ],
)
def test_bad_parameters_are_refused_before_any_data_is_read(changes: Any, words: str) -> None:
    with pytest.raises(InvalidParameterError, match=words):
        aggregation_request({**PARAMS, **changes})


SELECTION = {"mechanism": "gaussian", "epsilon": 1.0, "delta": 1e-6}


def test_private_selection_is_booked_first_and_identical_on_every_engine() -> None:
    pytest.importorskip("dask.dataframe")
    from tests.engines.conftest import make_table

    table = make_table(2000)
    table["day"][:3] = "rare"  # a key of at most three units: under the threshold (about 32)
    changes = {"public_partitions": None, "partition_selection": SELECTION}
    mem, book = run(table, "memory", **changes)
    dsk, _ = run(table, "dask", **changes)
    assert same_bits(mem, dsk)
    assert mem["partitions"] == ["mon", "sun", "tue", "wed"]  # hundreds of units each
    assert book.log[0]["step"] == "aggregate.select"
    assert book.log[0]["event"]["kind"] == "partition_selection"
    assert mem["plan"]["partitions"]["kind"] == "private selection"
    with pytest.raises(InvalidParameterError, match=r"^public_partitions: is given"):
        aggregation_request({**PARAMS, "partition_selection": SELECTION})
    with pytest.raises(InvalidParameterError, match=r"^partition_selection\.mechanism"):
        aggregation_request({**PARAMS, **changes, "partition_selection": {"mechanism": "x"}})


def test_an_empty_table_releases_noise_around_zeros(table: dict[str, Any]) -> None:
    """Whether a table is empty is private: an empty one is released like any other (zeros
    plus the declared noise), not refused."""
    out, book = run({c: v[:0] for c, v in table.items()})
    assert out["partitions"] == ["fri", "mon", "tue", "wed"]
    assert len(book.log) == len(run(table)[1].log)


def test_sums_beyond_the_exact_range_are_clamped_not_refused() -> None:
    """A partition's fixed-point sum beyond 2**53 is clamped (a 1-Lipschitz map: the release
    keeps its sensitivity); refusing would publish that some partition's sum is large."""
    from dpledger.runtime.engines.aggregate import EXACT_LIMIT, _exact_values

    query = aggregation_request({**PARAMS, "metrics": ["sum"]}).query
    rows = [(3, EXACT_LIMIT + 5, 3), (4, EXACT_LIMIT + 7, 4), (1, 12, 1)]
    top = float(EXACT_LIMIT - 1)
    assert _exact_values("sum", rows, query)[:2] == [
        np.ldexp(top, -query.scale_bits),
        np.ldexp(top, -query.scale_bits),
    ]
    centred = _exact_values("mean", rows, query)
    assert all(abs(v) <= np.ldexp(top, -query.scale_bits) for v in centred)


def test_a_value_range_that_could_overflow_is_refused_by_its_parameters(
    table: dict[str, Any],
) -> None:
    """The overflow guard depends on the parameters alone: the same refusal for any table."""
    for source in (table, {c: v[:1] for c, v in table.items()}):
        with pytest.raises(InvalidParameterError, match=r"^scale_bits: "):
            run(source, upper=2.0**40, scale_bits=20)
