"""Independent references for sampling without replacement under replace-one (Gaussian base).

The attained pair of one step (all other records contribute -C, the replaced record +C in one
dataset and -C in the other) is, after a public shift, ``A = ((1 - q) N(0, s^2) + q N(2, s^2),
N(0, s^2))``; its reverse ``B`` is the same pair swapped. The tight dominating pair of one step
is their join: the symmetric pair whose privacy-loss law is A's on positive losses and its
mirror image ``w(-t) = e^-t w(t)`` on negative ones (the self-dual extension of A's curve). The
pmfs below are built on a loss grid of step ``h`` from normal distribution functions alone and
handed to dp-accounting's PLD, which composes them: rounded up (``pessimistic``) they dominate
the pair, rounded down they are dominated by it.
"""

from __future__ import annotations

import itertools
import math

import mpmath
import numpy as np
from dp_accounting.pld import privacy_loss_distribution as dpa_pld
from numpy.typing import NDArray
from scipy import special

__all__ = [
    "attained_pair_delta",
    "attained_pair_pld",
    "join_pair_pld",
    "mixture_hockey_stick",
]

Array = NDArray[np.float64]


def _a_loss_masses(sigma: float, q: float, h: float, pessimistic: bool) -> tuple[int, Array, float]:
    """A's privacy-loss law under P on the grid i * h: (first index, masses, mass above the grid).

    L(y) = log(1 - q + q e^{(2y - 2)/s^2}) is increasing in the output y, so the mass of L in a
    cell is the P-mass of y between the cell's preimages; pessimistic rounding puts it on the
    cell's upper end, optimistic rounding on its lower end."""
    lo_loss = math.log1p(-q)
    top = math.log1p(q * math.expm1((2 * (2 + 10 * sigma) - 2) / sigma**2))
    i_lo, i_hi = math.floor(lo_loss / h), math.ceil(top / h)
    t = np.arange(i_lo, i_hi + 1) * h
    with np.errstate(divide="ignore", invalid="ignore"):
        y = 1 + sigma**2 / 2 * np.log((np.expm1(t) + q) / q)  # e^t - (1 - q) = expm1(t) + q
    y = np.where(t <= lo_loss, -np.inf, y)
    cdf = (1 - q) * special.ndtr(y / sigma) + q * special.ndtr((y - 2) / sigma)
    cells = np.diff(cdf)  # mass of L in (t_i, t_{i+1}]
    above = float(1.0 - cdf[-1])
    if pessimistic:
        return i_lo + 1, np.maximum(cells, 0.0), above
    return i_lo, np.maximum(cells, 0.0), 0.0


def attained_pair_pld(
    sigma: float, q: float, h: float, *, pessimistic: bool
) -> dpa_pld.PrivacyLossDistribution:
    """The attained pairs A (remove direction) and B (add direction) as one dp-accounting PLD:
    its epsilon is the larger of the two directions' (the accountant's lower-bound pairs)."""
    first, masses, above = _a_loss_masses(sigma, q, h, pessimistic)
    remove = {first + i: float(m) for i, m in enumerate(masses) if m > 0}
    # B = (Q, P): its loss is -L, its law under Q has masses e^{-L} dP at -L
    losses = (first + np.arange(len(masses))) * h
    add_masses = masses * np.exp(-losses)
    add = {-(first + i): float(m) for i, m in enumerate(add_masses) if m > 0}
    return dpa_pld.PrivacyLossDistribution.create_from_rounded_probability(
        remove, above, h, pessimistic, add, 0.0, symmetric=False
    )


def join_pair_pld(
    sigma: float, q: float, h: float, *, pessimistic: bool
) -> dpa_pld.PrivacyLossDistribution:
    """The symmetric pair whose curve is A's for eps >= 0 and its self-dual extension below."""
    first, masses, above = _a_loss_masses(sigma, q, h, pessimistic)
    index = first + np.arange(len(masses))
    pos = index > 0
    w = {int(i): float(m) for i, m in zip(index[pos], masses[pos], strict=True) if m > 0}
    for i, m in list(w.items()):
        w[-i] = m * math.exp(-i * h)
    w[0] = max(0.0, 1.0 - above - sum(w.values()))
    return dpa_pld.PrivacyLossDistribution.create_from_rounded_probability(
        w, above, h, pessimistic, symmetric=True
    )


