from __future__ import annotations

import numpy as np
import pytest

from dpledger.core.errors import InvalidParameterError
from dpledger.plugins.path.schema import Column, TableSchema, UserTable, UserTables

SCHEMA = TableSchema(
    (
        Column("id", "static"),
        Column("hr", "numeric", lower=30.0, upper=200.0),
        Column("level", "categorical", categories=("lo", "hi")),
    )
)


def _tables(*users: UserTable) -> UserTables:
    return UserTables(SCHEMA, users)


def test_helpers_and_normalisation() -> None:
    t = _tables(
        UserTable("a", [("a", 80, "lo"), ("a", 81.5, "hi")]),
        UserTable("b", [("b", np.float32(90.0), "hi")]),
    )
    assert len(t) == 2
    assert t.lengths.tolist() == [2, 1]
    assert t.numeric_array(0).tolist() == [[80.0], [81.5]]
    assert isinstance(t.users[0].rows[0][1], float)
    assert t.categorical_codes(0).tolist() == [[0], [1]]
    sub = t.subset([1])
    assert [u.user_id for u in sub] == ["b"]
    assert sub.numeric_array(0).tolist() == [[90.0]]
    assert SCHEMA.names == ("id", "hr", "level")
    assert [c.name for c in SCHEMA.numeric] == ["hr"]
    assert [c.name for c in SCHEMA.categorical] == ["level"]
    assert SCHEMA.column("hr").bounded


@pytest.mark.parametrize(
    ("users", "needle"),
    [
        ((UserTable("a", [("a", 80.0, "lo"), ("a", 81.0)]),), "user 'a' row 1"),
        ((UserTable("z", []),), "user 'z': has zero rows"),
        ((UserTable("a", [("a", "80", "lo")]),), "user 'a' row 0 column 'hr'"),
        ((UserTable("a", [("a", float("nan"), "lo")]),), "not finite"),
        ((UserTable("a", [("a", 80.0, "mid")]),), "column 'level'"),
        ((UserTable("a", [("a", 80.0, "lo"), ("b", 80.0, "lo")]),), "row 1 column 'id'"),
        ((UserTable("a", [("a", 1.0, "lo")]), UserTable("a", [("a", 1.0, "lo")])), "twice"),
        ((), "UserTables.users"),
    ],
)
def test_bad_input_names_location_and_fix(users: tuple[UserTable, ...], needle: str) -> None:
    with pytest.raises(InvalidParameterError, match="Fix:") as err:
        UserTables(SCHEMA, users)
    assert needle in str(err.value)


def test_non_numeric_message_names_user_row_column() -> None:
    with pytest.raises(InvalidParameterError) as err:
        _tables(UserTable("u7", [("u7", 1.0, "lo"), ("u7", "high", "lo")]))
    msg = str(err.value)
    assert "user 'u7' row 1 column 'hr'" in msg and "non-numeric" in msg and "float" in msg


def test_column_validation() -> None:
    with pytest.raises(InvalidParameterError, match="unknown column type 'text'"):
        Column("x", "text")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="public categories"):
        Column("x", "categorical")
    with pytest.raises(InvalidParameterError, match="lower"):
        Column("x", "numeric", lower=2.0, upper=1.0)
    with pytest.raises(InvalidParameterError, match="duplicate"):
        TableSchema((Column("x", "static"), Column("x", "static")))
    with pytest.raises(InvalidParameterError, match="unknown column"):
        SCHEMA.column("nope")
