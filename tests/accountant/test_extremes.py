"""Extreme but valid inputs: every backend returns a sound bound or declines with a reason.

Reference values are closed forms computed here: the single randomized-response profile
(e^eps0 - e^eps) / (1 + e^eps0), the Gaussian's delta(0) = 2 Phi(mu/2) - 1, and the mean
k eps0 tanh(eps0/2) of the composed privacy loss of k eps0-DP steps.
"""

from __future__ import annotations

import math
import time

import pytest
from scipy import stats

from dpledger.accountant import closed_form, rdp
from dpledger.accountant.closed_form import ClosedFormAccountant
from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.prv_adapter import PRVAccountant
from dpledger.accountant.rdp import RDPAccountant
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError, UnsupportedEventError
from dpledger.core.events import (
    MAX_NESTING,
    ComposedEvent,
    Event,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PureDPEvent,
    RandomizedResponseEvent,
    SelfComposedEvent,
)


def _rr_delta(eps: float, eps0: float) -> float:
    """Exact delta(eps) of binary randomized response at eps0, for |eps| <= eps0."""
    return (math.exp(eps0) - math.exp(eps)) / (1 + math.exp(eps0))


def test_tiny_and_huge_noise() -> None:
    quiet = account(GaussianEvent(1e300), delta=1e-5)
    assert quiet.bound.epsilon == 0.0  # delta(0) = 2 Phi(mu/2) - 1 ~ 4e-301 < 1e-5
    d0 = account(GaussianEvent(1e300), epsilon=0.0).bound.delta
    assert d0 >= 1e-300 / math.sqrt(2 * math.pi)  # never below the exact 3.99e-301
    loud = account(GaussianEvent(1e-300), delta=1e-5)
    assert loud.bound.epsilon == math.inf
    sampled = account(PoissonSampledEvent(0.01, GaussianEvent(1e300)), delta=1e-5)
    assert sampled.bound.epsilon == 0.0
    sampled_d0 = account(PoissonSampledEvent(0.5, GaussianEvent(1e300)), epsilon=0.0).bound
    assert sampled_d0.delta >= 0.5 * 1e-300 / math.sqrt(2 * math.pi) * 0.99


@pytest.mark.parametrize("eps0", [709.0, 710.0, 800.0, 1e4])
def test_pure_epsilon_beyond_the_exponent_range(eps0: float) -> None:
    b = account(PureDPEvent(eps0), delta=1e-5).bound
    exact = eps0 + math.log1p(-1e-5 * (1 + math.exp(-eps0)))  # solves _rr_delta(eps) = 1e-5
    assert exact <= b.epsilon <= exact + 1e-9 * eps0
    assert account(PureDPEvent(eps0), epsilon=eps0).bound.delta <= 1e-14 * eps0  # rounding slack
    assert account(PureDPEvent(eps0), epsilon=eps0 * (1 + 1e-12)).bound.delta == 0.0


@pytest.mark.parametrize(
    "event",
    [
        PureDPEvent(1.0),
        PureDPEvent(0.0),
        RandomizedResponseEvent(1.0, 5),
        LaplaceEvent(1.0),
        GaussianEvent(1.0),
    ],
)
def test_delta_at_epsilon_1000(event: Event) -> None:
    b = account(event, epsilon=1000.0).bound
    assert 0.0 <= b.delta <= 1e-300


@pytest.mark.parametrize(
    "event",
    [
        SelfComposedEvent(PureDPEvent(1.0), 10**30),
        SelfComposedEvent(SelfComposedEvent(PureDPEvent(1.0), 2**50), 2**50),
        SelfComposedEvent(PureDPEvent(1.0), 10**400),
    ],
)
def test_huge_counts_of_pure_steps(event: Event) -> None:
    k = event.count * getattr(event.event, "count", 1)  # type: ignore[attr-defined]
    b = account(event, delta=1e-5).bound
    mean = float(k) * math.tanh(0.5) if k < 2**1000 else math.inf
    # the true epsilon is at least about the mean loss; Hoeffding adds sqrt(2 k log 1e5)
    assert b.epsilon >= mean * (1 - 1e-12)
    if math.isfinite(mean):
        assert b.epsilon <= (mean + math.sqrt(2 * k * math.log(1e5))) * (1 + 1e-13)


