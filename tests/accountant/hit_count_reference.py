"""Semi-analytic reference for many steps of the Poisson-subsampled Gaussian with heavy hits.

Given ``k`` of ``T`` steps that sample the differing record (``k ~ Binomial(T, q)``), the remove
direction's privacy loss is a sum of ``k`` hit losses ``log(1 - q + q e^Z)``, ``Z ~ N(eta^2/2,
eta^2)``, and ``T - k`` miss losses of the same form with ``Z ~ N(-eta^2/2, eta^2)``. When
``eta^2`` is large each hit loss is ``log q + Z`` up to ``e^{-Z}/q``, and each miss loss is
``log(1 - q)`` up to ``q e^Z``; both corrections are bounded on a 20-sigma event, whose
complement is charged. So ``delta(eps)`` lies between two sums over ``k`` of Gaussian profiles,
evaluated here in the epsilon domain at 60 digits with exact binomial weights (no cancellation
guard, no float rounding, no cut chosen from delta), and ``eps(delta)`` between their roots.
"""

from __future__ import annotations

import mpmath

__all__ = ["reference_delta", "reference_epsilon"]

CUT_SIGMAS = 20


def _gaussian(x: mpmath.mpf, mu: mpmath.mpf) -> mpmath.mpf:
    """delta(x) of the Gaussian mechanism of GDP parameter mu (Balle and Wang 2018)."""
    return mpmath.ncdf(-x / mu + mu / 2) - mpmath.exp(x) * mpmath.ncdf(-x / mu - mu / 2)


def reference_delta(q: float, sigma: float, steps: int, eps: float) -> tuple[float, float]:
    """(lower, upper) bound on delta(eps) of ``steps`` remove-direction steps."""
    with mpmath.workdps(60):
        qm, eta, e = mpmath.mpf(q), 1 / mpmath.mpf(sigma), mpmath.mpf(eps)
        half = eta * eta / 2
        z1, z0 = half - CUT_SIGMAS * eta, -half + CUT_SIGMAS * eta
        hit_hi = mpmath.log(qm + (1 - qm) * mpmath.exp(-z1))
        miss_hi = mpmath.log(1 - qm + qm * mpmath.exp(z0))
        hit_lo, miss_lo = mpmath.log(qm), mpmath.log(1 - qm)
        lower = upper = mpmath.mpf(0)
        seen = mpmath.mpf(0)
        k = 0
        while True:
            w = mpmath.binomial(steps, k) * qm**k * (1 - qm) ** (steps - k)
            seen += w
            if k == 0:
                m = steps * miss_hi
                upper += w * max(0, 1 - mpmath.exp(e - m))
            else:
                mu = eta * mpmath.sqrt(k)
                lower += w * _gaussian(e - k * hit_lo - (steps - k) * miss_lo, mu)
                upper += w * _gaussian(e - k * hit_hi - (steps - k) * miss_hi, mu)
            k += 1
            if k > steps or (k > steps * q and w < mpmath.mpf(10) ** -80):
                break
        charge = (steps * qm + steps) * mpmath.ncdf(-CUT_SIGMAS)
        upper += (1 - seen) + charge
        return float(lower), float(upper)


def _root(curve: object, delta: float, hi: float) -> float:
    """The epsilon in [0, hi] where the non-increasing ``curve`` crosses ``delta``."""
    assert callable(curve)
    lo = 0.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if curve(mid) > delta:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-9 * hi:
            break
    return 0.5 * (lo + hi)


def reference_epsilon(
    q: float, sigma: float, steps: int, delta: float, hi: float
) -> tuple[float, float]:
    """(lower, upper) bound on eps(delta) of the remove direction (``hi``: an epsilon beyond
    both roots)."""
    low = _root(lambda e: reference_delta(q, sigma, steps, e)[0], delta, hi)
    high = _root(lambda e: reference_delta(q, sigma, steps, e)[1], delta, hi)
    return low, high
