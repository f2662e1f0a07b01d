"""Adversarial review of the PLD backend's lower-bound reading (d3a797b, 8905d51, 19d1333,
3c7d7dd, f631478, 73c5f2d, 54a9d9c): compositions of dominated pairs read with no excess-mass
charge, the wrap-around bound uncapped (and, untilted, capped by the mass above the window),
far tails cut for more than 16 distinct components queried at a known delta.

Two levels:

* the reading itself (``compose`` / ``compose_split`` then ``delta_at`` / ``epsilon_for``) on
  random dominated laws, windows cutting the support at both ends (mass wraps once or many
  times, from above and from below), tilts up to 40, against the exact linear composition by
  direct convolution (sums of non-negative terms: no cancellation, relative error ~n u);
* the default call ``account(...)`` against closed forms computed in mpmath (reference values
  hard-coded below, each with how it was computed; the slow tests recompute them), and against
  dp-accounting (pessimistic connect-the-dots PLD, an upper bound of the truth) and its RDP
  accountant (an independent upper bound) where no closed form exists.
"""

from __future__ import annotations

import logging
import math

import numpy as np
import pytest

from dpledger.accountant import pld_read as R
from dpledger.accountant.base import DeltaBound
from dpledger.accountant.pld_engine import DiscretePLD, compose, delta_at, epsilon_for
from dpledger.accountant.pld_split import compose_split
from dpledger.accountant.select import _exact as _select_exact
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    ComposedEvent,
    GaussianEvent,
    PoissonSampledEvent,
    PureDPEvent,
    RandomizedResponseEvent,
    SelfComposedEvent,
)

H = 0.25
#: relative slack of the comparisons against the float64 exact composition
REL = 1e-9


# -- the reading itself, against the exact linear composition ---------------------------------


def _law(rng: np.random.Generator, thin: tuple[float, float] = (-25.0, -2.0)) -> DiscretePLD:
    """A sub-probability law (total 0.9..1) on a few losses near 0 and a thin far tail of
    10^-25..10^-2, at a random offset (so losses may be mostly negative): the shape of a
    dominated pair of a sampled Gaussian (a body near 0 and a long thin tail)."""
    body = rng.uniform(0.05, 1.0, int(rng.integers(2, 6)))
    tail_mass = 10 ** rng.uniform(*thin)
    tails = rng.uniform(0.1, 1.0, int(rng.integers(1, 4)))
    masses = np.concatenate(
        [
            body / body.sum() * (1 - tail_mass),
            np.zeros(int(rng.integers(0, 40))),
            tails / tails.sum() * tail_mass,
        ]
    ) * rng.uniform(0.9, 1.0)
    return DiscretePLD(int(rng.integers(-8, 3)), masses, 0.0, H, dominated=True)


def _exact(comps: list[tuple[DiscretePLD, int]]) -> tuple[np.ndarray, np.ndarray]:
    out, offset = np.array([1.0]), 0
    for law, count in comps:
        for _ in range(count):
            out = np.convolve(out, law.masses)
            offset += law.offset
    return out, (offset + np.arange(out.size)) * H


def _truth(masses: np.ndarray, losses: np.ndarray, eps: float) -> float:
    above = losses > eps
    return float(np.sum(masses[above] * -np.expm1(eps - losses[above])))


def _check_reading(comp, masses: np.ndarray, losses: np.ndarray, label: str) -> None:
    lo, hi = float(losses[0]), float(losses[-1])
    for eps in [0.0, *np.linspace(max(lo, -1.0), hi, 13)]:
        truth = _truth(masses, losses, float(eps))
        low = delta_at(comp, float(eps), upper=False)
        assert not math.isnan(low), label
        assert low <= truth * (1 + REL) + 1e-300, (label, eps, low, truth)
        up = delta_at(comp, float(eps), upper=True)
        assert up >= truth * (1 - REL), (label, eps, up, truth)
    for delta in (1e-3, 1e-8, 1e-15, 1e-25):
        e_lo = epsilon_for(comp, delta, upper=False)
        assert not math.isnan(e_lo), label
        if e_lo > 0.0:
            # every smaller epsilon has a larger delta: the truth at e_lo is at least delta
            assert _truth(masses, losses, e_lo) >= delta * (1 - REL), (label, delta, e_lo)
        e_up = epsilon_for(comp, delta, upper=True)
        if math.isfinite(e_up):
            assert _truth(masses, losses, e_up) <= delta * (1 + REL), (label, delta, e_up)


