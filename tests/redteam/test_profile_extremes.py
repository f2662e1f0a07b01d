"""Every leaf curve of :func:`~dpledger.accountant.leaves.leaf_profiles`, at extreme but valid
parameters, against a 50-digit evaluation of the hockey-stick divergence of the pair it stands
for: an upper curve may never lie below it, a lower curve never above it.

The references are derived from the pairs, not from the code: each sampled pair is a mixture
``(al P0 + be Q0, ga P0 + de Q0)`` of a base pair whose likelihood ratio is monotone, so
``delta(eps) = A P0(R) + B Q0(R)`` with ``A = al - e^eps ga``, ``B = be - e^eps de`` and ``R``
the half-line (or set of atoms) where ``A e^l + B > 0``. Replace-one Poisson sampling of a
Gaussian is ``(1-q)N(0)+qN(a)`` vs ``(1-q)N(0)+qN(-a)``; sampling without replacement's upper
curve is Balle, Barthe, Gaboardi (2018), Thm 10, extended to eps < 0 by self-duality.

The sweeps stay away from a few hard points (kinks, eps = 0, the deep tail); the points where
curves used to fail there (overflow above 709.78, cancellation near 0, rounding at a base's
kink, small-mu Gaussian tails, subnormal tails) are pinned by the regression tests at the end.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Sequence

import mpmath as mp
import numpy as np
import pytest

from dpledger.accountant.leaves import leaf_profiles
from dpledger.accountant.pld_engine import discretise
from dpledger.accountant.profiles import REL_MARGIN, Profile
from dpledger.core.adjacency import ROW_ADD_REMOVE, ROW_REPLACE_ONE
from dpledger.core.events import (
    ApproxDPEvent,
    Event,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PureDPEvent,
    RandomizedResponseEvent,
    ReportNoisyMaxEvent,
    SampledWithoutReplacementEvent,
)

DIGITS = 50
#: relative tolerance of the comparison, and an absolute floor below every double that matters
TOL = 1e-10
FLOOR = 1e-300
#: eps values every sweep visits (near 0, and where e^eps over- or underflows)
SPECIAL = (0.0, 1e-12, -1e-12, 1e-8, -1e-8, 1e-4, -1e-4, 0.01, -0.01, 0.5, -0.5, 2.0, -2.0)
SPECIAL += (354.0, 700.0, 709.8, 745.0)

Truth = Callable[[float], mp.mpf]

# -- 50-digit references --------------------------------------------------------------------


class Base:
    """A base pair (P0, Q0): ``region(t, upper)`` gives the (P0, Q0) masses of the set where its
    privacy loss is above (``upper``) or below ``t``; ``atoms`` lists (p0, q0) of a finite pair."""

    def __init__(
        self,
        region: Callable[[mp.mpf, bool], tuple[mp.mpf, mp.mpf]] | None = None,
        atoms: Sequence[tuple[mp.mpf, mp.mpf]] = (),
    ) -> None:
        self.region = region
        self.atoms = atoms


def precise(factory: Callable[..., Base]) -> Callable[..., Base]:
    """Build a base's masses at DIGITS digits (parameters are set up outside the sweep's
    precision context)."""

    def build(*args: float) -> Base:
        with mp.workdps(DIGITS):
            return factory(*args)

    return build


def gaussian_base(mu: float) -> Base:
    """N(mu, 1) vs N(0, 1): loss mu x - mu^2 / 2."""
    m = mp.mpf(mu)

    def region(t: mp.mpf, upper: bool) -> tuple[mp.mpf, mp.mpf]:
        x = (t + m * m / 2) / m
        if upper:
            return mp.ncdf(m - x), mp.ncdf(-x)
        return mp.ncdf(x - m), mp.ncdf(x)

    return Base(region)


@precise
def laplace_base(eps0: float) -> Base:
    """Laplace(eps0, 1) vs Laplace(0, 1): loss -eps0 for x <= 0, 2x - eps0 between, eps0 above."""
    e0, half = mp.mpf(eps0), mp.mpf(1) / 2
    atoms = ((half * mp.exp(-e0), half, -e0), (half, half * mp.exp(-e0), e0))

    def region(t: mp.mpf, upper: bool) -> tuple[mp.mpf, mp.mpf]:
        p = q = mp.mpf(0)
        for pa, qa, loss in atoms:
            if (loss > t) if upper else (loss < t):
                p, q = p + pa, q + qa
        xt = min(max((t + e0) / 2, mp.mpf(0)), e0)
        u, v = (xt, e0) if upper else (mp.mpf(0), xt)
        return p + half * (mp.exp(v - e0) - mp.exp(u - e0)), q + half * (mp.exp(-u) - mp.exp(-v))

    return Base(region)


@precise
def approx_base(eps0: float, delta0: float) -> Base:
    """The tight (eps0, delta0) pair (Kairouz, Oh, Viswanath 2015)."""
    e0, d0 = mp.mpf(eps0), mp.mpf(delta0)
    ex = mp.exp(e0)
    a, b = (1 - d0) * ex / (1 + ex), (1 - d0) / (1 + ex)
    return Base(atoms=((d0, mp.mpf(0)), (a, b), (b, a), (mp.mpf(0), d0)))


@precise
def rr_base(eps0: float, k: int) -> Base:
    """k-ary randomized response, true buckets x vs y."""
    ex = mp.exp(mp.mpf(eps0))
    z = ex + k - 1
    mid = mp.mpf(k - 2) / z
    return Base(atoms=((ex / z, 1 / z), (mid, mid), (1 / z, ex / z)))


def _cut(value: mp.mpf, scale: mp.mpf) -> mp.mpf:
    """max(0, value), with a value at the reference's own rounding level taken as 0."""
    return mp.mpf(0) if value <= mp.mpf(10) ** (10 - DIGITS) * scale else value


