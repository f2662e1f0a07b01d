"""Exponential mechanisms at many distinct epsilons: the attained lower bound of the composed
GRR pairs at each release's own epsilon, and the Rényi upper bound without representatives."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

import mpmath as mp
import numpy as np
import pytest

from dpledger.accountant import br_heterogeneous
from dpledger.accountant.br_heterogeneous import (
    heterogeneous_cumulative,
    heterogeneous_delta_lower,
    heterogeneous_epsilon_lower,
)
from dpledger.accountant.conversions import rdp_to_epsilon
from dpledger.accountant.exp_mech_composition import (
    br_composed_delta_lower,
    br_composed_epsilon_lower,
    br_ledger_delta_lower,
    br_ledger_epsilon_lower,
)
from dpledger.accountant.rdp import RDPAccountant
from dpledger.accountant.rdp_orders import bounded_range_rdp, default_orders
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import ComposedEvent, ExponentialMechanismEvent

DPS = 40


@pytest.fixture(autouse=True)
def _digits() -> Iterator[None]:
    """Every test at DPS digits, without changing mpmath's precision for other modules."""
    with mp.workdps(DPS):
        yield


def _grr(t: mp.mpf, eps: mp.mpf) -> tuple[tuple[mp.mpf, mp.mpf, mp.mpf], ...]:
    """(loss, P mass, Q mass) of GRR(t) at eps, high outcome first."""
    q_low = (1 - mp.e ** (-t)) / (1 - mp.e ** (-eps))
    q_high = 1 - q_low
    return (t, q_high * mp.e**t, q_high), (t - eps, q_low * mp.e ** (t - eps), q_low)


def _exact_delta(epsilons: list[float], c: float, eps: float) -> mp.mpf:
    """delta(eps) of the composition of GRR(fl(c e_i)) at e_i, by enumerating every outcome."""
    pairs = [_grr(mp.mpf(c * e), mp.mpf(e)) for e in epsilons]
    ee = mp.e ** mp.mpf(eps)
    total = mp.mpf(0)
    for outcome in itertools.product(*pairs):
        loss = mp.fsum(o[0] for o in outcome)
        if loss > eps:
            p = mp.fprod(o[1] for o in outcome)
            q = mp.fprod(o[2] for o in outcome)
            total += p - ee * q
    return total


SMALL = [0.1, 0.13, 0.17, 0.2, 0.26, 0.3, 0.33, 0.41, 0.5, 0.55]


@pytest.mark.parametrize("eps", [0.0, 0.5, 1.0, 1.5])
def test_every_ratio_gives_a_certified_lower_bound_against_enumeration(eps: float) -> None:
    releases = [(e, 1) for e in SMALL]
    for c in (0.3, 0.5, 0.7):
        exact = _exact_delta(SMALL, c, eps)
        for grid in (4, 32, 256):
            p_cum, q_cum = heterogeneous_cumulative(sorted(releases, reverse=True), c, grid)
            found = max(0.0, float(np.max(p_cum - math.exp(eps) * q_cum)))
            assert found <= exact
        # at a fine lattice the sets {K <= m} are the likelihood-ratio tests: nearly exact
        assert found >= float(exact) * (1 - 1e-6) - 1e-15


def test_delta_lower_is_near_the_best_enumerated_pair() -> None:
    """The search over the common ratio finds a value within 3 % of the best one on a grid,
    and not above the best of a fine grid (the curve is smooth in c)."""
    small = SMALL[:8]
    releases = [(e, 1) for e in small]
    eps = 0.8
    found = heterogeneous_delta_lower(releases, eps)
    best = max(_exact_delta(small, c, eps) for c in np.linspace(0.02, 0.98, 97))
    assert 0.97 * float(best) <= found <= float(best) * (1 + 1e-3)


@pytest.mark.parametrize("c", [0.35, 0.5, 0.65])
def test_epsilon_lower_is_where_the_enumerated_curve_reaches_delta(c: float) -> None:
    """At a fixed ratio the epsilon read off the tests is below the pair's exact epsilon
    (its curve still exceeds delta there) and within 1 % of it at a fine lattice."""
    small = SMALL[:8]
    releases = sorted(((e, 1) for e in small), reverse=True)
    delta = 1e-3
    found = br_heterogeneous._epsilon_at(releases, delta, c, 256)
    assert found > 0.0
    assert _exact_delta(small, c, found) > delta
    assert _exact_delta(small, c, found * 1.01) < delta
    assert heterogeneous_epsilon_lower(releases, delta) >= found * 0.99


def test_one_epsilon_is_left_to_the_homogeneous_optimum() -> None:
    assert heterogeneous_epsilon_lower([(0.1, 50)], 1e-5) == 0.0
    assert heterogeneous_delta_lower([(0.1, 50), (0.1, 3)], 1.0) == 0.0
    v = 0.1 * (1 - 4 * 2.0**-53)  # the threshold rule's rounding
    assert br_ledger_epsilon_lower([(0.1, 50)], 1e-5) == br_composed_epsilon_lower(1e-5, v, 50)
    assert br_ledger_delta_lower([(0.1, 50)], 1.0) == br_composed_delta_lower(1.0, v, 50)