def _random_case(rng: np.random.Generator) -> tuple[list, tuple[float, float], float]:
    comps = [(_law(rng), int(rng.integers(1, 8))) for _ in range(int(rng.integers(1, 4)))]
    _, losses = _exact(comps)
    lo, hi = float(losses[0]), float(losses[-1])
    # the window starts anywhere from below the support to its middle (mass below it wraps
    # onto the top) and is 1 % to 125 % of the rest wide (mass above it wraps, many times
    # for narrow windows)
    a = lo + (hi - lo) * rng.uniform(-0.1, 0.5)
    b = a + (hi - a) * 10 ** rng.uniform(-2.0, 0.1)
    tilt = float(rng.choice([0.0, 0.0, 0.3, 1.0, 2.0, 4.0, 8.0, 15.0, 40.0]))
    return comps, (a, b), tilt


@pytest.mark.parametrize("seed", range(4))
def test_dominated_reading_below_exact_composition_random_windows_and_tilts(seed: int) -> None:
    """Random dominated laws (one to three distinct, one to seven copies each), windows cut at
    both ends, tilts 0..40: every lower reading (delta and the epsilon crossing) stays at or
    below the exact composition, every upper one above it. (Run on 1200 such cases in review,
    seeds 0-3 x 300: no violation.)"""
    rng = np.random.default_rng(1000 + seed)
    for i in range(6):
        comps, window, tilt = _random_case(rng)
        masses, losses = _exact(comps)
        comp = compose(comps, window, tilt)
        assert R.excess_mass(comp) == 0.0
        _check_reading(comp, masses, losses, f"seed {seed} case {i} tilt {tilt} {window}")


def test_steep_tilt_narrow_window_wraps_many_times() -> None:
    """Windows a twentieth to a third of the support at tilts 15, 3 and 1: the tail wraps onto
    them many times, untilted by up to e^{tilt m W}; the brackets sum above one (to 4 at tilt 3,
    each point clipped at one) and nothing is charged for it, yet every reading stays below
    the exact composition."""
    masses = np.zeros(60)
    masses[:3] = [0.5, 0.3, 0.2 - 1e-9]
    masses[-1] = 1e-9
    law = DiscretePLD(-1, masses, 0.0, H, dominated=True)
    comps = [(law, 8)]
    exact, losses = _exact(comps)
    sums = []
    for tilt, share in ((15.0, 0.05), (3.0, 0.2), (1.0, 0.3)):
        comp = compose(comps, (-2.0, share * float(losses[-1])), tilt)
        sums.append(float(comp.lower.sum()))
        _check_reading(comp, exact, losses, f"narrow window at tilt {tilt}")
    assert max(sums) > 2.0  # wrapped mass in the brackets


def test_untilted_wrap_is_at_most_the_mass_above_the_window() -> None:
    """8905d51: untilted, the wrap bound is min(Chernoff, upper_tail); a window ending inside
    the body (upper_tail near one) still reads below the exact composition."""
    rng = np.random.default_rng(7)
    for _ in range(5):
        comps = [(_law(rng), int(rng.integers(2, 6))) for _ in range(2)]
        exact, losses = _exact(comps)
        lo, hi = float(losses[0]), float(losses[-1])
        comp = compose(comps, (lo - 0.3, lo + 0.2 * (hi - lo)), 0.0)
        for eps in np.linspace(lo, hi, 9):
            assert R.wrap_above(comp, float(eps)) <= comp.upper_tail
        _check_reading(comp, exact, losses, "untilted")


def test_an_overflowing_wrap_bound_reads_zero_not_nan() -> None:
    """d3a797b: the wrap bound is no longer capped at one and is +inf past e^700; the lower
    readings are then 0 (delta) and 0 (epsilon), never NaN, and upper readings are unaffected."""
    masses = np.zeros(400)
    masses[:2] = [0.6, 0.4 - 1e-6]
    masses[-1] = 1e-6
    law = DiscretePLD(0, masses, 0.0, H, dominated=True)
    comp = compose([(law, 3)], (0.0, 5.0), 40.0)
    assert R.wrap_above(comp, -50.0) == math.inf
    assert delta_at(comp, -50.0, upper=False) == 0.0
    assert epsilon_for(comp, 1e-3, upper=False) >= 0.0
    exact, losses = _exact([(law, 3)])
    _check_reading(comp, exact, losses, "overflowing wrap")


