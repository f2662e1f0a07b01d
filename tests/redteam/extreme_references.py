"""50-digit references of the true privacy curves of the event kinds the extreme-parameter tests
``test_account_extremes_more.py`` and ``test_account_extremes_mechanisms.py`` check, and
discretised brackets of long compositions of them.

References (never the project's code):

* Poisson-sampled Laplace of scale ``b`` under add/remove, ``e0 = 1 / b``: under ``Q0`` the base
  loss ``L`` is an atom ``-e0`` (1/2), an atom ``e0`` (``e^-e0 / 2``) and the density
  ``e^{-(l + e0)/2} / 4`` on ``(-e0, e0)``; with ``r(L) = 1 - q + q e^L`` the remove curve is
  ``E[(r(L) - e^eps)_+]`` and the add curve ``E[(1 - e^eps r(L))_+]``, both integrated in
  closed form; the truth is the larger. Two releases: the same expectations over ``L1`` of the
  one-release closed forms at ``e^eps / r(L1)`` and ``e^eps r(L1)`` (one 1-D quadrature). Checked
  against direct quadrature of ``(M - e^eps Q0)_+`` over the output line.
* Poisson-sampled Gaussian under replace-one: the record is in the batch with the same coin
  under ``D`` and ``D'`` and contributes ``x`` resp. ``x'`` with ``|x|, |x'| <= C``, so (in units
  of the noise) the pair is ``(1-q) N(0,1) + q N(a,1)`` vs ``(1-q) N(0,1) + q N(-a,1)``,
  ``a = 1/sigma`` (``x = C``, ``x' = -C``), the pair of ``profiles.poisson_gaussian_replace_one``;
  at ``q = 1`` it is the unsampled replace-one pair ``N(2/sigma)`` vs ``N(0)``. Its loss is
  increasing in the output, so ``delta(eps) = P(X > z) - e^eps Q(X > z)`` at the root ``z`` of
  ``loss(z) = eps`` (bisection at 50 digits; checked against direct quadrature).
* Sampling ``m`` of ``n`` without replacement under replace-one, ``q = m/n``, base pair
  ``(P0, Q0)`` the unsampled replace-one pair: the dataset made of copies of ``x'`` with one
  ``x`` (and its swap) attains the remove pair ``((1-q) Q0 + q P0, Q0)`` and the add pair
  ``(Q0, (1-q) Q0 + q P0)``; Balle, Barthe, Gaboardi (2018) Thm 10 bounds the curve by
  ``q delta0(log(1 + (e^eps - 1)/q))`` for ``eps >= 0``, which is the remove pair's curve, and
  the substitution relation is symmetric: the truth is the larger of the two attained curves.
* ``ApproxDPEvent(eps, d)`` (Kairouz, Oh, Viswanath 2015): ``P`` has mass ``d`` at ``+inf``,
  ``Q`` mass ``d`` at ``-inf``, the rest is ``(1 - d)`` times randomized response ``RR(eps)``;
  ``k`` releases: ``1 - (1-d)^k + (1-d)^k delta_RR^k(e)`` (binomial sum, exact losses).
* ``ExponentialMechanismEvent(eps)``: the mechanism booked as ``eps`` has a privacy loss whose
  range has width at most ``eps`` (``eps``-bounded range, Durfee & Rogers 2019: the score term
  spans at most ``eps``, the normaliser is a constant); by convexity of ``(e^L - e^e)_+`` in
  ``e^L`` the worst pair puts its loss at ``t`` and ``t - eps``, and maximising over ``t`` gives
  ``delta(e) = (e^{eps/2} - e^{e/2})^2 / (e^eps - 1)`` on ``[-eps, eps]`` (``1 - e^e`` below),
  attained (in the limit ``t -> (eps + e)/2`` exactly) by a two-candidate mechanism. The
  accountants' curve for it is ``RR(eps)``: a sound upper bound, but no lower bound.
* Compositions of many sampled releases: the per-release loss law is binned (atoms exact,
  continuous parts in 4000-20000 bins with masses in closed form), each bin's loss rounded up
  to a lattice for an upper curve and down for a lower one (``(1 - e^{e - L})_+`` is monotone
  in ``L``), composed by FFT in double precision: a bracket ``[lo, hi]`` of the truth, used
  only at deltas far above its roundoff.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import mpmath as mp
import numpy as np
from numpy.typing import NDArray
from scipy.signal import fftconvolve
from scipy.special import ndtr

__all__ = [
    "DIGITS",
    "Array",
    "Curve",
    "Truth",
    "approx_dp_delta",
    "bounded_range_attained_delta",
    "bounded_range_delta",
    "laplace_add",
    "laplace_remove",
    "lattice_bracket",
    "poisson_gauss_delta",
    "poisson_laplace_bracket",
    "poisson_laplace_delta",
    "poisson_pure_delta",
    "replace_one_bracket",
    "replace_one_delta",
    "rr_composed_delta",
    "sampled_cap",
]

DIGITS = 50

Truth = Callable[[float], mp.mpf]
Curve = Callable[[float], float]
Array = NDArray[np.float64]

# -- 50-digit references ----------------------------------------------------------------------


def _laplace_part(a: mp.mpf, q: mp.mpf, y: mp.mpf, lo: mp.mpf, hi: mp.mpf) -> mp.mpf:
    """``int_lo^hi (1 - q + q e^l - y) e^{-(l + a)/2} / 4 dl``, in closed form."""

    def antiderivative(v: mp.mpf) -> mp.mpf:
        return -(1 - q - y) * mp.exp(-(v + a) / 2) / 2 + q * mp.exp((v - a) / 2) / 2

    return antiderivative(hi) - antiderivative(lo)


def laplace_remove(e0: float, q: float, y: mp.mpf) -> mp.mpf:
    """``E_Q0[(r(L) - y)_+]`` of the Laplace base loss ``L`` (``r = 1 - q + q e^L``)."""
    with mp.workdps(DIGITS):
        a, r, y = mp.mpf(e0), mp.mpf(q), mp.mpf(y)

        def ratio(v: mp.mpf) -> mp.mpf:
            return 1 - r + r * mp.exp(v)

        total = max(ratio(-a) - y, 0) / 2 + max(ratio(a) - y, 0) * mp.exp(-a) / 2
        lo = -a if y <= 1 - r else max(mp.log((y - (1 - r)) / r), -a)
        if lo < a:
            total += _laplace_part(a, r, y, lo, a)
        return total


def laplace_add(e0: float, q: float, y: mp.mpf) -> mp.mpf:
    """``E_Q0[(1 - y r(L))_+]``."""
    with mp.workdps(DIGITS):
        a, r, y = mp.mpf(e0), mp.mpf(q), mp.mpf(y)

        def ratio(v: mp.mpf) -> mp.mpf:
            return 1 - r + r * mp.exp(v)

        total = max(1 - y * ratio(-a), 0) / 2 + max(1 - y * ratio(a), 0) * mp.exp(-a) / 2
        t = 1 / y
        if t > 1 - r:
            hi = min(mp.log((t - (1 - r)) / r), a)
            if hi > -a:
                total += -y * _laplace_part(a, r, t, -a, hi)
        return total


def poisson_laplace_delta(e0: float, q: float, e: float, count: int = 1) -> mp.mpf:
    """delta(e) of ``count`` (1 or 2) Poisson-sampled Laplace releases under add/remove."""
    with mp.workdps(DIGITS):
        x = mp.exp(mp.mpf(e))
        if count == 1:
            return max(laplace_remove(e0, q, x), laplace_add(e0, q, x))
        assert count == 2
        a, r = mp.mpf(e0), mp.mpf(q)

        def ratio(v: mp.mpf) -> mp.mpf:
            return 1 - r + r * mp.exp(v)

        def over_first(fn: Callable[[mp.mpf], mp.mpf]) -> mp.mpf:
            total = fn(-a) / 2 + fn(a) * mp.exp(-a) / 2
            pts = {-a, a}
            for v in (x / ratio(a), x / ratio(-a), 1 / (x * ratio(a)), 1 / (x * ratio(-a))):
                if v > 1 - r:  # the inner expectation's kinks
                    v = mp.log((v - (1 - r)) / r)
                    if -a < v < a:
                        pts.add(v)

            def dens(v: mp.mpf) -> mp.mpf:
                return fn(v) * mp.exp(-(v + a) / 2) / 4

            return total + mp.quad(dens, sorted(pts))

        remove = over_first(lambda v: ratio(v) * laplace_remove(e0, q, x / ratio(v)))
        add = over_first(lambda v: laplace_add(e0, q, x * ratio(v)))
        return max(remove, add)


def replace_one_delta(a: float, q: float, e: float) -> mp.mpf:
    """delta(e) of ``(1-q) N(0) + q N(a)`` vs ``(1-q) N(0) + q N(-a)`` (symmetric)."""
    with mp.workdps(DIGITS):
        m, r, x = mp.mpf(a), mp.mpf(q), mp.mpf(e)

        def loss(z: mp.mpf) -> mp.mpf:
            up = mp.log(1 - r + r * mp.exp(m * z - m * m / 2))
            return up - mp.log(1 - r + r * mp.exp(-m * z - m * m / 2))

        lo, hi = mp.mpf(-1), mp.mpf(1)
        while loss(lo) > x:
            lo *= 2
        while loss(hi) < x:
            hi *= 2
        for _ in range(300):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if loss(mid) > x else (mid, hi)
            if hi - lo < mp.mpf(10) ** -45 * (1 + abs(lo)):
                break
        z, ex = (lo + hi) / 2, mp.exp(x)
        value = (1 - r) * (1 - ex) * mp.ncdf(-z) + r * (mp.ncdf(m - z) - ex * mp.ncdf(-m - z))
        return max(value, mp.mpf(0))


def poisson_gauss_delta(mu: float, q: float, e: float) -> mp.mpf:
    """The larger of the remove and add curves of ``N(mu)`` vs ``N(0)`` sampled at ``q``."""
    with mp.workdps(DIGITS):
        m, r, x = mp.mpf(mu), mp.mpf(q), mp.exp(mp.mpf(e))
        if x <= 1 - r:
            remove = 1 - x
        else:
            z = (mp.log((x - (1 - r)) / r) + m * m / 2) / m
            remove = (1 - r) * mp.ncdf(-z) + r * mp.ncdf(m - z) - x * mp.ncdf(-z)
        y = 1 / x
        if y <= 1 - r:
            add = mp.mpf(0)
        else:
            z = (mp.log((y - (1 - r)) / r) + m * m / 2) / m
            add = mp.ncdf(z) - x * ((1 - r) * mp.ncdf(z) + r * mp.ncdf(z - m))
        return max(remove, add)


def poisson_pure_delta(eps: float, q: float, e: float) -> mp.mpf:
    """The larger of the remove and add curves of binary randomized response sampled at ``q``."""
    with mp.workdps(DIGITS):
        r, x, big = mp.mpf(q), mp.exp(mp.mpf(e)), mp.exp(mp.mpf(eps))
        p0, q0 = [big / (1 + big), 1 / (1 + big)], [1 / (1 + big), big / (1 + big)]
        mix = [(1 - r) * b + r * a for a, b in zip(p0, q0, strict=True)]

        def curve(ps: list[mp.mpf], qs: list[mp.mpf]) -> mp.mpf:
            return mp.fsum(
                p - x * b for p, b in zip(ps, qs, strict=True) if mp.log(p) - mp.log(b) > e
            )

        return max(curve(mix, q0), curve(q0, mix))


def rr_composed_delta(eps: float, count: int, e: float) -> mp.mpf:
    """delta(e) of ``count`` binary randomized responses (binomial sum, exact losses)."""
    with mp.workdps(DIGITS):
        big, x = mp.exp(mp.mpf(eps)), mp.exp(mp.mpf(e))
        p, pbar = big / (1 + big), 1 / (1 + big)
        terms = []
        for j in range(count + 1):
            if (2 * j - count) * mp.mpf(eps) > e:
                w = mp.binomial(count, j)
                terms.append(w * (p**j * pbar ** (count - j) - x * pbar**j * p ** (count - j)))
        return mp.fsum(terms)


def approx_dp_delta(eps: float, d: float, count: int, e: float) -> mp.mpf:
    with mp.workdps(DIGITS):
        log_keep = count * mp.log1p(-mp.mpf(d))
        # the failure mass as -expm1: 1 - keep loses d = 1e-300 at 50 digits
        return -mp.expm1(log_keep) + mp.exp(log_keep) * rr_composed_delta(eps, count, e)


def bounded_range_attained_delta(eps: float, count: int, e: float, grid: int = 41) -> mp.mpf:
    """The largest delta(e) over ``grid`` positions a in [-eps, 0] of ``count`` releases of the
    two-point pair with losses a and a + eps (Q-mass (1 - e^a)/(e^a (e^eps - 1)) on the top):
    every such pair is a two-candidate exponential mechanism, so this is attained."""
    with mp.workdps(DIGITS):
        w, x = mp.mpf(eps), mp.mpf(e)
        best = mp.mpf(0)
        for i in range(grid + 1):
            a = -w * i / grid
            q_hi = -mp.expm1(a) / (mp.exp(a) * mp.expm1(w))
            p_hi, p_lo = mp.exp(a + w) * q_hi, mp.exp(a) * (1 - q_hi)
            terms = []
            for j in range(count + 1):
                loss = count * a + j * w
                if loss > x:
                    mass = mp.binomial(count, j) * p_hi**j * p_lo ** (count - j)
                    terms.append(mass * -mp.expm1(x - loss))
            best = max(best, mp.fsum(terms))
        return best


def bounded_range_delta(eps: float, e: float) -> mp.mpf:
    """The worst curve of a mechanism whose privacy loss spans at most ``eps``."""
    with mp.workdps(DIGITS):
        w, x = mp.mpf(eps), mp.mpf(e)
        if x <= -w:
            return -mp.expm1(x)
        if x >= w:
            return mp.mpf(0)
        return (mp.exp(w / 2) - mp.exp(x / 2)) ** 2 / mp.expm1(w)


# -- discretised brackets of long compositions -------------------------------------------------


def _compose(index: NDArray[np.int64], mass: Array, count: int) -> tuple[NDArray[np.int64], Array]:
    """The ``count``-fold convolution of masses on lattice points ``index`` (FFT)."""
    base = int(index.min())
    cur = np.zeros(int(index.max()) - base + 1)
    np.add.at(cur, index - base, mass)
    out, off = np.array([1.0]), 0
    while count:
        if count & 1:
            out, off = np.maximum(fftconvolve(out, cur), 0.0), off + base
        count >>= 1
        if count:
            cur, base = np.maximum(fftconvolve(cur, cur), 0.0), 2 * base
    return np.arange(out.size, dtype=np.int64) + off, out


def lattice_bracket(
    loss_lo: Array, loss_hi: Array, mass: Array, inf_mass: float, count: int, step: float
) -> tuple[Curve, Curve]:
    """(lower, upper) curves of ``count`` releases whose P-law puts ``mass[i]`` at a loss in
    ``[loss_lo[i], loss_hi[i]]`` (and ``inf_mass`` at a loss counted as +infinity above)."""
    up_i, up_m = _compose(np.ceil(loss_hi / step).astype(np.int64), mass, count)
    lo_i, lo_m = _compose(np.floor(loss_lo / step).astype(np.int64), mass, count)
    up_l, lo_l = up_i * step, lo_i * step
    at_inf = -math.expm1(count * math.log1p(-inf_mass)) if inf_mass else 0.0

    def upper(e: float) -> float:
        hit = up_l > e
        return at_inf + float(np.sum(up_m[hit] * -np.expm1(e - up_l[hit])))

    def lower(e: float) -> float:
        hit = lo_l > e
        return float(np.sum(lo_m[hit] * -np.expm1(e - lo_l[hit])))

    return lower, upper


def poisson_laplace_bracket(e0: float, q: float, count: int) -> tuple[Curve, Curve]:
    edges = np.linspace(-e0, e0, 4001)
    a, b = edges[:-1], edges[1:]
    q_bins = (np.exp(-(a + e0) / 2) - np.exp(-(b + e0) / 2)) / 2
    p_bins = np.exp(-e0 / 2) * (np.exp(b / 2) - np.exp(a / 2)) / 2
    atoms = np.array([-e0, e0])
    q_atoms = np.array([0.5, math.exp(-e0) / 2])
    p_atoms = q_atoms * np.exp(atoms)

    def log_ratio(v: Array) -> Array:
        return np.asarray(np.log1p(q * np.expm1(v)), dtype=float)

    top = max(log_ratio(atoms[1:])[0], -log_ratio(atoms[:1])[0])
    step = count * 2 * top / 4e5
    remove = lattice_bracket(
        np.concatenate([log_ratio(atoms), log_ratio(a)]),
        np.concatenate([log_ratio(atoms), log_ratio(b)]),
        np.concatenate([(1 - q) * q_atoms + q * p_atoms, (1 - q) * q_bins + q * p_bins]),
        0.0,
        count,
        step,
    )
    add = lattice_bracket(
        np.concatenate([-log_ratio(atoms), -log_ratio(b)]),
        np.concatenate([-log_ratio(atoms), -log_ratio(a)]),
        np.concatenate([q_atoms, q_bins]),
        0.0,
        count,
        step,
    )
    return (
        lambda e: max(remove[0](e), add[0](e)),
        lambda e: max(remove[1](e), add[1](e)),
    )


def replace_one_bracket(a: float, q: float, count: int) -> tuple[Curve, Curve]:
    """The pair is symmetric: one direction. The tails beyond ``+-(a + 40)`` (mass < 1e-300)
    are dropped below and put at +infinity above."""
    edges = np.linspace(-(a + 40.0), a + 40.0, 20001)
    keep, log_q = math.log1p(-q), math.log(q)
    loss = np.logaddexp(keep, log_q + a * edges - a * a / 2) - np.logaddexp(
        keep, log_q - a * edges - a * a / 2
    )
    cdf = (1 - q) * ndtr(edges) + q * ndtr(edges - a)
    bins = np.diff(cdf)
    step = max(count * 2 * float(loss[-1]) / 4e5, 1e-12)
    lower, _ = lattice_bracket(loss[:-1], loss[1:], bins, 0.0, count, step)
    left, right = float(cdf[0]), float(1 - cdf[-1])
    _, upper = lattice_bracket(
        np.concatenate([[loss[0]], loss[:-1]]),
        np.concatenate([[loss[0]], loss[1:]]),
        np.concatenate([[left], bins]),
        right,
        count,
        step,
    )
    return lower, upper


def sampled_cap(e0: float, q: float) -> float:
    """The largest privacy loss, ``log(1 + q (e^e0 - 1))``, of a release sampled at rate ``q``
    whose unsampled losses are at most ``e0``."""
    return math.log1p(q * math.expm1(e0))
