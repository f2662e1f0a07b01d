"""Contribution bounding and fixed-point sums: the bounds hold for every unit, the result does
not depend on the row order, and no adversarial ordering moves a sum (Casacuberta et al., CCS
2022)."""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.core.errors import InvalidParameterError
from dpledger.runtime.engines import bounding
from dpledger.runtime.engines.bounding import (
    ROWS_KEY,
    bound_chunk,
    clip_fixed,
    kept_rows,
    kept_rows_by_sorting,
)
from dpledger.runtime.engines.columns import key_column
from dpledger.runtime.engines.protocol import combine
from dpledger.runtime.engines.query import AggregationQuery


def _query(l0: int = 2, linf: int = 3, **kw: object) -> AggregationQuery:
    base: dict[str, object] = dict(
        partition_column="k", value_column="v", unit_column="u", max_partitions=l0, max_rows=linf
    )
    base.update(kw)
    return AggregationQuery(**base)  # type: ignore[arg-type]


tables = st.integers(1, 60).flatmap(
    lambda n: st.fixed_dictionaries(
        {
            "u": st.lists(st.integers(0, 6), min_size=n, max_size=n),
            "k": st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), min_size=n, max_size=n),
            "v": st.lists(st.floats(-5, 5), min_size=n, max_size=n),
        }
    )
)


@settings(max_examples=60, deadline=None)
@given(tables, st.integers(1, 3), st.integers(1, 3))
def test_every_unit_keeps_at_most_l0_partitions_and_linf_rows_in_each(
    table: dict[str, list[object]], l0: int, linf: int
) -> None:
    q = _query(l0, linf, lower=-1.0, upper=2.0)
    keys, units = key_column(table["k"], "k"), key_column(table["u"], "u")
    fixed = clip_fixed(np.asarray(table["v"], dtype=float), q)
    keep = kept_rows(keys, units, fixed, q)
    per_pair: dict[tuple[int, int], int] = defaultdict(int)
    for u, k in zip(units.codes[keep], keys.codes[keep], strict=True):
        per_pair[(int(u), int(k))] += 1
    assert all(c <= linf for c in per_pair.values())
    parts: dict[int, set[int]] = defaultdict(set)
    for u, k in per_pair:
        parts[u].add(k)
    assert all(len(p) <= l0 for p in parts.values())
    # a unit keeps min(L0, its partitions) partitions, min(L∞, its rows) rows in each
    for u in set(units.codes.tolist()):
        mine = units.codes == u
        assert len(parts[u]) == min(l0, len(set(keys.codes[mine].tolist())))


@settings(max_examples=40, deadline=None)
@given(tables, st.integers(1, 3), st.integers(1, 3), st.randoms(use_true_random=False))
def test_removing_one_unit_moves_the_aggregates_by_at_most_the_sensitivity(
    table: dict[str, list[object]], l0: int, linf: int, rnd: object
) -> None:
    q = _query(l0, linf, lower=-1.0, upper=2.0, scale_bits=10)
    full = combine([bound_chunk(table, q, None)])
    victim = table["u"][0]
    users = table["u"]
    rest = {c: [x for x, u in zip(v, users, strict=True) if u != victim] for c, v in table.items()}
    less = combine([bound_chunk(rest, q, None)]) if rest["u"] else None
    keys = set(full.keys) | set(less.keys if less else ())
    d_count = [full.row(k)[0] - (less.row(k)[0] if less else 0) for k in keys]
    d_sum = [full.row(k)[1] - (less.row(k)[1] if less else 0) for k in keys]
    d_units = [full.row(k)[2] - (less.row(k)[2] if less else 0) for k in keys]
    assert sum(abs(d) for d in d_count) <= l0 * linf
    assert math.sqrt(sum(d * d for d in d_count)) <= q.sensitivity("count", "l2")
    top = 2 * 2**10  # max(|lower|, |upper|) on the grid
    assert sum(abs(d) for d in d_sum) <= l0 * linf * top
    assert all(0 <= d <= 1 for d in d_units) and sum(d_units) <= l0