@pytest.mark.parametrize("seed", range(2))
def test_split_compositions_of_dominated_pairs_read_below_exact(seed: int) -> None:
    """The wrap bounds of a sum of parts (pld_split) add part by part, each at its own tilt
    (some parts untilted, so capped by their own upper_tail): the lower readings stay below
    the exact composition. (600 cases in review: no violation.)"""
    rng = np.random.default_rng(2000 + seed)
    made = 0
    for _ in range(8):
        comps = [
            (_law(rng, (-14.0, -6.0)), int(rng.integers(1, 6)))
            for _ in range(int(rng.integers(1, 4)))
        ]
        exact, losses = _exact(comps)
        lo, hi = float(losses[0]), float(losses[-1])
        a = lo + (hi - lo) * rng.uniform(-0.1, 0.3)
        b = a + (hi - a) * 10 ** rng.uniform(-1.5, 0.1)
        tilts = iter(rng.choice([0.0, 0.5, 2.0, 8.0, 30.0], 16).tolist())
        comp = compose_split(
            comps,
            (a, b),
            lambda _g, it=tilts: next(it),
            comps,
            10 ** rng.uniform(-12, -4),
            upper=False,
        )
        if comp is None:
            continue
        made += 1
        assert comp.parts and comp.dominated
        for eps in np.linspace(max(lo, -1.0), hi, 13):
            truth = _truth(exact, losses, float(eps))
            assert delta_at(comp, float(eps), upper=False) <= truth * (1 + REL) + 1e-300
        for delta in (1e-3, 1e-8, 1e-15):
            e_lo = epsilon_for(comp, delta, upper=False)
            if e_lo > 0.0:
                assert _truth(exact, losses, e_lo) >= delta * (1 - REL)
    assert made >= 4


def test_an_upper_bound_of_zero_counts_as_exact() -> None:
    """73c5f2d: a [0, 0] delta bracket is exact (the backends after it certify uppers only);
    an upper of 0 with a positive lower cannot occur, and a positive upper is not exact."""
    assert _select_exact(DeltaBound(0.0, 0.0, 1.0, "x"))
    assert not _select_exact(DeltaBound(1e-300, 0.0, 1.0, "x"))


# -- the default call against closed forms -----------------------------------------------------

#: 18 randomized-response steps of eps 0.01 n (n = 1..18) and a Gaussian of sigma 3: more than
#: 16 distinct components, so epsilon queries compose the tails cut. Exact: the randomized
#: responses' loss is a lattice law (0.01 times a sum of +-n with P(+) = e^{0.01 n} /
#: (1 + e^{0.01 n})), and delta(eps) = sum_r P(r) delta_G(eps - r), delta_G the closed form of
#: N(1/3, 1) vs N(0, 1) (valid at negative arguments); mpmath at 40 digits, bisection.
RR18 = ComposedEvent(
    [RandomizedResponseEvent(0.01 * n) for n in range(1, 19)] + [GaussianEvent(3.0)]
)
RR18_EPS = {1e-6: 2.4109904563667293, 1e-12: 3.4375369768186874}
RR18_DELTA = {0.0: 0.22410451491411437, 0.5: 0.07400644422666017, 3.0: 8.815720277940246e-10}

#: pure-DP steps beside a Poisson-sampled Gaussian. Exact: the pure steps' worst pair is
#: randomized response (the lattice law above, unit 0.001), so delta(eps) = max over the
#: directions of sum_r P(r) delta_SG(eps - r), delta_SG the sampled Gaussian's closed form in
#: that direction (its loss is monotone in x); mpmath at 30 digits, bisection.
PURE_SG = [
    ((1,) * 17, 0.01, 1.0, 1e-7, 0.58014822415316),
    ((1,) * 17, 0.01, 1.0, 1e-12, 2.0754958423942167),
    ((1,) * 40, 1e-4, 0.4, 1e-15, 10.195006373314431),
    (tuple(range(1, 19)), 0.05, 0.9, 1e-6, 1.924852188964931),
    (tuple(range(1, 19)), 0.05, 0.9, 1e-11, 4.255575078939008),
]


