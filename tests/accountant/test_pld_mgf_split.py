"""The split log-MGF of Chernoff bounds on a composition's own masses, and compositions made once
per grid (passes whose grids coincide share them)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpledger.accountant.pld_compositions import Compositions
from dpledger.accountant.pld_discrete import DiscretePLD, discretise
from dpledger.accountant.pld_fft import compose
from dpledger.accountant.pld_tilt import (
    MGF_BLOCK_SPAN,
    MGF_MIN_BLOCK,
    THETAS,
    _chernoff_upper,
    _log_mgf_split,
    log_mgf_bound_total,
    log_mgf_total,
)
from dpledger.accountant.profiles import gaussian_profile
from dpledger.accountant.profiles_sampled import poisson_remove

from .mgf_reference import reference_log_mgf


def _plds() -> list[DiscretePLD]:
    sampled = poisson_remove(gaussian_profile(1.0), 1e-3)
    return [
        discretise(gaussian_profile(1.0), 1e-3),
        discretise(gaussian_profile(0.5), 4e-3),
        discretise(sampled, 2e-4),
        discretise(sampled, 4e-3),
    ]


@pytest.mark.parametrize("which", range(4))
def test_split_log_mgf_is_within_its_error_bound_at_every_exponent(which: int) -> None:
    pld = _plds()[which]
    n = pld.masses.size
    bound = (math.isqrt(n) + 1 + 16) * 2.0**-53  # relative error of a sum of positive terms
    for lam in (THETAS[::3], -THETAS[1::3], 3.0 + THETAS[2::3], np.array([0.5, 1.0, 2.0]) * 37.0):
        got = _log_mgf_split(pld, lam).astype(np.longdouble)
        ref = reference_log_mgf(pld, lam)
        # |log(1 + r)| <= 2 |r| for |r| small, plus the rounding of the log itself
        assert np.all(np.abs(got - ref) <= 2 * bound + 4 * 2.0**-53 * np.abs(ref))


def test_split_log_mgf_sums_gentle_exponents_in_blocks_beside_steep_ones() -> None:
    # a fine grid where the steepest tilts allow no block of MGF_MIN_BLOCK points: the others
    # are still summed in blocks, and every value agrees with the term-by-term sum
    pld = _plds()[2]
    steep = MGF_BLOCK_SPAN / (MGF_MIN_BLOCK * pld.h)
    lam = np.array([1.0, 10.0, 100.0, 2 * steep, 10 * steep])
    got = _log_mgf_split(pld, lam)
    np.testing.assert_allclose(
        got, reference_log_mgf(pld, lam).astype(float), rtol=1e-12, atol=1e-12
    )


def test_the_values_that_choose_tilts_and_windows_are_the_split_sums() -> None:
    # log_mgf_total decides grids, and through them every bound to the last bit: its memoised
    # values are the split sums (blocks wherever the exponents allow them), deterministically
    for pld in _plds():
        memoised = log_mgf_total([(pld, 1)], THETAS)
        np.testing.assert_array_equal(memoised, _log_mgf_split(pld, THETAS))
        np.testing.assert_array_equal(log_mgf_total([(pld, 1)], THETAS), memoised)


def test_bound_total_is_the_count_weighted_sum_and_empty_masses_give_minus_infinity() -> None:
    a, b = _plds()[2], _plds()[3]
    lam = np.array([0.5, 5.0, 50.0])
    total = log_mgf_bound_total([(a, 3), (b, 2)], lam)
    np.testing.assert_allclose(total, 3 * _log_mgf_split(a, lam) + 2 * _log_mgf_split(b, lam))
    empty = DiscretePLD(0, np.zeros(8), 1.0, 0.1)
    assert np.all(np.isneginf(log_mgf_bound_total([(empty, 1)], lam)))


def test_chernoff_tail_of_the_split_sum_bounds_the_exact_tail() -> None:
    # the tail above the window's top of 40 sampled steps, exactly by repeated convolution,
    # is at most the Chernoff bound that compose charges
    pld = _plds()[3]
    masses = pld.masses
    exact = np.array([1.0])
    for _ in range(40):
        exact = np.convolve(exact, masses)
    losses = (40 * pld.offset + np.arange(exact.size)) * pld.h
    for top in (0.5, 1.0, 2.0, 4.0):
        tail = float(exact[losses >= top].sum())
        bound = _chernoff_upper([(pld, 40)], np.array([1.0, 4.0, 16.0, 64.0, 256.0]), top)
        assert tail <= bound * (1 + 1e-12)


def test_a_composition_is_made_once_per_grid_and_window() -> None:
    from dpledger.accountant.pld import PLDAccountant
    from dpledger.core.events import GaussianEvent, PoissonSampledEvent, SelfComposedEvent

    acc = PLDAccountant()
    acc.compose(SelfComposedEvent(PoissonSampledEvent(0.01, GaussianEvent(1.0)), 50))
    prep = acc._prepared()
    assert prep is not None
    cache = Compositions(1 << 12)
    h, win = cache.window(prep, "remove", 0.0, 1e-5, 0)
    first = cache._made_at(prep, "remove", 0.0, h, win, "upper")
    assert cache._made_at(prep, "remove", 0.0, h, win, "upper") is first
    # another grid, another kind or another preparation is composed anew
    assert cache._made_at(prep, "remove", 0.0, 2 * h, win, "upper") is not first
    assert cache._made_at(prep, "remove", 0.0, h, win, "chord") is not first
    assert cache.compose_at(prep, "remove", 0.0, h, win, "upper") is not first
    cache.clear()
    again = cache._made_at(prep, "remove", 0.0, h, win, "upper")
    assert again is not first and again is not None and first is not None
    np.testing.assert_array_equal(again.upper, first.upper)
    # the same composition as compose makes of the chords itself
    chords = [(discretise(d.remove, h), k) for d, k in prep.comps]
    direct = compose(chords, win, 0.0, prep.coarse["remove"])
    np.testing.assert_array_equal(direct.upper, first.upper)
    assert direct.upper_tail == first.upper_tail


def test_passes_whose_grids_coincide_share_their_compositions() -> None:
    # many distinct components: the FFT budget shared among them holds every pass at the same
    # grid, so the screen and the finer passes read one composition per direction and kind
    from dpledger.accountant.pld import PLDAccountant
    from dpledger.core.events import ComposedEvent, GaussianEvent, PoissonSampledEvent

    acc = PLDAccountant()
    acc.compose(
        ComposedEvent(
            [PoissonSampledEvent(0.01 * (1 + i / 20), GaussianEvent(1.0)) for i in range(20)]
        )
    )
    acc.get_epsilon(1e-5)
    made = acc._cache.made
    keys = [(p.cut, *key[1:]) for key, (p, _) in made.items()]
    assert len(keys) == len(set(keys))
    # every composition made by a pass's query is kept once, in the states it reads
    composed = [v for k, v in acc._states.items() if v is not None and k[3] in ("upper", "chord")]
    assert {id(v) for v in composed} <= {id(v) for _, v in made.values()}
