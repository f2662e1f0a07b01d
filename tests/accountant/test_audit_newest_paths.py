"""Independent soundness audit of the accountant's newest paths.

Every check compares the default call's certified bracket with a reference that does not use
the accountant's code (``audit_references``): 60-digit closed forms and one-dimensional
integrals (mpmath), attained strategies of the exponential mechanism evaluated exactly, and
dp-accounting at a fine grid (optimistic estimate below, pessimistic above). A certified upper
bound must never fall below a reference's value of an attained curve, and a certified lower
bound never rise above a reference's upper bound (1e-9 relative slack only). The fast cases
run by default; the wide battery is marked slow.
"""

from __future__ import annotations

import math

import mpmath as mp
import pytest

from dpledger.accountant.base import EpsilonBound
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    ApproxDPEvent,
    ComposedEvent,
    Event,
    ExponentialMechanismEvent,
    GaussianEvent,
    PoissonSampledEvent,
    PureDPEvent,
    RandomAllocationEvent,
    RandomizedResponseEvent,
    SelfComposedEvent,
)

from . import audit_references as ref
from .audit_checks import (
    ADD_REMOVE,
    REPLACE_ONE,
    SLACK,
    assert_br_upper_attained_on_lattice,
    assert_sound_against_exact,
    composed,
    epsilon_bracket,
)

# --- closed forms: Gaussian compositions, randomized response, approximate DP ---------------


@pytest.mark.parametrize(
    ("sigma", "count", "delta", "adjacency"),
    [
        (0.05, 1, 1e-300, REPLACE_ONE),
        (1.0, 7, 1e-30, ADD_REMOVE),
        (0.5, 10**30, 1e-15, REPLACE_ONE),
        (50.0, 1000, 1e-5, ADD_REMOVE),
    ],
)
def test_gaussian_compositions_against_the_exact_curve(
    sigma: float, count: int, delta: float, adjacency: Adjacency
) -> None:
    mu = adjacency.sensitivity_factor / sigma * math.sqrt(count)
    event = composed(GaussianEvent(sigma), count)
    assert_sound_against_exact(event, adjacency, delta, lambda e: ref.gaussian_delta(mu, e))


@pytest.mark.parametrize(
    ("kind", "eps0", "count", "delta"),
    [("rr", 0.3, 17, 1e-15), ("pure", 1.0, 200, 1e-30), ("approx", 0.01, 2, 1e-5)],
)
def test_pure_and_approximate_compositions_against_binomials(
    kind: str, eps0: float, count: int, delta: float
) -> None:
    delta0 = delta / 1000
    leaf: Event
    if kind == "approx":
        leaf = ApproxDPEvent(eps0, delta0)

        def exact(e: float) -> mp.mpf:
            return ref.approx_dp_delta(eps0, delta0, count, e)

    else:
        leaf = RandomizedResponseEvent(eps0) if kind == "rr" else PureDPEvent(eps0)

        def exact(e: float) -> mp.mpf:
            return ref.rr_composition_delta(eps0, count, e)

    assert_sound_against_exact(composed(leaf, count), ADD_REMOVE, delta, exact)


def test_exact_conditioning_gaussian_beside_pure_steps() -> None:
    """A Gaussian beside k pure-DP steps: the exact curve is the binomial mixture of the
    Gaussian curve shifted by each randomized-response loss."""
    sigma, eps0, count, delta = 2.0, 0.2, 3, 1e-8
    event = ComposedEvent((GaussianEvent(sigma), SelfComposedEvent(PureDPEvent(eps0), count)))
    assert_sound_against_exact(
        event,
        ADD_REMOVE,
        delta,
        lambda e: ref.gaussian_with_rr_delta(1 / sigma, eps0, count, e),
    )


