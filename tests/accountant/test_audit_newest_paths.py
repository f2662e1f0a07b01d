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
from collections.abc import Callable
from typing import Any

import mpmath as mp
import numpy as np
import pytest

from dpledger.accountant.base import DeltaBound, EpsilonBound
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import DPLedgerError
from dpledger.core.events import (
    ApproxDPEvent,
    ComposedEvent,
    Event,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PureDPEvent,
    RandomAllocationEvent,
    RandomizedResponseEvent,
    SelfComposedEvent,
)

from . import audit_references as ref

SLACK = 1e-9
ADD_REMOVE = Adjacency()
REPLACE_ONE = Adjacency(relation="replace_one")
Curve = Callable[[float], mp.mpf]


def _epsilon_bracket(event: Event, adjacency: Adjacency, delta: float) -> tuple[float, float]:
    bound = account(event, adjacency, delta=delta).bound
    assert isinstance(bound, EpsilonBound)
    return bound.epsilon_lower, bound.epsilon


def _delta_bracket(event: Event, adjacency: Adjacency, epsilon: float) -> tuple[float, float]:
    bound = account(event, adjacency, epsilon=epsilon).bound
    assert isinstance(bound, DeltaBound)
    return bound.delta_lower, bound.delta


def _assert_sound_against_exact(
    event: Event, adjacency: Adjacency, delta: float, exact: Curve
) -> tuple[float, float]:
    """The exact curve at our upper is at most ``delta`` and at our lower at least ``delta``;
    the delta query at our upper brackets the exact value there."""
    lower, upper = _epsilon_bracket(event, adjacency, delta)
    assert lower <= upper
    if math.isfinite(upper):
        assert exact(upper) <= delta * (1 + SLACK), (lower, upper)
        d_lower, d_upper = _delta_bracket(event, adjacency, upper)
        at_upper = exact(upper)
        assert d_upper >= at_upper * (1 - SLACK)
        assert d_lower <= at_upper * (1 + SLACK) + 1e-300
    if lower > 0:
        assert exact(lower) >= delta * (1 - SLACK), (lower, upper)
    return lower, upper


def _composed(event: Event, count: int) -> Event:
    return event if count == 1 else SelfComposedEvent(event, count)


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
    event = _composed(GaussianEvent(sigma), count)
    _assert_sound_against_exact(event, adjacency, delta, lambda e: ref.gaussian_delta(mu, e))


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

    _assert_sound_against_exact(_composed(leaf, count), ADD_REMOVE, delta, exact)


