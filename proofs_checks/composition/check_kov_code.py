"""kov_delta_bracket against the multi-precision KOV sum and brute-force enumeration."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from scipy import stats

from dpledger.accountant.conversions import kov_delta_bracket

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