def mixture_delta(base: Base, coef: Sequence[float], eps: float) -> mp.mpf:
    """sup_S P(S) - e^eps Q(S) for P = al P0 + be Q0, Q = ga P0 + de Q0."""
    al, be, ga, de = (mp.mpf(c) for c in coef)
    big = mp.exp(mp.mpf(eps))
    a, b = al - big * ga, be - big * de
    if base.region is None:
        return mp.fsum(_cut(a * p + b * q, abs(a * p) + abs(b * q)) for p, q in base.atoms)
    if a <= 0 and b <= 0:
        return mp.mpf(0)
    if a >= 0 and b >= 0:
        return a + b
    p, q = base.region(mp.log(-b / a), True) if a > 0 else base.region(mp.log(b / -a), False)
    return _cut(a * p + b * q, abs(a * p) + abs(b * q))


PLAIN = (1.0, 0.0, 0.0, 1.0)


def remove_coef(q: float) -> tuple[mp.mpf, ...]:
    """(1-q)Q0 + qP0 vs Q0."""
    return (mp.mpf(q), 1 - mp.mpf(q), mp.mpf(0), mp.mpf(1))


def add_coef(q: float) -> tuple[mp.mpf, ...]:
    """Q0 vs (1-q)Q0 + qP0."""
    return (mp.mpf(0), mp.mpf(1), mp.mpf(q), 1 - mp.mpf(q))


def bbg_upper(base: Base, q: float, eps: float) -> mp.mpf:
    """Balle, Barthe, Gaboardi (2018), Thm 10: q delta0(log(1 + (e^eps - 1)/q)) for eps >= 0,
    and 1 - e^eps + e^eps times that at -eps below."""
    qq, e = mp.mpf(q), mp.mpf(eps)
    pos = qq * mixture_delta(base, PLAIN, mp.log(1 + mp.expm1(abs(e)) / qq))
    return pos if e >= 0 else -mp.expm1(e) + mp.exp(e) * pos


def replace_one_delta(a: float, q: float, eps: float) -> mp.mpf:
    """(1-q)N(0)+qN(a) vs (1-q)N(0)+qN(-a): the set {x > x*}, x* where the loss equals eps."""
    aa, qq, e = mp.mpf(a), mp.mpf(q), mp.mpf(eps)
    big = mp.exp(e)
    # w = e^{a x - a^2/2} solves q w^2 + (1-q)(1-e^eps) w - q e^eps e^{-a^2} = 0
    b, c = -(1 - qq) * mp.expm1(e), qq * big * mp.exp(-aa * aa)
    disc = mp.sqrt(b * b + 4 * qq * c)
    w = (disc - b) / (2 * qq) if b < 0 else 2 * c / (b + disc)
    x = (mp.log(w) + aa * aa / 2) / aa
    p = (1 - qq) * mp.ncdf(-x) + qq * mp.ncdf(aa - x)
    qs = (1 - qq) * mp.ncdf(-x) + qq * mp.ncdf(-x - aa)
    return _cut(p - big * qs, p)


# -- the comparison -------------------------------------------------------------------------


