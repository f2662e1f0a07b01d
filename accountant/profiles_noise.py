"""Profiles of unsampled base mechanisms: Gaussian, Laplace, pure and approximate DP, bounded
range (exponential mechanism), randomized response.

Noise is in units of the per-unit add/remove contribution bound ``C``; the adjacency supplies the
factor 2 of replace-one (see :func:`~dpledger.accountant.leaves.leaf_profiles`).
"""

from __future__ import annotations

import math
from collections.abc import (
    Callable,
)

import numpy as np
from scipy import (
    special,
)

from dpledger.accountant.profiles_base import (
    _U,
    GAUSS_SPAN,
    Array,
    InfinitySplit,
    Profile,
    discrete_delta,
    gauss_span,
)
from dpledger.core.errors import (
    UnsupportedEventError,
)
from dpledger.core.events import (
    ApproxDPEvent,
    Event,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    PureDPEvent,
    RandomizedResponseEvent,
    ReportNoisyMaxEvent,
)

__all__ = [
    "approx_dp_profile",
    "attained_base",
    "base_profile",
    "bounded_range_profile",
    "gaussian_delta",
    "gaussian_profile",
    "laplace_delta",
    "laplace_noisy_max_epsilon",
    "randomized_response_profile",
]


def _log_ndtr_diff_delta(a: Array, eps: Array, mu: float) -> Array:
    """Phi(a) - e^eps Phi(a - mu), computed without cancellation.

    It is Phi(a) (1 - e^diff) with diff = eps + log Phi(a - mu) - log Phi(a). Where a < -1
    the two logs are large and nearly equal (small mu): with Phi(z) = erfcx(-z/sqrt 2)
    e^{-z^2/2} / 2 their Gaussian parts cancel exactly against eps, leaving
    diff = [eps - mu (mu/2 - a)] + log(erfcx((mu - a)/sqrt 2) / erfcx(-a/sqrt 2)).
    Each point's value depends on that point alone (the same arithmetic whether it comes alone
    or in an array); a grid, on which the deep points are one run at one end, is read in slices.
    """
    a = np.asarray(a, dtype=np.float64)
    eps = np.asarray(eps, dtype=float)
    if a.shape != eps.shape:
        a, eps = np.broadcast_arrays(a, eps)
    la = np.asarray(special.log_ndtr(a), dtype=np.float64)
    deep = a < -1.0
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        n, k = a.size, int(np.count_nonzero(deep))
        # each point's diff by one of the two forms (the other is not computed there)
        if a.ndim == 1 and deep[n - k :].all():  # increasing losses: the deep points last
            diff = np.empty(n)
            diff[: n - k] = _near_diff(a[: n - k], eps[: n - k], la[: n - k], mu)
            diff[n - k :] = _deep_diff(a[n - k :], eps[n - k :], mu)
        elif a.ndim == 1 and deep[:k].all():  # decreasing losses: the deep points first
            diff = np.empty(n)
            diff[:k] = _deep_diff(a[:k], eps[:k], mu)
            diff[k:] = _near_diff(a[k:], eps[k:], la[k:], mu)
        else:
            diff = np.empty(a.shape)
            near = ~deep
            diff[near] = _near_diff(a[near], eps[near], la[near], mu)
            diff[deep] = _deep_diff(a[deep], eps[deep], mu)
        # exp(la) * -expm1(min(diff, 0)), in place (the same operations)
        gap = np.asarray(np.minimum(diff, 0.0), dtype=np.float64)
        np.expm1(gap, out=gap)
        np.negative(gap, out=gap)
        out = np.exp(la, out=la)  # la is not read again
        out *= gap
    out[diff >= 0] = 0.0
    return out


def _near_diff(a: Array, eps: Array, la: Array, mu: float) -> Array:
    """diff of :func:`_log_ndtr_diff_delta` where a >= -1, from the two log-CDFs."""
    return np.asarray(eps + special.log_ndtr(a - mu) - la, dtype=np.float64)


