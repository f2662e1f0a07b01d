"""Numeric checks of basic and optimal composition and of the composition algebra."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from scipy import stats

from dpledger.accountant import select
from dpledger.core.events import (
    ApproxDPEvent,
    ComposedEvent,
    GaussianEvent,
    NoOpEvent,
    PureDPEvent,
    SelfComposedEvent,
    flatten,
    pure_epsilon,
)

KOV_GOLDEN = {0.0: 0.5570521, 1.0: 0.3316785, 2.0: 0.1454664, 3.0: 0.04102841}


def kov(eps: float, eps0: float, k: int) -> float:
    mp.mp.dps = 30
    total = mp.fsum(
        mp.binomial(k, ell)
        * max(mp.mpf(0), mp.e ** ((k - ell) * eps0) - mp.e ** (eps + ell * eps0))
        for ell in range(k + 1)
    )
    return float(total / (1 + mp.e**eps0) ** k)


def composed_rr_hockey_stick(eps: float, eps0: float, k: int) -> float:
    """k randomized responses: #ones ~ Bin(k, p) under D' and Bin(k, 1-p) under D."""
    p = math.exp(eps0) / (1 + math.exp(eps0))
    j = np.arange(k + 1)
    return float(
        np.maximum(stats.binom.pmf(j, k, p) - math.exp(eps) * stats.binom.pmf(j, k, 1 - p), 0).sum()
    )


@pytest.mark.parametrize(("eps", "golden"), sorted(KOV_GOLDEN.items()))
def test_kov_golden_values_and_enumeration(eps: float, golden: float) -> None:
    assert kov(eps, 0.5, 10) == pytest.approx(golden, abs=5e-8)
    assert composed_rr_hockey_stick(eps, 0.5, 10) == pytest.approx(kov(eps, 0.5, 10), abs=1e-14)


@pytest.mark.parametrize(("eps", "golden"), sorted(KOV_GOLDEN.items()))
def test_accountant_delta_is_an_upper_bound(eps: float, golden: float) -> None:
    exact = kov(eps, 0.5, 10)
    bound = select.account(SelfComposedEvent(PureDPEvent(0.5), 10), epsilon=eps).bound
    assert exact - 1e-12 <= bound.delta <= exact + 1e-5


def test_heterogeneous_approx_dp_composition() -> None:
    ev = ComposedEvent([ApproxDPEvent(1.0, 0.1), ApproxDPEvent(2.0, 0.2)])
    bound = select.account(ev, epsilon=3.0).bound
    assert pytest.approx(0.28) == 1 - 0.9 * 0.8
    assert 0.28 - 1e-12 <= bound.delta <= 0.28 + 1e-4


def test_basic_composition_and_algebra() -> None:
    e = GaussianEvent(1.0)
    grouped = ComposedEvent(
        [SelfComposedEvent(e, 1), SelfComposedEvent(e, 2), SelfComposedEvent(e, 3)]
    )
    assert sum(m for _, m in flatten(grouped)) == 6
    assert flatten(SelfComposedEvent(SelfComposedEvent(e, 2), 3)) == [(e, 6)]
    assert flatten(ComposedEvent([NoOpEvent(), SelfComposedEvent(e, 0)])) == []
    a = select.account(grouped, delta=1e-5).bound.epsilon
    b = select.account(SelfComposedEvent(e, 6), delta=1e-5).bound.epsilon
    c = select.account(ComposedEvent([e] * 6), delta=1e-5).bound.epsilon
    assert a == pytest.approx(b, rel=1e-6) and b == pytest.approx(c, rel=1e-6)
    assert pure_epsilon(SelfComposedEvent(PureDPEvent(0.5), 10)) == pytest.approx(5.0)
    assert (
        kov(0.0, 0.5, 10) > 0 and kov(5.0, 0.5, 10) == 0.0
    )  # basic composition is exact at k*eps0
