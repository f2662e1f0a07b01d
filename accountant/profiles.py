"""Privacy profiles of leaf mechanisms, in both neighbouring directions.

A profile is the hockey-stick curve ``delta(eps) = sup_S P(S) - e^eps Q(S)`` of the pair
``(P, Q) = (M(D), M(D'))``. Each :class:`Profile` returns *upper bounds* (exact closed forms
evaluated stably, inflated by a relative margin for floating-point error) and the finite range
of privacy-loss values outside which the remaining mass is negligible.

Noise is in units of the per-unit add/remove contribution bound ``C``; the adjacency supplies the
factor 2 of replace-one (see :func:`~dpledger.accountant.leaves.leaf_profiles`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import attrs
import numpy as np
from numpy.typing import NDArray
from scipy import special

from dpledger.accountant.allocation_ratio import allocation_ratio_pair
from dpledger.accountant.discrete_pair import DiscretePair
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import UnsupportedEventError
from dpledger.core.events import (
    SHUFFLED_NEEDS_REPLACE_ONE,
    ApproxDPEvent,
    Event,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    PureDPEvent,
    RandomizedResponseEvent,
    ReportNoisyMaxEvent,
    ShuffledBatchesEvent,
    TabulatedProfileEvent,
    flatten,
)

Array = NDArray[np.float64]
#: relative inflation of every delta value, covering floating-point error of the closed forms
REL_MARGIN = 1e-10
#: number of standard deviations kept on each side of Gaussian losses (tail < 1e-23)
GAUSS_SPAN = 10.0
#: unit roundoff of IEEE double
_U = 2.0**-53
#: largest loss at which a curve is evaluated without overflow unless its profile says more
#: (e^eps overflows near 709.8); curves audited beyond it set ``accurate_hi`` themselves
ACCURATE_LOSS = 700.0


@attrs.frozen
class Profile:
    """An upper-bound hockey-stick curve and the loss range that carries its finite mass."""

    delta: Callable[[Array], Array]
    loss_lo: float
    loss_hi: float
    exact: bool
    name: str
    #: curve of the swapped pair (Q, P); gives delta(eps) - (1 - e^eps) = e^eps * dual(-eps)
    #: without cancellation for eps < 0
    dual: Callable[[Array], Array] | None = None
    #: the curve is evaluated accurately (no overflow) for every eps up to this loss; above it
    #: the discretisation lumps the remaining mass at +infinity
    accurate_hi: float = ACCURATE_LOSS

    def __call__(self, eps: Array) -> Array:
        d = self.delta(np.asarray(eps, dtype=float))
        return np.minimum(1.0, np.maximum(0.0, d) * (1 + REL_MARGIN))

    def excess(self, eps: Array) -> Array:
        """delta(eps) - (1 - e^eps) >= 0, accurate for eps < 0 when the dual curve is known."""
        eps = np.asarray(eps, dtype=float)
        if self.dual is None:
            return np.maximum(0.0, self(eps) + np.expm1(eps))
        d = np.maximum(0.0, self.dual(-eps)) * (1 + REL_MARGIN)
        return np.asarray(np.exp(eps) * np.minimum(d, 1.0), dtype=float)


def _log_ndtr_diff_delta(a: Array, eps: Array, mu: float) -> Array:
    """Phi(a) - e^eps Phi(a - mu), computed without cancellation.

    It is Phi(a) (1 - e^diff) with diff = eps + log Phi(a - mu) - log Phi(a). Where a < -1
    the two logs are large and nearly equal (small mu): with Phi(z) = erfcx(-z/sqrt 2)
    e^{-z^2/2} / 2 their Gaussian parts cancel exactly against eps, leaving
    diff = [eps - mu (mu/2 - a)] + log(erfcx((mu - a)/sqrt 2) / erfcx(-a/sqrt 2)).
    """
    la = special.log_ndtr(a)
    lb = special.log_ndtr(a - mu)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        diff = eps + lb - la
        deep = a < -1.0
        if np.any(deep):
            e_near = special.erfcx(-a / math.sqrt(2))
            e_far = special.erfcx((mu - a) / math.sqrt(2))
            ratio = np.log1p((e_far - e_near) / e_near)
            diff = np.where(deep, (eps - mu * (mu / 2 - a)) + ratio, diff)
        out = np.exp(la) * -np.expm1(np.minimum(diff, 0.0))
    return np.where(diff >= 0, 0.0, out)


def gaussian_delta(mu: float) -> Callable[[Array], Array]:
    """Exact profile of N(mu, 1) vs N(0, 1) (Balle & Wang 2018, Thm 8); symmetric."""

    def delta(eps: Array) -> Array:
        a = -eps / mu + mu / 2
        return _log_ndtr_diff_delta(a, eps, mu)

    return delta


def gaussian_profile(mu: float) -> Profile:
    lo = mu * mu / 2 - GAUSS_SPAN * mu
    hi = mu * mu / 2 + GAUSS_SPAN * mu
    d = gaussian_delta(mu)
    # the curve is evaluated in log space: accurate at every loss
    return Profile(d, min(lo, -hi), hi, True, f"gaussian(mu={mu:.6g})", d, math.inf)


def laplace_delta(eps0: float) -> Callable[[Array], Array]:
    """Exact profile of Laplace noise with eps0 = sensitivity/scale (symmetric)."""

    def delta(eps: Array) -> Array:
        mid = -np.expm1((np.clip(eps, -eps0, eps0) - eps0) / 2)
        low = -np.expm1(np.minimum(eps, 0.0))  # read only below -eps0
        return np.where(eps >= eps0, 0.0, np.where(eps <= -eps0, low, mid))

    return delta


def discrete_delta(losses: Array, masses: Array, inf_mass: float) -> Callable[[Array], Array]:
    """Profile of a pair given by P-masses at finite losses plus an atom at +infinity."""

    def delta(eps: Array) -> Array:
        e = eps[..., None]
        with np.errstate(over="ignore"):
            terms = masses * np.maximum(0.0, -np.expm1(e - losses))
        return np.asarray(inf_mass + terms.sum(axis=-1), dtype=float)

    return delta


def approx_dp_profile(eps0: float, delta0: float) -> Profile:
    """Tight pair for a black-box (eps0, delta0)-DP release (Kairouz, Oh, Viswanath 2015)."""
    ex = math.exp(eps0)
    losses = np.array([eps0, -eps0])
    masses = (1 - delta0) * np.array([ex / (1 + ex), 1 / (1 + ex)])
    d = discrete_delta(losses, masses, delta0)
    return Profile(d, -eps0, eps0, True, f"approx_dp({eps0:g},{delta0:g})", d)


def bounded_range_profile(eps0: float) -> Profile:
    """The largest curve of any pair whose privacy loss spans an interval of width ``eps0``
    (an exponential mechanism booked at ``eps0``; Durfee and Rogers 2019 call it
    ``eps0``-bounded range): ``(e^{eps0/2} - e^{eps/2})^2 / (e^{eps0} - 1)`` on
    ``[-eps0, eps0]``, ``tanh(eps0/4)`` at ``eps = 0`` (randomized response at ``eps0`` has
    ``tanh(eps0/2)``).

    For losses on ``[a, a + eps0]`` the curve ``E_Q[(e^L - e^eps)_+]`` is convex in ``e^L``
    with ``E_Q[e^L] = 1``, so it is largest with Q-mass on the two ends only; the best ``a`` is
    ``(eps - eps0)/2``. A supremum of privacy curves is one (of the pair whose trade-off
    function is the convex hull of the minimum), so the curve dominates every such pair under
    composition; it is self-dual."""

    def delta(eps: Array) -> Array:
        e = np.clip(eps, -eps0, eps0)
        with np.errstate(divide="ignore"):
            log_mid = (
                (e - eps0) - math.log(-math.expm1(-eps0)) + 2.0 * np.log(np.expm1((eps0 - e) / 2))
            )
        mid = np.exp(log_mid)
        low = -np.expm1(np.minimum(eps, 0.0))  # read only at or below -eps0
        return np.where(eps >= eps0, 0.0, np.where(eps <= -eps0, low, mid))

    return Profile(delta, -eps0, eps0, True, f"bounded_range({eps0:g})", delta)


def randomized_response_profile(eps0: float, k: int) -> Profile:
    ex = math.exp(eps0)
    z = ex + k - 1
    losses = np.array([eps0, 0.0, -eps0])
    masses = np.array([ex / z, (k - 2) / z, 1 / z])
    d = discrete_delta(losses, masses, 0.0)
    return Profile(d, -eps0, eps0, True, f"rr({eps0:g},{k})", d)


#: relative error bound (in units of U) of the sampled curves' inner losses, times a margin
INNER_ROUNDING = 8.0


def _poisson_remove_delta(
    base_delta: Callable[[Array], Array], q: float, side: float = 1.0
) -> Callable[[Array], Array]:
    """The remove curve; its base is read at the inner loss moved by its rounding bound, down
    for an upper curve (``side`` = 1: the base is non-increasing) and up for a lower one
    (``side`` = -1), so that near a kink of the base the rounding errs on the safe side."""
    lo = math.log1p(-q) if q < 1 else -math.inf
    log_q = abs(math.log(q))

    def delta(eps: Array) -> Array:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            # (e^eps - 1)/q stays below e^700 up to `turn`; beyond, the same value is
            # log(1 + (e^eps - 1)/q) = eps - log q + log1p(-(1 - q) e^{-eps}), without overflow
            turn = max(1.0, ACCURATE_LOSS + math.log(q))
            inner = np.log1p(np.expm1(np.minimum(eps, turn)) / q)
            far = np.maximum(eps, turn)
            big = far - math.log(q) + np.log1p(-(1 - q) * np.exp(-far))
            inner = np.where(eps > turn, big, inner)
            shift = INNER_ROUNDING * _U * (np.abs(inner) + log_q + 1.0)
            inner = np.where(np.isfinite(inner), inner - side * shift, inner)
            val = q * base_delta(np.where(eps > lo, inner, 0.0))
            below = -np.expm1(np.minimum(eps, lo if math.isfinite(lo) else 0.0))
        return np.where(eps > lo, val, below)

    return delta


def _poisson_add_delta(
    base_reverse: Callable[[Array], Array], q: float, side: float = 1.0
) -> Callable[[Array], Array]:
    """The add curve c * delta0_rev(alpha), c = 1 - e^eps (1 - q) = -expm1(eps + log(1 - q)),
    alpha = eps + log q - log c, without cancellation; both are moved by their rounding bounds
    (c up and alpha down for an upper curve, ``side`` = 1; the other way for a lower one)."""
    log_keep = math.log1p(-q) if q < 1 else -math.inf
    log_q = math.log(q)

    def delta(eps: Array) -> Array:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            s = eps + log_keep
            if math.isfinite(log_keep):
                s = s - side * INNER_ROUNDING * _U * (np.abs(eps) + abs(log_keep))
            c = -np.expm1(s)
            log_c = np.log(np.where(c > 0, c, 1.0))
            alpha = eps + log_q - log_c
            alpha = alpha - side * INNER_ROUNDING * _U * (np.abs(eps) + abs(log_q) + np.abs(log_c))
            val = c * base_reverse(np.where(c > 0, alpha, 0.0))
        return np.where(c > 0, val, 0.0)

    return delta


def _symmetric_base(base: Profile, q: float) -> bool:
    return base.dual is base.delta and q < 1


def _zero_top(delta: Callable[[Array], Array], hi: float, base_top_is_zero: bool) -> float:
    """The top loss raised, by at most ~1e-6 of itself, until the curve is 0 there, when the
    base is pure (its curve is 0 at its own top): the safe-side rounding of an upper curve can
    leave it positive at the rounded top, and pure composition needs the 0."""
    if not base_top_is_zero or float(delta(np.array([hi]))[0]) == 0.0:
        return hi
    step = max(abs(hi), 1e-300) * 2.0**-50
    for _ in range(30):
        if float(delta(np.array([hi + step]))[0]) == 0.0:
            return hi + step
        step *= 2.0
    return hi


def _pure_top(base: Profile) -> bool:
    return math.isfinite(base.loss_hi) and float(base(np.array([base.loss_hi]))[0]) == 0.0


def poisson_remove(base: Profile, q: float, side: float = 1.0) -> Profile:
    """(1-q)Q0 + qP0 vs Q0: delta'(eps') = q * delta0(log(1 + (e^eps' - 1)/q)); an upper curve
    (``side`` = 1) or a lower one (``side`` = -1), differing only in how rounding is charged."""
    lo = math.log1p(-q) if q < 1 else base.loss_lo
    top = base.loss_hi
    # log(1 + q (e^top - 1)) = top + log(q + (1 - q) e^{-top}), without overflow
    hi = (
        math.log1p(q * math.expm1(top))
        if top < 700
        else top + math.log(q + (1 - q) * math.exp(-top))
    )
    curve = _poisson_remove_delta(base.delta, q, side)
    if side > 0:
        hi = _zero_top(curve, hi, _pure_top(base))
    dual = _poisson_add_delta(base.delta, q, side) if _symmetric_base(base, q) else None
    # the curve at eps reads the base at a loss >= eps: accurate while that loss is
    accurate = base.accurate_hi + math.log(q) if math.isfinite(base.accurate_hi) else math.inf
    name = f"poisson_remove(q={q:g}, {base.name})"
    return Profile(curve, lo, hi, base.exact, name, dual, accurate)


def poisson_add(base_reverse: Profile, q: float, side: float = 1.0) -> Profile:
    """Q0 vs (1-q)Q0 + qP0, from the reverse base curve delta0_rev (Zhu, Dong, Wang 2022); an
    upper curve (``side`` = 1) or a lower one (``side`` = -1)."""
    # the curve is 0 once the base is read beyond its top loss T: at eps >= -log(1 - q + q e^-T)
    # (-log(1 - q) for an unbounded base)
    top = base_reverse.loss_hi
    hi = -math.log1p(q * math.expm1(-top)) if q < 1 else top
    lo_inner = base_reverse.loss_hi
    lo = -math.log1p(q * math.expm1(lo_inner)) if lo_inner < 700 else -lo_inner
    curve = _poisson_add_delta(base_reverse.delta, q, side)
    if side > 0:
        hi = _zero_top(curve, hi, q < 1 or _pure_top(base_reverse))
    symmetric = _symmetric_base(base_reverse, q)
    dual = _poisson_remove_delta(base_reverse.delta, q, side) if symmetric else None
    # below its top loss -log(1 - q) the curve reads the base at log(e^eps q / c); at q = 1 that
    # is e^eps itself
    accurate = base_reverse.accurate_hi if q < 1 else min(base_reverse.accurate_hi, ACCURATE_LOSS)
    name = f"poisson_add(q={q:g}, {base_reverse.name})"
    return Profile(curve, lo, hi, base_reverse.exact, name, dual, accurate)


#: losses above which the replace-one Poisson curve is evaluated in log space
REPLACE_ONE_TURN = 200.0
#: tails below this are near the subnormal range: the replace-one curve uses log space there
SUBNORMAL_GUARD = 1e-290


#: per-term rounding of the replace-one curve's tails, in units of U (1 + |log T|): measured
#: 1.6 (4e-9 relative at a = 1e-3, T ~ 1e-270, the terms 3.7e4 times the curve), times a margin
REPLACE_ONE_ROUNDING = 8.0
#: from this a = 1/sigma up, that rounding stays far below REL_MARGIN of the curve (measured:
#: 0.12 REL_MARGIN at a = 0.4, 0.014 at a = 1), so one curve serves as upper and lower bound
REPLACE_ONE_SHARED_A = 0.4


def replace_one_profiles(a: float, q: float) -> DirectedProfiles:
    """Both directions of Poisson sampling under replace-one (the pair is symmetric): one curve
    for a >= REPLACE_ONE_SHARED_A, else an upper curve that adds its rounding bound and a lower
    one that subtracts it (for small a the curve is a difference of nearly equal tails)."""
    if a >= REPLACE_ONE_SHARED_A:
        return symmetric_profiles(poisson_gaussian_replace_one(a, q))
    upper = poisson_gaussian_replace_one(a, q, 1.0)
    lower = poisson_gaussian_replace_one(a, q, -1.0)
    return DirectedProfiles(upper, upper, lower, lower)


def poisson_gaussian_replace_one(a: float, q: float, charge: float = 0.0) -> Profile:
    """(1-q)N(0)+qN(a) vs (1-q)N(0)+qN(-a): Poisson sampling under replace-one (symmetric).

    ``charge`` = 1 adds the bound on the rounding of the tails' difference (an upper curve),
    -1 subtracts it (a lower one), 0 leaves it to the profile's relative margin."""
    a2 = a * a

    def delta(eps: Array) -> Array:
        ex = np.exp(np.minimum(eps, 700.0))
        gap = -np.expm1(np.minimum(eps, 700.0))  # 1 - e^eps, without cancellation near 0
        b = (1 - q) * gap
        with np.errstate(over="ignore"):  # only beyond REPLACE_ONE_TURN, replaced below
            disc = np.sqrt(b * b + 4 * q * q * np.exp(np.minimum(eps - a2, 700.0)))
        with np.errstate(divide="ignore", invalid="ignore"):
            w_pos = (-b + disc) / (2 * q)
            w_neg = 2 * q * np.exp(np.minimum(eps - a2, 700.0)) / (b + disc)
            w = np.where(b < 0, w_pos, w_neg)
            v = np.log(w)
        # where w under- or overflows (|eps| or a large), the same root in log space
        lost = ~np.isfinite(v)
        if np.any(lost):
            v = np.where(lost, _replace_one_log_root(a, q, np.where(lost, eps, 0.0)), v)
        x = (v + a2 / 2) / a
        sf = special.ndtr
        p_sf = (1 - q) * sf(-x) + q * sf(-(x - a))
        q_sf = (1 - q) * sf(-x) + q * sf(-(x + a))
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            out = (1 - q) * gap * sf(-x) + q * (sf(-(x - a)) - ex * sf(-(x + a)))
            if charge:
                terms = np.abs((1 - q) * gap * sf(-x)) + q * sf(-(x - a)) + q * ex * sf(-(x + a))
                rounding = REPLACE_ONE_ROUNDING * _U * (1.0 + np.abs(np.log(terms))) * terms
                out = out + charge * np.where(np.isfinite(rounding), rounding, 0.0)
        out = np.where(np.isfinite(out), out, p_sf - ex * q_sf)
        # b * b overflows once e^eps passes ~1e154, and e^eps times a subnormal Q-tail loses its
        # digits: there, log space
        far = (eps > REPLACE_ONE_TURN) | (q_sf < SUBNORMAL_GUARD)
        if np.any(far):
            out = np.where(far, _replace_one_far(a, q, np.where(far, eps, REPLACE_ONE_TURN)), out)
        return np.asarray(np.maximum(out, 0.0), dtype=float)

    # for |x| <= a + GAUSS_SPAN (all but < 1e-23 of either law) the loss is at most
    # log(1 + e^t), t = log(q / (1 - q)) + a^2 / 2 + GAUSS_SPAN a, and at least minus that
    t = math.log(q) - math.log1p(-q) + a * a / 2 + GAUSS_SPAN * a
    hi = (t if t > 0 else 0.0) + math.log1p(math.exp(-abs(t)))
    name = f"poisson_replace_one(q={q:g}, gaussian a={a:g}{', charged' if charge else ''})"
    return Profile(delta, -hi, hi, True, name, delta, math.inf)


def _replace_one_log_root(a: float, q: float, eps: Array) -> Array:
    """log w of the boundary w = phi(x - a) / phi(x) where the replace-one loss equals eps.

    w solves q w^2 + b w - q e^{eps - a^2} = 0 with b = (1 - q)(1 - e^eps); its positive root
    is (|b| + r) / (2q) for b < 0 and 2q e^{eps - a^2} / (b + r) for b >= 0, r = sqrt(b^2 +
    4 q^2 e^{eps - a^2}); every term is taken in log space."""
    with np.errstate(divide="ignore"):
        # log |e^eps - 1|, without overflow
        log_gap = np.where(
            eps > 0, eps + np.log(-np.expm1(-np.abs(eps))), np.log(-np.expm1(-np.abs(eps)))
        )
    log_b = math.log1p(-q) + log_gap
    log_c = math.log(4 * q * q) + eps - a * a
    log_r = 0.5 * np.logaddexp(2 * log_b, log_c)
    pos = np.logaddexp(log_b, log_r) - math.log(2 * q)
    neg = math.log(2 * q) + eps - a * a - np.logaddexp(log_b, log_r)
    return np.asarray(np.where(eps > 0, pos, neg), dtype=float)


def _replace_one_far(a: float, q: float, eps: Array) -> Array:
    """The replace-one Poisson curve at large eps in log space (e^eps overflows).

    With x the boundary (:func:`_replace_one_log_root`),
    delta = P(x' > x) - e^eps Q(x' > x) = e^{log_p} (1 - e^{t2 - log_p}) with
    log_p = log((1 - q) S(x) + q S(x - a)), t2 = eps + log((1 - q) S(x) + q S(x + a)), S the
    normal tail.
    """
    x = (_replace_one_log_root(a, q, eps) + a * a / 2) / a
    log_tail = special.log_ndtr
    t2 = eps + np.logaddexp(math.log1p(-q) + log_tail(-x), math.log(q) + log_tail(-x - a))
    log_p = np.logaddexp(math.log1p(-q) + log_tail(-x), math.log(q) + log_tail(a - x))
    out = np.exp(log_p) * -np.expm1(np.minimum(t2 - log_p, 0.0))
    return np.asarray(out, dtype=float)


def self_dual(profile: Profile, exact: bool) -> Profile:
    """The curve equal to ``profile`` for eps >= 0 and to its dual extension for eps < 0.

    For a symmetric neighbouring relation the true curve is self-dual,
    delta(eps) = 1 - e^eps + e^eps delta(-eps), so an upper bound valid for eps >= 0 extends to
    all eps this way.
    """

    def delta(eps: Array) -> Array:
        pos = profile.delta(np.abs(eps))
        with np.errstate(over="ignore", invalid="ignore"):
            neg = -np.expm1(np.minimum(eps, 0.0)) + np.exp(np.minimum(eps, 0.0)) * pos
        return np.where(eps >= 0, pos, neg)

    hi = max(profile.loss_hi, -profile.loss_lo)
    name = f"self_dual({profile.name})"
    return Profile(delta, -hi, hi, exact, name, delta, profile.accurate_hi)


# -- shuffled batches: a certified lower bound from the max-of-batch-sums attack -------------
#: bins of the max-of-batch-sums statistic (binning is post-processing: any count is sound)
SHUFFLE_BINS = 4000
#: the statistic is cut where both laws keep less than this mass beyond the cut (log scale)
SHUFFLE_LOG_TAIL = -92.0
#: the top of the binned range keeps the privacy loss below this (far inside the PLD grid)
SHUFFLE_MAX_LOSS = 300.0

Noise = Literal["gaussian", "laplace"]


def _log_cdf(noise: Noise, z: np.ndarray) -> np.ndarray:
    """log P[N <= z] of standard Gaussian or Laplace (scale 1) noise."""
    if noise == "gaussian":
        return np.asarray(special.log_ndtr(z), dtype=float)
    with np.errstate(over="ignore"):
        upper = np.log1p(-0.5 * np.exp(-np.maximum(z, 0.0)))
    return np.asarray(np.where(z < 0, math.log(0.5) + np.minimum(z, 0.0), upper), dtype=float)


def _log_cdf_error(noise: Noise, z: np.ndarray, value: np.ndarray) -> np.ndarray:
    """A bound on the absolute error of :func:`_log_cdf` at the computed ``z`` (``z`` itself
    rounded once): the function's own relative error (a few units of roundoff, taken as 16)
    plus the derivative times the error of ``z``. The derivative of ``log G`` is at most 1 for
    Laplace; for the Gaussian it is the inverse Mills ratio ``phi(z) / Phi(z)``, at most
    ``|z| + 1`` for ``z < 0`` and at most ``2 phi(z)`` for ``z >= 0``."""
    if noise == "gaussian":
        slope = np.where(z < 0, np.abs(z) + 1.0, np.minimum(1.0, 2 * np.exp(-0.5 * z * z)))
    else:
        slope = np.ones_like(z)
    err = 16 * _U * np.abs(value) + 4 * _U * slope * (np.abs(z) + 1.0) + 1e-300
    return np.asarray(err, dtype=float)


def max_of_batches_log_cdf(
    x: np.ndarray,
    num_batches: int,
    scale: float,
    shift: float,
    noise: Noise,
    shifted: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """(log P[M <= x], error bound) of ``M = max`` of ``num_batches - shifted`` draws of the
    noise at 0 and ``shifted`` at ``shift`` (noise of scale ``scale``): the CDF is exact,
    ``F(x) = G(x / scale)^(T - s) G((x - shift) / scale)^s``."""
    z0 = x / scale
    z1 = (x - shift) / scale
    l0 = _log_cdf(noise, z0)
    l1 = _log_cdf(noise, z1)
    t = float(num_batches - shifted)
    s = float(shifted)
    value = t * l0 + s * l1
    err = t * _log_cdf_error(noise, z0, l0) + s * _log_cdf_error(noise, z1, l1)
    # the two products and the sum
    err = err + 4 * _U * (t * np.abs(l0) + s * np.abs(l1) + np.abs(value))
    return value, err


def _bin_masses(lf: np.ndarray, err: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) bounds of the masses of ``(-inf, x_0], (x_0, x_1], ..., (x_K, inf)`` from
    log-CDF values ``lf`` at the increasing edges, each within ``err`` of the exact value."""
    lo_f, hi_f = lf - err, lf + err
    with np.errstate(over="ignore", under="ignore"):
        first_lo = np.exp(lo_f[:1]) * (1 - 4 * _U)
        first_hi = np.minimum(1.0, np.exp(hi_f[:1]) * (1 + 4 * _U))
        # exp(b) - exp(a) = exp(b) (1 - exp(a - b)) for a < b, with a and b pushed apart
        mid_lo = np.exp(lo_f[1:]) * -np.expm1(np.minimum(hi_f[:-1] - lo_f[1:], 0.0))
        mid_hi = np.exp(hi_f[1:]) * -np.expm1(np.minimum(lo_f[:-1] - hi_f[1:], 0.0))
        last_lo = -np.expm1(np.minimum(hi_f[-1:], 0.0))
        last_hi = -np.expm1(np.minimum(lo_f[-1:], 0.0))
    lower = np.concatenate([first_lo, mid_lo * (1 - 8 * _U), last_lo * (1 - 4 * _U)])
    upper = np.concatenate([first_hi, mid_hi * (1 + 8 * _U), last_hi * (1 + 4 * _U)])
    return np.maximum(lower, 0.0), np.minimum(np.maximum(upper, 0.0), 1.0)


def _bisect(fn: Callable[[float], bool], lo: float, hi: float) -> float:
    """The boundary of a monotone predicate (False at ``lo``, True at ``hi``)."""
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if fn(mid):
            hi = mid
        else:
            lo = mid
    return hi


def max_of_batches_edges(
    num_batches: int,
    scale: float,
    shift_p: float,
    shift_q: float,
    noise: Noise,
    bins: int,
    shifted: int = 1,
) -> np.ndarray:
    """Bin edges of the max statistic: where both laws carry all but ``e^SHUFFLE_LOG_TAIL`` of
    their mass, the top cut also keeping the privacy loss near or below SHUFFLE_MAX_LOSS (the
    edges are a choice of post-processing; any choice gives a valid lower bound)."""
    shifts = (shift_p, shift_q)

    def log_cdf(x: float, m: float) -> float:
        value = max_of_batches_log_cdf(np.array([x]), num_batches, scale, m, noise, shifted)
        return float(value[0][0])

    def below(x: float) -> bool:  # both CDFs at x exceed the tail (the lower cut is below x)
        return all(log_cdf(x, m) > SHUFFLE_LOG_TAIL for m in shifts)

    def above(x: float) -> bool:  # both upper tails are below e^SHUFFLE_LOG_TAIL
        return all(
            math.log(max(-math.expm1(log_cdf(x, m)), 1e-320)) < SHUFFLE_LOG_TAIL for m in shifts
        )

    span = 200.0 * scale + abs(shift_p) + abs(shift_q) + 1.0
    x_lo = _bisect(below, min(shifts) - span, max(shifts) + span)
    x_hi = _bisect(above, x_lo, max(shifts) + span)
    gap = abs(shift_p - shift_q)
    if gap > 0:  # the privacy loss grows at most like gap x / scale^2 (Gaussian), gap / scale
        rate = gap / scale**2 if noise == "gaussian" else gap / scale
        x_hi = min(x_hi, max(shifts) + SHUFFLE_MAX_LOSS / rate)
    if not x_hi > x_lo:
        x_hi = x_lo + scale
    return np.linspace(x_lo, x_hi, bins + 1)


def max_of_batches_pair(
    num_batches: int,
    scale: float,
    shift_p: float,
    shift_q: float,
    noise: Noise = "gaussian",
    bins: int = SHUFFLE_BINS,
    shifted: int = 1,
) -> DiscretePair:
    """The binned max of the ``num_batches`` batch outputs of one epoch, under P (the differing
    batch centred at ``shift_p``, the others at 0) and Q (centred at ``shift_q``), with
    rigorous bounds on every mass. With ``shifted = s > 1``, s of the outputs (the record's s
    steps) are centred at the shift under each law."""
    edges = max_of_batches_edges(num_batches, scale, shift_p, shift_q, noise, bins, shifted)
    lp, ep = max_of_batches_log_cdf(edges, num_batches, scale, shift_p, noise, shifted)
    lq, eq = max_of_batches_log_cdf(edges, num_batches, scale, shift_q, noise, shifted)
    p_lo, p_hi = _bin_masses(lp, ep)
    q_lo, q_hi = _bin_masses(lq, eq)
    return DiscretePair(p_lo, p_hi, q_lo, q_hi)


def _lower_curve(pair: DiscretePair) -> tuple[Callable[[Array], Array], float, float]:
    """A curve below the hockey-stick curve of ``pair``'s exact masses, and its loss range.

    Each outcome contributes ``max(0, p - e^eps q) >= max(0, p_lower - e^eps q_upper)``: the
    losses ``log(p_lower / q_upper)`` are rounded down, outcomes with ``q_upper = 0`` form the
    mass at +infinity, and the suffix sums are deflated (resp. inflated) by their rounding
    error bound."""
    keep = pair.p_lower > 0
    p = pair.p_lower[keep]
    q = pair.q_upper[keep]
    inf_mass = float(p[q <= 0].sum()) * (1 - p.size * 2 * _U)
    finite = q > 0
    p, q = p[finite], q[finite]
    with np.errstate(divide="ignore"):
        lp, lq = np.log(p), np.log(q)
    losses = lp - lq
    losses = losses - 8 * _U * (np.abs(lp) + np.abs(lq) + 1.0)
    order = np.argsort(losses)
    losses, p = losses[order], p[order]
    w = p * np.exp(-losses) * (1 + 4 * _U)  # >= q (the loss was rounded down)
    # suffix sums: sp[i] = sum_{j >= i} p_j, rounded down; sw likewise, rounded up
    k = max(1, losses.size)
    sp = np.concatenate([np.cumsum(p[::-1])[::-1], [0.0]]) * (1 - 4 * k * _U)
    sw = np.concatenate([np.cumsum(w[::-1])[::-1], [0.0]]) * (1 + 4 * k * _U)

    def delta(eps: Array) -> Array:
        e = np.asarray(eps, dtype=float)
        i = np.searchsorted(losses, e, side="right")  # first loss above eps
        with np.errstate(over="ignore", invalid="ignore"):
            val = sp[i] - np.exp(e) * (1 + 4 * _U) * sw[i]
        val = np.where(np.isfinite(val), val, 0.0)
        return np.asarray(inf_mass + np.maximum(val, 0.0), dtype=float)

    if losses.size == 0:
        return delta, 0.0, 0.0
    return delta, float(losses[0]), float(losses[-1])


def lower_pair_profiles(pair: DiscretePair, name: str) -> tuple[Profile, Profile]:
    """Exact lower-bound profiles of a finite pair, in both directions: (P vs Q, Q vs P)."""
    fwd, lo_f, hi_f = _lower_curve(pair)
    rev, lo_r, hi_r = _lower_curve(pair.swapped())
    lo = min(lo_f, -hi_r)
    hi = max(hi_f, -lo_r)
    return (
        Profile(fwd, lo, hi, True, f"lower({name})", rev),
        Profile(rev, -hi, -lo, True, f"lower_swapped({name})", fwd),
    )


def larger_profile(a: Profile, b: Profile, name: str) -> Profile:
    """The pointwise larger of two lower curves of the same pair of laws (and of their duals).

    Both lie below the true curve, hence so does their maximum; as functions of ``e^eps`` on
    the whole line both are convex, and so is their maximum: it is the curve of a pair the
    true one dominates (the lower envelope of the two trade-off functions, convexified)."""

    def delta(eps: Array) -> Array:
        return np.asarray(np.maximum(a.delta(eps), b.delta(eps)), dtype=float)

    dual = None
    if a.dual is not None and b.dual is not None:
        a_dual, b_dual = a.dual, b.dual

        def dual(eps: Array) -> Array:
            return np.asarray(np.maximum(a_dual(eps), b_dual(eps)), dtype=float)

    exact = a.exact and b.exact
    accurate = min(a.accurate_hi, b.accurate_hi)
    lo, hi = min(a.loss_lo, b.loss_lo), max(a.loss_hi, b.loss_hi)
    return Profile(delta, lo, hi, exact, name, dual, accurate)


def gaussian_attack_profiles(
    max_pair: DiscretePair, mu: float, num_steps: int, name: str
) -> tuple[Profile, Profile]:
    """Lower curves (P vs Q, Q vs P) of the pair ``(1/T) sum_t N(mu e_t, I)`` vs ``N(0, I)``:
    the larger of its binned max statistic's and of its likelihood-ratio statistic's
    (:func:`~dpledger.accountant.allocation_ratio.allocation_ratio_pair`)."""
    forward, backward = lower_pair_profiles(max_pair, name)
    if num_steps < 2:
        return forward, backward
    ratio_f, ratio_b = lower_pair_profiles(allocation_ratio_pair(mu, num_steps), name)
    return (
        larger_profile(forward, ratio_f, f"lower({name}, max and ratio)"),
        larger_profile(backward, ratio_b, f"lower_swapped({name}, max and ratio)"),
    )


def identical_profile() -> Profile:
    """The curve of a pair of equal laws, max(0, 1 - e^eps): below every privacy curve."""
    d = discrete_delta(np.array([0.0]), np.array([1.0]), 0.0)
    return Profile(d, 0.0, 0.0, True, "identical", d)


def _shuffled_base(event: ShuffledBatchesEvent) -> tuple[Event, Event | None]:
    """(the event an epoch costs at most, the single noise release of a batch or None).

    The inner event runs on the one batch that holds the differing record; Gaussians on the
    same batch compose exactly into one (for the upper bound the multiplier is rounded down,
    for the lower bound's construction up).
    """
    leaves = flatten(event.event)
    if len(leaves) == 1 and leaves[0][1] == 1:
        leaf = leaves[0][0]
        return leaf, leaf if isinstance(leaf, GaussianEvent | LaplaceEvent) else None
    if leaves and all(isinstance(e, GaussianEvent) for e, _ in leaves):
        precision = math.fsum(k / e.noise_multiplier**2 for e, k in leaves)  # type: ignore[attr-defined]
        sigma = 1.0 / math.sqrt(precision)
        upper = GaussianEvent(math.nextafter(sigma * (1 - 1e-12), 0.0))
        lower = GaussianEvent(math.nextafter(sigma * (1 + 1e-12), math.inf))
        return upper, lower
    raise UnsupportedEventError(
        f"{event.describe()}: the PLD backend analyses shuffled batches that run one mechanism "
        "(or Gaussians) per batch; declare one event per batch, or use the RDP backend"
    )


def shuffled_profiles(event: ShuffledBatchesEvent, adjacency: Adjacency) -> DirectedProfiles:
    """Upper: the inner event once (each record is in exactly one batch; no amplification is
    claimed). Lower: the max-of-batch-sums attack (Chua et al. 2024), certified by exact binned
    masses; for Gaussian batches also the attack's likelihood ratio (the larger curve is kept).
    Replace-one adjacency only."""
    if adjacency.relation != "replace_one":
        raise UnsupportedEventError(SHUFFLED_NEEDS_REPLACE_ONE)
    factor = noise_factor(adjacency)
    upper_event, release = _shuffled_base(event)
    upper = base_profile(upper_event, factor)
    if release is None:
        low = identical_profile()
        return DirectedProfiles(upper, upper, low, low)
    noise: Noise = "gaussian" if isinstance(release, GaussianEvent) else "laplace"
    assert isinstance(release, GaussianEvent | LaplaceEvent)
    scale = release.noise_multiplier
    # the other records contribute -C, the differing one +C under P and -C under Q: relative to
    # the other batches the differing batch sits at 2C (= factor * C) under P and at 0 under Q
    pair = max_of_batches_pair(event.num_batches, scale, factor, 0.0, noise)
    name = f"shuffled_max(T={event.num_batches}, {noise} scale={scale:g})"
    if noise == "gaussian":  # the pair is random allocation's, mu = 2 / sigma: use its ratio
        mu = math.nextafter(factor / scale, 0.0)
        forward, backward = gaussian_attack_profiles(pair, mu, event.num_batches, name)
    else:
        forward, backward = lower_pair_profiles(pair, name)
    return DirectedProfiles(upper, upper, forward, backward)


@attrs.frozen
class DirectedProfiles:
    """Upper curves for the two directions, and curves that are valid *lower* bounds."""

    remove: Profile
    add: Profile
    lower_remove: Profile
    lower_add: Profile


def symmetric_profiles(p: Profile) -> DirectedProfiles:
    """The same curve for both directions, upper and lower (a symmetric exact mechanism)."""
    return DirectedProfiles(p, p, p, p)


def base_profile(event: Event, factor: float) -> Profile:
    """Unsampled symmetric base mechanism with contribution factor ``factor``."""
    if isinstance(event, GaussianEvent):
        return gaussian_profile(factor / event.noise_multiplier)
    if isinstance(event, LaplaceEvent):
        e0 = factor / event.noise_multiplier
        d = laplace_delta(e0)
        return Profile(d, -e0, e0, True, f"laplace(eps0={e0:g})", d)
    if isinstance(event, ExponentialMechanismEvent) and event.epsilon > 0:
        return bounded_range_profile(event.epsilon)
    if isinstance(event, PureDPEvent | ExponentialMechanismEvent | ReportNoisyMaxEvent):
        return approx_dp_profile(event.epsilon, 0.0)
    if isinstance(event, ApproxDPEvent):
        return approx_dp_profile(event.epsilon, event.delta)
    if isinstance(event, RandomizedResponseEvent):
        return randomized_response_profile(event.epsilon, event.num_buckets)
    raise UnsupportedEventError(f"no privacy profile for {event.describe()}")


def attained_base(event: Event, base: Profile) -> Profile:
    """A curve the base mechanism of ``event`` attains, for lower bounds: ``base`` (its
    :func:`base_profile`) itself, except for the exponential mechanism and report-noisy-max.

    Those are booked at epsilon; the exponential mechanism's losses span at most epsilon, so it
    never attains randomized response at epsilon (at eps' = 0 it reaches tanh(epsilon / 4), not
    tanh(epsilon / 2)), and its upper curve is :func:`bounded_range_profile`, while
    report-noisy-max keeps randomized response at epsilon. A two-candidate exponential
    mechanism whose scores are (s/2, -s/2) on one dataset and (-s/2, s/2) on its neighbour
    (each moved by the sensitivity s) outputs binary randomized response at epsilon / 2: its
    privacy loss is +-epsilon / 2, in both directions, and its curve at eps' = 0 is
    tanh(epsilon / 4), the most any such mechanism reaches. Report-noisy-max may use Laplace
    noise (the ledger's does), which on the same scores attains less:
    :func:`laplace_noisy_max_epsilon`."""
    if isinstance(event, ExponentialMechanismEvent):
        return approx_dp_profile(event.epsilon / 2.0, 0.0)
    if isinstance(event, ReportNoisyMaxEvent):
        return approx_dp_profile(laplace_noisy_max_epsilon(event.epsilon), 0.0)
    return base


def laplace_noisy_max_epsilon(eps: float) -> float:
    """The binary randomized response that report-noisy-max with Laplace noise (scale
    2 s / eps) attains on two candidates scored (s/2, -s/2) and (-s/2, s/2), rounded down:
    it picks the first with p = 1 - e^{-eps/2} (1 + eps/4) / 2 (the difference of two
    Laplace draws exceeds s with probability e^{-eps/2} (1 + eps/4) / 2), so
    log(p / (1 - p)) = log1p(g) + eps/2 - log1p(eps/4), g = 2p - 1. At eps = 1 it is 0.4935,
    below the exponential mechanism's 1/2, so it is attained with either noise."""
    g = -math.expm1(-eps / 2) - (eps / 4) * math.exp(-eps / 2)
    return max(0.0, (math.log1p(g) + eps / 2 - math.log1p(eps / 4)) * (1 - 16 * _U))


def noise_factor(adjacency: Adjacency) -> float:
    """How many add/remove sensitivities one neighbouring step moves a statistic."""
    return adjacency.sensitivity_factor


def tabulated_delta(epsilons: Array, deltas: Array) -> Callable[[Array], Array]:
    """The chord interpolation, in ``x = e^eps``, of a curve tabulated at ``epsilons``.

    A hockey-stick curve is convex and non-increasing in ``x`` with value 1 at ``x = 0``, so
    the chord through upper bounds at neighbouring points bounds it from above in between;
    below the first point the chord from ``(0, 1)`` does, and beyond the last point the last
    value does."""
    xs = np.exp(epsilons)
    ds = np.maximum.accumulate(np.asarray(deltas, dtype=float)[::-1])[::-1]  # non-increasing

    def delta(eps: Array) -> Array:
        x = np.exp(np.minimum(eps, 700.0))
        inside = np.interp(x, xs, ds)
        below = 1.0 - (1.0 - ds[0]) * x / xs[0]
        return np.where(x < xs[0], below, inside)

    return delta


def tabulated_profiles(event: TabulatedProfileEvent, adjacency: Adjacency) -> DirectedProfiles:
    """Upper curves of a tabulated profile (no lower bound: the table is only an upper
    bound); refused under another relation than the one it was tabulated for.

    Below epsilon 0 each direction's curve is read off the other direction's table:
    ``delta(eps) = 1 - e^eps + e^eps * delta_swapped(-eps)`` (the table bounds both
    directions when ``deltas_add`` is None)."""
    if adjacency.relation != event.relation:
        raise UnsupportedEventError(
            f"{event.describe()} was tabulated under {event.relation}, not "
            f"{adjacency.relation}; tabulate it under the relation of the source"
        )
    eps = np.asarray(event.epsilons, dtype=float)
    remove = tabulated_delta(eps, np.asarray(event.deltas, dtype=float))
    add = remove
    if event.deltas_add is not None:
        add = tabulated_delta(eps, np.asarray(event.deltas_add, dtype=float))
    hi = max(float(eps[-1]), 0.0)

    def profile(own: Callable[[Array], Array], swapped: Callable[[Array], Array]) -> Profile:
        def delta(values: Array) -> Array:
            neg = np.minimum(values, 0.0)
            below = -np.expm1(neg) + np.exp(neg) * np.minimum(swapped(-neg), 1.0)
            return np.where(values >= 0, own(np.maximum(values, 0.0)), below)

        name = f"tabulated({event.name or 'plugin'})"
        return Profile(delta, -hi, hi, False, name, swapped)

    up_remove = profile(remove, add)
    up_add = up_remove if add is remove else profile(add, remove)
    return DirectedProfiles(up_remove, up_add, up_remove, up_add)


def claimed_pair_below(losses: Array, masses: Array, inf_mass: float) -> Callable[[Array], Array]:
    """The curve of a discrete pair (P-masses at finite losses, P's mass at +infinity), rounded
    down: ``inf + S1 - e^eps S2`` over the losses above ``eps`` (running sums from the top),
    less a bound on its roundoff. For certified lower bounds of a pair claimed exact."""
    top = np.argsort(-losses, kind="stable")
    ls, ps = losses[top], masses[top]
    s1 = np.concatenate([[0.0], np.cumsum(ps)])
    s2 = np.concatenate([[0.0], np.cumsum(ps * np.exp(-ls))])

    def delta(eps: Array) -> Array:
        eps = np.asarray(eps, dtype=float)
        k = np.searchsorted(-ls, -eps, side="left")  # the losses above eps
        with np.errstate(over="ignore", invalid="ignore"):
            below = np.where(k > 0, np.exp(np.minimum(eps, 700.0)) * s2[k], 0.0)
        value = inf_mass + s1[k] - below
        err = (k + 8) * 4 * 2.0**-53 * (inf_mass + s1[k]) + k * 1e-100
        return np.asarray(np.maximum(0.0, value - err), dtype=float)

    return delta


def claimed_pair_profile(event: TabulatedProfileEvent) -> Profile:
    """The exact curve of the pair a table's ``tight_claim`` states (rounded down), with the
    swapped pair's curve as its dual (Q's mass where P has none is at +infinity there)."""
    assert event.tight_losses is not None and event.tight_masses is not None
    ls = np.asarray(event.tight_losses, dtype=float)
    total = math.fsum([*event.tight_masses, event.tight_inf_mass]) * (1 + 2.0**-52)
    scale = max(1.0, total)  # P's masses, scaled down to at most a probability law
    ps = np.asarray(event.tight_masses, dtype=float) / scale
    inf_mass = event.tight_inf_mass / scale
    qs = ps * np.exp(-ls)
    q_rest = max(0.0, 1.0 - math.fsum(qs.tolist()) - 1e-15)
    reach = float(np.max(np.abs(ls))) if ls.size else 0.0
    name = f"claimed_exact({event.name or 'plugin'})"
    own = claimed_pair_below(ls, ps, inf_mass)
    return Profile(own, -reach, reach, True, name, claimed_pair_below(-ls, qs, q_rest))