@settings(max_examples=30, deadline=None)
@given(tables, st.randoms(use_true_random=False))
def test_the_bounded_aggregates_do_not_depend_on_the_row_order(
    table: dict[str, list[object]], rnd: object
) -> None:
    q = _query(2, 1, lower=-1.0, upper=2.0)
    order = list(range(len(table["u"])))
    rnd.shuffle(order)  # type: ignore[attr-defined]
    shuffled = {c: [v[i] for i in order] for c, v in table.items()}
    assert combine([bound_chunk(table, q, None)]) == combine([bound_chunk(shuffled, q, None)])


def test_adversarial_orderings_move_a_float_sum_but_not_the_fixed_point_sum() -> None:
    """Casacuberta et al. (CCS 2022): large clipped values among many small ones; the float
    sum depends on the order of summation, the integers on the grid do not."""
    q = AggregationQuery("k", "v", None, lower=-(2.0**45), upper=2.0**45, scale_bits=10)
    small = np.full(64, 2.0**-10)
    values = np.r_[2.0**45, small, -(2.0**45)]
    orders = [values, values[::-1], np.r_[small, 2.0**45, -(2.0**45)], np.sort(values)]
    float_sums = {float(np.cumsum(v)[-1]) for v in orders}
    assert len(float_sums) > 1  # the attack is real for a float sum
    assert {int(clip_fixed(v, q).sum()) for v in orders} == {64}  # exact: 64 * 2**-10
    # a range this wide on this grid could overflow a chunk's 64-bit sums: refused by its
    # parameters alone; within the limit the chunk sums are exact whatever the order
    with pytest.raises(InvalidParameterError, match=r"^scale_bits: "):
        bound_chunk({"k": ["a"], "v": [1.0]}, q, None)
    q = AggregationQuery("k", "v", None, lower=-(2.0**20), upper=2.0**20, scale_bits=10)
    values = np.r_[2.0**20, small, -(2.0**20)]
    table = {"k": ["a"] * values.size, "v": values.tolist()}
    rng = np.random.default_rng(1)
    sums = set()
    for _ in range(20):
        p = rng.permutation(values.size)
        part = bound_chunk({c: [x[i] for i in p] for c, x in table.items()}, q, None)
        sums.add(combine([part]).sums)
    assert sums == {(64,)}
    # removing any one row moves the integer sum by at most the sensitivity on the grid
    for i in (0, 1, values.size - 1):
        less = {c: x[:i] + x[i + 1 :] for c, x in table.items()}
        moved = abs(combine([bound_chunk(less, q, None)]).sums[0] - 64)
        assert math.ldexp(moved, -10) <= q.row_sensitivity("sum")


def test_rounding_is_charged_to_the_sensitivity() -> None:
    q = AggregationQuery("k", "v", None, lower=0.0, upper=1.0 + 2.0**-22, scale_bits=20)
    assert q.fixed_upper == 2**20  # round(2**20 + 1/4)
    assert q.row_sensitivity("sum") == 1.0
    q = AggregationQuery("k", "v", None, lower=0.0, upper=1.0 - 2.0**-22, scale_bits=20)
    assert q.row_sensitivity("sum") >= q.upper
    assert clip_fixed(np.array([5.0]), q)[0] == q.fixed_upper


def test_public_partitions_drop_other_keys_before_bounding() -> None:
    table = {"u": [1, 1, 1], "k": ["x", "a", "b"], "v": [1.0, 1.0, 1.0]}
    q = _query(1, 1)
    agg = combine([bound_chunk(table, q, frozenset({"s:a", "s:b"}))])
    assert agg.keys in (("s:a",), ("s:b",))  # x never takes the unit's one partition
    assert agg.rows == 3


