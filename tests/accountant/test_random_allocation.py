"""Random allocation of a Gaussian step: the certified tables against closed forms, the
max-of-steps lower curve, the no-amplification bound, Monte Carlo and an independent library."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, special

from dpledger.accountant.profiles import gaussian_profile, lower_pair_profiles
from dpledger.accountant.random_allocation import (
    allocation_lower_pair,
    allocation_table_event,
    allocation_tables,
)
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import UnsupportedEventError
from dpledger.core.events import (
    GaussianEvent,
    LaplaceEvent,
    RandomAllocationEvent,
    SelfComposedEvent,
)

DELTA = 1e-5


def test_one_step_is_the_plain_gaussian() -> None:
    alloc = account(RandomAllocationEvent(1, GaussianEvent(1.3)), Adjacency(), delta=DELTA)
    plain = account(GaussianEvent(1.3), Adjacency(), delta=DELTA)
    assert alloc.bound.epsilon == pytest.approx(plain.bound.epsilon, rel=2e-3)
    tables = allocation_tables(1.3, 1)
    gauss = gaussian_profile(1 / 1.3)(tables.epsilons)
    assert np.array_equal(tables.remove, gauss) and np.array_equal(tables.add, gauss)


def test_two_steps_raw_table_is_close_to_and_above_the_exact_value() -> None:
    # t = 2: delta_remove(eps) = E_{L1}[E[(L2 - (2 e^eps - L1))_+]] / 2, the inner
    # expectation in closed form, the outer one by quadrature
    mu, t = 1.0, 2
    tables = allocation_tables(1 / mu, t)

    def inner(x: float) -> float:
        if x <= 0:
            return 1.0 - x
        z = (math.log(x) + mu * mu / 2) / mu
        return float(special.ndtr(mu - z) - x * special.ndtr(-z))

    for i in range(0, 120, 15):
        c = math.exp(float(tables.epsilons[i]))

        def f(z1: float, c: float = c) -> float:
            density = math.exp(-z1 * z1 / 2) / math.sqrt(2 * math.pi)
            return density * inner(t * c - math.exp(mu * z1 - mu * mu / 2)) / t

        exact = integrate.quad(f, -12, 12, limit=400, epsabs=1e-14, epsrel=1e-12)[0]
        assert tables.remove_raw[i] >= exact
        assert tables.remove_raw[i] <= exact * 1.002 + 1e-12


def test_never_above_one_gaussian_release_per_epoch() -> None:
    epoch = RandomAllocationEvent(50, GaussianEvent(1.0))
    alloc = account(SelfComposedEvent(epoch, 4), Adjacency(), delta=DELTA).bound
    plain = account(SelfComposedEvent(GaussianEvent(1.0), 4), Adjacency(), delta=DELTA).bound
    assert alloc.epsilon <= plain.epsilon
    tables = allocation_tables(1.0, 50)
    gauss = gaussian_profile(1.0)(tables.epsilons)
    assert np.all(tables.remove <= gauss) and np.all(tables.add <= gauss)


def test_never_below_the_certified_max_of_steps_lower_curve() -> None:
    sigma, t = 1.1, 40
    tables = allocation_tables(sigma, t)
    forward, backward = lower_pair_profiles(allocation_lower_pair(sigma, t), "max")
    assert np.all(tables.remove >= forward(tables.epsilons))
    assert np.all(tables.add >= backward(tables.epsilons))
    bound = account(RandomAllocationEvent(t, GaussianEvent(sigma)), Adjacency(), delta=DELTA)
    assert 0 < bound.bound.epsilon_lower <= bound.bound.epsilon


@pytest.mark.parametrize("t", [3, 8])
def test_monte_carlo_sanity_of_the_delta_formula(t: int) -> None:
    sigma = 1.0
    rng = np.random.default_rng(12345)
    z = rng.standard_normal((400_000, t))
    ratio = np.exp(z / sigma - 0.5 / sigma**2).mean(axis=1)  # S / t under Q
    tables = allocation_tables(sigma, t)
    for i in (0, 10, 25, 40):
        c = math.exp(float(tables.epsilons[i]))
        for sample, bound in (
            (np.maximum(ratio - c, 0.0), tables.remove_raw[i]),
            (np.maximum(1.0 - c * ratio, 0.0), tables.add_raw[i]),
        ):
            mean, se = float(sample.mean()), float(sample.std()) / math.sqrt(sample.size)
            assert bound >= mean - 6 * se
            assert bound <= mean * 1.05 + 6 * se + 1e-9


def test_replace_one_and_other_bases_are_refused() -> None:
    event = RandomAllocationEvent(10, GaussianEvent(1.0))
    with pytest.raises(UnsupportedEventError, match="add/remove adjacency only"):
        allocation_table_event(event, Adjacency(relation="replace_one"))
    with pytest.raises(UnsupportedEventError, match="Gaussian releases"):
        allocation_table_event(RandomAllocationEvent(10, LaplaceEvent(1.0)), Adjacency())


def _eps(event: object, delta: float = DELTA) -> tuple[float, float]:
    bound = account(event, Adjacency(), delta=delta).bound  # type: ignore[arg-type]
    return bound.epsilon_lower, bound.epsilon


def test_k_of_k_steps_is_k_releases_in_closed_form() -> None:
    """Every step holds the record: k Gaussian releases, mu = sqrt(k) / sigma (exact)."""
    low, up = _eps(RandomAllocationEvent(5, GaussianEvent(2.0), 5))
    mu = math.sqrt(5) / 2.0
    exact = _gaussian_epsilon(mu, DELTA)
    assert low <= exact <= up
    assert up == pytest.approx(exact, rel=1e-3)


def _gaussian_epsilon(mu: float, delta: float) -> float:
    def excess(eps: float) -> float:
        d = special.ndtr(-eps / mu + mu / 2) - math.exp(eps) * special.ndtr(-eps / mu - mu / 2)
        return float(d) - delta

    lo, hi = 0.0, 50.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if excess(mid) > 0 else (lo, mid)
    return hi


def test_k_of_t_is_k_epochs_of_one_of_t_over_k() -> None:
    """Feldman & Shenfeld, Lemma 3.2: 2-of-20 costs what two 1-of-10 epochs cost; 3-of-10
    (groups of 3, 3 and 4 steps) lies between three 1-of-4 and three 1-of-3 epochs (the
    lemma's floor(t/k) form), and far below 3 releases."""
    g = GaussianEvent(2.0)
    assert _eps(RandomAllocationEvent(20, g, 2))[1] == pytest.approx(
        _eps(SelfComposedEvent(RandomAllocationEvent(10, g), 2))[1], rel=1e-9
    )
    g = GaussianEvent(1.5)
    kt = _eps(RandomAllocationEvent(10, g, 3))[1]
    floor_form = _eps(SelfComposedEvent(RandomAllocationEvent(3, g), 3))[1]
    ceil_form = _eps(SelfComposedEvent(RandomAllocationEvent(4, g), 3))[1]
    releases = _eps(SelfComposedEvent(g, 3))[1]
    assert ceil_form < kt < floor_form < releases
    assert kt < 0.6 * releases


@pytest.mark.slow  # a sweep of k and t (seconds); one k-of-t case is checked in the default tier
def test_k_of_t_grows_with_k_falls_with_t_and_stays_above_its_lower_bound() -> None:
    g = GaussianEvent(1.0)
    by_k = [_eps(RandomAllocationEvent(40, g, k)) for k in (1, 2, 4, 8)]
    by_t = [_eps(RandomAllocationEvent(t, g, 4)) for t in (8, 16, 40)]
    for seq, sign in ((by_k, 1), (by_t, -1)):
        uppers = [up for _, up in seq]
        assert all(sign * (b - a) > 0 for a, b in itertools.pairwise(uppers))
    for low, up in by_k + by_t:
        assert 0 < low < up
    # the lower bound (the max of the t step outputs and the lattice sum of their likelihood
    # ratios, the record's k steps shifted) grows with k as well
    lows = [low for low, _ in by_k]
    assert all(b > a for a, b in itertools.pairwise(lows))


def test_max_of_steps_with_k_shifted_has_the_closed_form_law() -> None:
    from dpledger.accountant.profiles import max_of_batches_log_cdf

    x = np.linspace(-3.0, 6.0, 19)
    value, err = max_of_batches_log_cdf(x, 12, 0.8, 1.0, "gaussian", shifted=3)
    ref = 9 * special.log_ndtr(x / 0.8) + 3 * special.log_ndtr((x - 1.0) / 0.8)
    assert np.all(np.abs(value - ref) <= err + 1e-15)
    assert np.all(err < 1e-12 * (np.abs(ref) + 1))


@settings(max_examples=4, deadline=None)
@given(sigma=st.floats(0.7, 4.0), t=st.integers(2, 25))
def test_tables_are_valid_certified_curves(sigma: float, t: int) -> None:
    tables = allocation_tables(sigma, t)
    gauss = gaussian_profile(1 / sigma)(tables.epsilons)
    for curve in (tables.remove, tables.add):
        assert np.all((curve >= 0) & (curve <= 1))
        assert np.all(np.diff(curve) <= 0)
        assert np.all(curve <= gauss)
    # delta(0) is the total variation distance: the same for both directions
    assert tables.remove_raw[0] == pytest.approx(tables.add_raw[0], rel=1e-3, abs=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize(("sigma", "t", "epochs"), [(1.1, 10, 1), (0.9, 50, 3)])
def test_against_pld_accounting(sigma: float, t: int, epochs: int) -> None:
    lib = pytest.importorskip("PLD_accounting")
    upper, lower = lib.gaussian_allocation_epsilon_range(
        delta=DELTA, sigma=sigma, num_steps=t, num_epochs=epochs
    )
    ours = account(
        SelfComposedEvent(RandomAllocationEvent(t, GaussianEvent(sigma)), epochs),
        Adjacency(),
        delta=DELTA,
    ).bound
    assert ours.epsilon >= lower * (1 - 1e-3)
    assert ours.epsilon <= upper * 1.03


@pytest.mark.slow
@pytest.mark.parametrize(("sigma", "t", "k"), [(2.0, 20, 2), (1.5, 10, 3)])
def test_k_of_t_against_pld_accounting(sigma: float, t: int, k: int) -> None:
    """The authors' library bounds k-of-t allocation by the same reduction (groups of t // k
    and t // k + 1 steps); our certified bound lies in its bracket."""
    lib = pytest.importorskip("PLD_accounting")
    upper, lower = lib.gaussian_allocation_epsilon_range(
        delta=DELTA, sigma=sigma, num_steps=t, num_selected=k
    )
    ours = _eps(RandomAllocationEvent(t, GaussianEvent(sigma), k))[1]
    assert lower * (1 - 1e-3) <= ours <= upper * 1.03


def test_the_likelihood_ratio_closes_the_bracket() -> None:
    """The lower bound uses the likelihood ratio of the step outputs besides their maximum: at
    sigma = 1, t = 50 (one epoch and five) it is within 0.5% of the certified upper bound, where
    the maximum alone certifies far less."""
    from dpledger.accountant.pld import PLDAccountant

    for epochs in (1, 5):
        low, up = _eps(SelfComposedEvent(RandomAllocationEvent(50, GaussianEvent(1.0)), epochs))
        assert 0.995 * up <= low <= up
    forward, _ = lower_pair_profiles(allocation_lower_pair(1.0, 50), "max")
    only_max = float(forward(np.array([0.5]))[0])
    both = PLDAccountant(Adjacency()).compose(RandomAllocationEvent(50, GaussianEvent(1.0)))
    assert both.get_delta(0.5).delta_lower > 2 * only_max


def test_one_of_t_is_left_as_it_was() -> None:
    """k = 1: the reduction is the event itself, and the upper bound is its certified table
    composed as a tabulated profile."""
    from dpledger.accountant.random_allocation import allocation_parts

    event = RandomAllocationEvent(30, GaussianEvent(1.2))
    assert allocation_parts(event) == ((event, 1),)
    table = allocation_table_event(event, Adjacency())
    assert _eps(SelfComposedEvent(event, 3))[1] == pytest.approx(
        _eps(SelfComposedEvent(table, 3))[1], rel=1e-6
    )


@pytest.mark.parametrize("delta", [1e-20, 1e-30])
def test_a_small_delta_reads_a_finite_epsilon_no_larger_than_one_release(delta: float) -> None:
    """Past the table the one-release Gaussian's points carry on: at delta = 1e-20 the epoch of
    two steps used to read infinity; now a finite bound, at most a hair (the connect-the-dots
    reading of a table) above one release's, and above the certified lower bound."""
    low, up = _eps(RandomAllocationEvent(2, GaussianEvent(1.0)), delta)
    single = account(GaussianEvent(1.0), Adjacency(), delta=delta).bound
    assert math.isfinite(up)
    assert single.epsilon_lower * (1 - 1e-12) <= up <= single.epsilon * (1 + 1e-4)
    assert 0 < low <= up


@pytest.mark.parametrize(("steps", "sigma"), [(2, 0.01), (2, 0.03), (10**30, 1.0), (10**12, 1.0)])
def test_epochs_beyond_the_tables_are_bounded_by_one_release(steps: int, sigma: float) -> None:
    """A nearly noiseless step (the table would reach e^eps beyond the float range) or an epoch
    too long to tabulate used to overflow; it is bounded by one Gaussian release, which
    dominates any epoch (joint convexity), and its lower bound stays below."""
    low, up = _eps(RandomAllocationEvent(steps, GaussianEvent(sigma)), 1e-5)
    single = account(GaussianEvent(sigma), Adjacency(), delta=1e-5).bound
    assert single.epsilon_lower * (1 - 1e-9) <= up <= single.epsilon * (1 + 1e-4)
    assert 0 <= low <= up
