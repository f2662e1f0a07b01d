"""Serialization Ψ, its inverse and the robust row parser."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.core.errors import InvalidParameterError
from dpledger.plugins.path.schema import Column, TableSchema
from dpledger.plugins.path.serialize import (
    RowParser,
    header,
    parse_row,
    parse_table,
    serialize_row,
    serialize_table,
)

SCHEMA = TableSchema(
    (
        Column("id", "static"),
        Column("hr", "numeric", lower=0.0, upper=250.0),
        Column("state", "categorical", categories=("low", "very high")),
        Column("spo2", "numeric"),
    )
)


def test_format_matches_the_paper_figure() -> None:
    text = serialize_table(SCHEMA, [("7", 83.0, "low", 97.5), ("7", 85.25, "very high", -1.0)])
    assert text == (
        "Columns: id, hr, state, spo2\n"
        "[Row 1]: id is 7, hr is 83.0, state is low, spo2 is 97.5\n"
        "[Row 2]: id is 7, hr is 85.25, state is very high, spo2 is -1.0\n"
    )
    assert serialize_row(SCHEMA, ("a", 1.005, "low", -0.004), 3, precision=2) == (
        "[Row 3]: id is a, hr is 1.00, state is low, spo2 is 0.00"
    )


_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\n\r,"), min_size=1, max_size=8
).filter(lambda s: s == s.strip())
_float = st.floats(allow_nan=False, allow_infinity=False, width=64)


@st.composite
def tables(draw: st.DrawFn) -> list[tuple[object, ...]]:
    uid = draw(_text)
    n = draw(st.integers(1, 6))
    return [
        (uid, draw(_float), draw(st.sampled_from(("low", "very high"))), draw(_float))
        for _ in range(n)
    ]


@settings(max_examples=60, deadline=None)
@given(tables())
def test_round_trip_is_exact(rows: list[tuple[object, ...]]) -> None:
    assert parse_table(SCHEMA, serialize_table(SCHEMA, rows)) == rows


@settings(max_examples=40, deadline=None)
@given(tables(), st.integers(0, 4))
def test_round_trip_with_precision_rounds(rows: list[tuple[object, ...]], p: int) -> None:
    rows = [(u, h, s, o) for u, h, s, o in rows if abs(h) < 1e12 and abs(o) < 1e12]
    if not rows:
        return
    back = parse_table(SCHEMA, serialize_table(SCHEMA, rows, precision=p))
    assert len(back) == len(rows)
    for got, want in zip(back, rows, strict=True):
        assert got[0] == want[0] and got[2] == want[2]
        for j in (1, 3):
            assert math.isclose(got[j], want[j], abs_tol=0.5 * 10**-p * (1 + 1e-9))


def test_header() -> None:
    assert header(SCHEMA) == "Columns: id, hr, state, spo2"


def test_key_value_in_any_order_and_csv_fallback() -> None:
    assert parse_row(SCHEMA, "[Row 4]: state is low, spo2 is 1, id is u, hr is 2.5") == (
        "u",
        2.5,
        "low",
        1.0,
    )
    assert parse_row(SCHEMA, "u, 2.5, very high, 3") == ("u", 2.5, "very high", 3.0)
    assert parse_row(SCHEMA, "[Row 2]: 2.5, low, 3", fallback="s") == ("s", 2.5, "low", 3.0)
    # a column twice, a missing column, an unknown category, a non-number: invalid
    assert parse_row(SCHEMA, "id is u, hr is 1, hr is 2, state is low, spo2 is 1") is None
    assert parse_row(SCHEMA, "id is u, hr is 1, state is low") is None
    assert parse_row(SCHEMA, "id is u, hr is 1, state is mid, spo2 is 1") is None
    assert parse_row(SCHEMA, "id is u, hr is fast, state is low, spo2 is 1") is None
    assert parse_row(SCHEMA, "id is u, hr is nan, state is low, spo2 is 1") is None
    assert parse_row(SCHEMA, "[Row 1]:   ") is None


def test_static_values_are_infilled_from_the_history() -> None:
    parser = RowParser(SCHEMA, fallback="syn-0")
    assert parser.feed("[Row 1]: hr is 1, state is low, spo2 is 2")  # id missing: fallback
    assert parser.feed("[Row 2]: id is other, hr is 3, state is low, spo2 is 4")  # overridden
    assert parser.feed("[Row 3]: 5, very high, 6")  # CSV without the static column
    assert parser.rows == [
        ("syn-0", 1.0, "low", 2.0),
        ("syn-0", 3.0, "low", 4.0),
        ("syn-0", 5.0, "very high", 6.0),
    ]
    first = RowParser(SCHEMA)
    assert not first.feed("hr is 1, state is low, spo2 is 2")  # no history, no fallback


def test_table_stops_at_first_invalid_row() -> None:
    text = (
        "Columns: id, hr, state, spo2\n[Row 1]: id is a, hr is 1, state is low, spo2 is 2\n\n"
        "[Row 2]: id is a, hr is x, state is low, spo2 is 2\n"
        "[Row 3]: id is a, hr is 3, state is low, spo2 is 2\n"
    )
    assert parse_table(SCHEMA, text) == [("a", 1.0, "low", 2.0)]


@pytest.mark.parametrize("value", ["a, b", "line\nbreak", " padded", ""])
def test_separators_in_values_are_refused(value: str) -> None:
    with pytest.raises(InvalidParameterError, match="'id'"):
        serialize_table(SCHEMA, [(value, 1.0, "low", 2.0)])


def test_bad_rows_and_precision_are_refused() -> None:
    with pytest.raises(InvalidParameterError, match="row"):
        serialize_row(SCHEMA, ("a", 1.0), 1)
    with pytest.raises(InvalidParameterError, match="precision"):
        serialize_table(SCHEMA, [("a", 1.0, "low", 2.0)], precision=-1)
    with pytest.raises(InvalidParameterError, match="not finite"):
        serialize_table(SCHEMA, [("a", math.inf, "low", 2.0)])
