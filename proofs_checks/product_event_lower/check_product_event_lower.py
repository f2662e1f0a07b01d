"""Lower bounds from one product event of constant loss: the event masses by simulation and by
scipy's Laplace distribution, the bounds against 30-digit closed forms, the search against
enumeration of every count vector, and every bound below the certified upper bound."""

from __future__ import annotations

import itertools
import math

import mpmath as mp
import numpy as np
import pytest
from scipy import stats

from dpledger.accountant.base import DeltaBound, EpsilonBound
from dpledger.accountant.product_event_lower import (
    _best_counts,
    _constant_loss,
    _delta_objective,
    _epsilon_objective,
    product_delta_lower,
    product_epsilon_lower,
)
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    ComposedEvent,
    LaplaceEvent,
    PureDPEvent,
    RandomAllocationEvent,
    SelfComposedEvent,
)

mp.mp.dps = 30
ADD = Adjacency()
REPLACE = Adjacency(relation="replace_one")


def _part(t: int, k: int, scale: float, apart: float) -> tuple[float, float]:
    """(l, log m) of a k-of-t allocation of Laplace(scale) steps."""
    found = _constant_loss(RandomAllocationEvent(t, LaplaceEvent(scale), k), apart)
    assert found is not None
    return found


def _simulated_masses(
    t: int, k: int, scale: float, x: float, y: float, cut: float, n: int = 400_000
) -> tuple[float, float]:
    """(P(E), Q(E)) by simulation: the record's value ``x`` (P) or ``y`` (Q) in ``k`` of ``t``
    steps chosen at random, Laplace noise on every step, E = every output at most ``cut``."""
    rng = np.random.default_rng(7)
    out = []
    for value in (x, y):
        noise = rng.laplace(0.0, scale, size=(n, t))
        steps = np.argsort(rng.random((n, t)), axis=1)[:, :k]
        np.put_along_axis(noise, steps, np.take_along_axis(noise, steps, axis=1) + value, axis=1)
        out.append(float(np.mean(np.all(noise <= cut, axis=1))))
    return out[0], out[1]


@pytest.mark.parametrize(
    ("t", "k", "scale", "apart"), [(3, 1, 1.0, 1), (4, 2, 2.0, 1), (3, 1, 1.0, 2)]
)
def test_event_masses_match_a_simulation(t: int, k: int, scale: float, apart: int) -> None:
    """The event's Q-mass m and ratio e^l, against a simulation of the allocation (4 standard
    errors)."""
    loss, log_m = _part(t, k, scale, float(apart))
    x, y, cut = (1.0, 0.0, 0.0) if apart == 1 else (1.0, -1.0, -1.0)
    p_e, q_e = _simulated_masses(t, k, scale, x, y, cut)
    m = math.exp(log_m)
    n = 400_000
    assert abs(q_e - m) <= 4 * math.sqrt(m / n)
    assert abs(p_e - m * math.exp(-loss)) <= 4 * math.sqrt(m * math.exp(-loss) / n) + 1e-6


@pytest.mark.parametrize(("t", "k", "scale"), [(7, 1, 0.5), (5, 3, 2.0), (10, 10, 1.0)])
def test_event_masses_equal_scipy_laplace_products(t: int, k: int, scale: float) -> None:
    """Both families' masses are products of scipy's Laplace CDFs."""
    cdf = stats.laplace.cdf
    epoch = RandomAllocationEvent(t, LaplaceEvent(scale), k)
    one, two = _constant_loss(epoch, 1.0), _constant_loss(epoch, 2.0)
    assert one is not None and two is not None
    loss, log_m = one
    q = cdf(0.0, 0.0, scale) ** t
    p = cdf(0.0, 1.0, scale) ** k * cdf(0.0, 0.0, scale) ** (t - k)
    assert math.exp(log_m) == pytest.approx(q, rel=1e-12)
    assert loss == pytest.approx(math.log(q / p), rel=1e-12)
    loss2, log_m2 = two
    q2 = cdf(-1.0, -1.0, scale) ** k * cdf(-1.0, 0.0, scale) ** (t - k)
    p2 = cdf(-1.0, 1.0, scale) ** k * cdf(-1.0, 0.0, scale) ** (t - k)
    assert math.exp(log_m2) == pytest.approx(q2, rel=1e-12)
    assert loss2 == pytest.approx(math.log(q2 / p2), rel=1e-12)


def _exact_epsilon(loss: mp.mpf, log_m: mp.mpf, delta: float) -> mp.mpf:
    return loss + mp.log(1 - mp.mpf(delta) / mp.e**log_m)