def test_huge_counts_of_gaussians_and_tiny_pure_steps() -> None:
    g = account(SelfComposedEvent(GaussianEvent(1.0), 10**30), delta=1e-5).bound
    assert g.epsilon >= 0.5e30  # mu^2 / 2 with mu = 1e15
    tiny = SelfComposedEvent(PureDPEvent(1e-300), 10**300)
    assert account(tiny, delta=1e-5).bound.epsilon == 0.0
    # delta(0) ~ E[L_+] ~ 0.4 sd with sd = 1e-300 * 1e150: the bound may not be below it
    assert account(tiny, epsilon=0.0).bound.delta >= 0.39e-150


def test_nesting_limit() -> None:
    event: Event = PureDPEvent(0.1)
    for _ in range(MAX_NESTING):
        event = ComposedEvent([event])
    assert account(event, delta=1e-5).bound.epsilon == pytest.approx(
        0.1 + math.log1p(-1e-5 * (1 + math.exp(-0.1))), abs=1e-9
    )
    with pytest.raises(InvalidParameterError, match="nested 101 levels"):
        ComposedEvent([event])


@pytest.mark.parametrize("eps0", [1.0, 3.0, 10.0])
@pytest.mark.parametrize("kind", [PureDPEvent, RandomizedResponseEvent])
def test_negative_epsilon_lower_bounds_stay_below_the_exact_value(eps0: float, kind: type) -> None:
    exact = _rr_delta(-min(5.0, eps0), eps0) if eps0 >= 5.0 else -math.expm1(-5.0)
    pld = PLDAccountant().compose(kind(eps0)).get_delta(-5.0)
    assert pld.delta_lower <= exact <= pld.delta
    sel = account(kind(eps0), epsilon=-5.0)  # no BackendInconsistencyError
    assert sel.bound.delta_lower <= exact <= sel.bound.delta


def _timed(fn):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def test_many_distinct_pure_events_closed_form() -> None:
    eps = [0.01 + i * 1e-6 for i in range(10_000)]
    event = ComposedEvent([PureDPEvent(e) for e in eps])
    b, seconds = _timed(lambda: ClosedFormAccountant().compose(event).get_epsilon(1e-5))
    assert seconds < 30
    basic = math.fsum(eps)
    assert b.epsilon_lower <= b.epsilon <= basic
    # KOV at the largest epsilon with 10,000 steps (the previous bound, unchanged)
    kov = ClosedFormAccountant().compose(PureDPEvent(max(eps)), 10_000).get_epsilon(1e-5)
    assert b.epsilon == pytest.approx(kov.epsilon, rel=1e-9)
    rr = ComposedEvent([RandomizedResponseEvent(e, 3) for e in eps])
    b3, seconds = _timed(lambda: ClosedFormAccountant().compose(rr).get_epsilon(1e-5))
    assert seconds < 30 and b3.epsilon == pytest.approx(kov.epsilon, rel=1e-9)


def test_ten_million_identical_pure_steps_use_hoeffding() -> None:
    k, eps0, delta = 10**7, 1e-3, 1e-5
    b, seconds = _timed(
        lambda: ClosedFormAccountant().compose(PureDPEvent(eps0), k).get_epsilon(delta)
    )
    assert seconds < 10
    assert b.details["profile"] == "hoeffding_and_basic"
    formula = k * eps0 * math.tanh(eps0 / 2) + math.sqrt(2 * k * eps0**2 * math.log(1 / delta))
    assert b.epsilon == pytest.approx(formula, rel=1e-12) and b.epsilon >= formula
    # the count at which the exact sum still runs gives the exact value, and Hoeffding above it
    exact = ClosedFormAccountant().compose(PureDPEvent(0.01), closed_form.KOV_MAX_COUNT)
    hoeff = ClosedFormAccountant().compose(PureDPEvent(0.01), closed_form.KOV_MAX_COUNT + 1)
    assert exact.get_epsilon(delta).details["profile"] == "kov"
    assert hoeff.get_epsilon(delta).epsilon >= exact.get_epsilon(delta).epsilon


def test_many_distinct_subsampled_gaussians_rdp(monkeypatch: pytest.MonkeyPatch) -> None:
    event = ComposedEvent(
        [PoissonSampledEvent(0.01 + i * 1e-5, GaussianEvent(1.0 + i * 1e-3)) for i in range(40)]
    )
    exact = RDPAccountant().compose(event).get_epsilon(1e-5)
    monkeypatch.setattr(rdp, "MAX_DISTINCT_SAMPLED", 8)
    grouped = RDPAccountant().compose(event).get_epsilon(1e-5)
    assert "representative_step" in grouped.details
    # 40 leaves in 8 cells: q and mu rounded up by at most one step of 1.6%
    assert grouped.details["representative_step"] == pytest.approx(0.016)
    assert exact.epsilon <= grouped.epsilon <= exact.epsilon * 1.05