def _distinct(n: int, base: float) -> list[tuple[float, int]]:
    return [(base * (1 + i / n), 1) for i in range(n)]


def test_new_lower_is_at_least_the_threshold_lower_and_below_rdp() -> None:
    releases = _distinct(200, 0.03)
    delta = 1e-6
    old = max(
        br_composed_epsilon_lower(delta, v, sum(1 for e, _ in releases if e >= v))
        for v in (0.03, 0.045, 0.0599)
    )
    new = br_ledger_epsilon_lower(releases, delta)
    assert new >= old
    orders = default_orders()
    curve = sum(bounded_range_rdp(orders, e) for e, _ in releases)
    assert new <= rdp_to_epsilon(orders, curve, delta)[0]


def test_delta_lower_is_below_the_rdp_delta() -> None:
    releases = _distinct(200, 0.03)
    event = ComposedEvent(tuple(ExponentialMechanismEvent(e) for e, _ in releases))
    upper = RDPAccountant(Adjacency()).compose(event).get_delta(1.5).delta
    assert br_ledger_delta_lower(releases, 1.5) <= upper


@pytest.mark.parametrize("eps0", [1e-3, 0.05, 0.5, 3.0])
def test_bounded_range_rdp_is_the_supremum_over_grr_pairs(eps0: float) -> None:
    """The Rényi bound of one release is the supremum over t of D_a(GRR(t)), rounded up (a
    grid of t at 40 digits never exceeds it and comes within 1e-3 relative)."""
    orders = np.array([1.5, 2.0, 8.0, 20.0, 64.0])
    code = bounded_range_rdp(orders, eps0)
    for a, value in zip(orders, code, strict=True):
        assert _best_renyi(float(a), eps0) <= value <= _best_renyi(float(a), eps0) * (1 + 1e-3)


def _best_renyi(a: float, eps0: float) -> mp.mpf:
    """The largest D_a(GRR(t)) over a grid of t in (0, eps0)."""
    best = mp.mpf(0)
    for t in mp.linspace(mp.mpf(eps0) / 200, mp.mpf(eps0) * 199 / 200, 199):
        s = mp.fsum(p ** mp.mpf(a) * q ** (1 - mp.mpf(a)) for _, p, q in _grr(t, mp.mpf(eps0)))
        best = max(best, mp.log(s) / (mp.mpf(a) - 1))
    return best


def test_rdp_keeps_distinct_exponential_mechanisms_exact() -> None:
    epsilons = [0.01 * (1 + i / 100) for i in range(100)]
    event = ComposedEvent(tuple(ExponentialMechanismEvent(e) for e in epsilons))
    bound = RDPAccountant(Adjacency()).compose(event).get_epsilon(1e-5)
    orders = default_orders()
    curve = sum(bounded_range_rdp(orders, e) for e in epsilons)
    exact = rdp_to_epsilon(orders, curve, 1e-5)[0]
    assert "representative_step" not in bound.details
    assert bound.epsilon == pytest.approx(exact, rel=1e-12)
    assert bound.epsilon >= exact


def test_two_hundred_distinct_exponential_mechanisms() -> None:
    """The reproduction, smaller: the default call's lower is at least the threshold
    sub-compositions' and the upper is the exact Rényi bound (no representatives)."""
    epsilons = [0.02 * (1 + i / 200) for i in range(200)]
    event = ComposedEvent(tuple(ExponentialMechanismEvent(e) for e in epsilons))
    bound = account(event, Adjacency(), delta=1e-5).bound
    releases = [(e, 1) for e in epsilons]
    old = max(
        br_composed_epsilon_lower(1e-5, v, sum(1 for e in epsilons if e >= v))
        for v in (0.02, 0.03, 0.0399)
    )
    orders = default_orders()
    rdp = rdp_to_epsilon(orders, sum(bounded_range_rdp(orders, e) for e in epsilons), 1e-5)[0]
    assert old < bound.epsilon_lower == pytest.approx(br_ledger_epsilon_lower(releases, 1e-5))
    assert bound.epsilon_lower <= bound.epsilon <= rdp * (1 + 1e-9)


def _issue_event() -> ComposedEvent:
    return ComposedEvent(
        tuple(ExponentialMechanismEvent(0.01 * (1 + i / 1000)) for i in range(1000))
    )


@pytest.mark.slow
def test_thousand_distinct_exponential_mechanisms() -> None:
    """The reproduction: the lower rises from 0.879596 (threshold sub-compositions) to the
    composed pairs at their own epsilons, the upper falls from 0.97985 (representatives) to the
    exact Rényi bound; the non-adaptive optimum (a Gaussian limit near 0.8916) lies inside."""
    bound = account(_issue_event(), Adjacency(), delta=1e-5).bound
    assert 0.8910 <= bound.epsilon_lower <= 0.8917
    assert 0.97400 <= bound.epsilon <= 0.97415
    assert bound.epsilon_lower >= 0.879596
    assert bound.epsilon <= 0.97985
    delta = account(_issue_event(), Adjacency(), epsilon=0.98).bound
    assert delta.delta_lower >= 1.68048e-06
    assert delta.delta_lower <= delta.delta <= 9.9745e-06
