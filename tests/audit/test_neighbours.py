"""Neighbouring datasets with a canary record (dpledger.audit.neighbours)."""

from __future__ import annotations

import math
from typing import Any

import attrs
import numpy as np
import pytest

from dpledger.audit import neighbours as nb
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError

ADD = Adjacency()
REPLACE = Adjacency(relation="replace_one")
ROWS = np.array([[0.5, 1.5], [1.5, -2.5], [0.2, 0.0]])


@attrs.frozen
class Sens:
    sensitivity: float = 1.0
    monotonic: bool = False


def test_rows_get_a_far_out_canary() -> None:
    pair = nb.build_neighbours("any", None, ROWS, ADD)
    far = nb.CANARY_SCALE * (1 + math.hypot(1.5, -2.5))
    np.testing.assert_array_equal(pair.d, ROWS)
    np.testing.assert_array_equal(pair.d_prime, np.vstack([ROWS, [[-far, 0.0]]]))  # mean x > 0
    replaced = nb.build_neighbours("any", None, ROWS, REPLACE).d_prime
    np.testing.assert_array_equal(replaced, np.vstack([[[-far, 0.0]], ROWS[1:]]))


def test_label_columns_get_a_valid_value() -> None:
    data = np.column_stack([ROWS, [1.0, 0.0, 1.0]])
    add = nb.build_neighbours("any", None, data, ADD).d_prime
    assert add[-1, 2] == 0.0 and abs(add[-1, 0]) > 1000 and add[-1, 1] == 0.0
    rep = nb.build_neighbours("any", None, data, REPLACE).d_prime
    assert rep[0, 2] == 0.0  # differs from the replaced record's label 1
    xy = {"x": ROWS, "y": np.array([0.0, 0.0, 0.0])}
    pair = nb.build_neighbours("any", None, xy, REPLACE)
    assert pair.d_prime["y"].tolist() == [0.0, 0.0, 0.0] and abs(pair.d_prime["x"][0, 0]) > 1e3


def test_one_dimensional_records() -> None:
    bins = np.array([2.0, 0.0, 2.0, 1.0])
    assert nb.build_neighbours("any", None, bins, ADD).d_prime.tolist() == [2, 0, 2, 1, 0]
    assert nb.build_neighbours("any", None, bins, REPLACE).d_prime.tolist() == [0, 0, 2, 1]
    values = np.array([0.5, -0.25])
    assert nb.build_neighbours("any", None, values, ADD).d_prime[-1] == -1500.0


def test_query_answers_and_scores_move_by_the_sensitivity() -> None:
    ans = np.array([3.0, 1.0])
    assert nb.query_answer(Sens(0.5), ans, ADD).d_prime.tolist() == [
        3.5,
        1.0,
    ]
    assert nb.query_answer(Sens(0.5), ans, REPLACE).d_prime.tolist() == [
        4.0,
        1.0,
    ]
    scores = np.array([0.0, 1.0, 1.0])
    assert nb.score_vector(Sens(), scores, ADD).d_prime.tolist() == [
        1.0,
        0.0,
        0.0,
    ]
    assert nb.score_vector(Sens(1.0, True), scores, ADD).d_prime.tolist() == [
        1.0,
        1.0,
        1.0,
    ]


def test_method_rules() -> None:
    data = {"records": ROWS, "candidates": np.zeros((5, 2))}
    pair = nb.nn_records(None, data, ADD)
    assert pair.d_prime["candidates"] is data["candidates"] and len(pair.d_prime["records"]) == 4
    angles = nb.circle_antipode(None, np.array([0.1, 0.3]), ADD).d_prime
    assert angles[-1] == pytest.approx(0.2 + math.pi)

    @attrs.frozen
    class Ball:
        radius: float = 2.0
        center: tuple[float, float] = (1.0, 1.0)

    marg = {"marginal_0": np.ones((3, 2)) * 1.5, "marginal_1": np.ones((3, 2))}
    moved = nb.ball_marginals(Ball(), marg, REPLACE).d_prime["marginal_0"]
    assert moved[0] == pytest.approx([1.0 - 2.0, 1.0]) and (moved[1:] == 1.5).all()
    with pytest.raises(InvalidParameterError, match="n_per_time"):
        nb.ball_marginals(Ball(), marg, ADD)


def test_user_tables() -> None:
    tables = {
        "schema": [
            {"name": "id", "kind": "static"},
            {"name": "x", "kind": "numeric", "lower": -5.0, "upper": 5.0},
            {"name": "c", "kind": "categorical", "categories": ["a", "b"]},
        ],
        "users": [{"user_id": str(i), "rows": [[str(i), -4.0, "a"]]} for i in range(2)],
    }
    add = nb.user_tables(None, tables, Adjacency(unit="user", unit_key="id"))
    assert add.d_prime["users"][-1] == {"user_id": "canary0", "rows": [["canary0", 5.0, "b"]]}
    rep = nb.user_tables(None, tables, REPLACE)
    assert [u["user_id"] for u in rep.d_prime["users"]] == ["canary0", "1"]


def test_rule_registration_and_refusals() -> None:
    def rule(params: Any, data: Any, adjacency: Adjacency) -> nb.NeighbourPair:
        return nb.NeighbourPair(data, data + 1, adjacency.relation, "plus one")

    with pytest.warns(DeprecationWarning, match="register_neighbour_rule is deprecated"):
        nb.register_neighbour_rule("mine", rule)
    try:
        assert nb.build_neighbours("mine", None, np.zeros(2), ADD).d_prime.tolist() == [1, 1]
    finally:
        nb.unregister_neighbour_rule("mine")
    with pytest.raises(InvalidParameterError, match="data: is missing"):
        nb.build_neighbours("any", None, None, ADD)
    with pytest.raises(InvalidParameterError, match="different lengths"):
        nb.build_neighbours("any", None, {"a": np.zeros(2), "b": np.zeros(3)}, ADD)
    with pytest.raises(InvalidParameterError, match="row-level neighbours only"):
        nb.build_neighbours("any", None, ROWS, Adjacency(unit="user", unit_key="id"))
    with pytest.raises(InvalidParameterError, match="not numeric"):
        nb.build_neighbours("any", None, np.array(["a", "b"]), ADD)


def test_an_integer_last_column_is_a_label_and_other_integer_columns_are_features() -> None:
    counts = np.array([[3.0, 1.0], [5.0, 0.0]])
    canary = nb.build_neighbours("any", None, counts, ADD).d_prime[-1]
    assert canary.tolist() == [-nb.CANARY_SCALE * (1 + math.hypot(5.0, 0.0)), 0.0]
