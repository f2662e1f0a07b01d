"""Closed-form accountant: golden values (V01-V03), exactness brackets and support rules."""

from __future__ import annotations

import math

import pytest

from dpledger.accountant.closed_form import ClosedFormAccountant
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import UnsupportedEventError
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
    RandomizedResponseEvent,
    SelfComposedEvent,
)

mp = pytest.importorskip("mpmath")
mp.mp.dps = 50


def _acc(event, count=1, relation="add_remove"):
    return ClosedFormAccountant(Adjacency(relation=relation)).compose(event, count)


def _gauss_exact(eps, mu):
    eps, mu = mp.mpf(eps), mp.mpf(mu)
    return mp.ncdf(-eps / mu + mu / 2) - mp.exp(eps) * mp.ncdf(-eps / mu - mu / 2)


def _kov_exact(eps, eps0, k):
    eps, eps0 = mp.mpf(eps), mp.mpf(eps0)
    s = mp.fsum(
        mp.binomial(k, j) * max(0, mp.exp((k - j) * eps0) - mp.exp(eps + j * eps0))
        for j in range(k + 1)
    )
    return s / (1 + mp.exp(eps0)) ** k


def test_v01_gaussian_golden() -> None:
    b = _acc(GaussianEvent(math.sqrt(3)), 3).get_delta(1.0)
    assert b.delta_lower <= 0.1269367375066 <= b.delta
    assert b.delta == pytest.approx(0.1269367375, abs=1e-10)
    exact = _gauss_exact(1, 1)
    assert b.delta_lower <= exact <= b.delta


@pytest.mark.parametrize(
    ("mu", "eps"), [(1.0, 0.0), (1.0, 4.0), (0.05, 0.3), (3.0, 10.0), (0.5, 8.0), (10.0, -1.0)]
)
def test_gaussian_delta_brackets_mpmath(mu: float, eps: float) -> None:
    b = _acc(GaussianEvent(1 / mu)).get_delta(eps)
    exact = _gauss_exact(eps, mu)
    assert b.delta_lower <= exact <= b.delta
    assert b.delta <= exact * (1 + 1e-9) + 1e-300


@pytest.mark.parametrize("delta", [1e-3, 1e-5, 1e-10, 1e-30, 1e-100])
def test_gaussian_epsilon_contains_exact(delta: float) -> None:
    sigmas = [1.0, 2.0, 0.5]
    b = ClosedFormAccountant().compose(ComposedEvent([GaussianEvent(s) for s in sigmas]), 4)
    mu = math.sqrt(4 * sum(1 / s**2 for s in sigmas))
    bound = b.get_epsilon(delta)
    # exact epsilon: delta profile at the bracket ends straddles the target
    assert _gauss_exact(bound.epsilon, mu) <= delta
    assert _gauss_exact(bound.epsilon_lower, mu) >= delta
    assert bound.epsilon - bound.epsilon_lower < 1e-8 * max(1.0, bound.epsilon)
    assert bound.details["mu"] == pytest.approx(mu, rel=1e-14)


def test_gaussian_mu1_epsilon_golden() -> None:
    # VERIFY V06: exact epsilon of mu = 1 at delta = 1e-5 is 4.3772
    assert _acc(GaussianEvent(1.0)).get_epsilon(1e-5).epsilon == pytest.approx(4.3772, abs=1e-4)


def test_pitfall1_replace_one_is_half_sigma() -> None:
    rep = _acc(GaussianEvent(2.0), 10, "replace_one").get_epsilon(1e-5)
    add = _acc(GaussianEvent(1.0), 10).get_epsilon(1e-5)
    assert rep.epsilon == pytest.approx(add.epsilon, rel=1e-9)
    assert rep.epsilon == pytest.approx(17.857, abs=1e-3)  # ACCOUNTANT_PITFALLS item 1


@pytest.mark.parametrize(
    ("eps", "golden"), [(0.5, 0.2211992169), (0.0, 0.39346934), (-2.0, 0.86466472), (1.0, 0.0)]
)
def test_v02_laplace(eps: float, golden: float) -> None:
    b = _acc(LaplaceEvent(1.0)).get_delta(eps)
    assert b.delta_lower <= golden + 1e-8 and b.delta >= golden - 1e-8
    assert b.delta == pytest.approx(golden, abs=1e-8)


def test_laplace_epsilon_bracket() -> None:
    b = _acc(LaplaceEvent(0.5)).get_epsilon(0.01)  # eps0 = 2: eps = 2 + 2 log(1 - 0.01)
    exact = 2 + 2 * math.log1p(-0.01)
    assert b.epsilon_lower <= exact <= b.epsilon
    assert b.epsilon == pytest.approx(exact, rel=1e-10)


@pytest.mark.parametrize(
    ("eps", "golden"), [(0.0, 0.5570521), (1.0, 0.3316785), (2.0, 0.1454664), (3.0, 0.04102841)]
)
def test_v03_kov_golden(eps: float, golden: float) -> None:
    b = _acc(PureDPEvent(0.5), 10).get_delta(eps)
    exact = _kov_exact(eps, 0.5, 10)
    assert b.delta_lower <= exact <= b.delta
    assert b.delta == pytest.approx(golden, abs=5e-8)  # golden values have 7 digits