@pytest.mark.parametrize(
    ("count", "eps0", "q", "sigma", "delta"),
    [
        (5, 0.05, 0.1, 1.5, 1e-9),
        (3, 0.5, 0.3, 0.5, 1e-12),
        pytest.param(30, 0.01, 0.02, 0.7, 1e-6, marks=pytest.mark.slow),
        pytest.param(60, 0.003, 0.001, 1.0, 1e-8, marks=pytest.mark.slow),
    ],
)
def test_exact_conditioning_sampled_gaussian_beside_pure_steps(
    count: int, eps0: float, q: float, sigma: float, delta: float
) -> None:
    """A Poisson-subsampled Gaussian step beside k pure-DP steps (the lower bound by exact
    conditioning): the worse direction of the exact binomial mixture, each direction's
    sampled-Gaussian curve in closed form."""
    event = ComposedEvent(
        (SelfComposedEvent(PureDPEvent(eps0), count), PoissonSampledEvent(q, GaussianEvent(sigma)))
    )
    assert_sound_against_exact(
        event,
        ADD_REMOVE,
        delta,
        lambda e: ref.sampled_gaussian_with_rr_delta(q, sigma, eps0, count, e),
    )


# --- the exponential mechanism: one release and the adaptive bounded-range bracket ----------


def test_one_exponential_mechanism_release_against_the_pairs_supremum() -> None:
    """One eps0-bounded-range release: the largest GRR(t) curve, found by a scan over t."""
    eps0, delta = 1.0, 1e-3
    lower, upper = epsilon_bracket(ExponentialMechanismEvent(eps0), ADD_REMOVE, delta)
    assert ref.br_single_delta(eps0, upper) <= delta * (1 + SLACK)
    assert lower <= upper


@pytest.mark.parametrize(("eps0", "count", "delta"), [(1.0, 10, 1e-5)])
def test_adaptive_bounded_range_upper_above_an_adaptive_strategy(
    eps0: float, count: int, delta: float
) -> None:
    """The certified upper of k releases at one epsilon is at least the exact value of an
    adaptive strategy and of the best non-adaptive one (both attained); the lower is at most
    the zCDP bound (eps0^2/8 per release)."""
    lower, upper = epsilon_bracket(
        SelfComposedEvent(ExponentialMechanismEvent(eps0), count), ADD_REMOVE, delta
    )
    policy = ref.adaptive_policy(eps0, count, upper)
    assert ref.adaptive_br_policy_delta(eps0, count, upper, policy) <= delta * (1 + SLACK)
    assert ref.brr_composition_delta(eps0, count, upper, points=100) <= delta * (1 + SLACK)
    assert lower <= ref.zcdp_epsilon(count * eps0**2 / 8, delta) * (1 + SLACK)


@pytest.mark.parametrize(("eps0", "count", "delta", "points"), [(1.0, 10, 1e-5, 200)])
def test_adaptive_bounded_range_upper_above_a_fine_lattice_optimum(
    eps0: float, count: int, delta: float, points: int
) -> None:
    """The optimal adaptive strategy with positions on a lattice of eps0 / points (an
    independent recursion) is attained: its value at the certified upper is at most delta."""
    assert_br_upper_attained_on_lattice(eps0, count, delta, points)


# --- random allocation: deterministic corner cases and the single-release cap ----------------


@pytest.mark.parametrize(("steps", "sigma", "delta"), [(1, 0.7, 1e-10), (3, 1.5, 1e-6)])
def test_allocation_to_every_step_is_that_many_gaussians(
    steps: int, sigma: float, delta: float
) -> None:
    """k = t allocates every record to every step: exactly t Gaussian releases."""
    mu = math.sqrt(steps) / sigma
    event = RandomAllocationEvent(steps, GaussianEvent(sigma), steps)
    assert_sound_against_exact(event, ADD_REMOVE, delta, lambda e: ref.gaussian_delta(mu, e))