def eps_grid(profile: Profile, extra: Iterable[float] = (), points: int = 13) -> list[float]:
    """[-50, max(loss_hi, 50)], the special points, and the loss range's (and ``extra``'s)
    ends with their neighbours."""
    hi = max(profile.loss_hi, 50.0) if math.isfinite(profile.loss_hi) else 50.0
    grid = [*np.linspace(-50.0, hi, points).tolist(), *SPECIAL]
    for v in (profile.loss_lo, profile.loss_hi, *extra):
        if math.isfinite(v) and v != 0.0:
            grid += [v, v * (1 - 1e-9), v * (1 + 1e-9), v - 0.01, v + 0.01]
    return sorted({float(x) for x in grid if x >= -50.0})


def violations(profile: Profile, eps: Sequence[float], truth: Truth, upper: bool) -> list[str]:
    """The points where the curve is NaN or infinite, or on the wrong side of ``truth``."""
    values = profile(np.asarray(eps, dtype=float))
    bad = []
    with mp.workdps(DIGITS):
        for e, v in zip(eps, values.tolist(), strict=True):
            t = truth(e)
            if not math.isfinite(v):
                bad.append(f"eps={e!r}: {v}")
            elif upper and v < t * (1 - TOL) - FLOOR:
                bad.append(f"eps={e!r}: upper {v!r} < true {mp.nstr(t, 17)}")
            elif not upper and v / (1 + REL_MARGIN) > t * (1 + TOL) + FLOOR:
                bad.append(f"eps={e!r}: lower {v!r} > true {mp.nstr(t, 17)}")
    return bad


def far_from(eps: Sequence[float], kinks: Iterable[float], gap: float) -> list[float]:
    """The points farther than ``gap`` (relative, at least absolute ``gap``) from every kink."""
    ks = [k for k in kinks if math.isfinite(k)]
    return [e for e in eps if all(abs(e - k) > gap * max(1.0, abs(k)) for k in ks)]


def sampled_kinks(q: float, base_kinks: Sequence[float]) -> list[float]:
    """Where a Poisson-sampled curve reads its base at a kink: log(1 + q(e^l - 1)) (remove) and
    -log(1 + q(e^-l - 1)) (add), for l = 0 and the base's kinks, and the support's ends."""
    out = [0.0, math.log1p(-q), -math.log1p(-q)]
    for loss in base_kinks:
        for sign in (1.0, -1.0):
            if sign * loss < 700:
                out.append(sign * math.log1p(q * math.expm1(sign * loss)))
    return out


def check(profile: Profile, eps: Sequence[float], truth: Truth, upper: bool) -> None:
    bad = violations(profile, eps, truth, upper)
    assert not bad, f"{profile.name}: " + "; ".join(bad[:5])


# -- passing sweeps -------------------------------------------------------------------------


def _params(cases: list[tuple[str, Event, Base, tuple[float, ...]]]) -> list[object]:
    return [pytest.param(*case, id=case[0]) for case in cases]


ADJ = {"add_remove": ROW_ADD_REMOVE, "replace_one": ROW_REPLACE_ONE}


def _plain_cases() -> list[tuple[str, Event, Base, tuple[float, ...]]]:
    """(id, event, base pair under add/remove with factor 1, its kinks)."""
    cases: list[tuple[str, Event, Base, tuple[float, ...]]] = []
    for e in (0.0, 1e-6, 1.0, 100.0, 500.0):
        cases.append((f"pure({e:g})", PureDPEvent(e), approx_base(e, 0.0), (e, -e)))
    cases.append(("rnm(3)", ReportNoisyMaxEvent(3.0), approx_base(3.0, 0.0), (3.0,)))
    for e, d in ((0.0, 1e-300), (1e-6, 1e-12), (1.0, 0.5), (5.0, 1 - 1e-12), (500.0, 1e-100)):
        cases.append((f"approx({e:g},{d:g})", ApproxDPEvent(e, d), approx_base(e, d), (e, -e)))
    for e, k in ((1e-6, 2), (1.0, 1000), (20.0, 2**40), (500.0, 2**53)):
        cases.append((f"rr({e:g},{k})", RandomizedResponseEvent(e, k), rr_base(e, k), (e, -e)))
    return cases


