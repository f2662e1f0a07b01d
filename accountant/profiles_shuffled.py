"""Profiles of shuffled batches, and lower curves of finite discrete pairs.

Upper: the inner event once per epoch. Lower: the max-of-batch-sums attack, binned with rigorous
bounds on every mass (:func:`max_of_batches_pair`), read as a dominated pair
(:func:`lower_pair_profiles`), and for Gaussians the larger of it and the likelihood-ratio
attack (:func:`gaussian_attack_profiles`).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import (
    Callable,
)
from typing import (
    Literal,
)

import numpy as np
from scipy import (
    special,
)

from dpledger.accountant.allocation_one_top import (
    allocation_one_top_pair,
    one_top_matters,
)
from dpledger.accountant.allocation_ratio import (
    allocation_ratio_pair,
)
from dpledger.accountant.discrete_pair import (
    DiscretePair,
)
from dpledger.accountant.profiles_base import (
    _U,
    Array,
    DirectedProfiles,
    Profile,
    identical_profile,
    noise_factor,
)
from dpledger.accountant.profiles_noise import (
    base_profile,
)
from dpledger.core.adjacency import (
    Adjacency,
)
from dpledger.core.errors import (
    UnsupportedEventError,
)
from dpledger.core.events import (
    SHUFFLED_NEEDS_REPLACE_ONE,
    Event,
    GaussianEvent,
    LaplaceEvent,
    ShuffledBatchesEvent,
    flatten,
)

__all__ = [
    "SHUFFLE_BINS",
    "SHUFFLE_LOG_TAIL",
    "SHUFFLE_MAX_LOSS",
    "Noise",
    "gaussian_attack_profiles",
    "larger_profile",
    "lower_pair_profiles",
    "max_of_batches_edges",
    "max_of_batches_log_cdf",
    "max_of_batches_pair",
    "shuffled_base",
    "shuffled_profiles",
]


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
    plus the derivative times the error of ``z``. The derivative of ``log G`` for Laplace is 1
    for ``z < 0`` and ``e^-z / (2 - e^-z) <= e^-z`` for ``z >= 0`` (taken twice over: the
    error then stays relative where ``G`` is within ``e^-z`` of 1, so the far upper tails keep
    their masses); for the Gaussian it is the inverse Mills ratio ``phi(z) / Phi(z)``, at most
    ``|z| + 1`` for ``z < 0`` and at most ``2 phi(z)`` for ``z >= 0``."""
    if noise == "gaussian":
        slope = np.where(z < 0, np.abs(z) + 1.0, np.minimum(1.0, 2 * np.exp(-0.5 * z * z)))
    else:
        slope = np.minimum(1.0, 2 * np.exp(-np.maximum(z, 0.0)))
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
    max_pair: DiscretePair, mu: float, num_steps: int, name: str, *, one_top: bool = False
) -> tuple[Profile, Profile]:
    """Lower curves (P vs Q, Q vs P) of the pair ``(1/T) sum_t N(mu e_t, I)`` vs ``N(0, I)``:
    the larger of its binned max statistic's and of its likelihood-ratio statistic's
    (:func:`~dpledger.accountant.allocation_ratio.allocation_ratio_pair`, and with ``one_top``,
    where one large output matters,
    :func:`~dpledger.accountant.allocation_one_top.allocation_one_top_pair`)."""
    forward, backward = lower_pair_profiles(max_pair, name)
    if num_steps < 2 or mu * mu > 700.0:  # e^(mu^2), the ratio's variance, would overflow
        return forward, backward
    pairs = [allocation_ratio_pair(mu, num_steps)]
    if one_top and one_top_matters(mu, num_steps):  # and one large output resolved
        # an extra lower curve that cannot be made is left out, never fatal
        with contextlib.suppress(ArithmeticError, ValueError):
            pairs.append(allocation_one_top_pair(mu, num_steps))
    for pair in pairs:
        ratio_f, ratio_b = lower_pair_profiles(pair, name)
        forward = larger_profile(forward, ratio_f, f"lower({name}, max and ratio)")
        backward = larger_profile(backward, ratio_b, f"lower_swapped({name}, max and ratio)")
    return forward, backward


def shuffled_base(event: ShuffledBatchesEvent) -> tuple[Event, Event | None]:
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
    upper_event, release = shuffled_base(event)
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