@pytest.mark.parametrize("delta", sorted(RR18_EPS))
def test_many_distinct_components_epsilon_bracket_holds_the_exact_value(delta: float) -> None:
    bound = account(RR18, Adjacency(), delta=delta, backends=["pld"]).bound
    assert bound.epsilon_lower <= RR18_EPS[delta] <= bound.epsilon


@pytest.mark.parametrize("eps", sorted(RR18_DELTA))
def test_many_distinct_components_delta_bracket_holds_the_exact_value(eps: float) -> None:
    bound = account(RR18, Adjacency(), epsilon=eps, backends=["pld"]).bound
    assert bound.delta_lower <= RR18_DELTA[eps] <= bound.delta


@pytest.mark.parametrize(("units", "q", "sigma", "delta", "exact"), PURE_SG)
def test_pure_steps_beside_a_sampled_gaussian_hold_the_exact_value(
    units: tuple[int, ...], q: float, sigma: float, delta: float, exact: float
) -> None:
    event = ComposedEvent(
        [PureDPEvent(0.001 * n) for n in units] + [PoissonSampledEvent(q, GaussianEvent(sigma))]
    )
    bound = account(event, Adjacency(), delta=delta, backends=["pld"]).bound
    assert bound.epsilon_lower <= exact <= bound.epsilon


# -- slow: the references recomputed, wider random sweeps, dp-accounting and RDP ---------------


def _gauss_delta(mp, mu, eps):
    return mp.ncdf(-eps / mu + mu / 2) - mp.e**eps * mp.ncdf(-eps / mu - mu / 2)


def _lattice(mp, units, unit):
    dist = {0: mp.mpf(1)}
    for n in units:
        p = mp.e ** (n * unit) / (1 + mp.e ** (n * unit))
        new: dict = {}
        for s, w in dist.items():
            new[s + n] = new.get(s + n, 0) + w * p
            new[s - n] = new.get(s - n, 0) + w * (1 - p)
        dist = new
    return dist


def _sg_delta(mp, q, s, eps, direction):
    if direction == "remove":
        t = (mp.e**eps - (1 - q)) / q
        if t <= 0:
            return 1 - mp.e**eps
        xs = (2 * s**2 * mp.log(t) + 1) / 2
        return (
            (1 - q) * mp.ncdf(-xs / s) + q * mp.ncdf(-(xs - 1) / s) - mp.e**eps * mp.ncdf(-xs / s)
        )
    t = (mp.e ** (-eps) - (1 - q)) / q
    if t <= 0:
        return mp.mpf(0)
    xs = (2 * s**2 * mp.log(t) + 1) / 2
    return mp.ncdf(xs / s) - mp.e**eps * ((1 - q) * mp.ncdf(xs / s) + q * mp.ncdf((xs - 1) / s))


def _root(f, lo=0.0, hi=1.0, steps=60):
    while f(hi) > 0:
        hi *= 2
    for _ in range(steps):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) > 0 else (lo, mid)
    return (lo + hi) / 2


@pytest.mark.slow
def test_slow_references_recomputed() -> None:
    mpmath = pytest.importorskip("mpmath")

    with mpmath.workdps(30):
        unit = mpmath.mpf("0.01")
        dist = _lattice(mpmath, range(1, 19), unit)
        mu = mpmath.mpf(1) / 3

        def rr18(e):
            return sum(w * _gauss_delta(mpmath, mu, e - s * unit) for s, w in dist.items())

        for eps, value in RR18_DELTA.items():
            assert float(rr18(mpmath.mpf(eps))) == pytest.approx(value, rel=1e-9)
        for delta, value in RR18_EPS.items():
            assert _root(lambda e, d=delta: rr18(mpmath.mpf(e)) - d, 2.0, 4.0, 50) == pytest.approx(
                value, abs=1e-9
            )
        unit = mpmath.mpf("0.001")
        for units, q, s, delta, value in PURE_SG[:2]:
            lat = _lattice(mpmath, units, unit)

            def f(e, lat=lat, q=q, s=s):
                e = mpmath.mpf(e)
                return max(
                    sum(w * _sg_delta(mpmath, q, s, e - k * unit, d) for k, w in lat.items())
                    for d in ("remove", "add")
                )

            assert f(value * (1 - 1e-8)) >= delta >= f(value * (1 + 1e-8))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4, 10))