def test_allocation_upper_finite_and_near_one_release_at_tiny_delta() -> None:
    """One Gaussian release of the same noise dominates an epoch of 1-of-t allocation; at
    delta = 1e-20 the epoch's upper bound is finite and within 1e-3 of that release's (the
    tables' floor once left it infinite)."""
    sigma, delta = 1.0, 1e-20
    _, upper = epsilon_bracket(RandomAllocationEvent(2, GaussianEvent(sigma)), ADD_REMOVE, delta)
    single = epsilon_bracket(GaussianEvent(sigma), ADD_REMOVE, delta)[1]
    assert upper <= single * (1 + 1e-3)


def test_every_step_allocation_upper_never_above_k_releases_at_tiny_delta() -> None:
    """2-of-2 allocation is exactly two Gaussian releases: at delta = 1e-25 its upper bound
    is finite and within 1e-3 of theirs."""
    delta = 1e-25
    event = RandomAllocationEvent(2, GaussianEvent(1.0), 2)
    _, upper = epsilon_bracket(event, ADD_REMOVE, delta)
    releases = epsilon_bracket(SelfComposedEvent(GaussianEvent(1.0), 2), ADD_REMOVE, delta)[1]
    assert upper <= releases * (1 + 1e-3)


# --- extreme parameters --------------------------------------------------------------------


def test_tiny_pure_steps_many_times_at_tiny_delta() -> None:
    """10^4 + 1 pure-DP steps at 1e-300 (the first count past the exact binomial): delta(0)
    is at least that of 100 of them (composition only adds), an exact binomial of 3.98e-300
    (400 digits), above delta = 1e-300; the closed form certifies epsilon 0 (the PLD and RDP
    backends give 1.0001e-296; the closed form's Hoeffding route once certified epsilon 0 here,
    its variance proxy count * eps0^2 underflowing)."""
    eps0, delta = 1e-300, 1e-300
    event = SelfComposedEvent(PureDPEvent(eps0), 10**4 + 1)
    lower, upper = epsilon_bracket(event, ADD_REMOVE, delta)
    assert lower <= upper
    assert ref.rr_composition_delta(eps0, 100, upper, dps=400) <= delta * (1 + SLACK)


def test_tiny_pure_steps_fewer_times_stay_sound() -> None:
    """The same steps 100 times (exact route) and 10^6 times at delta 1e-5 (where epsilon 0
    is right: delta(0) is about 4e-298)."""
    eps0 = 1e-300
    _, upper = epsilon_bracket(SelfComposedEvent(PureDPEvent(eps0), 100), ADD_REMOVE, 1e-300)
    assert ref.rr_composition_delta(eps0, 100, upper, dps=400) <= 1e-300 * (1 + SLACK)
    _, upper = epsilon_bracket(SelfComposedEvent(PureDPEvent(eps0), 10**6), ADD_REMOVE, 1e-5)
    assert upper >= 0.0


def test_extreme_allocation_is_bounded_by_its_release_without_warnings() -> None:
    """An epoch whose amplification the accountant cannot analyse (losses near 1e6) is bounded
    by its one Gaussian release (no amplification), with a lower bound of 0; the test
    configuration turns warnings into errors."""
    bound = account(RandomAllocationEvent(3, GaussianEvent(1e-3)), ADD_REMOVE, delta=1e-5).bound
    assert isinstance(bound, EpsilonBound) and "no amplification" in bound.method
    assert bound.epsilon_lower == 0.0
    assert ref.gaussian_delta(1e3, bound.epsilon) <= 1e-5 * (1 + SLACK)


def test_allocation_to_very_many_steps_is_bounded_by_one_release() -> None:
    """10^30 steps: the epoch is bounded by its one Gaussian release."""
    lower, upper = epsilon_bracket(
        RandomAllocationEvent(10**30, GaussianEvent(1.0)), ADD_REMOVE, 1e-5
    )
    assert 0.0 <= lower <= upper
    assert ref.gaussian_delta(1.0, upper) <= 1e-5 * (1 + SLACK)