def test_exact_conditioning_gaussian_beside_pure_steps() -> None:
    """A Gaussian beside k pure-DP steps: the exact curve is the binomial mixture of the
    Gaussian curve shifted by each randomized-response loss."""
    sigma, eps0, count, delta = 2.0, 0.2, 3, 1e-8
    event = ComposedEvent((GaussianEvent(sigma), SelfComposedEvent(PureDPEvent(eps0), count)))
    _assert_sound_against_exact(
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
    _assert_sound_against_exact(
        event,
        ADD_REMOVE,
        delta,
        lambda e: ref.sampled_gaussian_with_rr_delta(q, sigma, eps0, count, e),
    )


# --- the exponential mechanism: one release and the adaptive bounded-range bracket ----------


def test_one_exponential_mechanism_release_against_the_pairs_supremum() -> None:
    """One eps0-bounded-range release: the largest GRR(t) curve, found by a scan over t."""
    eps0, delta = 1.0, 1e-3
    lower, upper = _epsilon_bracket(ExponentialMechanismEvent(eps0), ADD_REMOVE, delta)
    assert ref.br_single_delta(eps0, upper) <= delta * (1 + SLACK)
    assert lower <= upper


@pytest.mark.parametrize(("eps0", "count", "delta"), [(1.0, 10, 1e-5)])
def test_adaptive_bounded_range_upper_above_an_adaptive_strategy(
    eps0: float, count: int, delta: float
) -> None:
    """The certified upper of k releases at one epsilon is at least the exact value of an
    adaptive strategy and of the best non-adaptive one (both attained); the lower is at most
    the zCDP bound (eps0^2/8 per release)."""
    lower, upper = _epsilon_bracket(
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
    lower, upper = _epsilon_bracket(
        SelfComposedEvent(ExponentialMechanismEvent(eps0), count), ADD_REMOVE, delta
    )
    assert ref.lattice_adaptive_br_delta(eps0, count, upper, points) <= delta * (1 + SLACK)
    assert lower <= upper


# --- random allocation: deterministic corner cases and the single-release cap ----------------


@pytest.mark.parametrize(("steps", "sigma", "delta"), [(1, 0.7, 1e-10), (3, 1.5, 1e-6)])
def test_allocation_to_every_step_is_that_many_gaussians(
    steps: int, sigma: float, delta: float
) -> None:
    """k = t allocates every record to every step: exactly t Gaussian releases."""
    mu = math.sqrt(steps) / sigma
    event = RandomAllocationEvent(steps, GaussianEvent(sigma), steps)
    _assert_sound_against_exact(event, ADD_REMOVE, delta, lambda e: ref.gaussian_delta(mu, e))


def test_allocation_upper_finite_and_near_one_release_at_tiny_delta() -> None:
    """One Gaussian release of the same noise dominates an epoch of 1-of-t allocation; at
    delta = 1e-20 the epoch's upper bound is finite and within 1e-3 of that release's (the
    tables' floor once left it infinite)."""
    sigma, delta = 1.0, 1e-20
    _, upper = _epsilon_bracket(RandomAllocationEvent(2, GaussianEvent(sigma)), ADD_REMOVE, delta)
    single = _epsilon_bracket(GaussianEvent(sigma), ADD_REMOVE, delta)[1]
    assert upper <= single * (1 + 1e-3)


def test_every_step_allocation_upper_never_above_k_releases_at_tiny_delta() -> None:
    """2-of-2 allocation is exactly two Gaussian releases: at delta = 1e-25 its upper bound
    is finite and within 1e-3 of theirs."""
    delta = 1e-25
    event = RandomAllocationEvent(2, GaussianEvent(1.0), 2)
    _, upper = _epsilon_bracket(event, ADD_REMOVE, delta)
    releases = _epsilon_bracket(SelfComposedEvent(GaussianEvent(1.0), 2), ADD_REMOVE, delta)[1]
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
    lower, upper = _epsilon_bracket(event, ADD_REMOVE, delta)
    assert lower <= upper
    assert ref.rr_composition_delta(eps0, 100, upper, dps=400) <= delta * (1 + SLACK)


def test_tiny_pure_steps_fewer_times_stay_sound() -> None:
    """The same steps 100 times (exact route) and 10^6 times at delta 1e-5 (where epsilon 0
    is right: delta(0) is about 4e-298)."""
    eps0 = 1e-300
    _, upper = _epsilon_bracket(SelfComposedEvent(PureDPEvent(eps0), 100), ADD_REMOVE, 1e-300)
    assert ref.rr_composition_delta(eps0, 100, upper, dps=400) <= 1e-300 * (1 + SLACK)
    _, upper = _epsilon_bracket(SelfComposedEvent(PureDPEvent(eps0), 10**6), ADD_REMOVE, 1e-5)
    assert upper >= 0.0


def test_extreme_allocation_is_refused_without_warnings() -> None:
    """An epoch the accountant cannot bound (losses near 1e6) is refused with its own error;
    the test configuration turns warnings into errors."""
    with pytest.raises(DPLedgerError):
        account(RandomAllocationEvent(3, GaussianEvent(1e-3)), ADD_REMOVE, delta=1e-5)


def test_allocation_to_very_many_steps_is_bounded_by_one_release() -> None:
    """10^30 steps: the epoch is bounded by its one Gaussian release."""
    lower, upper = _epsilon_bracket(
        RandomAllocationEvent(10**30, GaussianEvent(1.0)), ADD_REMOVE, 1e-5
    )
    assert 0.0 <= lower <= upper
    assert ref.gaussian_delta(1.0, upper) <= 1e-5 * (1 + SLACK)


# --- the wide battery (slow) -----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("sigma", [0.02, 0.1, 0.3, 1.0, 4.0])
@pytest.mark.parametrize("q", [1e-6, 1e-3, 0.05, 0.5])
@pytest.mark.parametrize("delta", [1e-5, 1e-15, 1e-30])
def test_two_sampled_gaussian_steps_against_quadrature(
    sigma: float, q: float, delta: float
) -> None:
    """Two Poisson-subsampled Gaussian steps (the hit-count route at small sigma, the tilted
    grid with its dominated pairs elsewhere) against a 60-digit integral of the exact pair."""
    event = SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(sigma)), 2)
    _assert_sound_against_exact(
        event, ADD_REMOVE, delta, lambda e: ref.sampled_gaussian_two_steps_delta(q, sigma, e)
    )