@pytest.mark.parametrize("relation", ["add_remove", "replace_one"])
@pytest.mark.parametrize(("name", "event", "base", "kinks"), _params(_plain_cases()))
def test_discrete_leaves_match_their_pairs(
    relation: str, name: str, event: Event, base: Base, kinks: tuple[float, ...]
) -> None:
    """Pure, approximate-DP (tiny and large delta), exponential mechanism, report-noisy-max and
    randomized response (up to 2^53 buckets) at every point, the overflow points included."""
    dp = leaf_profiles(event, ADJ[relation])
    eps = eps_grid(dp.remove, kinks)
    for upper, curve in ((True, dp.remove), (True, dp.add), (False, dp.lower_remove)):
        check(curve, eps, lambda e: mixture_delta(base, PLAIN, e), upper)


def bounded_range_truth(eps0: float) -> Truth:
    """The largest curve of a pair whose losses span eps0 (every exponential mechanism booked
    at eps0 is one; at each eps a two-candidate mechanism attains it):
    (e^{eps0/2} - e^{eps/2})^2 / (e^{eps0} - 1) on [-eps0, eps0]."""

    def truth(e: float) -> mp.mpf:
        with mp.workdps(50):
            w, x = mp.mpf(eps0), mp.mpf(e)
            if x <= -w:
                return -mp.expm1(x)
            if x >= w:
                return mp.mpf(0)
            return (mp.exp(w / 2) - mp.exp(x / 2)) ** 2 / mp.expm1(w)

    return truth


@pytest.mark.parametrize("relation", ["add_remove", "replace_one"])
@pytest.mark.parametrize("eps0", [1e-6, 3.0, 500.0])
def test_exponential_mechanism_leaf_matches_the_bounded_range_curve(
    relation: str, eps0: float
) -> None:
    """Upper curves at or above the worst bounded-range curve, the lower one at or below it."""
    dp = leaf_profiles(ExponentialMechanismEvent(eps0), ADJ[relation])
    eps = eps_grid(dp.remove, (eps0, -eps0))
    for upper, curve in ((True, dp.remove), (True, dp.add), (False, dp.lower_remove)):
        check(curve, eps, bounded_range_truth(eps0), upper)


@pytest.mark.parametrize("relation", ["add_remove", "replace_one"])
@pytest.mark.parametrize("sigma", [1e-4, 1e-3, 0.1, 1.0, 3.0])
def test_gaussian_and_laplace_leaves_match_their_pairs(relation: str, sigma: float) -> None:
    """Gaussian N(f/sigma, 1) vs N(0, 1) and Laplace with eps0 = f/sigma (f = 2 under
    replace-one); the Laplace curve below 709 only (beyond it: see the regression tests below)."""
    factor = 2.0 if relation == "replace_one" else 1.0
    for event, base, cap in (
        (GaussianEvent(sigma), gaussian_base(factor / sigma), math.inf),
        (LaplaceEvent(sigma), laplace_base(factor / sigma), 709.0),
    ):
        dp = leaf_profiles(event, ADJ[relation])
        eps = [e for e in eps_grid(dp.remove, (factor / sigma,)) if e <= cap]
        for upper in (True, False):
            check(dp.remove, eps, lambda e, b=base: mixture_delta(b, PLAIN, e), upper)


SAMPLING = [1e-12, 1e-3, 0.5, 1 - 1e-12]


def _sampled_bases() -> list[tuple[str, Event, Base, tuple[float, ...]]]:
    out: list[tuple[str, Event, Base, tuple[float, ...]]] = [
        (f"gauss({s:g})", GaussianEvent(s), gaussian_base(1.0 / s), ()) for s in (0.5, 1.0, 3.0)
    ]
    out.append(("laplace(1)", LaplaceEvent(1.0), laplace_base(1.0), (1.0, -1.0)))
    out.append(("pure(1)", PureDPEvent(1.0), approx_base(1.0, 0.0), (1.0, -1.0)))
    out.append(("approx(1,1e-6)", ApproxDPEvent(1.0, 1e-6), approx_base(1.0, 1e-6), (1.0, -1.0)))
    out.append(("rr(2,1000)", RandomizedResponseEvent(2.0, 1000), rr_base(2.0, 1000), (2.0, -2.0)))
    return out


