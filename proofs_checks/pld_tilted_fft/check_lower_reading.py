"""Numeric checks of the lower reading of a composition of dominated pairs
(dpledger.accountant.pld_read._lower_extra and excess_mass, "Reading lower bounds" in proof.md).

A steep tilt on a window below the support's top makes the lower brackets sum far above one
(wrapped mass, untilted by e^{tilt W}); the lower reading charges none of it, and still stays
below the exact delta of the composition (direct convolution in 60-digit arithmetic) at every
threshold, while the chord reading keeps its charge. A composition of dominated pairs adds
the mass at +infinity its pairs keep (pld_read.infinity_lower): checked against the exact
delta of approximate DP, randomized response and a Gaussian composed, at 60 digits.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from dpledger.accountant import pld_read as R
from dpledger.accountant.pld_engine import (
    ComposedPLD,
    DiscretePLD,
    compose,
    delta_at,
    epsilon_for,
)

__all__: list[str] = []

COUNT = 12
H = 0.25
WINDOW = (-3.0, 80.0)


def _law(dominated: bool) -> DiscretePLD:
    """A probability law with most mass near 0 and a thin tail of large losses."""
    masses = np.zeros(40)
    masses[:3] = [0.5, 0.3, 0.2 - 2e-6]
    masses[-1] = 2e-6
    return DiscretePLD(-1, masses, 0.0, H, dominated)


def _exact_delta(pld: DiscretePLD, eps: float) -> float:
    """delta(eps) of COUNT copies of ``pld`` by 60-digit convolution."""
    with mp.workdps(60):
        step = [mp.mpf(float(v)) for v in pld.masses]
        poly = [mp.mpf(1)]
        for _ in range(COUNT):
            out = [mp.mpf(0)] * (len(poly) + len(step) - 1)
            for i, a in enumerate(poly):
                if a:
                    for j, b in enumerate(step):
                        out[i + j] += a * b
            poly = out
        total = mp.mpf(0)
        for idx, value in enumerate(poly):
            loss = (COUNT * pld.offset + idx) * mp.mpf(H)
            if loss > eps:
                total += value * (1 - mp.exp(mp.mpf(eps) - loss))
        return float(total)


@pytest.fixture(scope="module")
def composed() -> tuple[DiscretePLD, ComposedPLD]:
    law = _law(dominated=True)
    # the window stops below the top loss COUNT * 38 h = 114: sums of tail steps wrap around
    # onto losses below 30, untilted by up to e^{1.5 * 85}
    return law, compose([(law, COUNT)], WINDOW, tilt=1.5)


def test_the_brackets_sum_far_above_one(composed: tuple[DiscretePLD, ComposedPLD]) -> None:
    _, comp = composed
    assert float(comp.lower.sum()) > 5.0
    assert R.excess_mass(comp) == 0.0


@pytest.mark.parametrize("eps", [0.5, 9.0, 20.0, 30.0, 35.0, 45.0, 60.0])
def test_dominated_reading_is_below_the_exact_delta(
    composed: tuple[DiscretePLD, ComposedPLD], eps: float
) -> None:
    law, comp = composed
    exact = _exact_delta(law, eps)
    read = delta_at(comp, eps, upper=False)
    assert read <= exact * (1 + 1e-9)
    if eps >= 30.0:  # above the wrapped mass: read as it is, with nothing charged for it
        assert read >= exact * (1 - 1e-3)


def test_dominated_epsilon_is_below_the_exact_root(
    composed: tuple[DiscretePLD, ComposedPLD],
) -> None:
    law, comp = composed
    delta = 1e-20
    lower = epsilon_for(comp, delta, upper=False)
    assert _exact_delta(law, lower) >= delta
    assert lower > 30.0


def test_chord_reading_keeps_its_charge() -> None:
    law = _law(dominated=False)
    comp = compose([(law, COUNT)], WINDOW, tilt=1.5)
    excess = R.excess_mass(comp)
    assert excess == pytest.approx(float(comp.lower.sum()) - 1.0)
    # the charge swamps every reading: the lower bound is 0
    assert math.isfinite(excess)
    assert delta_at(comp, 35.0, upper=False) == 0.0


def test_untilted_wrap_is_at_most_the_mass_above_the_window() -> None:
    """Untilted, the wrapped mass landing anywhere is at most the mass at or above the window's
    top (``upper_tail``): the lower reading stays below the exact delta, and is close to it."""
    law = _law(dominated=True)
    comp = compose([(law, COUNT)], (-3.6, 30.0), tilt=0.0)
    for eps in (0.5, 2.0, 9.0, 20.0):
        exact = _exact_delta(law, eps)
        wrapped = R.wrap_above(comp, eps)
        assert wrapped <= comp.upper_tail
        read = delta_at(comp, eps, upper=False)
        assert read <= exact * (1 + 1e-9)
        # short of exact by the mass above the window and the round-off on the masses read
        slack = comp.upper_tail + comp.lower_tail + comp.upper.size * comp.tilted_error
        assert read >= exact - slack


# -- the mass at +infinity of dominated pairs ---------------------------------------------------
#: approximate DP (0.3, 1e-4) five times, binary randomized response at 0.5 three times, and a
#: Gaussian at mu = 0.5: the first block carries P-mass 1 - (1 - 1e-4)^5 at +infinity
APPROX, APPROX_M, RR, RR_M, MU = (0.3, 1e-4), 5, 0.5, 3, 0.5
INF_H = 2e-3


def _lattice(eps: float, m: int) -> list[tuple[mp.mpf, mp.mpf]]:
    """(loss, P-mass) of ``m`` binary randomized responses at ``eps`` composed, 60 digits."""
    e = mp.mpf(eps)
    a = mp.exp(e) / (1 + mp.exp(e))
    return [((2 * k - m) * e, mp.binomial(m, k) * a**k * (1 - a) ** (m - k)) for k in range(m + 1)]


def _gauss_delta(eps: mp.mpf) -> mp.mpf:
    mu = mp.mpf(MU)
    return mp.ncdf(-eps / mu + mu / 2) - mp.exp(eps) * mp.ncdf(-eps / mu - mu / 2)


def _exact_mixed(eps: float) -> float:
    """delta(eps) of the three components at 60 digits: the mass at +infinity D plus the
    finite laws' composition, sum over lattice atoms of p (Gaussian delta at eps - loss)."""
    with mp.workdps(60):
        keep = (1 - mp.mpf(APPROX[1])) ** APPROX_M
        body = mp.mpf(0)
        for l1, p1 in _lattice(APPROX[0], APPROX_M):
            for l2, p2 in _lattice(RR, RR_M):
                body += p1 * p2 * _gauss_delta(mp.mpf(eps) - l1 - l2)
        return float(1 - keep + keep * body)


