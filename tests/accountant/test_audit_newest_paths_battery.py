"""The wide battery of the accountant audit (slow tier): the regimes of
``test_audit_newest_paths.py`` swept over noise, rates, counts, deltas and adjacencies, against the
same references."""

from __future__ import annotations

import math
from typing import Any

import mpmath as mp
import numpy as np
import pytest

from dpledger.core.adjacency import Adjacency
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
from .audit_checks import (
    ADD_REMOVE,
    REPLACE_ONE,
    SLACK,
    assert_br_upper_attained_on_lattice,
    assert_sound_against_exact,
    composed,
    delta_bracket,
    epsilon_bracket,
)

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
    assert_sound_against_exact(
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
    assert_sound_against_exact(event, ADD_REMOVE, delta, exact)


@pytest.mark.slow
@pytest.mark.parametrize("eps0", [0.01, 0.1, 1.0, 3.0])
@pytest.mark.parametrize("count", [1, 2, 3, 5, 10])
@pytest.mark.parametrize("delta", [1e-5, 1e-12, 1e-30])
def test_exponential_mechanism_battery(eps0: float, count: int, delta: float) -> None:
    lower, upper = epsilon_bracket(
        composed(ExponentialMechanismEvent(eps0), count), ADD_REMOVE, delta
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
    event = composed(GaussianEvent(sigma), count)
    assert_sound_against_exact(event, adjacency, delta, lambda e: ref.gaussian_delta(mu, e))


@pytest.mark.slow
@pytest.mark.parametrize("eps0", [0.01, 0.3, 1.0, 5.0])
@pytest.mark.parametrize("count", [1, 2, 17, 200])
@pytest.mark.parametrize("delta", [1e-5, 1e-15, 1e-30])
def test_pure_and_approximate_battery(eps0: float, count: int, delta: float) -> None:
    def binomial(e: float) -> mp.mpf:
        return ref.rr_composition_delta(eps0, count, e)

    for leaf in (RandomizedResponseEvent(eps0), PureDPEvent(eps0)):
        assert_sound_against_exact(composed(leaf, count), ADD_REMOVE, delta, binomial)
    delta0 = delta / 1000
    assert_sound_against_exact(
        composed(ApproxDPEvent(eps0, delta0), count),
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
    assert_sound_against_exact(event, adjacency, delta, lambda e: ref.gaussian_delta(mu, e))


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
    lower, upper = epsilon_bracket(event, ADD_REMOVE, delta)
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
    lower, upper = epsilon_bracket(ComposedEvent(tuple(leaves)), ADD_REMOVE, delta)
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
    assert_br_upper_attained_on_lattice(eps0, count, delta, points)


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
    lower, upper = epsilon_bracket(event, ADD_REMOVE, delta)
    d_lower, d_upper = delta_bracket(event, ADD_REMOVE, epsilon)
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
    lower, upper = epsilon_bracket(event, ADD_REMOVE, delta)
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
    lower, upper = epsilon_bracket(event, ADD_REMOVE, delta)
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
    d_lower, d_upper = delta_bracket(event, ADD_REMOVE, epsilon)
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
    lower, upper = epsilon_bracket(ComposedEvent(leaves), ADD_REMOVE, delta)
    assert upper >= make(False).get_epsilon_for_delta(delta) * (1 - SLACK)
    assert lower <= make(True).get_epsilon_for_delta(delta) * (1 + SLACK)
