"""Shuffled batches: the upper bound is the batch's mechanism once per epoch, the certified lower
bound (max of the batch sums) lies below it and agrees with a Monte-Carlo estimate."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import special, stats

from dpledger.accountant.leaves import leaf_profiles
from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.profiles import (
    lower_pair_profiles,
    max_of_batches_edges,
    max_of_batches_log_cdf,
    max_of_batches_pair,
)
from dpledger.accountant.rdp import RDPAccountant
from dpledger.accountant.select import account
from dpledger.core.adjacency import ROW_ADD_REMOVE, ROW_REPLACE_ONE
from dpledger.core.errors import UnsupportedEventError
from dpledger.core.events import (
    ComposedEvent,
    GaussianEvent,
    LaplaceEvent,
    PureDPEvent,
    SelfComposedEvent,
    ShuffledBatchesEvent,
)


def epochs(sigma: float, batches: int, count: int, inner=None) -> SelfComposedEvent:
    inner = inner if inner is not None else GaussianEvent(sigma)
    return SelfComposedEvent(ShuffledBatchesEvent(100 * batches, 100, inner), count)


def test_upper_bound_is_the_base_mechanism_composed_once_per_epoch():
    sigma, count = 2.0, 10
    shuffled = account(epochs(sigma, 100, count), ROW_REPLACE_ONE, delta=1e-5).bound
    plain = account(
        SelfComposedEvent(GaussianEvent(sigma), count),
        ROW_REPLACE_ONE,
        delta=1e-5,
        backends=["closed_form"],
    ).bound
    # exact: Gaussian with mu = 2 sqrt(E) / sigma; the PLD upper bound sits just above it
    assert plain.epsilon_lower <= shuffled.epsilon <= plain.epsilon * 1.002
    assert 0 < shuffled.epsilon_lower < shuffled.epsilon


def test_rdp_upper_bound_equals_the_composed_gaussian():
    shuffled = RDPAccountant(ROW_REPLACE_ONE).compose(epochs(1.0, 10, 7))
    plain = RDPAccountant(ROW_REPLACE_ONE).compose(GaussianEvent(1.0), 7)
    assert np.array_equal(shuffled.rdp(), plain.rdp())


def test_one_batch_per_epoch_brackets_the_gaussian_tightly():
    """With T = 1 the attack pair is N(2, s^2) vs N(0, s^2): the bracket closes."""
    bound = account(epochs(1.0, 1, 4), ROW_REPLACE_ONE, delta=1e-5).bound
    assert bound.epsilon_lower > 0.98 * bound.epsilon


def test_sigma1_100_batches_10_epochs_gap_to_poisson():
    from dpledger.core.events import PoissonSampledEvent

    bound = account(epochs(1.0, 100, 10), ROW_REPLACE_ONE, delta=1e-5).bound
    poisson = account(
        SelfComposedEvent(PoissonSampledEvent(0.01, GaussianEvent(1.0)), 1000),
        ROW_REPLACE_ONE,
        delta=1e-5,
    ).bound
    # shuffled batches certifiably cost several times the Poisson epsilon at q = 1/T
    assert bound.epsilon_lower > 3 * poisson.epsilon
    assert bound.epsilon_lower < bound.epsilon


def _log_ratio(x: np.ndarray, batches: int, m: float) -> np.ndarray:
    """Exact privacy loss of the max statistic (scale 1): f_P / f_Q at x."""
    a = math.log((batches - 1) / batches) + special.log_ndtr(x - m) - special.log_ndtr(x)
    b = -math.log(batches) + m * x - m * m / 2
    return np.logaddexp(a, b)


@pytest.mark.parametrize("count", [1, 2])
def test_lower_bound_against_monte_carlo(count):
    """Sound (below the Monte-Carlo upper confidence limit of the exact curve, from the full
    likelihood ratio) and at least as tight as the max statistic (above its lower confidence
    limit); the binned max pair, composed exactly, matches its Monte Carlo."""
    batches, sigma, eps = 4, 1.0, 1.0
    mu = 2.0 / sigma
    rng = np.random.default_rng(2024)
    n = 400_000
    loss_max, loss_full = np.zeros(n), np.zeros(n)
    for _ in range(count):
        draws = rng.normal(size=(n, batches))
        draws[:, 0] += mu
        loss_max += _log_ratio(draws.max(axis=1), batches, mu)
        loss_full += special.logsumexp(mu * draws - mu * mu / 2, axis=1) - math.log(batches)
    stats_ = {}
    for key, loss in (("max", loss_max), ("full", loss_full)):
        values = -np.expm1(np.minimum(eps - loss, 0.0))
        stats_[key] = values.mean(), values.std() / math.sqrt(n)
    acc = PLDAccountant(ROW_REPLACE_ONE).compose(epochs(sigma, batches, count))
    lower = acc.get_delta(eps).delta_lower
    full, full_se = stats_["full"]
    mean, se = stats_["max"]
    assert lower < full + 5 * full_se
    assert lower < acc.get_delta(eps).delta
    # the binned pair itself, composed exactly, is tight
    pair = max_of_batches_pair(batches, sigma, 2.0, 0.0, bins=1000)
    keep = (pair.p_lower > 0) & (pair.q_upper > 0)
    p, losses = pair.p_lower[keep], np.log(pair.p_lower[keep] / pair.q_upper[keep])
    if count == 2:
        p, losses = np.outer(p, p).ravel(), np.add.outer(losses, losses).ravel()
    exact = float(np.sum(p * np.maximum(0.0, -np.expm1(eps - losses))))
    assert mean - 5 * se < exact < mean + 5 * se
    if count == 1:  # above the max statistic, and close to the exact curve
        assert mean + 5 * se < lower
        assert full - 5 * full_se < lower / 0.98


def test_like_for_like_with_the_published_cube_bound():
    """The binned pair dominates Chua et al.'s single-threshold ("cube") bound for their pair
    (zeroing-out: the differing batch at 2 vs 1, scale sigma), at every threshold used."""
    sigma, batches = 0.5, 1000
    pair = max_of_batches_pair(batches, sigma, 2.0, 1.0)
    forward, _ = lower_pair_profiles(pair, "chua")
    caps = max_of_batches_edges(batches, sigma, 2.0, 1.0, "gaussian", 4000)
    out_p = -np.expm1(max_of_batches_log_cdf(caps, batches, sigma, 2.0, "gaussian")[0])
    out_q = -np.expm1(max_of_batches_log_cdf(caps, batches, sigma, 1.0, "gaussian")[0])
    # the same cube bound, written from scratch with scipy's normal law
    ref_p = 1 - stats.norm.cdf(caps / sigma) ** (batches - 1) * stats.norm.cdf((caps - 2) / sigma)
    assert np.allclose(out_p, ref_p, rtol=1e-6, atol=1e-12)
    for eps in (0.5, 1.0, 2.0, 4.0):
        cube = float(np.max(out_p - math.exp(eps) * out_q))
        ours = float(forward(np.array([eps]))[0])
        assert cube * (1 - 1e-9) - 1e-15 <= ours
        assert ours < cube * 1.5 + 1e-12  # binning adds little to the best threshold


def test_masses_are_bracketed():
    pair = max_of_batches_pair(50, 0.8, 2.0, 0.0, bins=500)
    assert np.all(pair.p_lower <= pair.p_upper) and np.all(pair.q_lower <= pair.q_upper)
    assert pair.p_lower.sum() <= 1.0 <= pair.p_upper.sum() * (1 + 1e-12)
    assert pair.q_lower.sum() <= 1.0 <= pair.q_upper.sum() * (1 + 1e-12)
    assert pair.p_upper.sum() - pair.p_lower.sum() < 1e-9


def test_laplace_batches_have_a_certified_lower_bound():
    event = epochs(1.0, 20, 3, inner=LaplaceEvent(1.0))
    bound = account(event, ROW_REPLACE_ONE, delta=1e-5).bound
    assert 0 < bound.epsilon_lower < bound.epsilon <= 3 * 2.0 * (1 + 1e-9)


def test_several_gaussians_per_batch_merge_and_other_mechanisms_have_a_trivial_lower_bound():
    two = epochs(1.0, 10, 2, inner=ComposedEvent([GaussianEvent(2.0), GaussianEvent(2.0)]))
    one = epochs(1.0, 10, 2, inner=GaussianEvent(math.sqrt(2.0)))
    a = account(two, ROW_REPLACE_ONE, delta=1e-5).bound
    b = account(one, ROW_REPLACE_ONE, delta=1e-5).bound
    assert a.epsilon == pytest.approx(b.epsilon, rel=1e-3)
    pure = leaf_profiles(ShuffledBatchesEvent(10, 2, PureDPEvent(1.0)), ROW_REPLACE_ONE)
    assert float(pure.lower_remove(np.array([0.0]))[0]) == 0.0


def test_add_remove_is_refused_by_every_backend():
    with pytest.raises(UnsupportedEventError) as info:
        account(epochs(1.0, 10, 2), ROW_ADD_REMOVE, delta=1e-5, crosscheck=True)
    text = str(info.value)
    assert "declare relation = 'replace_one'" in text
    assert text.count("replace-one adjacency only") >= 3


def test_closed_form_declines_with_the_reason():
    selection = account(epochs(1.0, 10, 2), ROW_REPLACE_ONE, delta=1e-5)
    reasons = dict(selection.unavailable)
    assert "no closed-form lower bound" in reasons["closed_form"]


def test_the_lower_bound_grows_with_the_epochs() -> None:
    """A longer run contains a shorter one: its certified lower bound is at least as large
    (the lower pair's own tails guide its wrap-around bound; the upper pair's made it
    vacuous at 3 epochs here)."""
    from dpledger.accountant.pld import PLDAccountant
    from dpledger.core.adjacency import Adjacency
    from dpledger.core.events import GaussianEvent, SelfComposedEvent, ShuffledBatchesEvent

    lowers = [
        PLDAccountant(Adjacency(relation="replace_one"))
        .compose(SelfComposedEvent(ShuffledBatchesEvent(1797, 64, GaussianEvent(1.0)), e))
        .get_epsilon(1e-5)
        .epsilon_lower
        for e in (1, 2, 3, 4)
    ]
    assert all(b > a for a, b in itertools.pairwise(lowers)), lowers


@pytest.mark.parametrize(
    ("batches", "sigma", "count"), [(100, 1.0, 10), (100, 2.0, 10), (40, 1.5, 3)]
)
def test_the_attack_pair_is_random_allocation_at_half_the_noise(batches, sigma, count) -> None:
    """Under replace-one the attack makes the differing batch 2C under D and 0 under D' (units
    of C, noise sigma C), every other batch 0: P = (1/T) sum_t N((2 / sigma) e_t, I), Q = N(0, I),
    the remove pair of random allocation (add/remove, one of T steps) at noise sigma / 2. So
    (i) both lower bounds are the max statistic of the same pair and agree, and (ii) random
    allocation's certified upper bound at sigma / 2 bounds the exact curve of this pair, hence
    every lower bound that attacks it: it must not be below the shuffled lower bound (with the
    likelihood ratio the two nearly meet)."""
    from dpledger.core.events import RandomAllocationEvent

    shuffled = account(epochs(sigma, batches, count), ROW_REPLACE_ONE, delta=1e-5).bound
    allocation = account(
        SelfComposedEvent(RandomAllocationEvent(batches, GaussianEvent(sigma / 2)), count),
        ROW_ADD_REMOVE,
        delta=1e-5,
    ).bound
    # the same lower curves, composed on grids of their own
    assert allocation.epsilon_lower == pytest.approx(shuffled.epsilon_lower, rel=1e-2)
    assert shuffled.epsilon_lower <= allocation.epsilon
    assert allocation.epsilon <= shuffled.epsilon  # one release per epoch caps both


def test_same_noise_different_adjacency_is_not_a_comparison() -> None:
    """At the same sigma random allocation (add/remove, sensitivity C) can be far below the
    shuffled lower bound (replace-one, sensitivity 2C): the MNIST setting of docs/batching.md,
    sigma = 1.1, T = 235, 60 epochs. Comparing them says nothing about shuffling; the like-for-
    like comparison halves sigma (previous test)."""
    from dpledger.core.events import RandomAllocationEvent

    shuffled = account(
        SelfComposedEvent(ShuffledBatchesEvent(60000, 256, GaussianEvent(1.1)), 60),
        ROW_REPLACE_ONE,
        delta=1e-5,
    ).bound
    allocation = account(
        SelfComposedEvent(RandomAllocationEvent(235, GaussianEvent(1.1)), 60),
        ROW_ADD_REMOVE,
        delta=1e-5,
    ).bound
    assert allocation.epsilon < shuffled.epsilon_lower / 5


def test_an_infinite_upper_bound_of_a_coarse_pass_is_refined() -> None:
    """Six shuffled epochs of Laplace batches (their upper curve the Laplace release's): the
    first pass's windows cut the composed loss's tail and read an infinite upper bound, which
    once ended the query (the default call then took RDP's, 12 % higher); a finer pass reads
    the Laplace composition's own bound."""
    rows = [
        (39, 39, 5.439084579250108, 23),
        (90, 30, 5.011180054105595, 4),
        (23, 23, 5.0550559266705415, 17),
        (58, 29, 5.0308138242128795, 5),
        (117, 39, 5.285045082449053, 9),
        (72, 24, 5.2710257475722955, 25),
    ]
    shuffled, plain = PLDAccountant(ROW_REPLACE_ONE), PLDAccountant(ROW_REPLACE_ONE)
    for n, b, scale, count in rows:
        shuffled.compose(ShuffledBatchesEvent(n, b, LaplaceEvent(scale)), count)
        plain.compose(LaplaceEvent(scale), count)
    for delta in (1e-2, 1e-5):
        got, want = shuffled.get_epsilon(delta), plain.get_epsilon(delta)
        assert want.epsilon_lower <= got.epsilon <= want.epsilon * (1 + 1e-5)
        assert 0.0 < got.epsilon_lower < got.epsilon


def test_laplace_far_upper_tail_keeps_its_masses() -> None:
    """Laplace noise of scale 0.01 under a shift of 2: Q's mass in the top bin is about
    T e^(-x/b) / 2, far below the rounding of 1; its bracket must hold it to 1e-9 relative (its
    upper bound was ~1e-13: an absolute error on log F, which capped the attack near 92), and
    the lower bound of a shuffled epoch reads the attack's 2/b - log T."""
    batches, scale = 100, 0.01
    pair = max_of_batches_pair(batches, scale, 2.0, 0.0, "laplace", bins=500)
    edges = max_of_batches_edges(batches, scale, 2.0, 0.0, "laplace", 500)
    exact_top = -math.expm1(batches * math.log1p(-0.5 * math.exp(-edges[-1] / scale)))
    assert exact_top < 1e-80
    assert pair.q_lower[-1] <= exact_top <= pair.q_upper[-1] <= exact_top * (1 + 1e-9)
    assert pair.q_lower.sum() <= 1.0 <= pair.q_upper.sum() * (1 + 1e-12)
    assert pair.p_lower.sum() <= 1.0 <= pair.p_upper.sum() * (1 + 1e-12)
    epoch = ShuffledBatchesEvent(10 * batches, 10, LaplaceEvent(scale))
    bound = account(epoch, ROW_REPLACE_ONE, delta=1e-5).bound
    attack = 2.0 / scale - math.log(batches)
    assert attack - 1e-3 <= bound.epsilon_lower <= bound.epsilon <= (2.0 / scale) * (1 + 1e-9)