@pytest.mark.parametrize(
    ("column", "values", "words"),
    [
        ("v", [1.0, float("nan")], "NaN or infinite"),
        ("v", [1.0, float("inf")], "NaN or infinite"),
        ("v", ["1", "x"], "text"),
        ("u", [1, None], "missing values"),
        ("u", [1.0, float("nan")], "missing values"),
        ("k", ["a", None], "missing values"),
    ],
)
def test_bad_values_are_refused_naming_the_column(
    column: str, values: list[object], words: str
) -> None:
    table: dict[str, list[object]] = {"u": [1, 2], "k": ["a", "b"], "v": [1.0, 2.0]}
    table[column] = values
    with pytest.raises(InvalidParameterError, match=rf"^{column}: .*{words}"):
        bound_chunk(table, _query(), None)


def test_a_missing_column_is_named() -> None:
    with pytest.raises(InvalidParameterError, match=r"^v: is not a column"):
        bound_chunk({"u": [1], "k": ["a"]}, _query(), None)


def test_integer_keys_read_as_floats_are_the_same_keys() -> None:
    a = key_column(np.array([3, 1, 3]), "k")
    b = key_column(np.array([3.0, 1.0, 3.0]), "k")
    c = key_column(np.array([3, 1, 3], dtype=object), "k")
    assert a.names() == b.names() == c.names() == ["i:1", "i:3"]
    assert a.hashes.tolist() == b.hashes.tolist() == c.hashes.tolist()


def test_a_chunk_counts_its_rows() -> None:
    part = bound_chunk({"u": [1, 2], "k": ["a", "a"], "v": [0.5, 0.5]}, _query(), None)
    assert part["key"][0] == ROWS_KEY and part["count"][0] == 2
    assert combine([part]).counts == (2,)


wide = st.integers(1, 80).flatmap(
    lambda n: st.fixed_dictionaries(
        {
            "u": st.lists(st.integers(0, 9), min_size=n, max_size=n),
            "k": st.lists(st.integers(-3, 5), min_size=n, max_size=n),
            "v": st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=n, max_size=n),
        }
    )
)


@settings(max_examples=60, deadline=None)
@given(wide, st.integers(1, 3), st.integers(1, 3), st.integers(1, 63))
def test_one_sort_keeps_the_rows_the_reference_stable_sorts_keep(
    table: dict[str, list[object]], l0: int, linf: int, unit_bits: int
) -> None:
    """The one-sort rule keeps exactly the reference's rows (ties of equal rows broken by row
    index alike); with few pair-hash bits left (many collisions) it defers to the reference
    or still agrees."""
    q = _query(l0, linf, lower=0.0, upper=1.0)
    keys, units = key_column(table["k"], "k"), key_column(table["u"], "u")
    fixed = clip_fixed(np.asarray(table["v"], dtype=float), q)
    reference = kept_rows_by_sorting(keys, units, fixed, q)
    assert kept_rows(keys, units, fixed, q).tolist() == reference.tolist()
    pair = bounding._pair_hashes(keys, units)
    bits = max(unit_bits, max(units.hashes.size - 1, 1).bit_length())
    few = bounding._kept_by_one_sort(keys.codes, units.codes, pair, fixed, bits, q)
    assert few is None or few.tolist() == reference.tolist()


def test_pair_hashes_agreeing_in_their_top_bits_fall_back_to_the_reference() -> None:
    q = _query(1, 1)
    keys, units = key_column([0, 1, 2, 3], "k"), key_column([7, 7, 7, 7], "u")
    fixed = np.zeros(4, dtype=np.int64)
    pair = bounding._pair_hashes(keys, units)
    # 63 bits for the unit leave one bit of pair hash: four partitions of one unit collide
    assert bounding._kept_by_one_sort(keys.codes, units.codes, pair, fixed, 63, q) is None
    assert kept_rows(keys, units, fixed, q).sum() == 1


def test_integer_keys_in_a_narrow_or_wide_range_get_the_same_codes() -> None:
    """Coded by a table of the range (narrow) or by a sort (wide): sorted distinct keys."""
    rng = np.random.default_rng(4)
    for span in (5, 10**4, 2**62):
        ints = rng.integers(-span, span, 300)
        column = key_column(ints, "k")
        uniques = np.unique(ints)
        assert column.uniques == uniques.tolist()
        assert column.codes.tolist() == np.searchsorted(uniques, ints).tolist()
