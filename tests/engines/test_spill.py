"""The Dask engine's fast paths give what the plain ones give: integer unit ids coded by their
offset (no sort) keep the rows sorted codes keep, spill blocks written as records or pickled
read back the same rows per bucket, and one reset Philox generator draws what a fresh one per
cell draws (the counter a hash of the step and the cell's name)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.runtime.engines.bounding import clip_fixed, kept_rows, kept_rows_by_sorting
from dpledger.runtime.engines.columns import (
    OFFSET_SPAN,
    KeyColumn,
    UnitIds,
    key_column,
    unit_column,
    unit_hashes,
)
from dpledger.runtime.engines.noise import cell_noise
from dpledger.runtime.engines.query import AggregationQuery
from dpledger.runtime.engines.spill import read_bucket, spill_file, write_blocks


def _groups(codes: np.ndarray) -> list[frozenset[int]]:
    """The rows grouped by code (which rows share a unit), whatever the codes' numbers."""
    out: dict[int, set[int]] = {}
    for row, code in enumerate(codes.tolist()):
        out.setdefault(code, set()).add(row)
    return sorted((frozenset(g) for g in out.values()), key=min)


@pytest.mark.parametrize(
    "ids",
    [
        np.array([5, -3, 5, 7, -3, 2**30]),
        np.array([5.0, -3.0, 5.0]),
        np.array([1, 2, 1], dtype=object),
        np.array([True, False, True]),
    ],
)
def test_offset_codes_group_and_hash_the_rows_as_sorted_codes(ids: np.ndarray) -> None:
    offsets, sorted_codes = unit_column(ids, "u"), key_column(ids, "u")
    assert isinstance(offsets, UnitIds)
    assert offsets.row_hashes().tolist() == sorted_codes.row_hashes().tolist()
    assert unit_hashes(ids, "u").tolist() == sorted_codes.row_hashes().tolist()
    assert _groups(offsets.codes) == _groups(sorted_codes.codes)
    assert int(offsets.codes.max()) < 2**offsets.code_bits


@pytest.mark.parametrize(
    "ids", [np.array([0, OFFSET_SPAN]), np.array(["a", "b", "a"], dtype=object), np.array([])]
)
def test_wide_ranges_text_and_empty_columns_keep_sorted_codes(ids: np.ndarray) -> None:
    column = unit_column(ids, "u")
    assert isinstance(column, KeyColumn)
    assert column.codes.tolist() == key_column(ids, "u").codes.tolist()
    assert unit_hashes(ids, "u").tolist() == column.row_hashes().tolist()


wide_units = st.integers(1, 80).flatmap(
    lambda n: st.fixed_dictionaries(
        {
            "u": st.lists(st.integers(-(2**20), 2**20), min_size=n, max_size=n),
            "k": st.lists(st.integers(0, 6), min_size=n, max_size=n),
            "v": st.lists(st.sampled_from([0.0, 0.25, 1.0]), min_size=n, max_size=n),
        }
    )
)


@settings(max_examples=60, deadline=None)
@given(wide_units, st.integers(1, 3), st.integers(1, 3))
def test_offset_codes_keep_the_rows_sorted_codes_keep(
    table: dict[str, list[int]], l0: int, linf: int
) -> None:
    q = AggregationQuery("k", "v", "u", max_partitions=l0, max_rows=linf, lower=0.0, upper=1.0)
    ids = np.asarray(table["u"])
    keys, fixed = key_column(table["k"], "k"), clip_fixed(np.asarray(table["v"], float), q)
    offsets, sorted_codes = unit_column(ids, "u"), key_column(ids, "u")
    assert isinstance(offsets, UnitIds)
    ours = kept_rows(keys, offsets, fixed, q)
    assert ours.tolist() == kept_rows(keys, sorted_codes, fixed, q).tolist()
    assert ours.tolist() == kept_rows_by_sorting(keys, offsets, fixed, q).tolist()


def _slice(seed: int, n: int, text: bool) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    units = rng.integers(0, 50, n)
    return {
        "k": rng.integers(0, 4, n),
        "u": np.asarray([f"u{x}" for x in units], dtype=object) if text else units,
        "v": rng.uniform(0, 1, n),
    }


@pytest.mark.parametrize("text", [False, True])
def test_spilled_blocks_read_back_every_row_of_each_bucket(tmp_path: Path, text: bool) -> None:
    """Blocks of numbers (records, read straight into one array) in two spill files, and with
    a block of text (pickled) among them, and an empty slice: each bucket reads back exactly
    the rows whose unit hashes to it."""
    tasks = [[_slice(0, 40, False), _slice(1, 0, False)], [_slice(2, 30, text)]]
    buckets = 5
    spilled = [
        write_blocks(iter(slices), spill_file(str(tmp_path), i), "u", buckets)
        for i, slices in enumerate(tasks)
    ]
    assert [b.dtype is None for blocks in spilled for b in blocks] == [False, False, text]
    expected = []
    for columns in (s for slices in tasks for s in slices):
        hashes = unit_column(columns["u"], "u").row_hashes() if columns["u"].size else []
        rows = zip(hashes, *columns.values(), strict=True)
        expected += [(int(h % np.uint64(buckets)), str(u), int(k), float(v)) for h, k, u, v in rows]
    seen = []
    for bucket in range(buckets):
        rows = read_bucket(str(tmp_path), bucket, ("k", "u", "v"), spilled)
        seen += [(bucket, str(u), int(k), float(v)) for k, u, v in zip(*rows.values(), strict=True)]
    assert sorted(seen) == sorted(expected)


@pytest.mark.parametrize("mechanism", ["gaussian", "laplace", "uniform"])
def test_one_reset_generator_draws_what_a_fresh_generator_per_cell_draws(mechanism: str) -> None:
    key = np.array([2**64 - 1, 12345], dtype=np.uint64)
    names = [f"i:{i}" for i in range(300)] + ["s:", "s:ü", "b:3:i:7"]
    fresh = []
    for name in names:
        digest = hashlib.blake2b(f"aggregate.count\x00{name}".encode(), digest_size=24).digest()
        counter = np.frombuffer(digest + bytes(8), dtype="<u8").astype(np.uint64)
        bits = np.random.Philox(key=key, counter=counter)
        gen = np.random.Generator(bits)
        draw = {"gaussian": gen.standard_normal, "laplace": gen.laplace}.get(mechanism, gen.random)
        fresh.append(draw())
    assert cell_noise(key, "aggregate.count", names, mechanism).tolist() == fresh
