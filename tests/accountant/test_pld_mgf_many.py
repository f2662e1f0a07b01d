"""Log-MGFs of many components on one grid summed together (:func:`pld_tilt._log_mgf_many`),
against term-by-term sums in extended precision."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.accountant.pld_discrete import DiscretePLD, discretise
from dpledger.accountant.pld_tilt import (
    MGF_BATCH_MIN,
    THETAS,
    _log_mgf_many,
    _log_mgf_split,
    log_mgf_total,
)
from dpledger.accountant.profiles import gaussian_profile
from dpledger.accountant.profiles_sampled import poisson_remove

from .mgf_reference import reference_log_mgf


def _assert_close(got: np.ndarray, ref: np.ndarray) -> None:
    assert np.array_equal(np.isfinite(got), np.isfinite(ref))
    finite = np.isfinite(ref)
    # sums of positive terms in blocks of at most a few thousand points: far below 1e-11
    np.testing.assert_allclose(got[finite], ref[finite], rtol=1e-11, atol=1e-11)


def _sampled(h: float) -> list[DiscretePLD]:
    rng = np.random.default_rng(7)
    pairs = zip(rng.uniform(0.5, 2.0, 10), rng.uniform(1e-4, 0.5, 10), strict=True)
    return [discretise(poisson_remove(gaussian_profile(s), q), h) for s, q in pairs]


def test_many_discretised_curves_at_every_kind_of_exponent() -> None:
    for h in (2e-3, 0.3):
        plds = _sampled(h)
        plds.insert(2, DiscretePLD(-3, np.zeros(7), 0.1, h))  # no finite mass
        plds.append(DiscretePLD(-50, np.array([1e-300, 0.0, 1.0]), 0.0, h))
        for lam in (THETAS[::3], 0.7 + THETAS[1::3], 0.7 - THETAS[2::3], np.array([0, 1e5, -1e5])):
            got = _log_mgf_many(plds, lam)
            _assert_close(got, np.array([reference_log_mgf(p, lam) for p in plds], dtype=float))


_masses = st.lists(st.one_of(st.just(0.0), st.floats(1e-300, 1.0)), min_size=1, max_size=300)


@settings(max_examples=40, deadline=None)
@given(
    parts=st.lists(st.tuples(st.integers(-400, 400), _masses), min_size=1, max_size=12),
    h=st.sampled_from([1e-5, 1e-3, 0.05, 1.0]),
    lam=st.lists(st.floats(-2e5, 2e5), min_size=1, max_size=20),
)
def test_random_pairs_of_any_length_offset_and_exponent(
    parts: list[tuple[int, list[float]]], h: float, lam: list[float]
) -> None:
    plds = [DiscretePLD(offset, np.array(m), 0.0, h) for offset, m in parts]
    tilts = np.array(lam)
    _assert_close(
        _log_mgf_many(plds, tilts),
        np.array([reference_log_mgf(p, tilts) for p in plds], dtype=float),
    )


def test_the_total_of_many_components_memoises_each_and_counts_repeats() -> None:
    plds = _sampled(2e-3)
    assert len(plds) >= MGF_BATCH_MIN
    ledger = [(p, k + 1) for k, p in enumerate(plds)] + [(plds[0], 3)]
    total = log_mgf_total(ledger, THETAS)
    expected = sum(k * _log_mgf_split(p, THETAS) for p, k in ledger)
    np.testing.assert_allclose(total, expected, rtol=1e-12, atol=1e-12)
    assert all(len(p.mgf_memo) == 1 for p in plds)
    np.testing.assert_array_equal(log_mgf_total(ledger, THETAS), total)  # read from memos


def test_components_on_different_grids_are_summed_one_by_one() -> None:
    plds = _sampled(2e-3)[:5] + _sampled(3e-3)[:5]
    total = log_mgf_total([(p, 1) for p in plds], THETAS)
    expected = sum(_log_mgf_split(p, THETAS) for p in plds)
    np.testing.assert_array_equal(total, expected)
