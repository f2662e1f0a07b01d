"""Pure-DP steps composed with one sampled Gaussian: the lower bound by exact conditioning,
against a 30-digit reference of the same composition (binomial sum of the sampled Gaussian's
closed-form curve)."""

from __future__ import annotations

import math

import mpmath as mp
import pytest

from dpledger.accountant.base import DeltaBound, EpsilonBound
from dpledger.accountant.exact_lower import (
    pure_plus_one_delta_lower,
    pure_plus_one_epsilon_lower,
    raise_lower,
)
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import BackendInconsistencyError
from dpledger.core.events import (
    ComposedEvent,
    Event,
    ExponentialMechanismEvent,
    GaussianEvent,
    PoissonSampledEvent,
    PureDPEvent,
    SelfComposedEvent,
)

mp.mp.dps = 30


def _sampled_gaussian_delta(eps: mp.mpf, q: mp.mpf, sigma: mp.mpf, remove: bool) -> mp.mpf:
    """Hockey-stick of ((1 - q) N(0, s^2) + q N(1, s^2), N(0, s^2)) (remove) or of the swapped
    pair (add), from the normal law: the loss is monotone in the output y."""
    cdf = mp.ncdf
    e = mp.e**eps
    if remove:
        # loss(y) = log(1 - q + q e^{(2y - 1)/(2 s^2)}) > eps  <=>  y > y*
        if eps <= mp.log(1 - q):
            return 1 - e
        y = (mp.log((e - 1 + q) / q) * 2 * sigma**2 + 1) / 2
        p = (1 - q) * (1 - cdf(y / sigma)) + q * (1 - cdf((y - 1) / sigma))
        return p - e * (1 - cdf(y / sigma))
    # loss(y) = -log(1 - q + q e^{(2y - 1)/(2 s^2)}) > eps  <=>  y < y*
    if eps >= -mp.log(1 - q):
        return mp.mpf(0)
    y = (mp.log((1 / e - 1 + q) / q) * 2 * sigma**2 + 1) / 2
    p = cdf(y / sigma)
    return p - e * ((1 - q) * cdf(y / sigma) + q * cdf((y - 1) / sigma))


def _composed_delta(eps: mp.mpf, k: int, e0: float, q: float, sigma: float) -> mp.mpf:
    """k randomized responses at e0 composed with the sampled Gaussian, both directions."""
    e0m, qm, sm = mp.mpf(e0), mp.mpf(q), mp.mpf(sigma)
    p_up = mp.e**e0m / (1 + mp.e**e0m)
    best = mp.mpf(0)
    for remove in (True, False):
        total = mp.fsum(
            mp.binomial(k, j)
            * p_up ** (k - j)
            * (1 - p_up) ** j
            * _sampled_gaussian_delta(eps - (k - 2 * j) * e0m, qm, sm, remove)
            for j in range(k + 1)
        )
        best = max(best, total)
    return best


def _event(k: int, e0: float, q: float, sigma: float) -> Event:
    gauss = PoissonSampledEvent(q, GaussianEvent(sigma))
    return ComposedEvent((SelfComposedEvent(PureDPEvent(e0), k), gauss))


# (e0, q, sigma, the default bracket before at delta = 1e-7)
CASES = [
    (0.002, 0.01, 2.0, (0.033038, 0.065864)),
    (0.001, 0.01, 1.0, (0.021501, 0.580256)),
]


@pytest.mark.parametrize(("e0", "q", "sigma", "before"), CASES)
def test_lower_bound_by_conditioning_is_certified_and_tight(
    e0: float, q: float, sigma: float, before: tuple[float, float]
) -> None:
    event, delta = _event(17, e0, q, sigma), 1e-7
    low = pure_plus_one_epsilon_lower(event, Adjacency(), delta, before[1])
    # the 30-digit curve exceeds delta at the lower bound, and falls below it 0.1 % above
    assert _composed_delta(mp.mpf(low), 17, e0, q, sigma) > delta
    assert _composed_delta(mp.mpf(low) * (1 + mp.mpf(1e-3)), 17, e0, q, sigma) < delta
    assert before[0] < low < before[1]


@pytest.mark.parametrize(
    ("e0", "q", "sigma", "before"), [pytest.param(*c, marks=pytest.mark.slow) for c in CASES]
)
def test_the_default_call_reports_it(
    e0: float, q: float, sigma: float, before: tuple[float, float]
) -> None:
    event, delta = _event(17, e0, q, sigma), 1e-7
    bound = account(event, delta=delta).bound
    assert isinstance(bound, EpsilonBound)
    low = pure_plus_one_epsilon_lower(event, Adjacency(), delta, 2 * bound.epsilon + 1)
    assert bound.epsilon_lower == low and "pure_plus_one" in bound.details["lower"]
    # the upper bound stays (the 30-digit curve is at most delta there), within 0.1 %
    assert _composed_delta(mp.mpf(bound.epsilon), 17, e0, q, sigma) <= delta
    assert before[0] < bound.epsilon_lower <= bound.epsilon <= bound.epsilon_lower * (1 + 1e-3)
    assert bound.epsilon <= before[1] * (1 + 1e-5)


def test_delta_lower_bound_by_conditioning() -> None:
    event, eps = _event(17, 0.002, 0.01, 2.0), 0.05
    truth = _composed_delta(mp.mpf(eps), 17, 0.002, 0.01, 2.0)
    low = pure_plus_one_delta_lower(event, Adjacency(), eps)
    assert truth * (1 - 1e-6) <= low <= truth


def test_tight_brackets_are_left_alone() -> None:
    bound = EpsilonBound(1.0, 0.999, 1e-7, "pld")
    assert raise_lower(bound, _event(17, 0.002, 0.01, 2.0), Adjacency()) is bound
    dbound = DeltaBound(1e-3, 0.0, 0.05, "pld")
    raised = raise_lower(dbound, _event(17, 0.002, 0.01, 2.0), Adjacency())
    assert isinstance(raised, DeltaBound) and raised.delta_lower > 0.0


def test_an_upper_bound_below_the_conditioned_lower_bound_is_refused() -> None:
    wrong = EpsilonBound(0.03, 0.0, 1e-7, "pld")
    with pytest.raises(BackendInconsistencyError):
        raise_lower(wrong, _event(17, 0.002, 0.01, 2.0), Adjacency())


def test_pure_steps_beside_an_unsampled_gaussian() -> None:
    event = ComposedEvent((SelfComposedEvent(PureDPEvent(0.01), 10), GaussianEvent(5.0)))
    bound = account(event, delta=1e-6).bound
    assert isinstance(bound, EpsilonBound)
    low = pure_plus_one_epsilon_lower(event, Adjacency(), 1e-6, 2 * bound.epsilon + 1)
    # the PLD bracket was [0.842691, 0.845193]; the lower end is now read by conditioning
    assert bound.epsilon_lower == low and "pure_plus_one" in bound.details["lower"]
    assert 0.842691 < low <= bound.epsilon <= 0.845194 and math.isfinite(bound.epsilon)
    assert bound.epsilon <= low * (1 + 1e-5)


def test_exponential_mechanisms_count_as_randomized_response_at_half_epsilon() -> None:
    gauss = PoissonSampledEvent(0.01, GaussianEvent(2.0))
    em = ComposedEvent((SelfComposedEvent(ExponentialMechanismEvent(0.004), 17), gauss))
    pure = _event(17, 0.002, 0.01, 2.0)
    got = pure_plus_one_epsilon_lower(em, Adjacency(), 1e-7, 1.0)
    assert got == pure_plus_one_epsilon_lower(pure, Adjacency(), 1e-7, 1.0) > 0.0
