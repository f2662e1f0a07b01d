"""Exact privacy profiles of the canonical neighbouring pairs used by the auditor.

These closed forms are the audit's "exact confirmation" step and the claims of the planted
bugs; they are independent of the accountant backends. ``delta(eps)`` is the hockey-stick
divergence ``sup_S Pr[A in S] - e^eps Pr[B in S]`` of the named ordered pair ``(A, B)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from scipy import special

from dpledger.core.errors import InvalidParameterError


def _phi(x: float) -> float:
    return float(special.ndtr(x))


def _exp_phi(eps: float, x: float) -> float:
    """``e^eps * Phi(x)`` without overflow."""
    return math.exp(eps + float(special.log_ndtr(x)))


def gaussian_delta(eps: float, mu: float) -> float:
    """Balle–Wang analytic profile of ``N(mu, 1)`` vs ``N(0, 1)`` (symmetric in the order)."""
    if mu <= 0:
        return max(0.0, 1.0 - math.exp(eps)) if eps < 0 else 0.0
    return max(0.0, _phi(-eps / mu + mu / 2) - _exp_phi(eps, -eps / mu - mu / 2))


def laplace_delta(eps: float, eps0: float) -> float:
    """Profile of ``Lap(Delta, b)`` vs ``Lap(0, b)`` with ``eps0 = Delta / b``."""
    if eps >= eps0:
        return 0.0
    if eps >= -eps0:
        return -math.expm1((eps - eps0) / 2)
    return -math.expm1(eps)


def subsampled_gaussian_delta(eps: float, q: float, sigma: float, direction: str) -> float:
    """Profile of one Poisson-subsampled Gaussian step (sensitivity 1, add/remove).

    ``direction='remove'`` is ``((1-q) N(0, s^2) + q N(1, s^2), N(0, s^2))``; ``'add'`` is the
    reverse order. The privacy loss is monotone in the output, so the optimal event is a
    half-line and the hockey stick has a closed form.
    """
    if not (0.0 <= q <= 1.0 and sigma > 0):
        raise InvalidParameterError("q", f"need 0 <= q <= 1, sigma > 0; got {q}, {sigma}", "fix")
    if q == 0.0:
        return max(0.0, -math.expm1(eps))
    s2 = sigma * sigma
    if direction == "remove":
        arg = math.expm1(eps) + q
        if arg <= 0:
            return -math.expm1(eps)
        x = s2 * math.log(arg / q) + 0.5
        p_a = (1 - q) * _phi(-x / sigma) + q * _phi((1 - x) / sigma)
        return max(0.0, p_a - _exp_phi(eps, -x / sigma))
    if direction == "add":
        arg = math.expm1(-eps) + q
        if arg <= 0:
            return 0.0
        x = s2 * math.log(arg / q) + 0.5
        p_b = (1 - q) * _exp_phi(eps, x / sigma) + q * _exp_phi(eps, (x - 1) / sigma)
        return max(0.0, _phi(x / sigma) - p_b)
    raise InvalidParameterError("direction", f"unknown {direction!r}", "use 'add' or 'remove'")


def subsampled_pure_epsilon(eps0: float, q: float, direction: str) -> float:
    """Pure epsilon of a Poisson-subsampled ``eps0``-DP mechanism in one direction."""
    if direction == "remove":
        return math.log1p(q * math.expm1(eps0))
    if direction == "add":
        return -math.log1p(-q * -math.expm1(-eps0))
    raise InvalidParameterError("direction", f"unknown {direction!r}", "use 'add' or 'remove'")


def epsilon_for_delta(
    profile: Callable[[float], float], delta: float, hi: float = 1.0, tol: float = 1e-12
) -> float:
    """Smallest ``eps >= 0`` with ``profile(eps) <= delta`` (bisection; returns the upper end)."""
    if profile(0.0) <= delta:
        return 0.0
    while profile(hi) > delta:
        hi *= 2.0
        if hi > 1e6:
            return math.inf
    lo = 0.0
    while hi - lo > tol * max(1.0, hi):
        mid = 0.5 * (lo + hi)
        if profile(mid) > delta:
            lo = mid
        else:
            hi = mid
    return hi


def gaussian_epsilon(mu: float, delta: float) -> float:
    """Exact epsilon(delta) of the Gaussian mechanism with ``mu = Delta / sigma``."""
    return epsilon_for_delta(lambda e: gaussian_delta(e, mu), delta)


def subsampled_gaussian_epsilon(
    q: float, sigma: float, delta: float, directions: tuple[str, ...] = ("add", "remove")
) -> float:
    """Exact epsilon(delta) of one subsampled Gaussian step, worst of ``directions``."""
    out = 0.0
    for direction in directions:

        def profile(eps: float, direction: str = direction) -> float:
            return subsampled_gaussian_delta(eps, q, sigma, direction)

        out = max(out, epsilon_for_delta(profile, delta))
    return out
