"""Review of delta queries that compose many components with their tails cut for an estimated
level (accountant/pld_delta.py, pld_compositions.py, pld_prepared.py) and of the representatives'
second budget (accountant/pld_components.py).

The cut mass is charged at +infinity to the upper bound and dropped from the lower one whatever
the level, so the brackets must hold when the level is far from the delta found (too high: a
Chernoff level; too low: a composition whose delta is its mass at +infinity). References: exact
60-digit deltas of approximate-DP and randomized-response lattices beside a Gaussian; the
epsilon brackets of the same ledgers (an epsilon bracket [lo, up] at delta0 and a delta bracket
[dl, du] at epsilon E must leave room for one curve); the brackets certified before tails were
cut in delta queries; dp-accounting's PLD at h = 1e-4 (connect-the-dots, an estimate from above).
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.pld_components import (
    MAX_DISTINCT_COMPONENTS,
    MAX_ROUNDED_COMPONENTS,
    MAX_ROUNDED_STEP,
    representative_components,
)
from dpledger.accountant.pld_compositions import CUT_SHARE
from dpledger.accountant.pld_prepared import CUT_COMPONENTS
from dpledger.accountant.representatives import Split, Table, split
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    ApproxDPEvent,
    ComposedEvent,
    Event,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    RandomizedResponseEvent,
    SelfComposedEvent,
)

#: the lattice's unit: leaf i of :func:`_lattice_mix` has epsilon i * UNIT
UNIT = 0.05


def _lattice_mix(n: int, sigma: float) -> dict[Event, int]:
    """``n`` distinct leaves at epsilons i * UNIT (every third approximate DP with delta
    i * 1e-9, the others binary randomized response) beside one Gaussian of noise ``sigma``:
    more than CUT_COMPONENTS components, mass at +infinity 1 - prod(1 - delta_i)."""
    leaves: dict[Event, int] = {}
    for i in range(1, n + 1):
        e = UNIT * i
        leaf = ApproxDPEvent(e, 1e-9 * i) if i % 3 == 0 else RandomizedResponseEvent(e, 2)
        leaves[leaf] = 1
    leaves[GaussianEvent(sigma)] = 1
    return leaves


def _exact_delta(leaves: dict[Event, int], eps: float, dps: int = 60) -> mp.mpf:
    """delta(eps) of :func:`_lattice_mix` at ``dps`` digits: the finite lattice (its losses
    j * UNIT merged by j; each leaf's float epsilon is i * UNIT up to 1e-16 relative) read
    through the Gaussian's curve, and the mass at +infinity."""
    with mp.workdps(dps):
        keep, precision = mp.mpf(1), mp.mpf(0)
        atoms: dict[int, mp.mpf] = {0: mp.mpf(1)}
        for leaf, m in leaves.items():
            if isinstance(leaf, GaussianEvent):
                precision += m / mp.mpf(leaf.noise_multiplier) ** 2
                continue
            assert isinstance(leaf, ApproxDPEvent | RandomizedResponseEvent)
            if isinstance(leaf, ApproxDPEvent):
                keep *= (1 - mp.mpf(leaf.delta)) ** m
            k = round(leaf.epsilon / UNIT)
            a = mp.exp(mp.mpf(leaf.epsilon)) / (1 + mp.exp(mp.mpf(leaf.epsilon)))
            for _ in range(m):
                moved: dict[int, mp.mpf] = {}
                for j, p in atoms.items():
                    moved[j + k] = moved.get(j + k, mp.mpf(0)) + p * a
                    moved[j - k] = moved.get(j - k, mp.mpf(0)) + p * (1 - a)
                atoms = moved
        mu, x = mp.sqrt(precision), mp.mpf(eps)

        def curve(t: mp.mpf) -> mp.mpf:
            return mp.ncdf(-t / mu + mu / 2) - mp.exp(t) * mp.ncdf(-t / mu - mu / 2)

        body = mp.fsum(p * curve(x - j * mp.mpf(UNIT)) for j, p in atoms.items())
        return 1 - keep + keep * body


def _pld(leaves: dict[Event, int] | list[Event], adjacency: Adjacency | None = None):  # type: ignore[no-untyped-def]
    acc = PLDAccountant(adjacency)
    if isinstance(leaves, dict):
        for leaf, m in leaves.items():
            acc.compose(leaf, m)
    else:
        acc.compose(ComposedEvent(leaves))
    return acc


def _cut_tags(acc: PLDAccountant) -> set[str]:
    return {name for name, *_ in acc._cache.states}


@pytest.mark.parametrize(
    ("n", "sigma", "eps"),
    [
        (20, 0.5, 8.0),
        pytest.param(20, 0.5, 16.0, marks=pytest.mark.slow),
        (17, 1.0, 12.0),
        (17, 1.0, 16.0),
    ],
)
def test_cut_delta_brackets_hold_the_exact_lattice_delta(n: int, sigma: float, eps: float):
    """Tails cut for a Chernoff level (once, or again for the delta found), and a delta that
    is almost all mass at +infinity (eps 16 with sigma 1): the bracket holds the exact delta."""
    leaves = _lattice_mix(n, sigma)
    exact = _exact_delta(leaves, eps)
    acc = _pld(leaves)
    bound = acc.get_delta(eps)
    assert bound.delta_lower <= exact * (1 + 1e-12)
    assert bound.delta >= exact * (1 - 1e-12)
    assert bound.delta <= exact * 1.001  # tight from above (connect-the-dots is)
    if eps < 16.0:
        assert any("|cut=" in tag for tag in _cut_tags(acc))


@pytest.mark.parametrize(
    ("n", "sigma", "eps"),
    [(17, 1.0, 20.0), pytest.param(18, 2.0, 14.0, marks=pytest.mark.slow)],
)
def test_a_delta_at_the_mass_at_infinity_keeps_its_lower_bound(n: int, sigma: float, eps: float):
    """An epsilon beyond the finite losses: delta is the mass at +infinity, which the Chernoff
    level of the finite losses (about 1e-300) leaves out; tails cut or widened for that level
    left the dominated pairs uncertified and the lower bound at 0 (exact 4.4999999235e-8)."""
    leaves = _lattice_mix(n, sigma)
    exact = _exact_delta(leaves, eps)
    bound = _pld(leaves).get_delta(eps)
    assert bound.delta_lower <= exact <= bound.delta
    assert bound.delta_lower >= 0.99 * exact


def test_sampled_approximate_dp_copies_keep_their_mass_at_infinity():
    """A Poisson-sampled approximate-DP leaf (rate 0.01, delta 1e-6) holds P-mass 1e-8 at
    +infinity, so k copies have delta(eps) >= 1 - (1 - 1e-8)^k at every eps; the lower bound
    keeps it (it read 0 for two copies and more before the dominated pair named the mass)."""
    acc = PLDAccountant()
    acc.compose(PoissonSampledEvent(0.01, ApproxDPEvent(0.5, 1e-6)), 5)
    bound = acc.get_delta(3.0)
    # (1 - (1 - 1e-8)^5 taken without cancellation: in doubles it errs by 5e-9 relative)
    floor = -math.expm1(5 * math.log1p(-1e-8))
    assert bound.delta_lower <= floor * (1 + 1e-12) and bound.delta >= floor * (1 - 1e-12)
    assert bound.delta_lower >= 0.99 * floor


def _distinct_mix() -> list[Event]:
    """A mixture past CUT_COMPONENTS: distinct Poisson-sampled Gaussians, Laplace and binary
    randomized response leaves."""
    leaves: list[Event] = [
        PoissonSampledEvent(0.01 * (1 + 0.04 * i), GaussianEvent(1.0)) for i in range(12)
    ]
    leaves += [LaplaceEvent(5.0 + i) for i in range(4)]
    leaves += [RandomizedResponseEvent(0.1 + 0.01 * i, 2) for i in range(4)]
    assert len(leaves) > CUT_COMPONENTS
    return leaves


def _check_pair(leaves: list[Event], adjacency: Adjacency, delta0: float, eps0: float) -> None:
    """The brackets of separate accountants (no shared compositions) leave room for one curve:
    an epsilon bracket [lo, up] at delta0 certifies delta(up) <= delta0 <= delta(lo) (up to
    continuity), so the delta query's lower bound at up is at most delta0 and its upper bound
    at lo at least delta0; a delta bracket [dl, du] at eps0 certifies eps(du) <= eps0 <= eps(dl),
    so the epsilon query's lower bound at du is at most eps0 and its upper bound at dl at least
    eps0."""
    found = _pld(leaves, adjacency).get_epsilon(delta0)
    lo, up = found.epsilon_lower, found.epsilon
    assert lo <= up
    # (an infinite end: delta0 is at most the mass at +infinity, no epsilon reaches it)
    if math.isfinite(up):
        assert _pld(leaves, adjacency).get_delta(up).delta_lower <= delta0 * (1 + 1e-9)
    if math.isfinite(lo):
        assert _pld(leaves, adjacency).get_delta(lo).delta >= delta0 * (1 - 1e-9)
    bracket = _pld(leaves, adjacency).get_delta(eps0)
    dl, du = bracket.delta_lower, bracket.delta
    assert 0.0 <= dl <= du
    if du < 1.0:
        assert _pld(leaves, adjacency).get_epsilon(du).epsilon_lower <= eps0 * (1 + 1e-9)
    if dl > 0.0:
        assert _pld(leaves, adjacency).get_epsilon(dl).epsilon >= eps0 * (1 - 1e-9)


def test_delta_and_epsilon_brackets_of_a_lattice_leave_room_for_one_curve():
    _check_pair(list(_lattice_mix(17, 1.0)), Adjacency(), 1e-6, 8.0)


@pytest.mark.slow
@pytest.mark.parametrize("relation", ["add_remove", "replace_one"])
def test_delta_and_epsilon_brackets_of_a_mixture_leave_room_for_one_curve(relation: str):
    _check_pair(_distinct_mix(), Adjacency(relation=relation), 1e-5, 3.0)


def _covers(rep: Split, member: Split, step: float, *, up: bool) -> bool:
    """Whether ``rep`` is on the costly (``up``) or cheap side of ``member`` in every
    parameter, within a factor 1 + ``step`` of it."""
    if rep[0] != member[0]:
        return False
    grow = 1.0 + step
    for r, m, costly in zip(rep[1], member[1], rep[2], strict=True):
        assert isinstance(r, float) and isinstance(m, float)
        larger = costly == up
        if (r < m) if larger else (r > m):
            return False
        if (r > m * grow * (1 + 1e-12)) if larger else (r < m / grow / (1 + 1e-12)):
            return False
    return True


def _check_representatives(merged: dict[Event, int]) -> float:
    """Every member has an upper representative on its costly side and a lower one on its
    cheap side, within the step; a representative counts no more than the members it covers;
    both sides count every member. The step."""
    upper, lower, step = representative_components(merged)
    assert len(upper) <= MAX_ROUNDED_COMPONENTS and len(lower) <= MAX_ROUNDED_COMPONENTS
    assert sum(upper.values()) == sum(lower.values()) == sum(merged.values())
    members = [(split(e), k) for e, k in merged.items()]
    for side, up in ((upper, True), (lower, False)):
        reps = [(split(e), k) for e, k in side.items()]
        for member, _ in members:
            assert member is not None
            assert any(r is not None and _covers(r, member, step, up=up) for r, _ in reps)
        for rep, count in reps:
            assert rep is not None
            covered = sum(
                k for m, k in members if m is not None and _covers(rep, m, math.inf, up=up)
            )
            assert count <= covered
    return step


def test_representatives_of_the_second_budget_dominate_their_members():
    """DP-SGD steps spread in rate and noise whose step is lowered by the second budget (4.4 %
    at 256 components, 2.8 % at at most 360): every member is covered on both sides."""
    rng = np.random.default_rng(7)
    merged: dict[Event, int] = {
        PoissonSampledEvent(float(q), GaussianEvent(float(s))): 1
        for q, s in zip(rng.uniform(1e-3, 3e-3, 500), rng.uniform(0.8, 1.2, 500), strict=True)
    }
    step = _check_representatives(merged)
    assert step <= MAX_ROUNDED_STEP < Table(merged).step(MAX_DISTINCT_COMPONENTS)


def test_representatives_of_mixed_kinds_dominate_their_members():
    """Randomized response, approximate DP, Laplace and sampled Gaussians together."""
    rng = np.random.default_rng(3)
    merged: dict[Event, int] = {}
    for q, s in zip(rng.uniform(1e-3, 3e-3, 150), rng.uniform(0.8, 1.2, 150), strict=True):
        merged[PoissonSampledEvent(float(q), GaussianEvent(float(s)))] = 2
    for e in rng.uniform(0.01, 0.02, 100):
        merged[RandomizedResponseEvent(float(e), 2)] = 1
    for e, d in zip(rng.uniform(0.01, 0.02, 100), rng.uniform(1e-9, 2e-9, 100), strict=True):
        merged[ApproxDPEvent(float(e), float(d))] = 3
    for b in rng.uniform(50.0, 100.0, 100):
        merged[LaplaceEvent(float(b))] = 1
    _check_representatives(merged)


def _poisson(n: int, base: float = 0.01, step: float = 0.04) -> list[Event]:
    return [PoissonSampledEvent(base * (1 + i * step), GaussianEvent(1.0)) for i in range(n)]


def _heavy() -> list[Event]:
    """Heavy single hits: 20 distinct rates near 1e-6 at noise 0.02, 500 steps each."""
    return [
        SelfComposedEvent(PoissonSampledEvent(1e-6 * (1 + 0.05 * i), GaussianEvent(0.02)), 500)
        for i in range(20)
    ]


#: brackets certified before delta queries cut tails (the code of the parent of the first
#: change), per (ledger, adjacency, epsilon): a new upper bound below the old lower, or a new
#: lower above the old upper, is a wrong certified number on one side
OLD_BRACKETS: dict[tuple[str, str, float], tuple[float, float]] = {
    ("poisson24", "add_remove", 0.5): (8.194732210591925e-05, 8.195006632175221e-05),
    ("poisson24", "add_remove", 1.0): (1.248944756881784e-06, 1.2489888818317017e-06),
    ("poisson24", "add_remove", 3.0): (1.6299225712816665e-12, 1.6299479256973332e-12),
    ("poisson24", "replace_one", 0.5): (0.0002241637028345345, 0.00022419093610338904),
    ("poisson24", "replace_one", 2.0): (2.235398738615724e-09, 2.2354677543324656e-09),
    ("poisson200", "add_remove", 0.3): (3.4135491598350357e-07, 3.417093460933925e-07),
    ("heavy", "add_remove", 5.0): (0.01464025834873765, 0.014652164528688312),
    ("heavy", "add_remove", 200.0): (0.014640258348737648, 0.014651976894312448),
    ("heavy", "replace_one", 50.0): (0.01464043891561946, 0.014652445995755874),
    ("mix", "add_remove", 1.0): (0.0005352076224400969, 0.0005384377300076543),
    ("mix", "add_remove", 3.0): (4.016302723908104e-12, 4.031668006034379e-12),
    ("poisson24", "add_remove", 5.0): (3.766314328945193e-19, 3.766435414202127e-19),
    ("heavy", "add_remove", 6000.0): (1.448967432617845e-12, 5.444382371431304e-12),
    ("approx", "add_remove", 0.5): (8.754557077929964e-05, 8.75708191808819e-05),
    ("approx", "add_remove", 3.5): (1.0100002558518103e-07, 1.010000257264537e-07),
    ("sampled_approx", "add_remove", 0.5): (4.3223901459707075e-05, 4.323866802619488e-05),
    ("long_run", "add_remove", 4.0): (4.192441735678697e-12, 4.197985622871855e-12),
    ("long_run", "add_remove", 6.0): (4.6874748008859747e-23, 1.4414205716517512e-22),
}

LEDGERS = {
    "poisson24": lambda: _poisson(24),
    "poisson200": lambda: _poisson(200, base=0.001, step=0.01),
    "heavy": _heavy,
    "mix": _distinct_mix,
    # approximate-DP leaves (mass at +infinity) beside many sampled Gaussians, and sampled
    "approx": lambda: [*_poisson(20), ApproxDPEvent(0.1, 1e-7), ApproxDPEvent(0.05, 1e-9)],
    "sampled_approx": lambda: [
        *_poisson(20),
        PoissonSampledEvent(0.01, ApproxDPEvent(0.5, 1e-6)),
    ],
    # a long run (1e5 steps of 20 distinct rates): its level is screened on a coarse window
    "long_run": lambda: [SelfComposedEvent(e, 5000) for e in _poisson(20, base=1e-3)],
}


@pytest.mark.slow
@pytest.mark.parametrize(("ledger", "relation", "eps"), sorted(OLD_BRACKETS))
def test_new_brackets_meet_the_brackets_certified_before(ledger: str, relation: str, eps: float):
    old_lo, old_up = OLD_BRACKETS[(ledger, relation, eps)]
    bound = _pld(LEDGERS[ledger](), Adjacency(relation=relation)).get_delta(eps)
    assert bound.delta >= old_lo and bound.delta_lower <= old_up
    assert bound.delta_lower <= bound.delta
    # no looser than before by more than the old bracket's width and the cut's charge (at
    # most about CUT_SHARE of delta: 8.2e-6 of it where delta is the mass at +infinity)
    assert bound.delta <= old_up * (1 + 2 * CUT_SHARE) + (old_up - old_lo)


#: dp-accounting 0.6 PLD of ``_poisson(24)`` at h = 1e-4 per epsilon: (pessimistic
#: connect-the-dots estimate, from above; optimistic estimate, from below)
DP_ACCOUNTING_DELTA = {
    1.0: (1.248967252139294e-06, 1.2380170618532552e-06),
    3.0: (1.658191519829282e-12, 1.615412811164855e-12),
}


@pytest.mark.slow
@pytest.mark.parametrize("eps", sorted(DP_ACCOUNTING_DELTA))
def test_cut_delta_brackets_against_dp_accounting(eps: float):
    """The certified lower bound stays below dp-accounting's estimate from above and the upper
    bound above its estimate from below (margin 1e-3 for their discretisation)."""
    pessimistic, optimistic = DP_ACCOUNTING_DELTA[eps]
    acc = _pld(_poisson(24))
    bound = acc.get_delta(eps)
    assert bound.delta_lower <= pessimistic * (1 + 1e-3)
    assert bound.delta >= optimistic * (1 - 1e-3)
    assert any("|cut=" in tag for tag in _cut_tags(acc))


_LEAVES = st.one_of(
    st.builds(PoissonSampledEvent, st.floats(1e-3, 0.05), st.floats(0.6, 2.0).map(GaussianEvent)),
    st.floats(2.0, 20.0).map(LaplaceEvent),
    st.floats(0.02, 0.3).map(lambda e: RandomizedResponseEvent(e, 2)),
    st.tuples(st.floats(0.02, 0.3), st.floats(1e-10, 1e-7)).map(lambda p: ApproxDPEvent(*p)),
)


@pytest.mark.slow
@settings(max_examples=8, deadline=None)
@given(
    leaves=st.lists(_LEAVES, min_size=CUT_COMPONENTS + 1, max_size=20, unique=True),
    relation=st.sampled_from(["add_remove", "replace_one"]),
    delta0=st.sampled_from([1e-5, 1e-8, 1e-12]),
    eps0=st.floats(0.3, 4.0),
)
def test_random_mixtures_leave_room_for_one_curve(
    leaves: list[Event], relation: str, delta0: float, eps0: float
):
    """The pair checks of :func:`_check_pair`; and dropping releases is post-processing, so the
    upper bound of the whole ledger at eps0 is at least the lower bound of its first half
    (composed whole, at most CUT_COMPONENTS components)."""
    adjacency = Adjacency(relation=relation)
    _check_pair(leaves, adjacency, delta0, eps0)
    whole = _pld(leaves, adjacency).get_delta(eps0)
    part = _pld(leaves[: len(leaves) // 2], adjacency).get_delta(eps0)
    assert whole.delta >= part.delta_lower * (1 - 1e-9)


@pytest.mark.slow
def test_the_default_call_keeps_the_lower_bound_of_a_mass_at_infinity_before():
    """account() at an epsilon beyond the finite losses: sound either way (the bracket holds
    the exact delta); its lower bound recorded for the report (6.0e-9 after, 4.49999992e-8
    before the change)."""
    leaves = _lattice_mix(17, 1.0)
    exact = _exact_delta(leaves, 20.0)
    bound = account(ComposedEvent(list(leaves)), epsilon=20.0).bound
    assert bound.delta_lower <= exact <= bound.delta
    assert math.isfinite(bound.delta)
