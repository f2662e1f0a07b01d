"""Split-point distribution and (context, continuation) examples."""

from __future__ import annotations

import numpy as np
import pytest

from dpledger.core.errors import InvalidParameterError
from dpledger.plugins.path.model import Codec
from dpledger.plugins.path.schema import Column, TableSchema
from dpledger.plugins.path.serialize import serialize_table
from dpledger.plugins.path.windowing import IGNORE, SplitSampler, collate, make_example

SCHEMA = TableSchema((Column("id", "static"), Column("x", "numeric")))
ROWS = [("u", 1.0), ("u", 2.0), ("u", 3.0), ("u", 4.0)]
CODEC = Codec(None, eos_id=256, pad_id=257, byte_level=True)


def test_split_weights_closed_form() -> None:
    # lengths uniform on 1..4: P(T > k) = 1, 3/4, 1/2, 1/4 for k = 0..3
    sampler = SplitSampler(np.full(4, 0.25), p_start=0.1)
    np.testing.assert_allclose(
        sampler.weights(3), [0.1 + 0.9 / 2.25, 0.9 * 0.75 / 2.25, 0.9 * 0.5 / 2.25]
    )
    np.testing.assert_allclose(sampler.weights(3), [0.5, 0.3, 0.2])
    np.testing.assert_allclose(sampler.weights(1), [1.0])
    # a table longer than every public length only splits where the pool has mass
    np.testing.assert_allclose(
        sampler.weights(6), [0.1 + 0.9 * 0.4, 0.9 * 0.3, 0.9 * 0.2, 0.9 * 0.1, 0.0, 0.0]
    )
    assert SplitSampler(np.full(4, 0.25), p_start=1.0).weights(4).tolist() == [1, 0, 0, 0]


def test_split_sampling_frequencies() -> None:
    sampler = SplitSampler(np.full(4, 0.25), p_start=0.1)
    rng = np.random.default_rng(0)
    draws = np.array([sampler.sample(3, rng) for _ in range(20000)])
    freq = np.bincount(draws, minlength=3) / draws.size
    # binomial standard error <= 0.0036; 5 sigma
    np.testing.assert_allclose(freq, [0.5, 0.3, 0.2], atol=0.018)


def test_bad_sampler_inputs() -> None:
    with pytest.raises(InvalidParameterError, match="length_pmf"):
        SplitSampler(np.array([0.5, 0.4]))
    with pytest.raises(InvalidParameterError, match="length_pmf"):
        SplitSampler(np.array([1.5, -0.5]))
    with pytest.raises(InvalidParameterError, match="p_start"):
        SplitSampler(np.full(2, 0.5), p_start=1.5)
    with pytest.raises(InvalidParameterError, match="length"):
        SplitSampler(np.full(2, 0.5)).weights(0)


def test_example_is_context_then_continuation() -> None:
    ex = make_example(SCHEMA, ROWS, 2, CODEC, max_tokens=10_000, precision=None)
    full = serialize_table(SCHEMA, ROWS)
    assert bytes(ex.input_ids[:-1]).decode() == full
    assert ex.input_ids[-1] == CODEC.eos_id
    n_ctx = len(full.split("[Row 3]")[0].encode())
    assert ex.labels[:n_ctx] == (IGNORE,) * n_ctx
    assert ex.labels[n_ctx:] == ex.input_ids[n_ctx:]
    assert (
        bytes(ex.labels[n_ctx:-1]).decode() == "[Row 3]: id is u, x is 3.0\n"
        "[Row 4]: id is u, x is 4.0\n"
    )
    start = make_example(SCHEMA, ROWS, 0, CODEC, max_tokens=10_000, precision=None)
    assert start.labels.count(IGNORE) == len(b"Columns: id, x\n")


def test_truncation_drops_oldest_context_rows_then_cuts_the_target() -> None:
    head = len(b"Columns: id, x\n")
    row = len(b"[Row 1]: id is u, x is 1.0\n")
    ex = make_example(SCHEMA, ROWS, 3, CODEC, max_tokens=head + 2 * row, precision=None)
    text = bytes(ex.input_ids).decode()
    assert text == "Columns: id, x\n[Row 3]: id is u, x is 3.0\n[Row 4]: id is u, x is 4.0\n"
    assert ex.labels[-1] == ord("\n")  # end-of-table token cut off
    short = make_example(SCHEMA, ROWS, 0, CODEC, max_tokens=head + 5, precision=None)
    assert len(short.input_ids) == head + 5
    with pytest.raises(InvalidParameterError, match="max_tokens"):
        make_example(SCHEMA, ROWS, 0, CODEC, max_tokens=head)
    with pytest.raises(InvalidParameterError, match="split"):
        make_example(SCHEMA, ROWS, 4, CODEC, max_tokens=1000)


def test_collate_pads_right() -> None:
    a = make_example(SCHEMA, ROWS[:1], 0, CODEC, max_tokens=1000)
    b = make_example(SCHEMA, ROWS, 1, CODEC, max_tokens=1000)
    batch = collate([a, b], CODEC.pad_id)
    assert batch["input_ids"].shape == (2, len(b.input_ids))
    assert batch["attention_mask"][0].sum().item() == len(a.input_ids)
    assert batch["input_ids"][0, -1].item() == CODEC.pad_id
    assert batch["labels"][0, -1].item() == IGNORE
    assert batch["position_ids"][1].tolist() == list(range(len(b.input_ids)))
