"""Adversarial review of the attained lower bound of exponential mechanisms at distinct epsilons
(:mod:`dpledger.accountant.br_heterogeneous`) and of the Rényi bound that keeps distinct
exponential-mechanism leaves exact.

References: every composed outcome of the ``GRR(fl(c eps_i))`` pairs enumerated at 50 digits
(at the ratio ``c`` the search actually chose), the homogeneous optimum
(:mod:`~dpledger.accountant.exp_mech_composition`) and the adaptive programme's certified upper
(:mod:`~dpledger.accountant.br_adaptive`) where the epsilons (nearly) coincide, and every
certified upper bound (Rényi, closed form, PLD, basic composition): a lower bound above any of
them is a bug."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterator

import mpmath as mp
import numpy as np
import pytest

from dpledger.accountant import br_heterogeneous as bh
from dpledger.accountant.br_adaptive import adaptive_br_delta, adaptive_br_epsilon
from dpledger.accountant.closed_form import ClosedFormAccountant
from dpledger.accountant.conversions import rdp_to_delta, rdp_to_epsilon
from dpledger.accountant.exp_mech_composition import (
    br_composed_delta_lower,
    br_composed_epsilon_lower,
    br_ledger_epsilon_lower,
)
from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.rdp import RDPAccountant
from dpledger.accountant.rdp_orders import bounded_range_rdp, default_orders, pure_dp_rdp
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import BoundUnavailable
from dpledger.core.events import (
    ComposedEvent,
    Event,
    ExponentialMechanismEvent,
    PureDPEvent,
    SelfComposedEvent,
)

DPS = 50
Releases = list[tuple[float, int]]
Atom = tuple[mp.mpf, mp.mpf, mp.mpf]


@pytest.fixture(autouse=True)
def _digits() -> Iterator[None]:
    with mp.workdps(DPS):
        yield


@pytest.fixture
def chosen(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The ratios ``c`` the search returns, in call order (the reported value is the curve of
    the pair at that ratio, so it is compared with that pair's enumeration)."""
    seen: list[float] = []
    original = bh._best_ratio

    def recording(f: object) -> float:
        c = original(f)  # type: ignore[arg-type]
        seen.append(c)
        return c

    monkeypatch.setattr(bh, "_best_ratio", recording)
    return seen


def _grr(t: mp.mpf, eps: mp.mpf) -> tuple[Atom, Atom]:
    """(loss, P mass, Q mass) of GRR(t) at eps, high outcome first."""
    q_low = -mp.expm1(-t) / -mp.expm1(-eps)
    q_high = 1 - q_low
    return (t, q_high * mp.e**t, q_high), (t - eps, q_low * mp.e ** (t - eps), q_low)


def _atoms(releases: Releases, c: float) -> list[Atom]:
    """Every composed outcome (merged per epsilon by its number of low outcomes) of the
    ``GRR(fl(c e))`` pairs, at DPS digits."""
    items: list[Atom] = [(mp.mpf(0), mp.mpf(1), mp.mpf(1))]
    for e, n in releases:
        (lh, ph, qh), (ll, pl, ql) = _grr(mp.mpf(c * e), mp.mpf(e))
        part = [
            (
                (n - j) * lh + j * ll,
                mp.binomial(n, j) * ph ** (n - j) * pl**j,
                mp.binomial(n, j) * qh ** (n - j) * ql**j,
            )
            for j in range(n + 1)
        ]
        items = [(a + b, p * r, q * s) for (a, p, q), (b, r, s) in itertools.product(items, part)]
    return items


def _delta(items: list[Atom], eps: float) -> mp.mpf:
    ee = mp.e ** mp.mpf(eps)
    return mp.fsum(p - ee * q for loss, p, q in items if loss > eps)


# ledgers at the edges: epsilons at both ends of the kept range, a subnormal one (left out),
# counts at the binomial kernels' threshold
EDGE_LEDGERS: list[Releases] = [
    [(40.0, 3), (39.9, 2), (1e-100, 5)],
    [(0.45, 16), (0.3, 17), (0.2, 3)],
    [(7.0, 16), (1e-8, 20), (5e-324, 3)],
    [(1e-30, 2), (1e-31, 3)],
]


@pytest.mark.parametrize("releases", EDGE_LEDGERS)
def test_reported_values_are_below_the_enumerated_pair_at_the_chosen_ratio(
    releases: Releases, chosen: list[float]
) -> None:
    kept = bh._releases(releases)
    for delta in (1e-1, 1e-10, 1e-30):
        found = bh.heterogeneous_epsilon_lower(releases, delta)
        if found > 0.0:  # the pair's curve still reaches delta at the reported epsilon
            assert _delta(_atoms(kept, chosen[-1]), found) >= delta
    top = math.fsum(e * n for e, n in kept)
    for eps in (-5.0, 0.0, 0.3 * top, 0.7 * top, 0.97 * top):
        found = bh.heterogeneous_delta_lower(releases, eps)
        assert found <= _delta(_atoms(kept, chosen[-1]), eps)