def test_kov_epsilon_contains_exact_and_beats_basic() -> None:
    b = _acc(PureDPEvent(0.01), 1000).get_epsilon(1e-5)
    assert _kov_exact(b.epsilon, 0.01, 1000) <= 1e-5 <= _kov_exact(b.epsilon_lower, 0.01, 1000)
    assert b.epsilon == pytest.approx(1.1977327983, abs=1e-8)  # pitfall 15 exact KOV
    ten = _acc(PureDPEvent(1.0), 10).get_epsilon(1e-5)
    assert ten.epsilon_lower <= 9.99977 + 1e-5 and 9.99977 - 1e-5 <= ten.epsilon < 10.0


def test_laplace_composition_uses_kov_upper_and_single_lower() -> None:
    b = _acc(LaplaceEvent(1.0), 3).get_epsilon(1e-3)
    kov = _acc(PureDPEvent(1.0), 3).get_epsilon(1e-3)
    single = _acc(LaplaceEvent(1.0)).get_epsilon(1e-3)
    assert b.epsilon == pytest.approx(kov.epsilon, rel=1e-9)
    assert b.epsilon_lower == pytest.approx(single.epsilon_lower, rel=1e-9)


def test_heterogeneous_pure_brackets() -> None:
    event = ComposedEvent(
        [PureDPEvent(0.5), PureDPEvent(1.0), ExponentialMechanismEvent(0.3), LaplaceEvent(2.0)]
    )
    b = _acc(event, 2).get_epsilon(1e-6)
    basic = 2 * (0.5 + 1.0 + 0.3 + 0.5)
    assert b.epsilon <= basic * (1 + 1e-12)
    # lower: the two eps=1 pure events alone (exact KOV), and they are a sub-composition
    sub = _acc(PureDPEvent(1.0), 2).get_epsilon(1e-6)
    assert b.epsilon_lower >= sub.epsilon_lower - 1e-12
    assert b.epsilon_lower <= b.epsilon


def test_kary_randomized_response_lower_is_valid() -> None:
    # k-ary RR is more private than binary RR: the lower bound must stay below binary KOV
    b = _acc(RandomizedResponseEvent(1.0, num_buckets=4)).get_delta(0.0)
    exact = (math.e - 1) / (math.e + 3)
    assert b.delta_lower == pytest.approx(exact, rel=1e-9)
    assert b.delta_lower <= exact <= b.delta


def test_noop_nonprivate_and_empty() -> None:
    assert ClosedFormAccountant().get_epsilon(1e-5).epsilon == 0.0
    assert _acc(NoOpEvent(), 5).get_epsilon(1e-5).epsilon == 0.0
    b = _acc(ComposedEvent([GaussianEvent(1.0), NoOpEvent()])).get_epsilon(1e-5)
    assert b.epsilon == pytest.approx(4.3772, abs=1e-4)
    assert math.isinf(
        _acc(ComposedEvent([GaussianEvent(1.0), NonPrivateEvent()])).get_epsilon(0.1).epsilon
    )
    assert _acc(PureDPEvent(0.0), 3).get_epsilon(1e-9).epsilon == 0.0


@pytest.mark.parametrize(
    "event",
    [
        PoissonSampledEvent(0.1, GaussianEvent(1.0)),
        ComposedEvent([GaussianEvent(1.0), PureDPEvent(1.0)]),
    ],
)
def test_unsupported_events_are_named(event) -> None:
    acc = ClosedFormAccountant()
    assert not acc.supports(event)
    reason = acc._unsupported_reason(event)
    assert reason is not None and ("sampled" in reason or "approx" in reason or "pure" in reason)
    with pytest.raises(UnsupportedEventError):
        acc.compose(event)


def test_mixing_across_compose_calls_is_refused() -> None:
    acc = _acc(GaussianEvent(1.0))
    with pytest.raises(UnsupportedEventError):
        acc.compose(PureDPEvent(1.0))
    assert len(acc.ledger) == 1


def test_round_trip_delta_epsilon() -> None:
    acc = _acc(GaussianEvent(0.7), 5)
    for delta in (0.5, 1e-3, 1e-9):
        eps = acc.get_epsilon(delta).epsilon
        assert acc.get_delta(eps).delta <= delta * (1 + 1e-9)


def _gaussian_delta(eps: float, mu: float) -> float:
    """Exact delta(eps) of mu-GDP (Balle & Wang 2018, Theorem 8), with scipy."""
    from scipy.stats import norm

    return float(norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2))


