"""The bounded-range privacy curve and Rényi curve against direct maximisation over pairs."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special

from dpledger.accountant.profiles import bounded_range_profile
from dpledger.accountant.rdp_orders import (
    bounded_range_rdp,
    bounded_range_rdp_rows,
    default_orders,
    pure_dp_rdp,
)

#: digits of the references, set by each check for itself (``mp.workdps``): a global setting
#: would depend on the order in which modules run (another module setting ``mp.mp.dps`` left
#: the 1e-8 reference at 15 or 30 digits, below the bound's last units)
DPS = 60
ORDERS = np.array([1.01, 1.1, 1.5, 2.0, 3.0, 10.0, 64.0, 1000.0, 10000.0])
EPS0 = (1e-8, 1e-5, 1e-3, 0.01, 0.1, 0.5, 1.0, 3.0, 10.0, 50.0, 1000.0, 1e5)


def _moment(a: mp.mpf, eps0: mp.mpf, w: mp.mpf) -> mp.mpf:
    """E_Q[X^a] of the two-point pair with Q-mass w on the top end."""
    return (w + (1 - w) * mp.e ** (-a * eps0)) / (w + (1 - w) * mp.e ** (-eps0)) ** a


def exact_rdp(a: float, eps0: float) -> mp.mpf:
    """log E(w*) / (a - 1), with w* the stationary point (the maximum over w)."""
    am, e = mp.mpf(a), mp.mpf(eps0)
    big_a, big_b = 1 - mp.e ** (-am * e), 1 - mp.e ** (-e)
    w = (big_a * mp.e ** (-e) - am * big_b * mp.e ** (-am * e)) / ((am - 1) * big_a * big_b)
    assert 0 <= w <= 1
    return mp.log(_moment(am, e, w)) / (am - 1)


@pytest.mark.parametrize(("a", "eps0"), [(1.5, 0.3), (2.0, 1.0), (10.0, 3.0), (1.01, 10.0)])
def test_stationary_point_is_the_maximum(a: float, eps0: float) -> None:
    with mp.workdps(DPS):
        grid = [mp.mpf(i) / 4000 for i in range(4001)]
        grid += [mp.mpf(10) ** (-k / 200) for k in range(2401)]
        best = max(mp.log(_moment(mp.mpf(a), mp.mpf(eps0), w)) / (a - 1) for w in grid)
        assert best <= exact_rdp(a, eps0) <= best * (1 + mp.mpf(1e-5))


@pytest.mark.parametrize("eps0", EPS0)
def test_rdp_is_the_exact_supremum_rounded_up(eps0: float) -> None:
    got = bounded_range_rdp(ORDERS, eps0)
    with mp.workdps(DPS):
        for a, g in zip(ORDERS.tolist(), got.tolist(), strict=True):
            truth = exact_rdp(a, eps0)
            assert g >= truth
            assert g <= truth * (1 + 1e-5) + mp.mpf(1e-300), (a, eps0, g, truth)


@pytest.mark.parametrize("eps0", EPS0)
def test_rdp_below_both_caps(eps0: float) -> None:
    got = bounded_range_rdp(ORDERS, eps0)
    assert np.all(got <= pure_dp_rdp(ORDERS, eps0))
    assert np.all(got <= ORDERS * eps0 * eps0 / 8 * (1 + 1e-12))


@settings(max_examples=200, deadline=None)
@given(
    eps0=st.floats(1e-3, 30.0),
    a=st.floats(1.01, 200.0),
    points=st.lists(st.tuples(st.floats(0.0, 1.0), st.floats(1e-3, 1.0)), min_size=2, max_size=8),
)
def test_no_pair_spanning_eps0_exceeds_the_rdp(
    eps0: float, a: float, points: list[tuple[float, float]]
) -> None:
    """A many-point pair with likelihood ratios e^{eps0 u} c (u in [0, 1]), E_Q[ratio] = 1."""
    u = np.array([p[0] for p in points])
    q = np.array([p[1] for p in points])
    q = q / q.sum()
    log_c = -float(np.log(np.sum(q * np.exp(eps0 * u))))
    log_ratio = log_c + eps0 * u
    divergence = float(special.logsumexp(a * log_ratio, b=q)) / (a - 1)
    bound = float(bounded_range_rdp(np.array([a]), eps0)[0])
    assert divergence <= bound * (1 + 1e-9) + 1e-12


def by_two_point_search(eps: float, eps0: float) -> mp.mpf:
    """sup over two-point pairs (Q-mass w on the top end) of the hockey stick at eps."""
    e, e0 = mp.mpf(eps), mp.mpf(eps0)

    def stick(w: mp.mpf) -> mp.mpf:
        u = 1 / (w + (1 - w) * mp.e ** (-e0))
        lo = u * mp.e ** (-e0)
        return w * max(u - mp.e**e, 0) + (1 - w) * max(lo - mp.e**e, 0)

    coarse = max(range(2001), key=lambda i: stick(mp.mpf(i) / 2000))
    lo = mp.mpf(max(coarse - 1, 0)) / 2000  # the maximum is within a step of the best point
    return max(stick(lo + mp.mpf(i) / 2000 / 1000) for i in range(2001))


@pytest.mark.parametrize(("eps", "eps0"), [(0.0, 1.0), (0.5, 1.0), (-0.5, 1.0), (1.0, 3.0)])
def test_profile_is_the_supremum_over_two_point_pairs(eps: float, eps0: float) -> None:
    got = float(bounded_range_profile(eps0).delta(np.array([eps]))[0])
    with mp.workdps(DPS):
        best = by_two_point_search(eps, eps0)
        assert got >= best * (1 - 1e-12)
        assert got <= best + mp.mpf(1e-7)


def test_profile_at_zero_is_tanh_quarter() -> None:
    for eps0 in (0.1, 1.0, 4.0):
        got = float(bounded_range_profile(eps0).delta(np.array([0.0]))[0])
        assert got == pytest.approx(math.tanh(eps0 / 4), rel=1e-12)


@pytest.mark.parametrize(
    ("a", "eps0"), [(1.01, 1e-161), (2.0, 1e-161), (1.1, 1e-160), (2.0, 1e-154), (1e8, 1e-158)]
)
def test_rdp_not_below_the_truth_where_it_is_subnormal(a: float, eps0: float) -> None:
    """There a*eps0^2/8 decides, and a product with a subnormal factor loses precision."""
    with mp.workdps(2000):
        truth = exact_rdp(a, eps0)
        assert bounded_range_rdp(np.array([a]), eps0)[0] >= truth


def test_nan_gives_an_infinite_curve() -> None:
    assert np.all(np.isinf(bounded_range_rdp(ORDERS, float("nan"))))
    assert np.isinf(bounded_range_rdp(np.array([2.0, float("nan")]), 1.0)[1])


@pytest.mark.parametrize("dps", [15, 30, 200])
def test_checks_keep_their_own_precision(dps: int) -> None:
    """The references at their own precision whatever another module left in ``mp.mp.dps``
    (at 15 or 30 digits the 1e-8 and 1e-5 checks failed)."""
    kept = mp.mp.dps
    try:
        mp.mp.dps = dps
        for eps0 in EPS0:
            test_rdp_is_the_exact_supremum_rounded_up(eps0)
        test_profile_is_the_supremum_over_two_point_pairs(0.5, 1.0)
        assert mp.mp.dps == dps
    finally:
        mp.mp.dps = kept


@settings(max_examples=20, deadline=None)
@given(st.lists(st.floats(1e-300, 1e3), min_size=1, max_size=12))
def test_rows_equal_the_curve_bit_for_bit(epsilons: list[float]) -> None:
    orders = default_orders()
    rows = bounded_range_rdp_rows(orders, epsilons)
    for eps, row in zip(epsilons, rows, strict=True):
        assert np.array_equal(row.view(np.int64), bounded_range_rdp(orders, eps).view(np.int64))