@pytest.fixture(scope="module")
def mixed() -> ComposedPLD:
    from dpledger.accountant.epsilon_cells import cell_profiles
    from dpledger.accountant.pld_dominated import InfinitySplit, discretise_lower
    from dpledger.accountant.profiles_noise import gaussian_profile
    from dpledger.core.events import ApproxDPEvent, RandomizedResponseEvent

    approx = cell_profiles(ApproxDPEvent(*APPROX), APPROX_M)
    rr = cell_profiles(RandomizedResponseEvent(RR), RR_M)
    assert approx is not None and rr is not None
    assert isinstance(approx.lower_remove, InfinitySplit)
    pairs = []
    for profile in (approx.lower_remove, rr.lower_remove, gaussian_profile(MU)):
        pair = discretise_lower(profile, INF_H)
        assert pair is not None and pair.dominated
        pairs.append((pair, 1))
    return compose(pairs, (-6.0, 9.0), tilt=0.0)


def test_dominated_pairs_carry_their_mass_at_infinity(mixed: ComposedPLD) -> None:
    with mp.workdps(60):
        d = 1 - (1 - mp.mpf(APPROX[1])) ** APPROX_M
    assert mixed.dominated
    assert d * (1 - 1e-12) <= mixed.inf_mass <= d * (1 + 1e-12)
    assert d * (1 - 1e-12) <= R.infinity_lower(mixed) < d


@pytest.mark.parametrize("eps", [0.0, 0.5, 1.5, 3.0, 4.5, 6.0])
def test_reading_with_the_mass_at_infinity_is_below_the_exact_delta(
    mixed: ComposedPLD, eps: float
) -> None:
    """The lower reading adds the certified mass at +infinity to the finite masses' reading
    (which already carry the factor of no infinite loss): below the exact delta, and close to
    it (within the grid's second-order loss and the window's tails)."""
    exact = _exact_mixed(eps)
    read = delta_at(mixed, eps, upper=False)
    assert read <= exact
    assert read >= exact * (1 - 1e-2)
    # where the finite part has all but vanished, delta is the mass at +infinity itself
    if eps >= 4.5:
        assert read >= R.infinity_lower(mixed)


@pytest.mark.parametrize("delta", [1e-2, 1e-3, 6e-4])
def test_epsilon_with_the_mass_at_infinity_is_below_the_exact_root(
    mixed: ComposedPLD, delta: float
) -> None:
    lower = epsilon_for(mixed, delta, upper=False)
    assert _exact_mixed(lower) >= delta
    upper = epsilon_for(mixed, delta, upper=True)
    assert lower <= upper


def test_chord_reading_leaves_the_mass_at_infinity_out() -> None:
    """A chord's mass at +infinity holds its raise and deficit: no lower reading adds it."""
    law = DiscretePLD(0, np.array([0.6, 0.3]), 0.1, H)
    comp = compose([(law, 3)], (-1.0, 4.0), tilt=0.0)
    assert comp.inf_mass > 0.27 and R.infinity_lower(comp) == 0.0