@pytest.mark.slow
@pytest.mark.parametrize("sigma", [0.1, 0.3, 0.6, 1.0, 3.0, 10.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-5, 1e-10, 1e-15, 1e-30])
def test_allocation_of_two_steps_against_quadrature(sigma: float, delta: float) -> None:
    """One epoch of 1-of-2 allocation: the worse direction's exact curve by a 60-digit
    integral (the pair of Chua et al. and Feldman & Shenfeld)."""

    def exact(e: float) -> mp.mpf:
        return max(
            ref.allocation_two_steps_delta(sigma, e, "remove"),
            ref.allocation_two_steps_delta(sigma, e, "add"),
        )

    event = RandomAllocationEvent(2, GaussianEvent(sigma))
    _assert_sound_against_exact(event, ADD_REMOVE, delta, exact)


@pytest.mark.slow
@pytest.mark.parametrize("eps0", [0.01, 0.1, 1.0, 3.0])
@pytest.mark.parametrize("count", [1, 2, 3, 5, 10])
@pytest.mark.parametrize("delta", [1e-5, 1e-12, 1e-30])
def test_exponential_mechanism_battery(eps0: float, count: int, delta: float) -> None:
    lower, upper = _epsilon_bracket(
        _composed(ExponentialMechanismEvent(eps0), count), ADD_REMOVE, delta
    )
    policy = ref.adaptive_policy(eps0, count, upper)
    assert ref.adaptive_br_policy_delta(eps0, count, upper, policy) <= delta * (1 + SLACK)
    assert ref.brr_composition_delta(eps0, count, upper, points=100) <= delta * (1 + SLACK)
    # eps0-DP releases: the binomial randomized-response curve bounds them from above
    assert lower == 0 or ref.rr_composition_delta(eps0, count, lower) >= delta * (1 - SLACK)
    assert lower <= ref.zcdp_epsilon(count * eps0**2 / 8, delta) * (1 + SLACK)


@pytest.mark.slow
@pytest.mark.parametrize("sigma", [0.05, 0.5, 1.0, 5.0, 50.0])
@pytest.mark.parametrize("count", [1, 7, 1000, 10**9, 10**30])
@pytest.mark.parametrize("delta", [1e-5, 1e-15, 1e-30, 1e-300])
@pytest.mark.parametrize("adjacency", [ADD_REMOVE, REPLACE_ONE], ids=["ar", "ro"])
def test_gaussian_battery(sigma: float, count: int, delta: float, adjacency: Adjacency) -> None:
    mu = adjacency.sensitivity_factor / sigma * math.sqrt(count)
    event = _composed(GaussianEvent(sigma), count)
    _assert_sound_against_exact(event, adjacency, delta, lambda e: ref.gaussian_delta(mu, e))