def test_slow_dominated_reading_wide_sweep(seed: int) -> None:
    rng = np.random.default_rng(1000 + seed)
    for i in range(60):
        comps, window, tilt = _random_case(rng)
        masses, losses = _exact(comps)
        _check_reading(compose(comps, window, tilt), masses, losses, f"{seed}/{i}")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sigma", "k", "delta"), [(1.0, 1, 1e-15), (2.0, 1000, 1e-20), (0.8, 10**6, 1e-30)]
)
def test_slow_gaussian_compositions_against_the_closed_form(sigma, k, delta) -> None:
    import mpmath

    with mpmath.workdps(60):
        mu = mpmath.sqrt(k) / sigma
        ref = _root(lambda e: _gauss_delta(mpmath, mu, mpmath.mpf(e)) - delta, 0.0, 1.0, 80)
    bound = account(SelfComposedEvent(GaussianEvent(sigma), k), delta=delta, backends=["pld"]).bound
    assert bound.epsilon_lower <= ref <= bound.epsilon


@pytest.mark.slow
@pytest.mark.parametrize(
    ("q", "sigma", "k", "delta"),
    [(1e-3, 0.6, 1000, 1e-20), (0.01, 1.0, 500, 1e-30), (1e-4, 0.5, 10**5, 1e-25)],
)
def test_slow_steep_tilts_lower_below_rdp(q, sigma, k, delta) -> None:
    """Many sampled-Gaussian steps at tiny delta (steep tilts): the certified lower bound is
    below dp-accounting's RDP upper bound (independent; loose, so only gross errors show)."""
    from dp_accounting import dp_event as E
    from dp_accounting import rdp

    acc = rdp.RdpAccountant(orders=[1 + x / 20 for x in range(1, 200)] + list(range(12, 2000)))
    acc.compose(E.PoissonSampledDpEvent(q, E.GaussianDpEvent(sigma)), k)
    event = SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(sigma)), k)
    bound = account(event, delta=delta, backends=["pld"]).bound
    assert bound.epsilon_lower <= acc.get_epsilon(delta)


@pytest.mark.slow
def test_slow_eighteen_sampled_gaussians_against_dp_accounting() -> None:
    """18 distinct sampled Gaussians (tails cut at epsilon queries): the lower bounds are
    below dp-accounting's pessimistic connect-the-dots PLD at h = 2e-4 (an upper bound of the
    truth). In review: eps(1e-5) in [3.3248408, 3.3260237], dp-accounting 3.3256959;
    eps(1e-9) in [4.9699527, 4.9710805], 4.9708069; delta(1) in [0.0504132, 0.0504588],
    0.0504612."""
    from dp_accounting.pld import privacy_loss_distribution as P

    logging.disable(logging.WARNING)
    try:
        spec = [
            (0.002 * (1 + i % 5) * (1 + i // 5), 0.7 + 0.05 * i, 50 + 10 * i) for i in range(18)
        ]
        event = ComposedEvent(
            [SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(s)), k) for q, s, k in spec]
        )
        pess = None
        for q, s, k in spec:
            pld = P.from_gaussian_mechanism(
                s,
                value_discretization_interval=2e-4,
                log_mass_truncation_bound=-80,
                sampling_prob=q,
            ).self_compose(k, tail_mass_truncation=1e-20)
            pess = pld if pess is None else pess.compose(pld, tail_mass_truncation=1e-20)
        for delta in (1e-5, 1e-9):
            bound = account(event, delta=delta, backends=["pld"]).bound
            assert bound.epsilon_lower <= pess.get_epsilon_for_delta(delta)
        for eps in (0.0, 1.0, 4.0):
            bound = account(event, epsilon=eps, backends=["pld"]).bound
            assert bound.delta_lower <= pess.get_delta_for_epsilon(eps)
    finally:
        logging.disable(logging.NOTSET)