def _deep_diff(a: Array, eps: Array, mu: float) -> Array:
    """diff of :func:`_log_ndtr_diff_delta` where a < -1, from the ratio of the two erfcx."""
    e_near = special.erfcx(-a / math.sqrt(2))
    e_far = special.erfcx((mu - a) / math.sqrt(2))
    # (eps - mu (mu / 2 - a)) + log1p((e_far - e_near) / e_near), in place (the same operations)
    ratio = np.subtract(e_far, e_near, out=e_far)
    ratio /= e_near
    np.log1p(ratio, out=ratio)
    shift = np.subtract(mu / 2, a, out=e_near)  # e_near is not read again
    shift *= mu
    out = np.subtract(eps, shift, out=shift)
    out += ratio
    return np.asarray(out, dtype=np.float64)


def gaussian_delta(mu: float) -> Callable[[Array], Array]:
    """Exact profile of N(mu, 1) vs N(0, 1) (Balle & Wang 2018, Thm 8); symmetric."""

    def delta(eps: Array) -> Array:
        a = -eps / mu + mu / 2
        return _log_ndtr_diff_delta(a, eps, mu)

    return delta


def gaussian_profile(mu: float, span: float = GAUSS_SPAN) -> Profile:
    """The Gaussian curve on the losses within ``span`` standard deviations (``mu``) of the
    mean ``mu^2 / 2``: beyond its top the P-mass is ``Phi(-span)``, which bounds the curve
    there; widened for a tail level by :func:`~dpledger.accountant.profiles_base.gauss_span`."""
    lo = mu * mu / 2 - span * mu
    hi = mu * mu / 2 + span * mu
    d = gaussian_delta(mu)

    def widen(level: float) -> Profile:
        return gaussian_profile(mu, max(span, gauss_span(level)))

    # the curve is evaluated in log space: accurate at every loss
    name = f"gaussian(mu={mu:.6g})"
    if span != GAUSS_SPAN:
        name = f"gaussian(mu={mu:.6g}, z={span:.4g})"
    return Profile(d, min(lo, -hi), hi, True, name, d, math.inf, widen)


def laplace_delta(eps0: float) -> Callable[[Array], Array]:
    """Exact profile of Laplace noise with eps0 = sensitivity/scale (symmetric)."""

    def delta(eps: Array) -> Array:
        mid = -np.expm1((np.clip(eps, -eps0, eps0) - eps0) / 2)
        low = -np.expm1(np.minimum(eps, 0.0))  # read only below -eps0
        return np.where(eps >= eps0, 0.0, np.where(eps <= -eps0, low, mid))

    return delta


def approx_dp_profile(eps0: float, delta0: float) -> Profile:
    """Tight pair for a black-box (eps0, delta0)-DP release (Kairouz, Oh, Viswanath 2015).

    With probability ``delta0`` it gives an outcome only one law can give, and otherwise
    randomized response at ``eps0``: for ``delta0 > 0`` the curve names that split
    (:class:`~dpledger.accountant.profiles_base.InfinitySplit`, the mass exactly ``delta0``
    and the finite part normalised), so that lower bounds keep the mass at +infinity."""
    losses = np.array([eps0, -eps0])
    if eps0 <= 700.0:
        ex = math.exp(eps0)
        masses = (1 - delta0) * np.array([ex / (1 + ex), 1 / (1 + ex)])
    else:  # e^eps0 would overflow: the same masses from e^-eps0
        small = math.exp(-eps0)
        masses = (1 - delta0) * np.array([1 / (1 + small), small / (1 + small)])
    d = discrete_delta(losses, masses, delta0)
    name = f"approx_dp({eps0:g},{delta0:g})"
    if not delta0 > 0.0:
        return Profile(d, -eps0, eps0, True, name, d)
    finite = approx_dp_profile(eps0, 0.0)
    return InfinitySplit(
        d, -eps0, eps0, True, name, d, finite=finite, inf_lower=min(float(delta0), 1.0)
    )


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
