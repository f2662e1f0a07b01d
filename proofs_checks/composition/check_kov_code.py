"""kov_delta_bracket against the multi-precision KOV sum and brute-force enumeration."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest
from scipy import stats

from dpledger.accountant.conversions import KOVProfile, fsum_nonnegative, kov_delta_bracket

mp.mp.dps = 50
KOV_GOLDEN = {0.0: 0.5570521, 1.0: 0.3316785, 2.0: 0.1454664, 3.0: 0.04102841}


def kov_exact(eps: float, eps0: float, k: int) -> mp.mpf:
    e, e0 = mp.mpf(eps), mp.mpf(eps0)
    total = mp.fsum(
        mp.binomial(k, ell) * max(mp.mpf(0), mp.e ** ((k - ell) * e0) - mp.e ** (e + ell * e0))
        for ell in range(k + 1)
    )
    return total / (1 + mp.e**e0) ** k


@pytest.mark.parametrize(("eps", "golden"), sorted(KOV_GOLDEN.items()))
def test_golden_values(eps: float, golden: float) -> None:
    lo, hi = kov_delta_bracket(eps, 0.5, 10)
    assert lo <= kov_exact(eps, 0.5, 10) <= hi
    assert hi == pytest.approx(golden, abs=5e-8)


@pytest.mark.parametrize("k", [1, 2, 7, 50, 400])
@pytest.mark.parametrize("eps0", [0.01, 0.5, 2.0])
def test_bracket_contains_exact_and_is_tight(k: int, eps0: float) -> None:
    for frac in (-0.5, 0.0, 0.1, 0.5, 0.9, 1.0):
        eps = frac * k * eps0
        lo, hi = kov_delta_bracket(eps, eps0, k)
        truth = min(kov_exact(eps, eps0, k), mp.mpf(1))  # 1 - e^{-400} is 1 at 50 digits
        assert lo <= truth <= hi, (eps, eps0, k)
        if truth > 1e-250:
            assert hi <= truth * (1 + 1e-8) + 1e-14


def test_boundary_eps_equals_k_eps0_is_exactly_zero_in_truth() -> None:
    """At eps = k eps0 every term vanishes; rounding must keep the upper end >= 0 and tiny."""
    lo, hi = kov_delta_bracket(10 * 0.5, 0.5, 10)
    assert kov_exact(5.0, 0.5, 10) == 0
    assert lo == 0.0 and 0.0 <= hi < 1e-12


def test_equals_enumeration_of_composed_randomized_response() -> None:
    k, eps0 = 12, 0.7
    p = math.exp(eps0) / (1 + math.exp(eps0))
    j = np.arange(k + 1)
    for eps in (0.0, 1.0, 3.0):
        brute = float(
            np.maximum(
                stats.binom.pmf(j, k, p) - math.exp(eps) * stats.binom.pmf(j, k, 1 - p), 0
            ).sum()
        )
        lo, hi = kov_delta_bracket(eps, eps0, k)
        assert lo - 1e-14 <= brute <= hi + 1e-14


def test_degenerate_cases() -> None:
    for args in ((0.3, 1.0, 0), (0.3, 0.0, 5), (-0.3, 0.0, 5)):
        lo, hi = kov_delta_bracket(*args)
        exact = max(0.0, -math.expm1(args[0]))
        assert lo <= exact <= hi


@pytest.mark.parametrize(("eps0", "k"), [(0.01, 7), (0.3, 400), (0.002, 2000)])
def test_profile_brackets_the_exact_sum_and_equals_fresh_brackets(eps0: float, k: int) -> None:
    """One KOVProfile evaluated at many epsilons: each bracket holds the 50-digit sum and is the
    same pair of floats as a fresh kov_delta_bracket."""
    profile = KOVProfile(eps0, k)
    for frac in (-0.2, 0.0, 0.05, 0.3, 0.7, 1.0):
        eps = frac * k * eps0
        lo, hi = profile.bracket(eps)
        assert (lo, hi) == kov_delta_bracket(eps, eps0, k)
        assert (profile.lower(eps), profile.upper(eps)) == (lo, hi)
        truth = min(kov_exact(eps, eps0, k), mp.mpf(1))
        assert lo <= truth <= hi, (eps, eps0, k)


def test_fsum_nonnegative_is_the_exact_sum_correctly_rounded() -> None:
    """fsum_nonnegative against the exact rational sum rounded to nearest (Fraction), on random
    arrays spanning the float range and on totals at a rounding tie that tiny terms break."""
    rng = random.Random(7)
    pool = [1.0, 2.0**-53, 2.0**-52, 3 * 2.0**-54, 2.0**-111, 1e-300, 5e-324, 0.0]
    arrays = [
        np.array([rng.choice([*pool, rng.random(), rng.random() * 2.0**-108]) for _ in range(n)])
        for n in (1, 65, 300, 2000)
        for _ in range(40)
    ]
    arrays.append(np.array([1.0, 2.0**-53] + [2.0**-200] * 100))  # the tie, broken upwards
    arrays.append(np.array([1.0, 2.0**-53] + [0.0] * 100))  # the tie, kept at 1 (half even)
    for values in arrays:
        exact = sum((Fraction(v) for v in values.tolist()), Fraction(0))
        assert fsum_nonnegative(values) == float(exact) == math.fsum(values.tolist())
