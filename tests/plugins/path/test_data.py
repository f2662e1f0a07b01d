from __future__ import annotations

import numpy as np
import pytest

from dpledger.core.errors import InvalidParameterError
from dpledger.plugins.path.data import default_hmm_params, hmm_dataset, hmm_sample


def test_hmm_statistics_match_parameters() -> None:
    p = default_hmm_params()
    s = hmm_sample(1500, seed=3, params=p)
    tables, paths = s.tables, s.states
    n = len(tables)
    # start distribution: standard error <= sqrt(.25/1500) ~ 0.013
    first = np.bincount([int(x[0]) for x in paths], minlength=p.n_states) / n
    np.testing.assert_allclose(first, p.start, atol=0.05)
    # transition frequencies
    counts = np.zeros((p.n_states, p.n_states))
    for x in paths:
        np.add.at(counts, (x[:-1], x[1:]), 1.0)
    np.testing.assert_allclose(counts / counts.sum(1, keepdims=True), p.transition, atol=0.02)
    # emissions given the state
    allx = np.concatenate([tables.numeric_array(i) for i in range(n)])
    allc = np.concatenate([tables.categorical_codes(i)[:, 0] for i in range(n)])
    alls = np.concatenate(paths)
    for k in range(p.n_states):
        np.testing.assert_allclose(allx[alls == k].mean(0), p.means[k], atol=0.06)
        np.testing.assert_allclose(allx[alls == k].std(0), p.stds[k], rtol=0.06)
        freq = np.bincount(allc[alls == k], minlength=len(p.categories)) / (alls == k).sum()
        np.testing.assert_allclose(freq, p.cat_probs[k], atol=0.03)
    # lengths uniform on 6..20
    assert tables.lengths.min() >= 6 and tables.lengths.max() <= 20
    hist = np.bincount(tables.lengths - 6, minlength=15) / n
    np.testing.assert_allclose(hist, p.length_probs, atol=0.03)


def test_schema_and_reproducibility() -> None:
    a, p = hmm_dataset(20, seed=1)
    b, _ = hmm_dataset(20, seed=1)
    c, _ = hmm_dataset(20, seed=2)
    assert a == b and a != c
    sch = a.schema
    assert sch.names[0] == "subject_id" and sch.names[-1] == "Zolronide"
    assert len(sch.numeric) == 5 and len(sch.categorical) == 1
    for j, (col, (lo, hi)) in enumerate(zip(sch.numeric, p.bounds(), strict=True)):
        assert col.lower == lo and col.upper == hi
        assert lo <= np.min(p.means[:, j] - 4 * p.stds[:, j]) < lo + 1
        assert hi - 1 < np.max(p.means[:, j] + 4 * p.stds[:, j]) <= hi
    assert all(u.rows[0][0] == u.user_id for u in a)


def test_bad_parameters() -> None:
    with pytest.raises(InvalidParameterError, match="n_users"):
        hmm_dataset(0, seed=1)
    p = default_hmm_params()
    bad = np.array(p.transition)
    bad[0, 0] += 0.5
    with pytest.raises(InvalidParameterError, match="transition"):
        type(p)(p.start, bad, p.means, p.stds, p.cat_probs, p.lengths, p.length_probs)