def attained_pair_delta(sigma: float, q: float, eps: float, *, reverse: bool = False) -> float:
    """H_eps of A (or, ``reverse``, of B) from normal tails at 60 digits (mpmath)."""
    with mpmath.workdps(60):
        s, qq, e = mpmath.mpf(sigma), mpmath.mpf(q), mpmath.mpf(eps)
        if reverse:  # H_eps(Q || P) = 1 - e^eps + e^eps H_{-eps}(P || Q)
            value = 1 - mpmath.exp(e) + mpmath.exp(e) * _a_delta_mp(s, qq, -e)
        else:
            value = _a_delta_mp(s, qq, e)
        return max(0.0, float(value))  # a cancelled 0 may come out as -1e-62


def _sf(x: mpmath.mpf) -> mpmath.mpf:
    return mpmath.erfc(x / mpmath.sqrt(2)) / 2


def _a_delta_mp(s: mpmath.mpf, qq: mpmath.mpf, e: mpmath.mpf) -> mpmath.mpf:
    ee = mpmath.exp(e)
    if ee <= 1 - qq:  # the loss is at least log(1 - q) >= eps: H = 1 - e^eps
        return 1 - ee
    y = 1 + s**2 / 2 * mpmath.log((ee - 1 + qq) / qq)
    return (1 - qq) * _sf(y / s) + qq * _sf((y - 2) / s) - ee * _sf(y / s)


def mixture_hockey_stick(
    centres_p: Array, centres_q: Array, sigma: float, eps: float, dps: int = 40
) -> float:
    """H_eps of two equal-weight mixtures of N(c, s^2) (one weight per listed centre).

    The sign changes of log p - log q - eps are located on a fine grid and refined by mpmath
    root finding; H is then the sum, over the intervals where p > e^eps q, of P(I) - e^eps Q(I)
    from normal distribution functions at ``dps`` digits."""
    cp, wp = np.unique(np.asarray(centres_p, dtype=float), return_counts=True)
    cq, wq = np.unique(np.asarray(centres_q, dtype=float), return_counts=True)
    wp, wq = wp / wp.sum(), wq / wq.sum()
    lo = float(min(cp.min(), cq.min())) - 40 * sigma
    hi = float(max(cp.max(), cq.max())) + 40 * sigma
    x = np.linspace(lo, hi, 40_001)

    def log_dens(v: Array, cs: Array, ws: Array) -> Array:
        z = -((v[:, None] - cs) ** 2) / (2 * sigma**2)
        return np.asarray(special.logsumexp(z, axis=1, b=ws), dtype=float)

    g = log_dens(x, cp, wp) - log_dens(x, cq, wq) - eps
    flips = np.nonzero(np.sign(g[1:]) != np.sign(g[:-1]))[0]
    with mpmath.workdps(dps):
        s, ee = mpmath.mpf(sigma), mpmath.exp(mpmath.mpf(eps))
        part_p = [(mpmath.mpf(float(c)), mpmath.mpf(float(w))) for c, w in zip(cp, wp, strict=True)]
        part_q = [(mpmath.mpf(float(c)), mpmath.mpf(float(w))) for c, w in zip(cq, wq, strict=True)]

        def dens(v: mpmath.mpf, part: list[tuple[mpmath.mpf, mpmath.mpf]]) -> mpmath.mpf:
            return mpmath.fsum(w * mpmath.npdf(v, c, s) for c, w in part)

        def mp_g(v: mpmath.mpf) -> mpmath.mpf:
            return dens(v, part_p) - ee * dens(v, part_q)

        def mass(
            part: list[tuple[mpmath.mpf, mpmath.mpf]], a: mpmath.mpf, b: mpmath.mpf
        ) -> mpmath.mpf:
            return mpmath.fsum(w * (mpmath.ncdf(b, c, s) - mpmath.ncdf(a, c, s)) for c, w in part)

        roots = [mpmath.findroot(mp_g, (x[i], x[i + 1]), solver="anderson") for i in flips]
        total = mpmath.mpf(0)
        for a, b in itertools.pairwise([mpmath.ninf, *roots, mpmath.inf]):
            if mpmath.isfinite(a) and mpmath.isfinite(b):
                probe = (a + b) / 2
            elif mpmath.isfinite(b):
                probe = b - 1
            elif mpmath.isfinite(a):
                probe = a + 1
            else:
                probe = mpmath.mpf(0)
            if mp_g(probe) > 0:
                total += mass(part_p, a, b) - ee * mass(part_q, a, b)
        return float(total)