def test_masses_bracket_the_pair_at_extreme_ratios_and_epsilons() -> None:
    for c, eps in itertools.product((0.02, 0.37, 0.98), (1e-100, 1e-30, 1e-8, 0.3, 39.9, 40.0)):
        t, p_low, p_high, q_low, q_high = bh._masses(c, eps)
        (_, ph, qh), (_, pl, ql) = _grr(mp.mpf(t), mp.mpf(eps))
        assert p_low <= pl and p_high <= ph and q_low >= ql and q_high >= qh


def test_binomial_kernels_are_directed_up_to_one_subnormal() -> None:
    """Q kernels are at least the binomial masses; P kernels are at most them plus the smallest
    subnormal: ``exp`` rounds a subnormal result to nearest and the factor ``1 - 2u`` cannot
    move it down (2.78750973e-316 above 2.7875097251e-316 at n = 100, c = 0.02, eps = 7,
    j = 86). The composed bound stays sound: every binomial kernel is charged an absolute
    ``NORMAL (n + 2)`` per entry, far above ``(n + 1)`` subnormals."""
    above = 0
    for n, c, eps in itertools.product((16, 100, 2000), (0.02, 0.98), (1e-8, 7.0, 40.0)):
        _, p_low, p_high, q_low, q_high = bh._masses(c, eps)
        p_kernel = bh._binomial(p_low, p_high, n, n, -1)
        q_kernel = bh._binomial(q_low, q_high, n, n, 1)
        for j in range(0, n + 1, max(1, n // 50)):
            binom = mp.binomial(n, j)
            p_exact = binom * mp.mpf(p_high) ** (n - j) * mp.mpf(p_low) ** j
            q_exact = binom * mp.mpf(q_high) ** (n - j) * mp.mpf(q_low) ** j
            assert q_kernel[j] >= q_exact
            assert p_kernel[j] <= p_exact + bh.TINY
            above += int(p_kernel[j] > p_exact)
        # a Q kernel sums to at most 1 + 1e-9 (not the 1 + 1e-12 the proof states; the
        # factor 2 on the absolute charges covers it)
        assert float(np.sum(q_kernel)) <= 1.0 + 1e-9
    assert above >= 1  # the subnormal case is reached by this grid


def test_subnormal_kernel_entries_stay_charged_in_the_composition() -> None:
    """A ledger whose P kernel has a subnormal entry below the truncation (40.0 booked 1000
    times at c = 0.02, grid 64: entry j = 20 is 1.8e-320, the next ones underflow): the composed
    cumulative P stays below the enumerated one and Q above it at every threshold."""
    releases = [(40.0, 1000), (3.0, 2)]
    c, grid = 0.02, 64
    p_cum, q_cum = bh.heterogeneous_cumulative(releases, c, grid)
    h = 40.0 / grid
    units = [round(e / h) for e, _ in releases]
    laws = []
    for (e, n), k in zip(releases, units, strict=True):
        (_, ph, qh), (_, pl, ql) = _grr(mp.mpf(c * e), mp.mpf(e))
        top = min(n, p_cum.size // k + 1)
        laws.append(
            [
                (
                    j * k,
                    mp.binomial(n, j) * ph ** (n - j) * pl**j,
                    mp.binomial(n, j) * qh ** (n - j) * ql**j,
                )
                for j in range(top + 1)
            ]
        )
    p_law = [mp.mpf(0)] * p_cum.size
    q_law = [mp.mpf(0)] * p_cum.size
    for (k1, p1, q1), (k2, p2, q2) in itertools.product(*laws):
        if k1 + k2 < p_cum.size:
            p_law[k1 + k2] += p1 * p2
            q_law[k1 + k2] += q1 * q2
    p_ref, q_ref = mp.mpf(0), mp.mpf(0)
    for m in range(p_cum.size):
        p_ref += p_law[m]
        q_ref += q_law[m]
        assert p_cum[m] <= p_ref
        assert q_cum[m] >= q_ref


def _event(releases: Releases, extra: tuple[Event, ...] = ()) -> ComposedEvent:
    parts = tuple(
        SelfComposedEvent(ExponentialMechanismEvent(e), n)
        if n > 1
        else ExponentialMechanismEvent(e)
        for e, n in releases
    )
    return ComposedEvent(parts + extra)


def _rdp_upper(releases: Releases, delta: float) -> float:
    orders = default_orders()
    curve = sum(n * bounded_range_rdp(orders, e) for e, n in releases)
    return rdp_to_epsilon(orders, curve * (1 + 1e-12), delta)[0]


UPPER_LEDGERS: list[Releases] = [
    [(10.530944801771852, 16), (10.184612947903492, 2)],  # the lower within 3e-6 of the RDP
    [(0.2277081410444536, 17), (0.009593301151877032, 17)],
    [(0.03 * (1 + i / 20), 1) for i in range(20)],
    [(0.5, 10**6), (0.3, 10**6), (0.29, 3)],
]


@pytest.mark.parametrize("releases", UPPER_LEDGERS)
def test_lower_never_exceeds_a_certified_upper(releases: Releases) -> None:
    for delta in (1e-1, 1e-30):
        lower = bh.heterogeneous_epsilon_lower(releases, delta)
        assert lower <= _rdp_upper(releases, delta)
        assert lower <= math.fsum(e * n for e, n in releases)
    delta = 8.983440917915062e-12
    lower = bh.heterogeneous_epsilon_lower(releases, delta)
    assert lower <= _rdp_upper(releases, delta)
    kept = bh._releases(releases)
    count, top = sum(n for _, n in kept), max(e for e, _ in kept)
    adaptive = adaptive_br_epsilon(delta, top, count) if count * top < 200 else None
    if adaptive is not None:
        assert lower <= adaptive[1]
        return  # (the closed form's own bracket takes most of a second here)
    closed = ClosedFormAccountant(Adjacency()).compose(_event(releases)).get_epsilon(delta)
    assert lower <= closed.epsilon
    assert closed.epsilon_lower <= closed.epsilon


@pytest.mark.parametrize("relation", ["add_remove", "replace_one"])
def test_both_adjacencies_book_the_range_itself(relation: str) -> None:
    """The event's epsilon is the range under the source's relation, so the lower is the same
    under both relations and below every backend's upper under each."""
    releases = [(0.2, 5), (0.13, 4), (0.07, 3)]
    adjacency = Adjacency(relation=relation)
    event = _event(releases, (PureDPEvent(0.01),))
    selection = account(event, adjacency, delta=1e-6)
    own = br_ledger_epsilon_lower(releases, 1e-6)
    assert selection.bound.epsilon_lower >= own > 0.0
    for candidate in selection.candidates:
        assert own <= candidate.epsilon  # type: ignore[union-attr]
    rdp = RDPAccountant(adjacency).compose(event).get_epsilon(1e-6)
    assert own <= rdp.epsilon


def test_nearly_equal_epsilons_match_the_homogeneous_optimum() -> None:
    """Two epsilons 1e-9 apart: the composed pairs' value is the homogeneous optimum (exact
    non-adaptive, Dong, Durfee and Rogers 2020) to 1e-7, and below the adaptive upper."""
    releases = [(0.5, 17), (0.5 * (1 + 1e-9), 17)]
    lower = bh.heterogeneous_epsilon_lower(releases, 1e-6)
    homogeneous = br_composed_epsilon_lower(1e-6, 0.5, 34)
    assert lower == pytest.approx(homogeneous, rel=1e-7)
    adaptive = adaptive_br_epsilon(1e-6, 0.5 * (1 + 1e-9), 34)
    assert adaptive is not None and lower <= adaptive[1]
    d_lower = bh.heterogeneous_delta_lower(releases, 3.0)
    assert d_lower == pytest.approx(br_composed_delta_lower(3.0, 0.5, 34), rel=1e-5)
    d_adaptive = adaptive_br_delta(3.0, 0.5 * (1 + 1e-9), 34)
    assert d_adaptive is not None and d_lower <= d_adaptive[1]


def test_rdp_keeps_exponential_mechanisms_exact_beside_rounded_pure_leaves() -> None:
    """Beyond 64 other distinct leaves the pure-DP ones are rounded up and the exponential
    mechanisms keep their own curves: the total is at least the exact sum of curves, and the
    exponential-mechanism part is not rounded."""
    ems = [0.01 * (1 + i / 100) for i in range(100)]
    pures = [0.002 * (1 + i / 100) for i in range(100)]
    event = ComposedEvent(
        tuple(ExponentialMechanismEvent(e) for e in ems) + tuple(PureDPEvent(e) for e in pures)
    )
    acc = RDPAccountant(Adjacency()).compose(event)
    orders = acc.orders
    exact_em = sum(bounded_range_rdp(orders, e) for e in ems)
    leaves = acc._leaves()
    assert all(ExponentialMechanismEvent(e) in leaves for e in ems)
    rounded = sum(
        k * acc._leaf_rdp(leaf) for leaf, k in leaves.items() if isinstance(leaf, PureDPEvent)
    )
    exact_pure = sum(pure_dp_rdp(orders, e) for e in pures)
    assert np.all(rounded >= exact_pure)
    assert np.all(acc.rdp() >= exact_em + exact_pure)


# -- the wide battery ----------------------------------------------------------------------


def _random_ledger(rng: random.Random) -> Releases:
    releases: Releases = []
    size = 1
    for _ in range(rng.randint(2, 5)):
        if rng.random() < 0.1:
            e = rng.choice([1e-100, 1e-50, 1e-12, 40.0, 39.999, 5e-324, 1e-101, 40.5])
        else:
            e = math.exp(rng.uniform(math.log(1e-6), math.log(40.0)))
        n = rng.choice([1, 1, 2, 3, 5, 16, 17, 20, 30])
        if size * (n + 1) > 3000:
            n = 1
        size *= n + 1
        releases.append((e, n))
    return releases


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_random_ledgers_against_enumeration(seed: int, chosen: list[float]) -> None:
    rng = random.Random(seed)
    for _ in range(10):
        releases = _random_ledger(rng)
        kept = bh._releases(releases)
        if not bh._applies(kept):
            continue
        top = math.fsum(e * n for e, n in kept)
        for eps in (rng.uniform(-1.0, 1.2 * top), 0.0, -5.0):
            found = bh.heterogeneous_delta_lower(releases, eps)
            assert found <= _delta(_atoms(kept, chosen[-1]), eps)
        for delta in (10 ** rng.uniform(-30, -1), 1e-30, 0.1):
            found = bh.heterogeneous_epsilon_lower(releases, delta)
            if found > 0.0:
                assert _delta(_atoms(kept, chosen[-1]), found) >= delta


def _pld(event: Event, *, delta: float | None = None, epsilon: float | None = None) -> float:
    """The PLD backend's upper bound (infinite where it declines: delta queries at epsilons in
    the millions overflow, e.g. ``SelfComposedEvent(ExponentialMechanismEvent(7.7), 10**6)``
    at 4e6, and the default call then answers [0, 1] from the closed form)."""
    acc = PLDAccountant(Adjacency()).compose(event)
    try:
        if delta is not None:
            return acc.get_epsilon(delta).epsilon
        assert epsilon is not None
        return acc.get_delta(epsilon).delta
    except BoundUnavailable:
        return math.inf


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
def test_random_ledgers_below_every_certified_upper(seed: int) -> None:
    rng = random.Random(100 + seed)
    orders = default_orders()
    for _ in range(8):
        k = rng.choice([2, 3, 5, 10, 30, 100])
        base = math.exp(rng.uniform(math.log(1e-4), math.log(30.0)))
        spread = 1.04 if rng.random() < 0.3 else 100.0
        epsilons = [base / math.exp(rng.uniform(0, math.log(spread))) for _ in range(k)]
        releases = [(e, rng.choice([1, 2, 16, 17, 100, 1000, 10**6])) for e in epsilons]
        delta = 10 ** rng.uniform(-30, -1)
        lower = bh.heterogeneous_epsilon_lower(releases, delta)
        event = _event(releases)
        assert lower <= _rdp_upper(releases, delta)
        assert lower <= ClosedFormAccountant(Adjacency()).compose(event).get_epsilon(delta).epsilon
        assert lower <= _pld(event, delta=delta)
        kept = bh._releases(releases)
        count, top = sum(n for _, n in kept), max(e for e, _ in kept)
        if count * top < 200:
            adaptive = adaptive_br_epsilon(delta, top, count)
            if adaptive is not None:
                assert lower <= adaptive[1]
        curve = sum(n * bounded_range_rdp(orders, e) for e, n in releases) * (1 + 1e-12)
        eps = rng.uniform(0.0, 1.0) * _rdp_upper(releases, 1e-3)
        d_lower = bh.heterogeneous_delta_lower(releases, eps)
        assert d_lower <= rdp_to_delta(orders, curve, eps)[0]
        assert d_lower <= _pld(event, epsilon=eps)


@pytest.mark.slow
def test_rdp_beyond_the_exact_limit_rounds_up() -> None:
    """4097 distinct exponential mechanisms (one above MAX_EXACT_BOUNDED_RANGE): rounded to
    dominating representatives, the curve stays at least the exact sum (about 1.1 % above it:
    the bound steps up by that much at the limit)."""
    epsilons = [0.01 * (1 + i / 4097) for i in range(4097)]
    event = ComposedEvent(tuple(ExponentialMechanismEvent(e) for e in epsilons))
    acc = RDPAccountant(Adjacency()).compose(event)
    exact = sum(bounded_range_rdp(acc.orders, e) for e in epsilons)
    assert len(acc._leaves()) <= 64
    assert np.all(acc.rdp() >= exact)
