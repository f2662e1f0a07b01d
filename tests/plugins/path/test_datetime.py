"""Date-time columns: stored as POSIX seconds, written and parsed as ISO 8601 text."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from dpledger.core.errors import InvalidParameterError
from dpledger.plugins.path.baselines_plugin import DIRECT_SPEC
from dpledger.plugins.path.ddp import tables_from_json, tables_to_json
from dpledger.plugins.path.generate import Guide
from dpledger.plugins.path.schema import Column, TableSchema, UserTable, UserTables
from dpledger.plugins.path.serialize import parse_table, serialize_table
from dpledger.runtime.runner import run_verified

T0 = dt.datetime(2024, 3, 1, 8, 30, tzinfo=dt.UTC).timestamp()  # 1709281800
SCHEMA = TableSchema(
    (
        Column("id", "static"),
        Column("at", "datetime", lower="2024-03-01T00:00:00", upper="2024-03-08T00:00:00"),
        Column("hr", "numeric", lower=40.0, upper=180.0),
    )
)


def test_times_are_read_as_posix_seconds_in_every_form() -> None:
    assert T0 == 1709281800.0
    assert SCHEMA.column("at").lower == 1709251200.0 and SCHEMA.column("at").upper == 1709856000.0
    rows = (
        ("u", "2024-03-01T08:30:00", 60.0),
        ("u", dt.datetime(2024, 3, 1, 8, 30), 61.0),
        ("u", T0, 62.0),
        ("u", "2024-03-01T09:30:00+01:00", 63.0),
    )
    tables = UserTables(SCHEMA, (UserTable("u", rows),))
    assert [r[1] for r in tables[0].rows] == [T0] * 4
    assert SCHEMA.numeric == (SCHEMA.column("at"), SCHEMA.column("hr"))
    assert tables.numeric_array(0)[:, 0].tolist() == [T0] * 4


@pytest.mark.parametrize("bad", ["yesterday", True, None, "2024-13-01T00:00:00", float("nan")])
def test_a_bad_time_is_refused_naming_the_column(bad: object) -> None:
    with pytest.raises(InvalidParameterError, match=r"column 'at'.*not a time"):
        UserTables(SCHEMA, (UserTable("u", (("u", bad, 60.0),)),))


def test_a_time_bound_must_be_a_time() -> None:
    with pytest.raises(InvalidParameterError, match="ISO 8601"):
        Column("at", "datetime", lower="soon")
    with pytest.raises(InvalidParameterError, match="only on numeric or datetime"):
        Column("s", "static", lower="2024-03-01")


def test_text_round_trip_is_iso() -> None:
    rows = [("u", T0, 60.0), ("u", T0 + 90.5, 61.0)]
    text = serialize_table(SCHEMA, rows)
    assert "at is 2024-03-01T08:30:00, " in text
    assert "at is 2024-03-01T08:31:30.500000, " in text
    assert parse_table(SCHEMA, text) == rows
    assert parse_table(SCHEMA, text.replace("2024-03-01T08:30:00", "1709281800")) == []


def test_json_round_trip_keeps_the_kind() -> None:
    tables = UserTables(SCHEMA, (UserTable("u", (("u", T0, 60.0),)),))
    again = tables_from_json(tables_to_json(tables))
    assert again.schema.column("at").kind == "datetime" and again[0].rows == tables[0].rows


def test_generation_grammar_writes_only_times() -> None:
    g = Guide(SCHEMA, eos=256)
    for byte in b"[Row 1]: id is u, at is ":
        g.step(byte)
    assert g.allowed() == set(b"0123456789-:T.")
    for byte in b"2024-03-01":
        g.step(byte)
    assert ord(",") in g.allowed()  # a date alone is a complete time
    for byte in b"T08:3":
        g.step(byte)
    assert ord(",") not in g.allowed()  # "2024-03-01T08:3" is not a time


def test_direct_discretises_times_on_their_public_bounds() -> None:
    rng = np.random.default_rng(0)
    users = tuple(
        UserTable(
            f"u{i}",
            tuple(
                (f"u{i}", T0 + 3600.0 * k + float(rng.uniform(0, 60)), float(rng.uniform(50, 120)))
                for k in range(3)
            ),
        )
        for i in range(30)
    )
    params = DIRECT_SPEC.make_params(
        {"epsilon": 4.0, "delta": 1e-6, "length": 3, "bins": 8, "iters": 30}
    )
    result = run_verified(DIRECT_SPEC, params, UserTables(SCHEMA, users), seed=0)
    synthetic = result.outputs["tables"]
    times = np.concatenate([synthetic.numeric_array(i)[:, 0] for i in range(len(synthetic))])
    at = SCHEMA.column("at")
    assert at.lower is not None and at.upper is not None
    assert np.all((times >= at.lower) & (times <= at.upper))
    assert synthetic.schema.column("at").kind == "datetime"
