"""Attained lower bounds of exponential-mechanism releases at many distinct epsilons.

Each release at ``eps_i`` admits the two-candidate exponential mechanism ``GRR(t_i)``
(:mod:`~dpledger.accountant.exp_mech_composition`, claim 1 of its proof), here at one common
ratio ``t_i = c eps_i``. Their non-adaptive composition is a concrete pair ``(P, Q)``, so for
every set ``S`` of its outcomes ``P(S) - e^eps Q(S)`` is at most its curve at ``eps``
(the hockey-stick divergence is a supremum over sets), hence at most the worst case of the
ledger. The sets used are ``S_m = {K <= m}`` with ``K = sum k_i J_i``: ``J_i`` the indicator
of release ``i``'s low outcome (loss ``t_i - eps_i``) and ``k_i = round(eps_i / h)`` its
epsilon in lattice units, so ``K h`` is the composed loss's deficit ``sum eps_i J_i`` up to
rounding (the rounding only makes the sets slightly worse tests: it costs tightness, never
validity). The laws of ``K`` under ``P`` and ``Q`` are convolved one release at a time on
``0..M`` (masses shifted beyond ``M`` never come back; an epsilon booked many times enters as
one binomial kernel), every ``P`` mass rounded down and every ``Q`` mass up. The ratio ``c``
is searched on a coarse lattice, then evaluated on a fine one: every ``c`` gives a certified
bound, so the search needs no accuracy. The proof is
``proofs_checks/exp_mech_composition/proof.md`` (section "Distinct epsilons").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from scipy import special

from dpledger.accountant.golden_section import golden_section
from dpledger.accountant.nonnegative_convolution import nonnegative_convolve

__all__ = [
    "HET_MAX_COUNT",
    "heterogeneous_cumulative",
    "heterogeneous_delta_lower",
    "heterogeneous_epsilon_lower",
]

U = 2.0**-53
#: the smallest subnormal: the absolute error of one rounding of a result below the normals
TINY = 5e-324
#: the smallest normal double
NORMAL = 2.2250738585072014e-308
#: at most this many releases (the largest epsilons first: a sub-composition)
HET_MAX_COUNT = 2_000
#: releases at epsilons outside this range are left out (a sub-composition)
EPS_RANGE = (1e-100, 40.0)
#: lattice units per largest epsilon: while searching c, and for the reported value
SEARCH_GRID, FINAL_GRID = 8, 32
#: the ratio c = t / eps: its search interval, coarse grid and golden-section steps
C_RANGE = (0.02, 0.98)
C_GRID = 9
GOLDEN_STEPS = 12
#: releases at one epsilon this many times or more enter as one binomial kernel
BINOMIAL_FROM = 16
#: the search for c merges neighbouring epsilons into this many
PROXY_GROUPS = 24

_Releases = list[tuple[float, int]]


def _releases(releases: Sequence[tuple[float, int]]) -> _Releases:
    """(eps, count) kept: in range, the largest first, at most HET_MAX_COUNT in all."""
    kept: _Releases = []
    room = HET_MAX_COUNT
    for eps, count in sorted(releases, key=lambda r: -r[0]):
        if room <= 0:
            break
        if EPS_RANGE[0] <= eps <= EPS_RANGE[1] and count > 0:
            kept.append((eps, min(count, room)))
            room -= kept[-1][1]
    return kept


def _masses(c: float, eps: float) -> tuple[float, float, float, float, float]:
    """(t, P low mass and P high mass rounded down, Q low and Q high rounded up) of
    ``GRR(t)``, ``t = fl(c eps)`` (the pair is defined by the rounded ``t``)."""
    t = c * eps
    norm = -math.expm1(-eps)
    q_low = -math.expm1(-t) / norm
    q_high = math.exp(-t) * -math.expm1(-(eps - t)) / norm
    p_low = q_low * math.exp(t - eps)
    p_high = -math.expm1(-(eps - t)) / norm
    err = 16 * U * (2.0 + eps)
    down, up = 1 - err, 1 + err
    return t, p_low * down, p_high * down, min(q_low * up, 1.0), min(q_high * up, 1.0)


def heterogeneous_cumulative(
    releases: Sequence[tuple[float, int]], c: float, grid: int
) -> tuple[np.ndarray, np.ndarray]:
    """(P[K <= m] rounded down, Q[K <= m] rounded up), m = 0..M, of the composition of
    ``GRR(c eps_i)`` over the (already filtered) ``releases``."""
    h = max(e for e, _ in releases) / grid
    total = math.fsum(e * n for e, n in releases)
    units = sum(round(e / h) * n for e, n in releases)
    size = min(units, math.ceil(c * total / h) + 4 * grid) + 1
    p_mass, q_mass = np.zeros(size), np.zeros(size)
    p_mass[0] = q_mass[0] = 1.0
    rel, absolute = 0.0, 0.0  # relative and absolute (per entry) error bounds so far
    for eps, count in releases:
        k = round(eps / h)
        _, p_low, p_high, q_low, q_high = _masses(c, eps)
        if count >= BINOMIAL_FROM and 0 < k < size:
            p_mass, p_err = _strided(p_mass, _binomial(p_low, p_high, count, size // k, -1), k)
            q_mass, q_err = _strided(q_mass, _binomial(q_low, q_high, count, size // k, 1), k)
            rel += max(p_err, q_err)
            absolute += NORMAL * (count + 2.0)  # as if a product library flushed subnormals
            continue
        for _ in range(count):
            p_mass, q_mass = _shift(p_mass, p_low, p_high, k), _shift(q_mass, q_low, q_high, k)
        # two products and a sum per entry and step: (1 + u)^2, and TINY / 2 per product
        rel += 2 * U * count
        absolute += TINY * count
    # the cumulative sums of at most size non-negative terms; the factor 2 covers the
    # products of the relative errors
    rel = 2 * (rel + U * (size + 4))
    floor = absolute * 2 * np.arange(1.0, size + 1.0) + TINY
    p_cum = np.cumsum(p_mass) * (1 - rel) - floor
    q_cum = np.minimum(np.cumsum(q_mass) * (1 + rel) + floor, 1.0 + rel)
    return p_cum, q_cum


def _shift(mass: np.ndarray, low: float, high: float, k: int) -> np.ndarray:
    """One release: mass ``high`` stays, mass ``low`` moves ``k`` units up (truncated)."""
    out = mass * high
    if k < mass.size:
        out[k:] += mass[: mass.size - k] * low
    return out


def _binomial(low: float, high: float, n: int, top: int, side: int) -> np.ndarray:
    """``C(n, j) high^(n-j) low^j`` for j = 0..min(n, top), rounded down (``side`` -1) or up
    (``side`` 1, with the smallest subnormal added for an underflow), from logarithms whose
    absolute errors are charged: ``gammaln`` (64u of the magnitudes), the two logarithms
    (one rounding each, times the multiplicities) and the sum (8u of the magnitudes)."""
    j = np.arange(min(n, top) + 1, dtype=np.float64)
    lg_n = float(special.gammaln(n + 1.0))
    lg_j: np.ndarray = special.gammaln(j + 1.0)
    lg_r: np.ndarray = special.gammaln(n - j + 1.0)
    log_high, log_low = math.log(high), math.log(low)
    log_w = lg_n - lg_j - lg_r + (n - j) * log_high + j * log_low
    err = 64 * U * (abs(lg_n) + np.abs(lg_j) + np.abs(lg_r) + 4.0)
    err += 8 * U * ((n - j) * (abs(log_high) + 1.0) + j * (abs(log_low) + 1.0))
    err += 8 * U * (np.abs(log_w) + 1.0)
    out: np.ndarray
    if side < 0:
        out = np.exp(log_w - err) * (1 - 2 * U)
    else:
        out = np.exp(log_w + err) * (1 + 2 * U) + TINY
    return out


def _strided(mass: np.ndarray, kernel: np.ndarray, k: int) -> tuple[np.ndarray, float]:
    """``mass`` convolved with ``kernel`` placed at multiples of ``k`` (truncated to the size
    of ``mass``): one convolution per residue modulo ``k``; and its relative error bound."""
    out = np.zeros_like(mass)
    worst = 0.0
    for r in range(min(k, mass.size)):
        part = mass[r::k]
        conv, err = nonnegative_convolve(part, kernel)
        out[r::k] = conv[: part.size]
        worst = max(worst, err)
    return out, worst


def _epsilon_at(releases: _Releases, delta: float, c: float, grid: int) -> float:
    """max_m log((P[K <= m] - delta) / Q[K <= m]), rounded down (-inf if none)."""
    p_cum, q_cum = heterogeneous_cumulative(releases, c, grid)
    ok = p_cum > delta
    if not ok.any():
        return -math.inf
    a = np.log((p_cum[ok] - delta) * (1 - 2 * U))
    b = np.log(q_cum[ok]) * (1 - 4 * U) + 4 * U  # rounded up (q_cum is at most 1 + rel)
    return float(np.max(a - b - 8 * U * (np.abs(a) + np.abs(b) + 1.0)))


def _delta_at(releases: _Releases, eps: float, c: float, grid: int) -> float:
    """max_m P[K <= m] - e^eps Q[K <= m], rounded down."""
    p_cum, q_cum = heterogeneous_cumulative(releases, c, grid)
    with np.errstate(over="ignore", divide="ignore"):
        x = eps + np.log(q_cum) * (1 - 4 * U) + 4 * U
        e_q = np.exp(x + 8 * U * (np.abs(x) + 1.0)) * (1 + 2 * U)
    d = p_cum - e_q
    best = float(np.max(d))
    return best * (1 - 2 * U) if best > 0 else 0.0


def _best_ratio(f: Callable[[float], float]) -> float:
    """The ratio c with the largest ``f(c)`` found: a coarse grid, then a golden section
    around its best point."""
    lo_c, hi_c = C_RANGE
    grid = [lo_c + (hi_c - lo_c) * i / (C_GRID - 1) for i in range(C_GRID)]
    values = [f(c) for c in grid]
    i = int(np.argmax(values))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, C_GRID - 1)]
    (fa, a), (fb, b) = golden_section(f, lo, hi, GOLDEN_STEPS)
    return max((values[i], grid[i]), (fa, a), (fb, b))[1]


def _proxy(releases: _Releases) -> _Releases:
    """The releases the search for c runs on: beyond PROXY_GROUPS distinct epsilons, runs of
    neighbouring epsilons (sorted) merged into one at their root mean square, so each run
    enters as a binomial kernel. Only the choice of c depends on it (the reported value is
    computed on the releases themselves), so it needs no guarantee."""
    if len(releases) <= PROXY_GROUPS:
        return releases
    ordered = sorted(releases)
    out: _Releases = []
    for part in np.array_split(np.arange(len(ordered)), PROXY_GROUPS):
        chunk = [ordered[i] for i in part]
        count = sum(n for _, n in chunk)
        mean = math.fsum(e * e * n for e, n in chunk) / count
        out.append((math.sqrt(mean), count))
    return sorted(out, reverse=True)


def _applies(releases: _Releases) -> bool:
    """At least two distinct epsilons and two releases (one epsilon: the homogeneous optimum
    of :mod:`exp_mech_composition` is exact)."""
    return len({e for e, _ in releases}) >= 2


def heterogeneous_epsilon_lower(releases: Sequence[tuple[float, int]], delta: float) -> float:
    """Certified lower bound of epsilon(delta) of the ``(eps, count)`` bounded-range releases
    at several epsilons (0 if it does not apply)."""
    kept = _releases(releases)
    if not (_applies(kept) and 0.0 < delta < 1.0):
        return 0.0
    with np.errstate(all="ignore"):
        proxy = _proxy(kept)
        c = _best_ratio(lambda c: _epsilon_at(proxy, delta, c, SEARCH_GRID))
        found = _epsilon_at(kept, delta, c, FINAL_GRID)
    return max(0.0, found) if math.isfinite(found) else 0.0


def heterogeneous_delta_lower(releases: Sequence[tuple[float, int]], eps: float) -> float:
    """Certified lower bound of delta(eps) of the ``(eps, count)`` bounded-range releases at
    several epsilons (0 if it does not apply)."""
    kept = _releases(releases)
    if not (_applies(kept) and math.isfinite(eps)):
        return 0.0
    with np.errstate(all="ignore"):
        proxy = _proxy(kept)
        c = _best_ratio(lambda c: _delta_at(proxy, eps, c, SEARCH_GRID))
        found = _delta_at(kept, eps, c, FINAL_GRID)
    return min(1.0, max(0.0, found)) if math.isfinite(found) else 0.0