@pytest.mark.parametrize("eps", [-1.0, 0.0, 0.5, 2.0, 5.0])
def test_zero_epsilon_failure_events_compose_exactly(eps: float) -> None:
    from dpledger.core.events import ComposedEvent

    sigma, p = 1.3, 2e-6
    event = ComposedEvent([GaussianEvent(sigma), ApproxDPEvent(0.0, p), ApproxDPEvent(0.0, p)])
    bound = ClosedFormAccountant().compose(event).get_delta(eps)
    fail = 1 - (1 - p) ** 2
    gauss = _gaussian_delta(eps, 1 / sigma) if eps >= 0 else None
    if gauss is not None:
        exact = fail + (1 - fail) * gauss
        # the scipy reference is itself rounded (~1e-12 relative)
        assert bound.delta_lower <= exact * (1 + 1e-9) and exact <= bound.delta * (1 + 1e-9)
        assert bound.delta == pytest.approx(exact, rel=1e-9)
    # epsilon at that delta inverts it
    target = 1e-5
    at = ClosedFormAccountant().compose(event).get_epsilon(target)
    assert _gaussian_delta(at.epsilon, 1 / sigma) * (1 - fail) + fail <= target * (1 + 1e-9)
    assert at.epsilon_lower <= at.epsilon <= at.epsilon_lower * (1 + 1e-6)


def test_failure_mass_above_delta_has_no_finite_epsilon() -> None:

    acc = ClosedFormAccountant().compose(ApproxDPEvent(0.0, 1e-6), 3)
    assert acc.get_epsilon(2e-6).epsilon == math.inf
    assert acc.get_epsilon(2e-6).epsilon_lower == math.inf  # delta(eps) >= 3e-6 everywhere
    assert acc.get_epsilon(1e-5).epsilon == 0.0
    assert acc.get_delta(0.0).delta == pytest.approx(1 - (1 - 1e-6) ** 3, rel=1e-9)
    assert acc.get_delta(-1.0).delta_lower <= 1 - (1 - 1e-6) ** 3 * math.exp(-1.0) + 1e-12


def test_failure_events_with_positive_epsilon_stay_unsupported() -> None:
    from dpledger.core.events import ComposedEvent

    event = ComposedEvent([GaussianEvent(1.0), ApproxDPEvent(0.1, 1e-6)])
    assert ClosedFormAccountant()._unsupported_reason(event) is not None


@pytest.mark.parametrize("epsilon", [-746.0, -700.0, -5.0, 0.0, 5.0])
def test_a_negligible_gaussian_is_never_below_the_trivial_bracket(epsilon: float) -> None:
    """At sigma = 1e159 the rounding error of eps / mu is unbounded: the bound falls back to
    [max(0, 1 - e^eps), 1] (it reported delta = 0 at eps = -746, below 1 - e^eps)."""
    from dpledger.core.errors import BoundUnavailable

    try:
        bound = ClosedFormAccountant().compose(GaussianEvent(1e159)).get_delta(epsilon)
    except BoundUnavailable:
        return  # a refusal is honest
    floor = max(0.0, -math.expm1(epsilon))
    assert bound.delta >= floor * (1 - 1e-9)
    assert bound.delta_lower <= bound.delta


@pytest.mark.parametrize(("eps0", "p", "e"), [(1.0, 1e-6, 0.0), (1.0, 1e-6, 1.0), (0.3, 0.01, 0.2)])
def test_approximate_dp_composes_as_failure_then_randomized_response(
    eps0: float, p: float, e: float
) -> None:
    # two (eps0, p) releases: 1 - (1 - p)^2 (1 - delta_RR2(e)), RR2 the two-fold binary
    # randomized response at eps0 (losses 2 eps0, 0, -2 eps0 with P-mass r^2, 2 r (1-r), (1-r)^2)

    r = math.exp(eps0) / (1 + math.exp(eps0))
    atoms = [(r * r, 2 * eps0), (2 * r * (1 - r), 0.0), ((1 - r) ** 2, -2 * eps0)]
    rr2 = sum(m * max(0.0, 1 - math.exp(e - loss)) for m, loss in atoms)
    truth = 1 - (1 - p) ** 2 * (1 - rr2)
    bound = ClosedFormAccountant().compose(ApproxDPEvent(eps0, p), 2).get_delta(e)
    assert bound.delta_lower <= truth * (1 + 1e-9) and bound.delta >= truth * (1 - 1e-9)
    assert bound.delta <= truth * (1 + 1e-6) and bound.delta_lower >= truth * (1 - 1e-6)


def test_tiny_failure_masses_answer_below_one_ulp_of_one() -> None:

    acc = ClosedFormAccountant().compose(ApproxDPEvent(0.0, 1e-300), 2)
    assert acc.get_epsilon(1e-30).epsilon == 0.0
    assert acc.get_delta(0.0).delta == pytest.approx(2e-300, rel=1e-12)


def test_hoeffding_route_keeps_a_variance_below_the_float_range() -> None:
    """10^6 pure-DP steps of 1e-300 at delta = 1e-300: count * eps^2 underflows to 0, which
    read epsilon 0 although delta(0) is far above delta (about 1e-297). The root of the
    variance proxy is taken scaled by the largest epsilon: the Hoeffding value
    sqrt(2 k log(1/delta)) eps, within a relative 1e-9 and not below it."""
    bound = account(SelfComposedEvent(PureDPEvent(1e-300), 10**6), Adjacency(), delta=1e-300).bound
    expected = math.sqrt(2 * 10**6 * 300 * math.log(10)) * 1e-300
    assert expected <= bound.epsilon <= expected * (1 + 1e-9)
