"""RDP accountant: golden vectors (V05, V06, V09), mpmath oracle, cross-checks, support rules."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpledger.accountant.closed_form import ClosedFormAccountant
from dpledger.accountant.conversions import rdp_to_delta, rdp_to_epsilon
from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.rdp import RDPAccountant
from dpledger.accountant.rdp_orders import (
    bounded_range_rdp,
    gaussian_rdp,
    laplace_rdp,
    poisson_gaussian_rdp,
    pure_dp_rdp,
)
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError, UnsupportedEventError
from dpledger.core.events import (
    ApproxDPEvent,
    ComposedEvent,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    NoOpEvent,
    PoissonSampledEvent,
    PureDPEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
)


def _dpsgd(sigma: float, q: float, steps: int, relation: str = "add_remove") -> RDPAccountant:
    acc = RDPAccountant(Adjacency(relation=relation))
    return acc.compose(PoissonSampledEvent(q, GaussianEvent(sigma)), steps)


def test_v05_integer_orders_golden() -> None:
    orders = np.array([5.0, 50.0, 100.0])
    got = 50 * poisson_gaussian_rdp(orders, 0.01, 2.5)
    golden = np.array([2.18075656e-03, 2.38460375e-02, 1.67416308e02])
    np.testing.assert_allclose(got, golden, rtol=1e-8)
    assert np.all(got >= golden * (1 - 1e-8))


def _rdp_mp(q: float, sigma: float, alpha: float) -> float:
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 40
    q_, s, a = mp.mpf(q), mp.mpf(sigma), mp.mpf(alpha)

    def f(z):
        return mp.npdf(z, 0, s) * ((1 - q_) + q_ * mp.exp((2 * z - 1) / (2 * s * s))) ** a

    area = mp.quad(f, [-mp.inf, -20 * s, 0, mp.mpf(1) / 2, 20 * s + 10, mp.inf])
    return float(mp.log(area) / (a - 1))


@pytest.mark.parametrize(
    ("q", "sigma", "alpha"),
    [
        (0.01, 2.5, 1.5),
        (0.01, 2.5, 2.5),
        (0.1, 0.6, 1.01),
        (0.3, 1.2, 1.1),
        (0.5, 0.3, 1.05),
        (0.2, 0.5, 3.5),
        (1e-3, 1.0, 10.5),
        (0.1, 0.6, 7.0),
    ],
)
def test_log_a_is_upper_bound_of_mpmath(q: float, sigma: float, alpha: float) -> None:
    exact = _rdp_mp(q, sigma, alpha)
    got = float(poisson_gaussian_rdp(np.array([alpha]), q, sigma)[0])
    assert exact <= got <= exact * (1 + 1e-4)


def test_v05_fractional_orders_do_not_exceed_dp_accounting_upper() -> None:
    # dp_accounting sums |terms| for fractional orders (an upper bound); ours is the exact series
    got = 50 * poisson_gaussian_rdp(np.array([1.5, 2.5]), 0.01, 2.5)
    golden = np.array([6.70579741e-04, 1.08548710e-03])
    assert np.all(got <= golden)
    assert np.all(got >= golden * 0.9)


def test_extreme_parameters_do_not_overflow() -> None:
    rdp = poisson_gaussian_rdp(np.array([1.5, 2.0, 32.0, 256.0, 10000.0]), 0.1, 0.02)
    assert np.all(np.isfinite(rdp) | np.isinf(rdp)) and np.all(rdp >= 0)
    assert np.isfinite(poisson_gaussian_rdp(np.array([256.1, 256.0]), 0.999, 1.0)).all()


def test_v06_constant_rdp_conversion() -> None:
    orders = np.arange(2.0, 33.0)
    eps, order = rdp_to_epsilon(orders, np.full_like(orders, 1.1), 1e-5)
    assert eps == pytest.approx(1.32783806176, abs=1e-10) and order == 32
    assert eps >= 1.327838061755
    delta, _ = rdp_to_delta(orders, np.full_like(orders, 1.1), eps)
    assert delta <= 1e-5 * (1 + 1e-9) and delta == pytest.approx(1e-5, rel=1e-6)


def test_v06_gaussian_ordering() -> None:
    eps = RDPAccountant().compose(GaussianEvent(1.0)).get_epsilon(1e-5).epsilon
    assert 4.3772 < eps == pytest.approx(4.7284, abs=2e-4)


@pytest.mark.parametrize(
    ("sigma", "q", "steps", "golden", "pld"),
    [
        (0.8, 0.001, 100, 1.3711, 0.2603),
        (1.5, 0.05, 1000, 6.6680, 6.1997),
        (3.0, 0.001, 100000, 0.4697, 0.4369),
    ],
)
def test_v09_rdp_column(sigma: float, q: float, steps: int, golden: float, pld: float) -> None:
    b = _dpsgd(sigma, q, steps).get_epsilon(1e-6)
    assert b.epsilon == pytest.approx(golden, rel=1e-2)
    assert b.epsilon >= pld
    assert b.epsilon_lower == 0.0


def test_opacus_golden() -> None:
    b = _dpsgd(1.5, 0.04, 2250).get_epsilon(1e-5)
    assert b.epsilon == pytest.approx(7.32911117143, rel=1e-3)


def test_cross_check_dp_accounting() -> None:
    dpa = pytest.importorskip("dp_accounting")
    for sigma, q, steps in [(1.0, 0.01, 500), (0.7, 0.2, 30), (4.0, 0.5, 10)]:
        ref = dpa.rdp.RdpAccountant()
        ref.compose(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(sigma)), steps)
        ours = _dpsgd(sigma, q, steps).get_epsilon(1e-5).epsilon
        # same analysis on a wider order grid with exact fractional orders: never above
        theirs = ref.get_epsilon(1e-5)
        assert ours <= theirs * (1 + 1e-9)
        assert ours >= theirs * 0.9
    ref = dpa.rdp.RdpAccountant()
    ref.compose(dpa.LaplaceDpEvent(0.5), 4)
    ours = RDPAccountant().compose(LaplaceEvent(0.5), 4).get_epsilon(1e-5).epsilon
    assert ours <= ref.get_epsilon(1e-5) * (1 + 1e-9)


def test_rdp_is_above_exact_closed_forms() -> None:
    for event, count in [
        (GaussianEvent(0.8), 7),
        (PureDPEvent(0.5), 10),
        (PureDPEvent(1.0), 10),
        (LaplaceEvent(1.0), 1),
        (PureDPEvent(0.01), 1000),
    ]:
        for delta in (1e-2, 1e-6, 1e-12):
            exact = ClosedFormAccountant().compose(event, count).get_epsilon(delta)
            rdp = RDPAccountant().compose(event, count).get_epsilon(delta)
            assert rdp.epsilon >= exact.epsilon_lower, (event, delta)
            d = RDPAccountant().compose(event, count).get_delta(exact.epsilon_lower)
            assert d.delta >= delta * (1 - 1e-9)


def test_pure_rdp_bounds() -> None:
    orders = np.array([1.01, 1.5, 2.0, 10.0, 1000.0])
    for eps in (0.01, 0.5, 3.0):
        rdp = pure_dp_rdp(orders, eps)
        assert np.all(rdp <= eps * (1 + 1e-12)) and np.all(rdp <= orders * eps**2 / 2 * (1 + 1e-12))
        # binary randomized response attains the bound: compare with its Renyi divergence
        p = math.exp(eps) / (1 + math.exp(eps))
        for a, r in zip(orders, rdp, strict=True):
            a = float(a)
            lp, lq = math.log(p), math.log1p(-p)
            exact = float(np.logaddexp(a * lp + (1 - a) * lq, a * lq + (1 - a) * lp)) / (a - 1)
            assert exact <= r <= exact + 1e-9


def test_laplace_rdp_matches_mironov() -> None:
    orders = np.array([1.05, 2.0, 20.0])
    got = laplace_rdp(orders, 1.0)
    for a, r in zip(orders, got, strict=True):
        exact = math.log(
            a / (2 * a - 1) * math.exp(a - 1) + (a - 1) / (2 * a - 1) * math.exp(-a)
        ) / (a - 1)
        assert exact <= r <= exact + 1e-12


def test_pitfall1_replace_one_is_half_sigma() -> None:
    rep = RDPAccountant(Adjacency("replace_one")).compose(GaussianEvent(2.0), 10).get_epsilon(1e-5)
    add = RDPAccountant().compose(GaussianEvent(1.0), 10).get_epsilon(1e-5)
    assert rep.epsilon == pytest.approx(add.epsilon, rel=1e-9)
    assert rep.epsilon == pytest.approx(19.054, abs=2e-3)  # ACCOUNTANT_PITFALLS item 1


def test_poisson_replace_one_and_wor_unsupported() -> None:
    acc = RDPAccountant(Adjacency("replace_one"))
    ev = PoissonSampledEvent(0.01, GaussianEvent(1.0))
    assert "replace-one" in (acc._unsupported_reason(ev) or "")
    with pytest.raises(UnsupportedEventError):
        acc.compose(ev)
    wor = SampledWithoutReplacementEvent(1000, 10, GaussianEvent(1.0))
    assert not acc.supports(SelfComposedEvent(ComposedEvent([wor]), 3))
    assert not RDPAccountant().supports(ApproxDPEvent(1.0, 1e-6))
    assert not RDPAccountant().supports(PoissonSampledEvent(0.1, LaplaceEvent(1.0)))


def test_composition_algebra_and_edge_cases() -> None:
    g = PoissonSampledEvent(0.05, GaussianEvent(1.1))
    six = RDPAccountant().compose(g, 6).get_epsilon(1e-5).epsilon
    nested = ComposedEvent(
        [SelfComposedEvent(g, 1), SelfComposedEvent(g, 2), SelfComposedEvent(g, 3)]
    )
    assert RDPAccountant().compose(nested).get_epsilon(1e-5).epsilon == pytest.approx(
        six, rel=1e-12
    )
    assert (
        RDPAccountant()
        .compose(PoissonSampledEvent(0.0, GaussianEvent(0.1)), 9)
        .get_epsilon(1e-9)
        .epsilon
        == 0.0
    )
    assert RDPAccountant().compose(NoOpEvent()).get_epsilon(1e-5).epsilon == 0.0
    assert math.isinf(RDPAccountant().compose(NonPrivateEvent()).get_epsilon(1e-5).epsilon)
    assert RDPAccountant().compose(NonPrivateEvent()).get_delta(3.0).delta == 1.0
    # q = 1 is the plain Gaussian
    q1 = RDPAccountant().compose(PoissonSampledEvent(1.0, GaussianEvent(1.0))).get_epsilon(1e-5)
    assert q1.epsilon == pytest.approx(
        RDPAccountant().compose(GaussianEvent(1.0)).get_epsilon(1e-5).epsilon
    )


def test_pure_capped_by_basic_composition() -> None:
    b = RDPAccountant().compose(PureDPEvent(1.0), 3).get_epsilon(1e-12)
    assert b.epsilon <= 3.0 * (1 + 1e-12)
    assert RDPAccountant().compose(PureDPEvent(1.0), 3).get_delta(3.0 + 1e-9).delta == 0.0


def test_monotone_and_round_trip() -> None:
    acc = _dpsgd(1.0, 0.05, 200)
    deltas = [1e-1, 1e-3, 1e-5, 1e-9]
    eps = [acc.get_epsilon(d).epsilon for d in deltas]
    assert eps == sorted(eps)
    for d, e in zip(deltas, eps, strict=True):
        assert acc.get_delta(e).delta <= d * (1 + 1e-6)
    assert acc.get_delta(-0.5).delta >= acc.get_delta(0.0).delta


def test_boundary_order_is_warned() -> None:
    b = RDPAccountant(orders=[2.0, 3.0]).compose(GaussianEvent(1.0)).get_epsilon(1e-5)
    assert b.details["order"] == 3.0 and "edge" in b.details["warning"]
    assert "warning" not in RDPAccountant().compose(GaussianEvent(1.0)).get_epsilon(1e-5).details


@pytest.mark.parametrize("orders", [[], [1.0, 2.0], [2.0, float("nan")]])
def test_bad_orders(orders: list[float]) -> None:
    with pytest.raises(InvalidParameterError, match="orders"):
        RDPAccountant(orders=orders)


def test_bad_queries() -> None:
    acc = RDPAccountant().compose(GaussianEvent(1.0))
    for bad in (0.0, 1.0, -1e-5, float("nan")):
        with pytest.raises(InvalidParameterError, match="delta"):
            acc.get_epsilon(bad)


@pytest.mark.parametrize(
    ("q", "sigma"), [(256 / 60000, 1.1), (1e-4, 1.0), (0.01, 0.5), (0.5, 3.0), (0.99, 0.7)]
)
def test_batched_fractional_orders_equal_the_order_by_order_series(q: float, sigma: float) -> None:
    from dpledger.accountant.rdp_orders import _log_a_frac, _log_a_frac_batch

    alphas = np.array([1.01, 1.1, 1.5, 2.25, 3.5, 7.75, 10.9])
    batch = _log_a_frac_batch(q, sigma, alphas)
    single = np.array([_log_a_frac(q, sigma, a) for a in alphas])
    kept = ~np.isnan(batch)
    assert kept.sum() >= 5  # the first series length suffices for most orders
    np.testing.assert_allclose(batch[kept], single[kept], rtol=1e-11, atol=0)
    # and the whole curve stays above the exact (mpmath) value
    for alpha in (1.5, 3.5):
        exact = _rdp_mp(q, sigma, alpha)
        assert exact <= float(poisson_gaussian_rdp(np.array([alpha]), q, sigma)[0])


def test_exponential_mechanism_uses_the_bounded_range_curve() -> None:
    """Tighter than the eps-DP curve, never below the attained lower bound, and no lower than the
    Rényi divergence of randomized response at eps/2 (two candidates scored +-s/2), which is an
    exponential mechanism at eps."""
    orders = np.array([1.5, 2.0, 8.0, 64.0])
    for eps in (0.1, 1.0, 5.0):
        got = bounded_range_rdp(orders, eps)
        assert np.all(got < pure_dp_rdp(orders, eps))
        p = 1 / (1 + math.exp(-eps / 2))
        for a, r in zip(orders.tolist(), got.tolist(), strict=True):
            attained = math.log(p**a * (1 - p) ** (1 - a) + (1 - p) ** a * p ** (1 - a)) / (a - 1)
            assert attained <= r
    em = SelfComposedEvent(ExponentialMechanismEvent(0.1), 1000)
    rdp = RDPAccountant().compose(em).get_epsilon(1e-5)
    pure = RDPAccountant().compose(SelfComposedEvent(PureDPEvent(0.1), 1000)).get_epsilon(1e-5)
    pld = PLDAccountant()
    pld.compose(em)
    assert pld.get_epsilon(1e-5).epsilon_lower <= rdp.epsilon < 0.45 * pure.epsilon


def test_gaussian_rdp_not_below_alpha_mu_squared_half_where_subnormal() -> None:
    """alpha mu^2 / 2 with mu^2 / 2 subnormal: a direct product would lose precision."""
    import mpmath as mp

    with mp.workdps(60):
        for a, mu in [(2.0, 1e-161), (1e8, 1e-158), (1.5, 3e-156), (64.0, 1e-20)]:
            got = gaussian_rdp(np.array([a]), mu)[0]
            assert got >= mp.mpf(a) * mp.mpf(mu) ** 2 / 2
            assert got <= float(mp.mpf(a) * mp.mpf(mu) ** 2 / 2) * (1 + 1e-10) + 1e-322