@pytest.mark.slow
@pytest.mark.parametrize("eps0", [0.01, 0.3, 1.0, 5.0])
@pytest.mark.parametrize("count", [1, 2, 17, 200])
@pytest.mark.parametrize("delta", [1e-5, 1e-15, 1e-30])
def test_pure_and_approximate_battery(eps0: float, count: int, delta: float) -> None:
    def binomial(e: float) -> mp.mpf:
        return ref.rr_composition_delta(eps0, count, e)

    for leaf in (RandomizedResponseEvent(eps0), PureDPEvent(eps0)):
        _assert_sound_against_exact(_composed(leaf, count), ADD_REMOVE, delta, binomial)
    delta0 = delta / 1000
    _assert_sound_against_exact(
        _composed(ApproxDPEvent(eps0, delta0), count),
        ADD_REMOVE,
        delta,
        lambda e: ref.approx_dp_delta(eps0, delta0, count, e),
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("count", "spread", "delta", "adjacency", "seed"),
    [
        (300, 0.5, 1e-5, ADD_REMOVE, 0),
        (400, 3.0, 1e-10, REPLACE_ONE, 1),
        (1000, 0.01, 1e-30, ADD_REMOVE, 2),
        (257, 1.0, 1e-5, ADD_REMOVE, 3),
    ],
)
def test_distinct_gaussians_against_their_exact_sum(
    count: int, spread: float, delta: float, adjacency: Adjacency, seed: int
) -> None:
    """Many distinct Gaussian leaves (rounded to representatives) compose exactly to one
    Gaussian with mu = sqrt(sum mu_i^2)."""
    rng = np.random.default_rng(seed)
    sigmas = np.exp(rng.uniform(-spread, spread, count)) * rng.choice([0.3, 1.0, 10.0])
    counts = rng.integers(1, 5, count)
    event = ComposedEvent(
        tuple(
            SelfComposedEvent(GaussianEvent(float(s)), int(c))
            for s, c in zip(sigmas, counts, strict=True)
        )
    )
    factor = adjacency.sensitivity_factor
    pairs = zip(sigmas, counts, strict=True)
    mu = math.sqrt(sum(int(c) * (factor / float(s)) ** 2 for s, c in pairs))
    _assert_sound_against_exact(event, adjacency, delta, lambda e: ref.gaussian_delta(mu, e))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sigma", "q", "steps", "delta", "interval"),
    [
        (0.2, 1e-3, 10, 1e-5, 2e-3),
        (0.15, 0.01, 30, 1e-6, 3e-3),
        (1.0, 0.01, 200, 1e-8, 1e-4),
        (0.8, 0.1, 50, 1e-10, 1e-4),
    ],
)
def test_sampled_gaussian_compositions_against_dp_accounting(
    sigma: float, q: float, steps: int, delta: float, interval: float
) -> None:
    pytest.importorskip("dp_accounting")
    event = SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(sigma)), steps)
    lower, upper = _epsilon_bracket(event, ADD_REMOVE, delta)
    ref_lower, ref_upper = ref.dpa_poisson_gaussian_bracket(sigma, q, steps, delta, interval)
    assert upper >= ref_lower * (1 - SLACK)
    assert lower <= ref_upper * (1 + SLACK)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["laplace", "pure", "rr", "exponential"])
