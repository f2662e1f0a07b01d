"""The PLD accountant against closed forms, golden values and published cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize, special

from dpledger.accountant.pld import PLDAccountant
from dpledger.core.adjacency import ROW_REPLACE_ONE, Adjacency
from dpledger.core.errors import InvalidParameterError, UnsupportedEventError
from dpledger.core.events import (
    ComposedEvent,
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    NoOpEvent,
    PoissonSampledEvent,
    PureDPEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
)


def exact_gaussian_delta(mu: float, eps: float) -> float:
    a = -eps / mu + mu / 2
    return float(np.exp(special.log_ndtr(a)) - np.exp(eps + special.log_ndtr(a - mu)))


def exact_gaussian_epsilon(mu: float, delta: float) -> float:
    if exact_gaussian_delta(mu, 0.0) <= delta:
        return 0.0
    return float(
        optimize.brentq(lambda e: exact_gaussian_delta(mu, e) - delta, 0.0, 1e4, xtol=1e-13)
    )


def account(event, count=1, adjacency=None):
    acc = PLDAccountant(adjacency)
    acc.compose(event, count)
    return acc


def assert_tight_upper(bound: float, truth: float) -> None:
    assert bound >= truth - 1e-9, f"{bound} under-reports {truth}"
    assert bound <= truth * 1.01 + 0.01, f"{bound} is not within 1% of {truth}"


def test_v01_gaussian_golden_delta():
    d = account(GaussianEvent(math.sqrt(3)), 3).get_delta(1.0)
    assert d.delta_lower <= 0.12693673750664 <= d.delta
    assert d.delta - 0.12693673750664 < 1e-6


@pytest.mark.parametrize(
    ("sigma", "k", "delta"),
    [(0.3, 1, 1e-5), (1.0, 1, 1e-10), (2.0, 10, 1e-5), (5.0, 100, 1e-3), (100.0, 10_000, 1e-6)],
)
def test_gaussian_battery_matches_closed_form(sigma, k, delta):
    mu = math.sqrt(k) / sigma
    truth = exact_gaussian_epsilon(mu, delta)
    bound = account(GaussianEvent(sigma), k).get_epsilon(delta)
    assert_tight_upper(bound.epsilon, truth)
    assert bound.epsilon_lower <= truth + 1e-9


def test_v02_laplace_profile():
    acc = account(LaplaceEvent(1.0))
    assert acc.get_delta(0.5).delta == pytest.approx(0.2211992169, rel=1e-6)
    assert acc.get_delta(0.5).delta >= 0.2211992169
    assert acc.get_delta(0.0).delta == pytest.approx(0.39346934, rel=1e-6)
    assert acc.get_delta(-2.0).delta == pytest.approx(0.86466472, rel=1e-6)
    assert acc.get_delta(1.0).delta == 0.0


@pytest.mark.parametrize(
    ("eps", "golden"), [(0.0, 0.5570521), (1.0, 0.3316785), (2.0, 0.1454664), (3.0, 0.04102841)]
)
def test_v03_kov_optimal_pure_composition(eps, golden):
    d = account(PureDPEvent(0.5), 10).get_delta(eps)
    assert d.delta_lower - 1e-7 <= golden <= d.delta + 1e-7
    assert d.delta - golden < 1e-5


def test_v04_poisson_subsampled_laplace():
    eps = account(PoissonSampledEvent(0.2, LaplaceEvent(0.5)), 3).get_epsilon(1e-14)
    truth = 3 * math.log1p(0.2 * math.expm1(2.0))
    assert truth - 1e-9 <= eps.epsilon <= truth + 1e-6


def test_v14_both_directions_single_subsampled_step():
    d = account(PoissonSampledEvent(0.2, GaussianEvent(0.5))).get_delta(1.0)
    assert d.delta == pytest.approx(0.0578, abs=1e-4)


def test_v16_total_variation_gives_zero_epsilon():
    acc = account(PoissonSampledEvent(0.00105, GaussianEvent(1.0)))
    assert acc.get_delta(0.0).delta == pytest.approx(4.0207e-4, rel=1e-4)
    assert acc.get_epsilon(1e-3).epsilon == 0.0


def test_v16_empty_noop_and_non_private():
    assert PLDAccountant().get_epsilon(1e-5).epsilon == 0.0
    assert account(NoOpEvent()).get_epsilon(1e-5).epsilon == 0.0
    assert account(NonPrivateEvent()).get_epsilon(1e-5).epsilon == math.inf
    assert account(NonPrivateEvent()).get_delta(3.0).delta == 1.0


def test_pitfall1_replace_one_doubles_sensitivity():
    rep = account(GaussianEvent(2.0), 10, ROW_REPLACE_ONE).get_epsilon(1e-5).epsilon
    add = account(GaussianEvent(1.0), 10).get_epsilon(1e-5).epsilon
    assert rep == pytest.approx(add, abs=1e-6)
    assert rep == pytest.approx(17.857, abs=2e-3)


def test_pitfall3_adjacency_changes_epsilon():
    ev = PoissonSampledEvent(256 / 60000, GaussianEvent(1.0))
    assert account(ev, 1000).get_epsilon(1e-5).epsilon == pytest.approx(0.728, abs=2e-3)
    assert account(ev, 1000, ROW_REPLACE_ONE).get_epsilon(1e-5).epsilon == pytest.approx(
        1.112, abs=2e-3
    )


def test_pitfall5_without_replacement_is_bounded_and_below_rdp_golden():
    ev = SampledWithoutReplacementEvent(60000, 256, GaussianEvent(1.0))
    b = account(ev, 1000, ROW_REPLACE_ONE).get_epsilon(1e-5)
    poisson_replace = account(
        PoissonSampledEvent(256 / 60000, GaussianEvent(1.0)), 1000, ROW_REPLACE_ONE
    )
    assert b.epsilon <= 12.113
    assert b.epsilon_lower <= b.epsilon
    assert b.epsilon >= poisson_replace.get_epsilon(1e-5).epsilon_lower


def test_pitfall2_without_replacement_under_add_remove_is_refused():
    ev = SampledWithoutReplacementEvent(100, 10, GaussianEvent(1.0))
    acc = PLDAccountant(Adjacency())
    assert not acc.supports(ev)
    with pytest.raises(UnsupportedEventError, match="replace-one"):
        acc.compose(ev)


def test_pitfall11_s11_large_epsilon_is_finite_and_consistent():
    b = account(PoissonSampledEvent(0.1, GaussianEvent(0.6)), 1000).get_epsilon(1e-5)
    assert 78.6485 * 0.99 <= b.epsilon_lower <= b.epsilon <= 78.6485 * 1.001


def test_v09_dp_sgd_reference_points():
    cases = [((0.8, 0.001, 100), 0.2603), ((1.5, 0.05, 1000), 6.1997)]
    for (sigma, q, steps), pld_ref in cases:
        b = account(PoissonSampledEvent(q, GaussianEvent(sigma)), steps).get_epsilon(1e-6)
        assert b.epsilon_lower <= b.epsilon
        assert b.epsilon == pytest.approx(pld_ref, rel=2e-3)


def test_pure_dp_capped_by_basic_composition():
    b = account(PureDPEvent(1.0), 10).get_epsilon(1e-12)
    assert b.epsilon <= 10.0 * (1 + 1e-9)
    assert b.epsilon == pytest.approx(9.99977, abs=1e-3)


def test_queries_are_pure_and_validate():
    acc = account(GaussianEvent(1.0), 5)
    first = acc.get_epsilon(1e-5)
    assert acc.get_epsilon(1e-5) == first
    with pytest.raises(InvalidParameterError, match="delta"):
        acc.get_epsilon(0.0)
    with pytest.raises(InvalidParameterError, match="delta"):
        acc.get_epsilon(1.5)


def test_self_composed_equals_repeated_and_composed():
    ev = PoissonSampledEvent(0.01, GaussianEvent(1.0))
    a = account(SelfComposedEvent(ev, 6)).get_epsilon(1e-5).epsilon
    b = account(ComposedEvent([ev] * 6)).get_epsilon(1e-5).epsilon
    c = account(ev, 6).get_epsilon(1e-5).epsilon
    assert a == pytest.approx(b, abs=1e-12)
    assert a == pytest.approx(c, abs=1e-12)


@settings(max_examples=15, deadline=None)
@given(
    sigma=st.floats(0.5, 5.0),
    q=st.floats(1e-3, 0.1),
    steps=st.integers(1, 300),
)
def test_property_monotone_in_steps_q_sigma_delta(sigma, q, steps):
    base = account(PoissonSampledEvent(q, GaussianEvent(sigma)), steps)
    e = base.get_epsilon(1e-5)
    more_steps = account(PoissonSampledEvent(q, GaussianEvent(sigma)), steps + 10).get_epsilon(1e-5)
    more_q = account(
        PoissonSampledEvent(min(1.0, q * 1.5), GaussianEvent(sigma)), steps
    ).get_epsilon(1e-5)
    more_sigma = account(PoissonSampledEvent(q, GaussianEvent(sigma * 1.5)), steps).get_epsilon(
        1e-5
    )
    bigger_delta = base.get_epsilon(1e-3)
    assert more_steps.epsilon >= e.epsilon_lower
    assert more_q.epsilon >= e.epsilon_lower
    assert more_sigma.epsilon_lower <= e.epsilon
    assert bigger_delta.epsilon <= e.epsilon + 1e-9
    # round trip: delta(eps(delta)) <= delta
    assert base.get_delta(e.epsilon).delta <= 1e-5 * (1 + 1e-6)


@settings(max_examples=10, deadline=None)
@given(sigmas=st.lists(st.floats(0.5, 10.0), min_size=2, max_size=5))
def test_property_order_invariance_and_closed_form(sigmas):
    events = [GaussianEvent(s) for s in sigmas]
    fwd = account(ComposedEvent(events)).get_epsilon(1e-6)
    rev = account(ComposedEvent(events[::-1])).get_epsilon(1e-6)
    assert fwd.epsilon == pytest.approx(rev.epsilon, abs=1e-9)
    mu = math.sqrt(sum(1 / s**2 for s in sigmas))
    assert_tight_upper(fwd.epsilon, exact_gaussian_epsilon(mu, 1e-6))


def test_zero_sampling_rate_and_extreme_noise_do_not_overflow():
    acc = account(PoissonSampledEvent(0.0, GaussianEvent(0.05)), 10)
    assert acc.get_epsilon(1e-6).epsilon == 0.0
    b = account(GaussianEvent(0.01)).get_epsilon(1e-5)  # mu = 100: losses beyond the float range
    assert b.epsilon >= exact_gaussian_epsilon(100.0, 1e-5) - 1e-9


@pytest.mark.slow  # many distinct leaves: the rounding's bounds are property-tested in the default
# tier (test_representatives_kinds.py)
def test_many_distinct_components_keep_both_bounds_certified(monkeypatch):
    """Rounded representatives: the upper stays above, the lower below, the exact composition."""
    import dpledger.accountant.pld as pld_module

    rng = np.random.default_rng(3)
    events = [
        PoissonSampledEvent(float(q), GaussianEvent(float(s)))
        for q, s in zip(rng.uniform(0.01, 0.02, 70), rng.uniform(1.0, 1.3, 70), strict=True)
    ]
    exact = PLDAccountant(target_points=1 << 15).compose(ComposedEvent(events)).get_epsilon(1e-6)
    monkeypatch.setattr(pld_module, "MAX_DISTINCT_COMPONENTS", 16)
    rounded = PLDAccountant(target_points=1 << 15).compose(ComposedEvent(events))
    got = rounded.get_epsilon(1e-6)
    assert exact.epsilon_lower < exact.epsilon < got.epsilon  # rounding costs a little ...
    assert got.epsilon_lower < exact.epsilon_lower  # ... on both sides, and never crosses
    # parameters rounded by at most ~3% (6% for the lower) move the bounds by little here
    assert got.epsilon <= exact.epsilon * 1.10
    assert got.epsilon_lower >= exact.epsilon_lower * 0.85


def _subsampled_gaussian_delta_mp(mu: float, q: float, eps: float) -> float:
    """Worse direction of Poisson-subsampled N(mu, 1) vs N(0, 1) at eps, in 60-digit mpmath."""
    import mpmath

    mpmath.mp.dps = 60
    mu_, q_, e = mpmath.mpf(mu), mpmath.mpf(q), mpmath.exp(mpmath.mpf(eps))

    def sf(x):  # type: ignore[no-untyped-def]
        return mpmath.ncdf(-x)

    # remove: (1-q)N(0) + qN(mu) vs N(0); the loss exceeds eps above x_r
    x_r = mu_ / 2 + mpmath.log((e - (1 - q_)) / q_) / mu_
    remove = q_ * sf(x_r - mu_) + (1 - q_) * sf(x_r) - e * sf(x_r)
    # add: N(0) vs (1-q)N(0) + qN(mu); the loss exceeds eps below x_a (when e (1-q) < 1)
    add = mpmath.mpf(0)
    if e * (1 - q_) < 1:
        x_a = mu_ / 2 + mpmath.log((1 - e * (1 - q_)) / (e * q_)) / mu_
        add = mpmath.ncdf(x_a) - e * ((1 - q_) * mpmath.ncdf(x_a) + q_ * mpmath.ncdf(x_a - mu_))
    return float(max(remove, add))


@pytest.mark.parametrize(
    ("sigma", "q", "delta"), [(0.5, 1e-3, 1e-5), (1.0, 1e-4, 1e-15), (1.0, 0.1, 1e-5)]
)
def test_one_subsampled_step_is_the_root_of_its_exact_profile(sigma, q, delta):
    """One release: the bracket is the root of the exact profile (a 60-digit reference)."""
    acc = PLDAccountant()
    acc.compose(PoissonSampledEvent(q, GaussianEvent(sigma)))
    b = acc.get_epsilon(delta)
    mu = 1.0 / sigma
    assert _subsampled_gaussian_delta_mp(mu, q, b.epsilon) <= delta * (1 + 1e-9)
    assert _subsampled_gaussian_delta_mp(mu, q, b.epsilon_lower) >= delta * (1 - 1e-9)
    assert b.epsilon - b.epsilon_lower <= 1e-6 * b.epsilon
    d = acc.get_delta(b.epsilon)
    exact = _subsampled_gaussian_delta_mp(mu, q, b.epsilon)
    assert d.delta_lower <= exact <= d.delta <= exact * (1 + 1e-8)


def _two_step_remove_delta_mp(q: float, eps: float) -> float:
    """Two Poisson-subsampled N(1, 1) vs N(0, 1) steps (remove direction) at eps:
    E_{x ~ P}[delta_1(eps - L(x))] with delta_1 the exact one-step profile (mpmath quadrature)."""
    import mpmath

    mpmath.mp.dps = 40
    q_ = mpmath.mpf(q)
    half = mpmath.mpf(1) / 2

    def loss(x):  # type: ignore[no-untyped-def]
        return mpmath.log(1 - q_ + q_ * mpmath.exp(x - half))

    def one_step(t):  # type: ignore[no-untyped-def]
        e = mpmath.exp(t)
        if e <= 1 - q_:
            return 1 - e
        x_r = half + mpmath.log((e - (1 - q_)) / q_)
        return q_ * mpmath.ncdf(1 - x_r) + (1 - q_) * mpmath.ncdf(-x_r) - e * mpmath.ncdf(-x_r)

    def integrand(x):  # type: ignore[no-untyped-def]
        density = (1 - q_) * mpmath.npdf(x) + q_ * mpmath.npdf(x, 1)
        return density * one_step(mpmath.mpf(eps) - loss(x))

    points = [-mpmath.inf, 0, 4, 7, 8, 9, 10, 11, 13, mpmath.inf]
    return float(mpmath.quad(integrand, points))


def test_two_subsampled_steps_at_delta_1e15_bracket_the_exact_value():
    """Dominated-pair lower bound and connect-the-dots upper bound against an exact quadrature."""
    acc = PLDAccountant()
    acc.compose(PoissonSampledEvent(1e-3, GaussianEvent(1.0)), 2)
    b = acc.get_epsilon(1e-15)
    assert _two_step_remove_delta_mp(1e-3, b.epsilon_lower) >= 1e-15
    assert _two_step_remove_delta_mp(1e-3, b.epsilon) <= 1e-15
    assert b.epsilon <= b.epsilon_lower * 1.005


def test_log_mgf_memo_returns_fresh_copies_of_the_computed_values():
    from dpledger.accountant.pld_engine import THETAS, _log_mgf, _log_mgf_split, discretise
    from dpledger.accountant.profiles import gaussian_profile

    pld = discretise(gaussian_profile(1.0), 1e-3)
    first = _log_mgf(pld, THETAS)
    first[:] = 0.0  # a caller scribbling on its result must not reach the memo
    np.testing.assert_array_equal(_log_mgf(pld, THETAS), _log_mgf_split(pld, THETAS))
    assert len(pld.mgf_memo) == 1


def test_a_direction_below_the_lower_bound_is_only_screened():
    # 500 DP-SGD steps: the add direction (epsilon ~0.33) cannot decide the bracket set by
    # remove (~0.43), so it is composed on the coarse screening grid only
    acc = PLDAccountant()
    acc.compose(SelfComposedEvent(PoissonSampledEvent(256 / 60000, GaussianEvent(1.1)), 500))
    bound = acc.get_epsilon(1e-5)
    add_points = {points for (name, _t, points, _k) in acc._states if name == "add"}
    assert add_points and max(add_points) < 16384 // 8
    assert 0.42984 * (1 - 5e-3) <= bound.epsilon_lower <= 0.42984 <= bound.epsilon


def test_delta_query_refines_only_the_deciding_direction():
    # q = 1e-4, 1e4 steps at eps = 0.304: delta ~ 1e-15 is carried by the remove direction
    # (one heavy step, split compositions); add (delta ~ 1e-16) is settled on the first grid
    # (the first pass's bracket is already within the goal)
    acc = PLDAccountant()
    acc.compose(SelfComposedEvent(PoissonSampledEvent(1e-4, GaussianEvent(1.0)), 10_000))
    bound = acc.get_delta(0.304)
    # importance-sampling reference (tests/accountant/importance_reference.py): 9.74e-16 ± 2.4e-17
    assert bound.delta_lower <= 9.74e-16 + 3 * 2.4e-17 and bound.delta >= 9.74e-16 - 3 * 2.4e-17
    assert bound.delta <= 1.01 * bound.delta_lower
    passes = {points for (_n, _t, points, _k) in acc._states}
    add_passes = {points for (name, _t, points, _k) in acc._states if name == "add"}
    assert add_passes == {min(passes)}


def test_a_chord_out_of_reach_is_not_composed():
    # q = 1e-4, 1e5 steps, delta = 1e-5: the chord's Hoeffding shift, h sqrt(k log(1e3/delta)/2)
    # ~ 0.02, is wider than the bracket goal (0.5 % of ~0.132), so the lower bound is the
    # dominated pairs' alone
    acc = PLDAccountant()
    acc.compose(SelfComposedEvent(PoissonSampledEvent(1e-4, GaussianEvent(1.0)), 100_000))
    bound = acc.get_epsilon(1e-5)
    kinds = {kind for (*_, kind) in acc._states}
    assert "dominated" in kinds and "chord" not in kinds
    assert bound.epsilon <= bound.epsilon_lower * 1.005
    # dp-accounting's PLD at discretisation 1e-5 (pessimistic, so above the truth): 0.131940
    assert bound.epsilon_lower <= 0.131940 and bound.epsilon >= 0.131940 * (1 - 5e-3)


def test_only_an_upper_composition_no_lower_bound_reads_gets_the_shorter_window():
    from dpledger.accountant.pld import EXTENDED_WINDOW_POINTS, UPPER_WINDOW_POINTS

    sampled = PLDAccountant()  # Poisson sampling: lower pairs of their own
    sampled.compose(PoissonSampledEvent(0.01, GaussianEvent(1.0)), 10)
    prep = sampled._prepared()
    assert prep is not None
    assert sampled._extend(prep, "remove", "upper") == UPPER_WINDOW_POINTS
    for kind in ("chord", "dominated"):
        assert sampled._extend(prep, "remove", kind) == EXTENDED_WINDOW_POINTS
    plain = PLDAccountant()  # the chord lower bound reads the upper composition itself
    plain.compose(GaussianEvent(1.0), 10)
    prep = plain._prepared()
    assert prep is not None
    assert plain._extend(prep, "remove", "upper") == EXTENDED_WINDOW_POINTS
    assert UPPER_WINDOW_POINTS < EXTENDED_WINDOW_POINTS


def test_one_sampled_pure_release_is_solved_on_its_exact_curve() -> None:
    # Poisson-sampled Laplace and sampling without replacement of a pure release, once: the
    # root of the exact curve (was a composition on a grid: 17-24 s, and the without-replacement
    # lower bound was 0); capped by the pure cap
    from dpledger.core.adjacency import ROW_REPLACE_ONE
    from dpledger.core.events import LaplaceEvent, PureDPEvent, SampledWithoutReplacementEvent

    acc = PLDAccountant()
    acc.compose(PoissonSampledEvent(0.5, LaplaceEvent(1e4)))
    bound = acc.get_epsilon(1e-300)
    assert bound.details == {"exact_profile": 1.0}
    # the pure cap log(1 + q (e^{1e-4} - 1)) ~ 5.0001250e-5 is where delta reaches 0
    cap = math.log1p(0.5 * math.expm1(1e-4))
    assert bound.epsilon_lower <= cap and cap * (1 - 1e-12) <= bound.epsilon <= cap * (1 + 1e-9)
    assert bound.epsilon <= bound.epsilon_lower * (1 + 1e-9)
    wor = PLDAccountant(ROW_REPLACE_ONE)
    wor.compose(SampledWithoutReplacementEvent(10**6, 10**6 - 1, PureDPEvent(1e-9)))
    b = wor.get_epsilon(1e-12)
    assert 0 < b.epsilon_lower <= b.epsilon <= b.epsilon_lower * (1 + 1e-5)
