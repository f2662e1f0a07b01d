"""Numeric checks of the approximate-DP pair's curve and of its split at +infinity (60 digits)."""

from __future__ import annotations

from collections.abc import Iterator

import mpmath as mp
import numpy as np
import pytest

from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.pld_dominated import discretise_lower
from dpledger.accountant.profiles_base import InfinitySplit
from dpledger.accountant.profiles_noise import approx_dp_profile
from dpledger.core.events import ApproxDPEvent, GaussianEvent

CASES = [(0.5, 1e-6), (0.01, 1e-9), (1.0, 1e-3), (2.0, 0.3)]


@pytest.fixture(autouse=True)
def _digits() -> Iterator[None]:
    with mp.workdps(60):
        yield


def kov_curve(eps0: float, delta0: float, eps: float) -> mp.mpf:
    """sum_i max(0, p_i - e^eps q_i) over the four outcomes of the Kairouz-Oh-Viswanath pair."""
    e0, d0 = mp.mpf(eps0), mp.mpf(delta0)
    a = mp.exp(e0) / (1 + mp.exp(e0))
    p = [d0, (1 - d0) * a, (1 - d0) * (1 - a), mp.mpf(0)]
    q = [mp.mpf(0), (1 - d0) * (1 - a), (1 - d0) * a, d0]
    x = mp.exp(mp.mpf(eps))
    return mp.fsum(max(mp.mpf(0), pi - x * qi) for pi, qi in zip(p, q, strict=True))


def _points(eps0: float) -> list[float]:
    return [t * eps0 for t in (-2.0, -1.0, -0.5, 0.0, 0.3, 0.99, 1.0, 1.5, 3.0)]


@pytest.mark.parametrize(("eps0", "delta0"), CASES)
def test_curve_and_its_parts_match_the_pair(eps0: float, delta0: float) -> None:
    prof = approx_dp_profile(eps0, delta0)
    assert isinstance(prof, InfinitySplit)
    assert prof.inf_lower == delta0
    for x in _points(eps0):
        exact = kov_curve(eps0, delta0, x)
        whole = float(prof.delta(np.array([x]))[0])
        part = float(prof.finite.delta(np.array([x]))[0])
        assert abs(whole - exact) <= 1e-14 * exact + 1e-50
        # the split is exact: D + (1 - D) finite, finite the curve of randomized response
        assert abs(part - kov_curve(eps0, 0.0, x)) <= 1e-14 * part + 1e-50
        split = mp.mpf(delta0) + (1 - mp.mpf(delta0)) * kov_curve(eps0, 0.0, x)
        assert abs(split - exact) <= mp.mpf(10) ** -55


def test_no_split_without_a_mass_at_infinity() -> None:
    assert not isinstance(approx_dp_profile(0.5, 0.0), InfinitySplit)


@pytest.mark.parametrize(("eps0", "delta0"), CASES)
@pytest.mark.parametrize("per_loss", [3, 40])
def test_dominated_pair_of_the_split_is_below_the_curve(
    eps0: float, delta0: float, per_loss: int
) -> None:
    h = eps0 / per_loss
    pair = discretise_lower(approx_dp_profile(eps0, delta0), h)
    assert pair is not None and pair.dominated
    assert pair.inf_mass == delta0
    losses = [mp.mpf(int(pair.offset) + i) * mp.mpf(h) for i in range(pair.masses.size)]
    masses = [mp.mpf(float(m)) for m in pair.masses]
    assert mp.fsum(masses) + mp.mpf(delta0) <= 1
    for x in [*_points(eps0), *(float(v) for v in losses[:: max(1, len(losses) // 40)])]:
        ex = mp.exp(mp.mpf(x))
        atoms = zip(losses, masses, strict=True)
        curve = mp.mpf(delta0) + mp.fsum(m * max(mp.mpf(0), 1 - ex / mp.exp(y)) for y, m in atoms)
        assert curve <= kov_curve(eps0, delta0, x)


def test_composition_brackets_the_exact_delta() -> None:
    """Two approximate-DP leaves and a Gaussian: the exact delta by enumerating the four
    lattices' atoms through the Gaussian's curve; the PLD lower bound holds the composed mass
    at +infinity (about 3e-6) and stays below."""
    acc = PLDAccountant()
    acc.compose(ApproxDPEvent(0.5, 1e-6), 3)
    acc.compose(GaussianEvent(1.0), 1)
    e0, d0, m = mp.mpf(0.5), mp.mpf(1e-6), 3
    a = mp.exp(e0) / (1 + mp.exp(e0))
    eps = mp.mpf(5.0)

    def gauss(t: mp.mpf) -> mp.mpf:
        return mp.ncdf(-t + mp.mpf(1) / 2) - mp.exp(t) * mp.ncdf(-t - mp.mpf(1) / 2)

    body = mp.fsum(
        mp.binomial(m, k) * a**k * (1 - a) ** (m - k) * gauss(eps - (2 * k - m) * e0)
        for k in range(m + 1)
    )
    exact = 1 - (1 - d0) ** m + (1 - d0) ** m * body
    bound = acc.get_delta(5.0)
    assert bound.delta_lower <= exact <= bound.delta
    assert bound.delta_lower >= float(1 - (1 - d0) ** m)