def test_distinct_pure_leaves_against_dp_accounting(kind: str) -> None:
    """300 distinct leaves of one kind (rounded to representatives) against dp-accounting's
    composition of the exact pairs (for the exponential mechanism: the attained randomized
    response at half its epsilon below, the zCDP bound above)."""
    pytest.importorskip("dp_accounting")
    rng = np.random.default_rng(7)
    eps = [float(e) for e in rng.uniform(0.005, 0.05, 300)]
    delta = 1e-6
    leaves: list[Event]
    if kind == "laplace":
        leaves = [LaplaceEvent(1 / e) for e in eps]
    elif kind == "pure":
        leaves = [PureDPEvent(e) for e in eps]
    elif kind == "rr":
        leaves = [RandomizedResponseEvent(e) for e in eps]
    else:
        leaves = [ExponentialMechanismEvent(e) for e in eps]
    lower, upper = _epsilon_bracket(ComposedEvent(tuple(leaves)), ADD_REMOVE, delta)
    if kind == "laplace":
        ref_lower, ref_upper = ref.dpa_laplace_bracket(eps, delta)
    elif kind == "exponential":
        ref_lower = ref.dpa_rr_composition_epsilon([e / 2 for e in eps], delta, round_up=False)
        ref_upper = ref.zcdp_epsilon(sum(e * e for e in eps) / 8, delta)
    else:
        ref_lower = ref.dpa_rr_composition_epsilon(eps, delta, round_up=False)
        ref_upper = ref.dpa_rr_composition_epsilon(eps, delta, round_up=True)
    assert upper >= ref_lower * (1 - SLACK)
    assert lower <= ref_upper * (1 + SLACK)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("eps0", "count", "delta", "points"),
    [
        (1.0, 10, 1e-5, 1000),
        (0.1, 5, 1e-12, 1000),
        (0.1, 100, 1e-5, 100),
        (1.0, 2, 1e-5, 4000),
        (3.0, 5, 1e-12, 1000),
        (0.5, 30, 1e-8, 300),
        (2.0, 20, 1e-3, 400),
    ],
)
def test_adaptive_bounded_range_battery_on_fine_lattices(
    eps0: float, count: int, delta: float, points: int
) -> None:
    test_adaptive_bounded_range_upper_above_a_fine_lattice_optimum(eps0, count, delta, points)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("case", "delta", "epsilon"),
    [("long", 1e-10, 0.5), ("mixed", 1e-7, 1.0), ("laplace", 1e-9, 2.0), ("dense", 1e-12, 2.0)],
)
def test_long_pld_compositions_against_dp_accounting(
    case: str, delta: float, epsilon: float
) -> None:
    """Long and mixed compositions on the PLD grid (dominated pairs with completing atoms,
    midpoint rule): both queries against dp-accounting at loss spacing 1e-4."""
    pytest.importorskip("dp_accounting")
    parts = ref.long_parts(case)
    event = ComposedEvent(tuple(e for e, _ in parts)) if len(parts) > 1 else parts[0][0]
    lower, upper = _epsilon_bracket(event, ADD_REMOVE, delta)
    d_lower, d_upper = _delta_bracket(event, ADD_REMOVE, epsilon)
    refs = []
    for pessimistic in (False, True):
        total: Any = None
        for _, make in parts:
            one: Any = make(pessimistic)
            total = one if total is None else total.compose(one)
        refs.append((total.get_epsilon_for_delta(delta), total.get_delta_for_epsilon(epsilon)))
    (eps_opt, delta_opt), (eps_pess, delta_pess) = refs
    assert upper >= eps_opt * (1 - SLACK) and lower <= eps_pess * (1 + SLACK)
    assert d_upper >= delta_opt * (1 - SLACK) and d_lower <= delta_pess * (1 + SLACK)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("base", "count", "delta"), [(1.0, 8, 1e-5), (0.1, 10, 1e-8), (0.5, 12, 1e-10)]
)
def test_exponential_mechanisms_at_nearby_epsilons(base: float, count: int, delta: float) -> None:
    """Releases at distinct epsilons within 5 %: the upper is at least the adaptive lattice
    optimum at the smallest epsilon (each release admits such mechanisms), the lower at most
    the zCDP bound of their epsilons."""
    rng = np.random.default_rng(3)
    eps = [float(base * (1 + 0.049 * u)) for u in rng.random(count)]
    event = ComposedEvent(tuple(ExponentialMechanismEvent(e) for e in eps))
    lower, upper = _epsilon_bracket(event, ADD_REMOVE, delta)
    assert ref.lattice_adaptive_br_delta(min(eps), count, upper, 400) <= delta * (1 + SLACK)
    assert lower <= ref.zcdp_epsilon(sum(e * e for e in eps) / 8, delta) * (1 + SLACK)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("eps0", "pure", "q", "sigma", "steps", "delta"),
    [(0.01, 1000, 0.01, 1.0, 500, 1e-7), (0.1, 50, 0.05, 2.0, 200, 1e-9)],
)
def test_pure_blocks_beside_sampled_gaussians_against_dp_accounting(
    eps0: float, pure: int, q: float, sigma: float, steps: int, delta: float
) -> None:
    """Equal pure-DP leaves (composed in blocks on the PLD grid) beside a sampled Gaussian:
    dp-accounting's composition, the pure steps' epsilon moved onto its grid (down for the
    lower reference, up for the upper)."""
    pytest.importorskip("dp_accounting")
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    event = ComposedEvent(
        (
            SelfComposedEvent(PureDPEvent(eps0), pure),
            SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(sigma)), steps),
        )
    )
    lower, upper = _epsilon_bracket(event, ADD_REMOVE, delta)
    interval = 1e-4
    refs = []
    for pessimistic in (False, True):
        cells = math.ceil(eps0 / interval) if pessimistic else math.floor(eps0 / interval)
        x = cells * interval
        rr = pld_lib.PrivacyLossDistribution.create_from_rounded_probability(
            {cells: 1 / (1 + math.exp(-x)), -cells: 1 / (1 + math.exp(x))},
            0.0,
            interval,
            pessimistic_estimate=pessimistic,
        ).self_compose(pure)
        sampled: Any = ref.dpa_sampled(sigma, q, steps)(pessimistic)
        refs.append(sampled.compose(rr).get_epsilon_for_delta(delta))
    assert upper >= refs[0] * (1 - SLACK) and lower <= refs[1] * (1 + SLACK)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("eps0", "count", "epsilon", "points"),
    [
        (1.0, 10, 5.0, 200),
        (0.1, 100, 2.0, 60),
        (0.5, 30, 8.0, 200),
        (2.0, 20, 15.0, 200),
        (0.01, 200, 0.2, 60),
        (3.0, 5, 0.0, 200),
        (0.1, 50, 1e-9, 60),
    ],
)
def test_adaptive_bounded_range_delta_queries(
    eps0: float, count: int, epsilon: float, points: int
) -> None:
    """Delta queries: the upper is at least an attained lattice strategy's delta, the lower at
    most randomized response's (every release is eps0-DP)."""
    event = SelfComposedEvent(ExponentialMechanismEvent(eps0), count)
    d_lower, d_upper = _delta_bracket(event, ADD_REMOVE, epsilon)
    attained = ref.lattice_adaptive_br_delta(eps0, count, epsilon, points)
    assert d_upper >= attained * (1 - SLACK)
    assert d_lower <= ref.rr_composition_delta(eps0, count, epsilon) * (1 + SLACK)