@pytest.mark.parametrize("q", SAMPLING)
@pytest.mark.parametrize(("name", "event", "base", "kinks"), _params(_sampled_bases()))
def test_poisson_add_remove_away_from_kinks(
    q: float, name: str, event: Event, base: Base, kinks: tuple[float, ...]
) -> None:
    """Poisson sampling under add/remove, both directions, upper and lower, at every point
    farther than 1e-3 (relative) from where the curve reads its base at a kink or at loss 0,
    and below 709 (beyond: see the regression tests below)."""
    dp = leaf_profiles(PoissonSampledEvent(q, event), ROW_ADD_REMOVE)
    stops = sampled_kinks(q, kinks)
    eps = [e for e in far_from(eps_grid(dp.remove, stops), stops, 1e-3) if e <= 709.0]
    remove = (lambda e: mixture_delta(base, remove_coef(q), e), (dp.remove, dp.lower_remove))
    add = (lambda e: mixture_delta(base, add_coef(q), e), (dp.add, dp.lower_add))
    for truth, (up, low) in (remove, add):
        check(up, eps, truth, True)
        check(low, eps, truth, False)


@pytest.mark.parametrize("q", [1e-12, 1e-6, 0.5, 1 - 1e-12])
@pytest.mark.parametrize("sigma", [0.5, 1.0, 3.0])
def test_poisson_gaussian_replace_one_away_from_zero(q: float, sigma: float) -> None:
    """(1-q)N(0)+qN(a) vs (1-q)N(0)+qN(-a), a = 1/sigma, at every point with |eps| >= 1e-6 where
    the true curve is above 1e-250 (near 0 and in the deep tail: see the regression tests below)."""
    dp = leaf_profiles(PoissonSampledEvent(q, GaussianEvent(sigma)), ROW_REPLACE_ONE)
    with mp.workdps(DIGITS):
        eps = [
            e
            for e in far_from(eps_grid(dp.remove), [0.0], 1e-6)
            if replace_one_delta(1 / sigma, q, e) > 1e-250
        ]
    for upper in (True, False):
        check(dp.remove, eps, lambda e: replace_one_delta(1 / sigma, q, e), upper)


@pytest.mark.parametrize(("n", "m"), [(10**12, 1), (1000, 1), (2, 1), (10**12, 10**12 - 1)])
@pytest.mark.parametrize("sigma", [1.0, 3.0])
def test_sampling_without_replacement_gaussian(n: int, m: int, sigma: float) -> None:
    """Upper: BBG18 Thm 10 (self-dual extension); lower: the add- and remove-type pairs of the
    replace-one base (shift 2/sigma); away from loss 0 and the support's ends."""
    q = m / n
    base = gaussian_base(2.0 / sigma)
    dp = leaf_profiles(SampledWithoutReplacementEvent(n, m, GaussianEvent(sigma)), ROW_REPLACE_ONE)
    stops = sampled_kinks(q, ())
    eps = [e for e in far_from(eps_grid(dp.remove, stops), stops, 1e-3) if e <= 709.0]
    check(dp.remove, eps, lambda e: bbg_upper(base, q, e), True)
    check(dp.lower_remove, eps, lambda e: mixture_delta(base, add_coef(q), e), False)
    check(dp.lower_add, eps, lambda e: mixture_delta(base, remove_coef(q), e), False)


@pytest.mark.parametrize(
    "event",
    [
        GaussianEvent(1e4),
        PoissonSampledEvent(1e-12, GaussianEvent(1.0)),
        PoissonSampledEvent(0.5, LaplaceEvent(1.0)),
        PoissonSampledEvent(1e-9, PureDPEvent(1e-6)),
        PoissonSampledEvent(1e-3, ApproxDPEvent(1.0, 1e-300)),
    ],
    ids=str,
)
@pytest.mark.parametrize("h", [1e-2, 1e-3])
def test_flagged_curves_discretise_to_finite_masses(event: Event, h: float) -> None:
    """The curves of the regression tests below give finite masses on the PLD grid."""
    dp = leaf_profiles(event, ROW_ADD_REMOVE)
    for curve in (dp.remove, dp.add):
        pld = discretise(curve, h)
        assert np.all(np.isfinite(pld.masses)) and math.isfinite(pld.inf_mass)
        assert pld.masses.min() >= 0.0 and 0.0 <= pld.inf_mass <= 1.0


# -- regressions -----------------------------------------------------------------------------


def _one(curve: Profile, eps: float, truth: Truth, upper: bool) -> None:
    check(curve, [eps], truth, upper)