def test_ten_thousand_distinct_subsampled_gaussians_rdp() -> None:
    event = ComposedEvent(
        [PoissonSampledEvent(0.01 + i * 1e-6, GaussianEvent(1.0 + i * 1e-4)) for i in range(10_000)]
    )
    b, seconds = _timed(lambda: RDPAccountant().compose(event).get_epsilon(1e-5))
    assert seconds < 60
    # every component is at most as private as (q = 0.02, sigma = 1): that bound is above
    worst = RDPAccountant().compose(PoissonSampledEvent(0.02, GaussianEvent(1.0)), 10_000)
    best = RDPAccountant().compose(PoissonSampledEvent(0.01, GaussianEvent(2.0)), 10_000)
    assert best.get_epsilon(1e-5).epsilon <= b.epsilon <= worst.get_epsilon(1e-5).epsilon


@pytest.mark.parametrize(
    ("backend", "event", "adjacency", "reason"),
    [
        (
            PRVAccountant,
            ComposedEvent([LaplaceEvent(100 + i * 1e-2) for i in range(10_000)]),
            Adjacency(),
            "distinct components",
        ),
        (
            PRVAccountant,
            SelfComposedEvent(LaplaceEvent(1000.0), 10**7),
            Adjacency(),
            "compositions",
        ),
        (PRVAccountant, GaussianEvent(1e300), Adjacency(), "noise multiplier outside"),
        (PLDAccountant, GaussianEvent(1e-300), Adjacency(), "noise multiplier"),
        (
            PLDAccountant,
            PoissonSampledEvent(0.01, GaussianEvent(1e300)),
            Adjacency(),
            "noise multiplier",
        ),
        (PLDAccountant, PureDPEvent(710.0), Adjacency(), "epsilon 710"),
        (PLDAccountant, SelfComposedEvent(PureDPEvent(1.0), 10**30), Adjacency(), "compositions"),
    ],
)
def test_backends_decline_at_once(
    backend: type, event: Event, adjacency: Adjacency, reason: str
) -> None:
    acc = backend(adjacency)
    why, seconds = _timed(lambda: acc._unsupported_reason(event))
    assert why is not None and reason in why
    assert seconds < 5
    with pytest.raises(UnsupportedEventError, match=reason):
        acc.compose(event)


@pytest.mark.slow
@pytest.mark.parametrize(
    "event",
    [
        ComposedEvent([PureDPEvent(0.01 + i * 1e-6) for i in range(10_000)]),
        ComposedEvent([LaplaceEvent(100.0 + i * 1e-2) for i in range(10_000)]),
        ComposedEvent(
            [
                PoissonSampledEvent(0.01 + i * 1e-6, GaussianEvent(1.0 + i * 1e-4))
                for i in range(10_000)
            ]
        ),
        SelfComposedEvent(PoissonSampledEvent(0.001, GaussianEvent(1.0)), 10**7),
    ],
)
def test_pld_scales_to_many_components(event: Event) -> None:
    b, seconds = _timed(lambda: PLDAccountant().compose(event).get_epsilon(1e-5))
    assert seconds < 120
    r = RDPAccountant().compose(event).get_epsilon(1e-5)
    assert b.epsilon_lower <= r.epsilon  # PLD's lower bound below an independent upper bound


def test_gaussian_reference_is_unchanged() -> None:
    # Balle & Wang: delta(eps) at mu = 1, eps = 1 (independent scipy evaluation)
    exact = stats.norm.cdf(-1 + 0.5) - math.e * stats.norm.cdf(-1 - 0.5)
    b = ClosedFormAccountant().compose(GaussianEvent(1.0)).get_delta(1.0)
    assert b.delta_lower <= exact <= b.delta <= exact * (1 + 1e-9)


def test_lower_bound_beyond_the_search_range_is_verified() -> None:
    # two Laplace releases at eps0 = 1e17: the true epsilon is at most 2e17 (basic composition)
    b = ClosedFormAccountant().compose(LaplaceEvent(1e-17), 2).get_epsilon(0.1)
    assert b.epsilon == pytest.approx(2e17, rel=1e-12)
    assert b.epsilon_lower <= 2e17 and b.epsilon_lower == closed_form.LOWER_SEARCH_LIMIT