@pytest.mark.slow
@pytest.mark.parametrize("case", ["rr5_sampled", "approx_sampled", "rr3_pure_gauss"])
def test_atoms_at_zero_and_infinity_against_dp_accounting(case: str) -> None:
    """Components with an atom at loss 0 (k-ary randomized response) or at infinity
    (approximate DP) on the PLD grid beside Gaussians: dp-accounting's composition."""
    pytest.importorskip("dp_accounting")
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    def gauss(pessimistic: bool) -> Any:
        return pld_lib.from_gaussian_mechanism(
            3.0,
            value_discretization_interval=1e-4,
            pessimistic_estimate=pessimistic,
            use_connect_dots=pessimistic,
        )

    def make(pessimistic: bool) -> Any:
        if case == "rr5_sampled":
            rr: Any = ref.dpa_randomized_response(0.5, 5, 20, 0.0, pessimistic)
            return rr.compose(ref.dpa_sampled(1.0, 0.02, 100)(pessimistic))
        if case == "approx_sampled":
            rr = ref.dpa_randomized_response(0.1, 2, 10, 1e-10, pessimistic)
            return rr.compose(ref.dpa_sampled(1.2, 0.05, 200)(pessimistic))
        rr = ref.dpa_randomized_response(0.2, 3, 40, 0.0, pessimistic)
        pure: Any = ref.dpa_randomized_response(0.05, 2, 25, 0.0, pessimistic)
        return rr.compose(pure).compose(gauss(pessimistic))

    leaves: tuple[Event, ...]
    if case == "rr5_sampled":
        leaves = (
            SelfComposedEvent(RandomizedResponseEvent(0.5, 5), 20),
            SelfComposedEvent(PoissonSampledEvent(0.02, GaussianEvent(1.0)), 100),
        )
        delta = 1e-8
    elif case == "approx_sampled":
        leaves = (
            SelfComposedEvent(ApproxDPEvent(0.1, 1e-10), 10),
            SelfComposedEvent(PoissonSampledEvent(0.05, GaussianEvent(1.2)), 200),
        )
        delta = 1e-7
    else:
        leaves = (
            SelfComposedEvent(RandomizedResponseEvent(0.2, 3), 40),
            SelfComposedEvent(PureDPEvent(0.05), 25),
            GaussianEvent(3.0),
        )
        delta = 1e-9
    lower, upper = _epsilon_bracket(ComposedEvent(leaves), ADD_REMOVE, delta)
    assert upper >= make(False).get_epsilon_for_delta(delta) * (1 - SLACK)
    assert lower <= make(True).get_epsilon_for_delta(delta) * (1 + SLACK)