@pytest.mark.parametrize(
    ("sigma", "eps", "upper"),
    [
        (1e4, 0.001000005001000005, True),
        (1e4, 0.0027149054434811603, True),
        (1e4, 0.001000004998999995, False),
        (1e4, 0.0027979329809936647, False),
    ],
)
def test_gaussian_small_mu_tail(sigma: float, eps: float, upper: bool) -> None:
    dp = leaf_profiles(GaussianEvent(sigma), ROW_ADD_REMOVE)
    curve = dp.remove if upper else dp.lower_remove
    _one(curve, eps, lambda e: mixture_delta(gaussian_base(1 / sigma), PLAIN, e), upper)


def test_laplace_curve_is_quiet_above_709() -> None:
    dp = leaf_profiles(LaplaceEvent(1.0), ROW_ADD_REMOVE)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert float(dp.remove(np.array([745.0]))[0]) == 0.0


def test_poisson_add_curve_is_quiet_above_709() -> None:
    dp = leaf_profiles(PoissonSampledEvent(0.5, GaussianEvent(1.0)), ROW_ADD_REMOVE)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert float(dp.add(np.array([745.0]))[0]) == 0.0


@pytest.mark.parametrize(
    ("q", "event", "base", "eps"),
    [
        (1e-12, GaussianEvent(1e-4), gaussian_base(1e4), -1e-12),
        (1e-9, PureDPEvent(1e-6), approx_base(1e-6, 0.0), 0.0),
        (1 - 1e-6, GaussianEvent(0.5), gaussian_base(2.0), 13.815510557935518),
    ],
    ids=["gauss-q1e-12-eps-1e-12", "pure-q1e-9-eps0", "gauss-q1-1e-6-top"],
)
def test_poisson_add_upper_cancellation(q: float, event: Event, base: Base, eps: float) -> None:
    dp = leaf_profiles(PoissonSampledEvent(q, event), ROW_ADD_REMOVE)
    _one(dp.add, eps, lambda e: mixture_delta(base, add_coef(q), e), True)


def test_poisson_add_lower_above_truth_at_zero() -> None:
    q = 1e-6
    dp = leaf_profiles(PoissonSampledEvent(q, ApproxDPEvent(0.0, 1e-300)), ROW_ADD_REMOVE)
    base = approx_base(0.0, 1e-300)
    _one(dp.lower_add, 0.0, lambda e: mixture_delta(base, add_coef(q), e), False)


@pytest.mark.parametrize(
    ("q", "event", "base", "eps"),
    [
        (1e-3, LaplaceEvent(1.0), laplace_base(1.0), 0.001716807271133098),
        (1e-3, ApproxDPEvent(1.0, 1e-300), approx_base(1.0, 1e-300), 0.001716807271133098),
        (0.9, LaplaceEvent(1.0), laplace_base(1.0), 0.9347016630664646),
    ],
    ids=["laplace-top", "approx-top", "laplace-1e-9-below-top"],
)
def test_poisson_remove_upper_at_base_kink(q: float, event: Event, base: Base, eps: float) -> None:
    dp = leaf_profiles(PoissonSampledEvent(q, event), ROW_ADD_REMOVE)
    _one(dp.remove, eps, lambda e: mixture_delta(base, remove_coef(q), e), True)


def test_poisson_remove_lower_above_truth_at_base_kink() -> None:
    q = 1e-9
    dp = leaf_profiles(PoissonSampledEvent(q, PureDPEvent(10.0)), ROW_ADD_REMOVE)
    base = approx_base(10.0, 0.0)
    eps = 2.2025223215771374e-05
    _one(dp.lower_remove, eps, lambda e: mixture_delta(base, remove_coef(q), e), False)


def test_sampling_without_replacement_upper_at_base_kink() -> None:
    event = SampledWithoutReplacementEvent(10**12, 1, LaplaceEvent(0.1))
    dp = leaf_profiles(event, ROW_REPLACE_ONE)
    base = laplace_base(20.0)
    _one(dp.remove, 0.0004850475398299235, lambda e: bbg_upper(base, 1e-12, e), True)


@pytest.mark.parametrize("eps", [1e-12, -1e-12])
def test_replace_one_near_zero(eps: float) -> None:
    dp = leaf_profiles(PoissonSampledEvent(1e-12, GaussianEvent(30.0)), ROW_REPLACE_ONE)
    _one(dp.remove, eps, lambda e: replace_one_delta(1 / 30.0, 1e-12, e), True)


def test_replace_one_deep_tail_lower() -> None:
    dp = leaf_profiles(PoissonSampledEvent(0.5, GaussianEvent(1.0)), ROW_REPLACE_ONE)
    _one(dp.lower_remove, 37.5, lambda e: replace_one_delta(1.0, 0.5, e), False)