@pytest.mark.parametrize("scale", [1e-3, 1.5e-3, 0.1, 1.0])
@pytest.mark.parametrize("delta", [1e-5, 1e-9])
def test_epsilon_lower_is_the_closed_form(scale: float, delta: float) -> None:
    """One 1-of-7 allocation: 1/b + log(1 - 2^7 delta) at 30 digits, from below within 1e-9
    relative."""
    epoch = RandomAllocationEvent(7, LaplaceEvent(scale))
    exact = _exact_epsilon(1 / mp.mpf(scale), -7 * mp.log(2), delta)
    got = product_epsilon_lower(epoch, ADD, delta)
    assert got <= exact
    assert got >= exact * (1 - 1e-9)


@pytest.mark.parametrize("eps", [0.5, 9.9, 999.0])
def test_delta_lower_is_the_closed_form(eps: float) -> None:
    """Two epochs (1/b = 1 and 10) and one Laplace release (1/b = 990): the best of the
    sub-multisets' M (1 - e^(eps - L)) at 30 digits, found by enumeration."""
    parts = [(mp.mpf(1), -7 * mp.log(2)), (mp.mpf(10), -5 * mp.log(2)), (mp.mpf(990), -mp.log(2))]
    best = mp.mpf(0)
    for mask in itertools.product((0, 1), repeat=3):
        total_l = sum((p[0] for p, on in zip(parts, mask, strict=True) if on), mp.mpf(0))
        log_m = sum((p[1] for p, on in zip(parts, mask, strict=True) if on), mp.mpf(0))
        if total_l > eps:
            best = max(best, mp.e**log_m * (1 - mp.e ** (eps - total_l)))
    ledger = ComposedEvent(
        [
            RandomAllocationEvent(7, LaplaceEvent(1.0)),
            RandomAllocationEvent(5, LaplaceEvent(0.1)),
            LaplaceEvent(1 / 990),
        ]
    )
    got = product_delta_lower(ledger, ADD, eps)
    assert got <= best
    assert got >= best * (1 - 1e-8)  # the margin on L (1e-12 relative of 1000)


@pytest.mark.parametrize("seed", range(6))
def test_search_matches_enumeration_of_every_count_vector(seed: int) -> None:
    """The search's value equals the best over every count vector (itertools), for both
    objectives, on random parts of up to 4 copies each."""
    rng = np.random.default_rng(seed)
    parts = sorted(
        [
            (float(rng.uniform(0.05, 3.0)), -float(rng.uniform(0.05, 3.0)), int(rng.integers(1, 5)))
            for _ in range(3)
        ],
        key=lambda p: -p[0] / -p[1],
    )
    for objective in (_epsilon_objective(1e-3, 1e-12), _delta_objective(1.5, 1e-12)):
        brute = max(
            objective.value(
                sum(c * p[0] for c, p in zip(cs, parts, strict=True)),
                sum(-c * p[1] for c, p in zip(cs, parts, strict=True)),
            )
            for cs in itertools.product(*(range(p[2] + 1) for p in parts))
        )
        got = _best_counts(parts, objective)
        assert got <= brute + 1e-12
        # the search takes parts in order: within one part's loss of the enumeration
        assert got >= brute - max(p[0] for p in parts) - 1e-12


def test_bounds_stay_below_the_certified_upper_bound() -> None:
    """Mixed ledgers of allocations, Laplace and pure releases, both adjacencies, both queries:
    the product lower bound never exceeds the accountant's certified upper bound."""
    ledgers = [
        ComposedEvent([RandomAllocationEvent(7, LaplaceEvent(0.3)), PureDPEvent(0.7)]),
        SelfComposedEvent(RandomAllocationEvent(4, LaplaceEvent(0.5), 2), 5),
        ComposedEvent([LaplaceEvent(0.2), SelfComposedEvent(PureDPEvent(0.05), 40)]),
    ]
    for ledger in ledgers:
        for adjacency in (ADD, REPLACE):
            for delta in (1e-3, 1e-7):
                bound = account(ledger, adjacency, delta=delta).bound
                assert isinstance(bound, EpsilonBound)
                assert product_epsilon_lower(ledger, adjacency, delta) <= bound.epsilon
            for eps in (0.5, 3.0):
                at = account(ledger, adjacency, epsilon=eps).bound
                assert isinstance(at, DeltaBound)
                assert product_delta_lower(ledger, adjacency, eps) <= at.delta
