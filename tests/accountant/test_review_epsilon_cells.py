"""Adversarial review of the exact epsilon-type blocks (:mod:`dpledger.accountant.epsilon_cells`).

Every certified bracket is held against an exact reference:

- a block's curves (as the PLD backend reads them: the upper curve and its excess as they are,
  the lower ones after the backend's deflation ``1 / (1 + LOWER_DEFLATION)``) against the
  ``m``-fold composition computed at 50 digits with mpmath (multinomial coefficients);
- compositions of binary / k-ary randomized responses, pure DP and approximate DP whose
  epsilons are integer multiples of a unit: the P-law of the privacy loss on the lattice, by the
  recursion of non-negative terms (relative error ~ 2 n units per atom) or a binomial by lgamma
  (~1e-13 relative), times ``prod (1 - delta_i)``, plus the failure atom
  ``1 - prod (1 - delta_i)`` at +infinity;
- where tiny epsilons cannot share a lattice with the large ones, the truth is bracketed by
  the composition without them (post-processing: a lower bound) and that composition with
  every loss raised by their summed epsilon (their losses are at most that: an upper bound).

Two routes: the default call (more than 256 distinct leaves, rounded to representatives, the
equal ones composed in blocks) and the blocks isolated, with the representatives' rounding
replaced by the identity (so the bracket is tight and any unsound block shows).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import mpmath as mp
import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.special import gammaln

import dpledger.accountant.epsilon_cells as cells
import dpledger.accountant.pld as pld
import dpledger.accountant.pld_components as pld_components
from dpledger.accountant.epsilon_cells import cell_profiles
from dpledger.accountant.pld_discrete import LOWER_DEFLATION
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    ApproxDPEvent,
    ComposedEvent,
    Event,
    PureDPEvent,
    RandomizedResponseEvent,
    SelfComposedEvent,
)

U = 2.0**-53
#: how the PLD backend deflates a lower curve before reading it (pld_dominated._brackets)
SHRINK = 1.0 / (1.0 + LOWER_DEFLATION) * (1 - 8 * U)
ADD_REMOVE = Adjacency()
REPLACE_ONE = Adjacency(relation="replace_one")


# -- exact references ---------------------------------------------------------------------------
class Lattice:
    """The P-law of the composed loss on ``unit * Z`` (index ``top`` <-> loss 0)."""

    def __init__(self, unit: float, top: int) -> None:
        self.unit, self.top = unit, top
        self.pmf = np.zeros(2 * top + 1)
        self.pmf[top] = 1.0
        self.log_keep = 0.0

    def rr(self, k: int, count: int = 1, delta: float = 0.0, buckets: int = 2) -> Lattice:
        """``count`` randomized responses (``buckets``-ary) at ``k * unit`` (approximate DP
        with ``delta``: the KOV pair, i.e. binary randomized response and an atom at +inf)."""
        ex = math.exp(k * self.unit)
        z = ex + buckets - 1
        a, b, c = ex / z, (buckets - 2) / z, 1.0 / z
        for _ in range(count):
            new = b * self.pmf
            new[k:] += a * self.pmf[:-k]
            new[:-k] += c * self.pmf[k:]
            self.pmf = new
        self.log_keep += count * math.log1p(-delta)
        return self

    def binomial(self, k: int, n: int, delta: float = 0.0) -> Lattice:
        """``n`` binary randomized responses at ``k * unit`` at once (call first: it places a
        binomial law, by lgamma, around the single atom at 0)."""
        assert np.count_nonzero(self.pmf) == 1 and self.pmf[self.top] == 1.0
        eps = k * self.unit
        i = np.arange(n + 1)
        la, lc = -math.log1p(math.exp(-eps)), -math.log1p(math.exp(eps))
        lw = gammaln(n + 1) - gammaln(i + 1) - gammaln(n - i + 1) + i * la + (n - i) * lc
        self.pmf = np.zeros_like(self.pmf)
        self.pmf[self.top + (2 * i - n) * k] = np.exp(lw)
        self.log_keep += n * math.log1p(-delta)
        return self

    def done(self) -> Lattice:
        nz = np.flatnonzero(self.pmf)
        self.losses = (nz - self.top) * self.unit
        self.masses = self.pmf[nz]
        self.keep = math.exp(self.log_keep)
        self.inf = -math.expm1(self.log_keep)
        return self

    def delta(self, eps: float, shift: float = 0.0) -> float:
        """delta(eps) of the composition, every finite loss raised by ``shift``."""
        loss = self.losses + shift
        above = loss > eps
        body = float(np.sum(self.masses[above] * -np.expm1(eps - loss[above])))
        return self.inf + self.keep * body

    def epsilon(self, delta: float, shift: float = 0.0) -> float:
        if self.delta(0.0, shift) <= delta:
            return 0.0
        top = float(self.losses[-1] + shift)
        if self.delta(top, shift) > delta:
            return math.inf
        return float(
            brentq(lambda e: self.delta(e, shift) - delta, 0.0, top, xtol=1e-15, rtol=1e-14)
        )


def _exact_block(eps: float, k: int, delta: float, m: int) -> tuple[dict[int, mp.mpf], mp.mpf]:
    """(P-masses at losses j eps, P-mass at +infinity) of m leaves composed (at the caller's
    precision: 50 digits)."""
    e = mp.e ** mp.mpf(eps)
    z = e + (k - 1)
    a, b, c = e / z, mp.mpf(k - 2) / z, 1 / z
    keep = (1 - mp.mpf(delta)) ** m
    p: dict[int, mp.mpf] = {}
    for i in range(m + 1):
        for j in range(m - i + 1):
            rest = m - i - j
            if rest and k == 2:
                continue
            coef = mp.factorial(m) / (mp.factorial(i) * mp.factorial(j) * mp.factorial(rest))
            p[i - j] = p.get(i - j, 0) + coef * a**i * c**j * b**rest * keep
    return p, 1 - keep


def _exact_curve(p: dict[int, mp.mpf], inf: mp.mpf, eps: float, t: float) -> mp.mpf:
    t = mp.mpf(t)
    out = inf
    for j, v in p.items():
        loss = j * mp.mpf(eps)
        if loss > t:
            out += v * (1 - mp.e ** (t - loss))
    return out


@contextmanager
def _blocks_isolated() -> Iterator[None]:
    """The PLD backend with every leaf handed to the blocks unrounded (identity
    representatives, whatever the number of distinct leaves)."""
    saved_rep, saved_comp = pld_components.representative_components, pld.PLDAccountant._components
    limit = pld.MAX_DISTINCT_COMPONENTS

    def identity(
        merged: dict[Event, int], _limit: int = 0, _reserved: int = 0
    ) -> tuple[dict[Event, int], dict[Event, int], float]:
        return merged, merged, 1e-12

    def components(self: pld.PLDAccountant) -> Any:
        pld.MAX_DISTINCT_COMPONENTS = 0
        try:
            return saved_comp(self)
        finally:
            pld.MAX_DISTINCT_COMPONENTS = limit

    pld_components.representative_components = identity
    pld.PLDAccountant._components = components
    try:
        yield
    finally:
        pld_components.representative_components = saved_rep
        pld.PLDAccountant._components = saved_comp


def _check(
    event: Event,
    truth: Lattice,
    *,
    deltas: tuple[float, ...] = (),
    epsilons: tuple[float, ...] = (),
    adjacency: Adjacency = ADD_REMOVE,
    backends: list[str] | None = None,
    shift: float = 0.0,
) -> None:
    """Every bracket contains the truth (within ``[truth(0), truth(shift)]``), to 1e-12
    relative (the reference's own round-off)."""
    for d in deltas:
        b = account(event, adjacency, delta=d, backends=backends).bound
        low, high = truth.epsilon(d), truth.epsilon(d, shift)
        assert b.epsilon >= low * (1 - 1e-12), (d, b, low)
        assert b.epsilon_lower <= high * (1 + 1e-12), (d, b, high)
    for e in epsilons:
        b = account(event, adjacency, epsilon=e, backends=backends).bound
        low, high = truth.delta(e), truth.delta(e, shift)
        assert b.delta >= low * (1 - 1e-12), (e, b, low)
        assert b.delta_lower <= high * (1 + 1e-12), (e, b, high)


# -- fast: the block curves, as the backend reads them -------------------------------------------
BLOCKS = [
    # (eps, buckets, delta, m)
    (1e-8, 2, 1e-3, 24),  # all atoms within NEAR_GAP of each other: summed term by term
    (5.0, 2, 1e-3, 2),  # the widest block (MAX_BLOCK_LOSS / 5 = 2)
    (0.25, 2, 0.0, 24),
    (0.05, 5, 0.0, 24),  # k-ary: an atom at loss 0
    (3.0, 10**6, 0.0, 3),  # nearly all mass at loss 0
    (0.3, 2, 1e-30, 21),
]


@pytest.mark.parametrize(("eps", "buckets", "delta", "m"), BLOCKS)
@pytest.mark.parametrize("tail", [cells.CELL_TAIL, 1e-4])
def test_block_curves_bracket_the_exact_composition(
    eps: float, buckets: int, delta: float, m: int, tail: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cells, "CELL_TAIL", tail)  # 1e-4: tails moved / merged inside
    if delta:
        event: Event = ApproxDPEvent(eps, delta)
    else:
        event = RandomizedResponseEvent(eps, buckets)
    d = cell_profiles(event, m)
    assert d is not None and d.remove is d.add and d.lower_remove is d.lower_add
    with mp.workdps(50):
        _block_against_exact(d, eps, buckets, delta, m)


def _block_against_exact(d: Any, eps: float, buckets: int, delta: float, m: int) -> None:
    p, inf = _exact_block(eps, buckets, delta, m)
    top = m * eps
    atoms = np.arange(-m, m + 1) * eps
    ts = np.unique(
        np.concatenate(
            [
                np.linspace(-top - 1, top + 0.5, 11),
                atoms,
                np.nextafter(atoms, -np.inf),
                [0.0, 1e-9, -1e-9, top * (1 - 1e-15)],
            ]
        )
    )
    upper, lower = d.remove(ts), d.lower_remove(ts) * SHRINK
    up_c, low_c = d.remove.excess(ts), d.lower_remove.excess(ts) * (1 + 4 * U) * SHRINK
    for t, u, lo, uc, lc in zip(ts, upper, lower, up_c, low_c, strict=True):
        exact = _exact_curve(p, inf, eps, t)
        # the pair is symmetric: excess(t) = delta(t) - (1 - e^t) = e^t delta(-t)
        excess = mp.e ** mp.mpf(t) * _exact_curve(p, inf, eps, -t)
        assert u >= exact or u == 1.0, (t, u, exact)
        assert lo <= exact, (t, lo, exact)
        assert uc >= excess * (1 - 4 * U), (t, uc, excess)  # the backend raises it by 4 U
        assert lc <= excess, (t, lc, excess)


# -- fast: compositions of blocks, tight brackets ---------------------------------------------
def test_isolated_blocks_five_ary_randomized_response() -> None:
    """1000 leaves of 5-ary RR at 0.05: 7 blocks of 128 and one of 104, exact lattice."""
    truth = Lattice(0.05, 1000).rr(1, 1000, buckets=5).done()
    event = SelfComposedEvent(RandomizedResponseEvent(0.05, 5), 1000)
    with _blocks_isolated():
        _check(event, truth, deltas=(1e-10,), epsilons=(2.0,), backends=["pld"])


def test_isolated_blocks_approximate_dp_failure_atom() -> None:
    """1000 leaves of (0.01, 1e-3)-DP: the atom at +infinity is 1 - 0.999^1000 = 0.632; an
    epsilon query just below it is infinite, just above it finite and above the truth."""
    truth = Lattice(1e-3, 10_000).binomial(10, 1000, 1e-3).done()
    event = SelfComposedEvent(ApproxDPEvent(0.01, 1e-3), 1000)
    with _blocks_isolated():
        _check(event, truth, deltas=(0.64,), epsilons=(1.0,), backends=["pld"])
        assert account(event, delta=truth.inf * (1 - 1e-9), backends=["pld"]).bound.epsilon == (
            math.inf
        )


def test_default_route_260_distinct_pure_dp_replace_one() -> None:
    """260 distinct pure-DP leaves at k * 1e-3 (rounded to representatives, grouped in blocks)
    under replace-one (the pure-DP pair does not depend on the relation)."""
    ks = range(1, 261)
    truth = Lattice(1e-3, sum(ks))
    for k in ks:
        truth.rr(k)
    truth.done()
    event = ComposedEvent([PureDPEvent(k * 1e-3) for k in ks])
    _check(event, truth, deltas=(1e-6,), adjacency=REPLACE_ONE)


# -- slow: wider sweeps ----------------------------------------------------------------------------
def _s1() -> tuple[Event, Lattice, float]:
    truth = Lattice(1e-3, 45150)
    for k in range(1, 301):
        truth.rr(k)
    return ComposedEvent([RandomizedResponseEvent(k * 1e-3) for k in range(1, 301)]), truth, 0.0


def _d1() -> tuple[Event, Lattice, float]:
    """One value 1e5 times beside 300 distinct ones (a huge count per distinct value)."""
    u = 1e-4
    truth = Lattice(u, 30 * 100_000 + 45150).binomial(30, 100_000)
    for k in range(1, 301):
        truth.rr(k)
    event = ComposedEvent(
        [SelfComposedEvent(RandomizedResponseEvent(30 * u), 100_000)]
        + [RandomizedResponseEvent(k * u) for k in range(1, 301)]
    )
    return event, truth, 0.0


def _d2() -> tuple[Event, Lattice, float]:
    """The approximate-DP version of _d1: deltas 1e-10 (1e5 times) and k * 1e-12."""
    u = 1e-4
    truth = Lattice(u, 30 * 100_000 + 45150).binomial(30, 100_000, 1e-10)
    for k in range(1, 301):
        truth.rr(k, 1, 1e-12 * k)
    event = ComposedEvent(
        [SelfComposedEvent(ApproxDPEvent(30 * u, 1e-10), 100_000)]
        + [ApproxDPEvent(k * u, 1e-12 * k) for k in range(1, 301)]
    )
    return event, truth, 0.0


def _d3() -> tuple[Event, Lattice, float]:
    """Tiny and large together: RR at 2 (50 times), pure DP at 5 (3 times), and 300 distinct
    pure-DP epsilons 1e-10 * i, 1000 times each (their losses sum to at most 4.515e-3)."""
    truth = Lattice(1.0, 115).rr(2, 50).rr(5, 3)
    event = ComposedEvent(
        [
            SelfComposedEvent(RandomizedResponseEvent(2.0), 50),
            SelfComposedEvent(PureDPEvent(5.0), 3),
        ]
        + [SelfComposedEvent(PureDPEvent(1e-10 * (i + 1)), 1000) for i in range(300)]
    )
    return event, truth, 1000 * 1e-10 * 45150


def _d4() -> tuple[Event, Lattice, float]:
    truth = Lattice(1e-3, 45150)
    for k in range(1, 301):
        truth.rr(k, buckets=5)
    return ComposedEvent([RandomizedResponseEvent(k * 1e-3, 5) for k in range(1, 301)]), truth, 0.0


DEFAULT_CASES: dict[
    str, tuple[Callable[[], tuple[Event, Lattice, float]], tuple[float, ...], tuple[float, ...]]
] = {
    "300-distinct-rr": (_s1, (1e-3, 1e-10, 1e-30), (0.5, 10.0, 20.0)),
    "huge-count-rr": (_d1, (1e-3, 1e-10, 1e-30), (1.0, 5.0)),
    "huge-count-approx-dp": (_d2, (1e-3, 1e-5 + 1e-7), (1.0, 5.0)),
    "tiny-and-large": (_d3, (1e-3, 1e-10, 1e-30), (10.0, 50.0, 100.0)),
    "300-distinct-5-ary-rr": (_d4, (1e-3, 1e-10, 1e-30), (1.0, 5.0)),
}


@pytest.mark.slow
@pytest.mark.parametrize("backends", [None, ["pld"]], ids=["default", "pld"])
@pytest.mark.parametrize("name", sorted(DEFAULT_CASES))
def test_default_route_against_exact_lattices(name: str, backends: list[str] | None) -> None:
    build, deltas, epsilons = DEFAULT_CASES[name]
    event, truth, shift = build()
    truth.done()
    _check(event, truth, deltas=deltas, epsilons=epsilons, backends=backends, shift=shift)


@pytest.mark.slow
def test_default_route_replace_one_matches_add_remove() -> None:
    event, truth, _ = _s1()
    truth.done()
    _check(event, truth, deltas=(1e-6, 1e-30), epsilons=(3.0,), adjacency=REPLACE_ONE)


ISOLATED_CASES: dict[
    str, tuple[Callable[[], tuple[Event, Lattice]], tuple[float, ...], tuple[float, ...]]
] = {
    # 781 blocks of 128 and one of 32
    "rr-3e-3-x1e5": (
        lambda: (
            SelfComposedEvent(RandomizedResponseEvent(3e-3), 100_000),
            Lattice(1e-4, 3_000_000).binomial(30, 100_000),
        ),
        (1e-3, 1e-10, 1e-30),
        (0.1, 1.0, 2.0),
    ),
    "pure-1e-8-x1e7": (
        lambda: (
            SelfComposedEvent(PureDPEvent(1e-8), 10**7),
            Lattice(1e-8, 10**7).binomial(1, 10**7),
        ),
        (1e-10, 1e-30),
        (1e-5, 1e-4),
    ),
    # blocks of 2 (MAX_BLOCK_LOSS / 5), queried up to the top loss 5000
    "rr-5-x1000": (
        lambda: (
            SelfComposedEvent(RandomizedResponseEvent(5.0), 1000),
            Lattice(1.0, 5000).binomial(5, 1000),
        ),
        (1e-3, 1e-10, 1e-30),
        (4000.0, 4900.0),
    ),
    # the widest block of 128 (128 * 5/64 = 10), tails cut
    "rr-5/64-x6407": (
        lambda: (
            SelfComposedEvent(RandomizedResponseEvent(0.078125), 6407),
            Lattice(0.078125, 6407).binomial(1, 6407),
        ),
        (1e-3, 1e-30),
        (200.0,),
    ),
    "approx-dp-1e-3-1e-12-x1e5": (
        lambda: (
            SelfComposedEvent(ApproxDPEvent(1e-3, 1e-12), 100_000),
            Lattice(1e-4, 1_000_000).binomial(10, 100_000, 1e-12),
        ),
        (1e-3, 1e-6, 1.01e-7),
        (0.5, 1.0, 2.0),
    ),
    "approx-dp-1e-8-1e-9-x1e5": (
        lambda: (
            SelfComposedEvent(ApproxDPEvent(1e-8, 1e-9), 100_000),
            Lattice(1e-8, 100_000).binomial(1, 100_000, 1e-9),
        ),
        (1.0001e-4, 1e-3),
        (0.0, 1e-6, 1e-5, 1e-3),
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ISOLATED_CASES))
def test_isolated_blocks_against_exact_lattices(name: str) -> None:
    build, deltas, epsilons = ISOLATED_CASES[name]
    event, truth = build()
    truth.done()
    with _blocks_isolated():
        _check(event, truth, deltas=deltas, epsilons=epsilons, backends=["pld"])


@pytest.mark.slow
@pytest.mark.parametrize(
    ("eps", "buckets", "delta", "m"),
    [(0.078125, 2, 0.0, 128), (1e-8, 2, 0.0, 128), (0.07, 2, 1e-12, 127), (0.01, 3, 0.0, 128)],
)
def test_full_blocks_bracket_the_exact_composition(
    eps: float, buckets: int, delta: float, m: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    test_block_curves_bracket_the_exact_composition(
        eps, buckets, delta, m, cells.CELL_TAIL, monkeypatch
    )


def test_subnormal_epsilon_leaf_gets_a_block() -> None:
    """10 / eps is infinite for a subnormal epsilon: the block size is the largest allowed
    (it overflowed), and the PLD route's representative grid stops at steps near 1e300."""
    leaf = PureDPEvent(1e-309)
    upper, _ = cells.cell_components({leaf: 3}, {leaf: 3}, ADD_REMOVE)
    assert sum(k for _, k in upper) >= 1
    leaves = [PureDPEvent(1e-309 * (1 + i)) for i in range(300)]
    bound = account(ComposedEvent(leaves), ADD_REMOVE, delta=1e-5, backends=["pld"]).bound
    assert 0.0 <= bound.epsilon <= 1e-300
