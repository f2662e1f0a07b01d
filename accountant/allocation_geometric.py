"""Random allocation of a Gaussian step: the law of the likelihood-ratio sum on a geometric grid.

Under ``Q`` the remove pair's likelihood ratio is ``S / t``, ``S = L_1 + ... + L_t`` with iid
lognormals ``L = exp(mu Z - mu^2 / 2)``, and both directions' curves are expectations of convex
functions of ``S``: ``E[(S / t - c)_+]`` (remove) and ``E[(1 - c S / t)_+]`` (add). The heavy
right tail of ``L`` (at small ``t`` and large ``mu`` the remove curve is set by one value far
above the others) and its mass near 0 (the add curve at large ``eps``, where every value must be
small) call for a grid of constant *relative* resolution: the points ``0`` and
``x_0 r^k``. Each cell of ``L`` and each sum of two grid values is split between the two grid
points around it with its mean kept (its two ends, or the neighbours of the sum), so every
computed law is a mean-preserving spread of the true one: by Jensen the expectation of every
convex function is larger. Split fractions are moved by their error bounds towards the upper
point (remove: increasing convex hinge) or the lower one (add: decreasing convex hinge). A sum
``v_j + v_i`` depends on ``(i, j)`` only through ``j - i`` (scale invariance), so a convolution is
a band of ``2 D + 1`` shifted products plus one aggregate for the pairs whose smaller value is
below ``(r - 1) / 2`` of the larger (they fall between ``v_j`` and ``v_{j+1}``).

Proof record: ``proofs_checks/random_allocation/proof.md`` ("The geometric grid").
"""

from __future__ import annotations

import functools
import itertools
import math

import attrs
import numpy as np
from numpy.typing import NDArray
from scipy import special

from dpledger.accountant.conversions import NDTR_REL

Array = NDArray[np.float64]

__all__ = ["GeometricTables", "geometric_tables"]

#: unit roundoff of IEEE double
_U = 2.0**-53
#: ratio of neighbouring grid points is 1 + RATIO_STEP
RATIO_STEP = 2.0**-6
#: the grid of L reaches the quantiles at -Z_LOW and mu + Z_HIGH of Z (tail masses ~1e-33)
Z_LOW = 12.0
Z_HIGH = 12.0
#: epsilons per block of the hinge sums
HINGE_BLOCK = 64
#: absolute slack on every computed split fraction (their rounding error is below 1e-13)
FRACTION_SLACK = 1e-12


@attrs.frozen
class GeometricTables:
    """Certified upper bounds of both directions' curves on ``epsilons``, and the charges."""

    remove: Array
    add: Array
    points: int
    charges: dict[str, float]


@attrs.frozen
class _Law:
    """A sub-probability law on the points 0 (``zero``) and ``x_0 r^k`` (``w[k]``)."""

    zero: float
    w: Array


def _tail(z: Array) -> Array:
    return np.asarray(special.ndtr(-z), dtype=float)


def _cell_law(mu: float, log_x0: float, log_r: float, cells: int, up: bool) -> tuple[_Law, float]:
    """L restricted to [0, x_0 r^cells], each cell split between its ends with its mean kept
    (fraction moved up or down by its error bound); and the masses' relative error bound."""
    k = np.arange(cells + 1, dtype=float)
    z = (log_x0 + k * log_r + 0.5 * mu * mu) / mu  # L > x_0 r^k  <=>  Z > z[k]
    x = np.exp(log_x0 + k * log_r)
    sf, cdf = _tail(z), np.asarray(special.ndtr(z), dtype=float)
    sf_m, cdf_m = _tail(z - mu), np.asarray(special.ndtr(z - mu), dtype=float)
    # the cell [0, x_0] and the cells [x_k, x_{k+1}]: mass and E[L; cell], differences taken
    # on the side where they do not cancel
    low = z[1:] <= 0
    mass = np.where(low, cdf[1:] - cdf[:-1], sf[:-1] - sf[1:])
    moment = np.where(low, cdf_m[1:] - cdf_m[:-1], sf_m[:-1] - sf_m[1:])
    err_mass = NDTR_REL * np.where(low, cdf[1:] + cdf[:-1], sf[:-1] + sf[1:]) + 4 * _U * mass
    err_mom = NDTR_REL * np.where(low, cdf_m[1:] + cdf_m[:-1], sf_m[:-1] + sf_m[1:])
    mass, moment = np.maximum(mass, 0.0), np.maximum(moment, 0.0)
    about = moment - x[:-1] * mass  # E[L - x_k; cell]
    err_about = err_mom + 4 * _U * moment + x[:-1] * (err_mass + 4 * _U * mass)
    keep = mass > 0
    rel = float(np.max(err_mass[keep] / mass[keep])) if keep.any() else 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        width = x[:-1] * math.expm1(log_r)
        frac = np.where(keep, about / (width * mass), 0.0)
        slack = np.where(keep, err_about / (width * mass) + rel + 16 * _U, 0.0)
    # fmin / fmax also send a 0/0 of underflowed masses to the safe end
    frac = np.fmin(frac + slack, 1.0) if up else np.fmax(frac - slack, 0.0)
    zero_cell = float(special.ndtr(z[0]))
    zero_mom = float(special.ndtr(z[0] - mu))
    f0 = zero_mom / (x[0] * zero_cell) if zero_cell > 0 else 0.0
    f0 = min(f0 * (1 + 1e-11) + 1e-300, 1.0) if up else max(f0 * (1 - 1e-11), 0.0)
    w = np.zeros(cells + 1)
    w[:-1] += mass * (1.0 - frac)
    w[1:] += mass * frac
    w[0] += zero_cell * f0
    rel = max(rel, 2 * NDTR_REL) + 8 * _U
    return _Law(zero_cell * (1.0 - f0), w), rel


@functools.lru_cache(maxsize=8)
def _shifts(log_r: float, up: bool) -> tuple[int, Array, Array]:
    """(D, k_d, f_d) for d = 0..D: v_j + v_{j-d} = v_j r^{k_d + f} split between v_{j+k_d}
    (1 - f_d) and v_{j+k_d+1} (f_d); for d > D the smaller value is below (r - 1)/2 of the
    larger, k_d = 0 and f_d = r^-d / (r - 1) <= 1/2."""
    rm1 = math.expm1(log_r)
    big_d = math.ceil(math.log(2.0 / rm1) / log_r)
    d = np.arange(big_d + 1, dtype=float)
    log_y = np.log1p(np.exp(-d * log_r))
    k = np.floor(log_y / log_r)
    frac = np.expm1(log_y - k * log_r) / rm1
    # a computed k one step off puts frac just outside [0, 1]: the clip keeps the split valid
    frac = np.clip(frac + FRACTION_SLACK, 0.0, 1.0) if up else np.clip(frac - FRACTION_SLACK, 0, 1)
    return big_d, k.astype(np.int64), frac


def _convolve(a: _Law, b: _Law, log_r: float, up: bool) -> tuple[_Law, float]:
    """The mean-preserving split of the sum of independent ``a`` and ``b`` onto the grid; and
    the relative error bound of its masses."""
    big_d, k, frac = _shifts(log_r, up)
    n = max(a.w.size, b.w.size)
    kmax = int(k[0]) + 2
    aw, bw = np.zeros(n), np.zeros(n)
    aw[: a.w.size], bw[: b.w.size] = a.w, b.w
    out = np.zeros(n + kmax)
    out[:n] += a.zero * bw + b.zero * aw
    for x, y, start in ((aw, bw, 0), (bw, aw, 1)):  # y holds the larger value (ties once)
        for d in range(start, min(big_d, n - 1) + 1):
            prod = x[: n - d] * y[d:]
            j0 = d + int(k[d])
            out[j0 : j0 + n - d] += prod * (1.0 - frac[d])
            out[j0 + 1 : j0 + 1 + n - d] += prod * frac[d]
        _far(x, y, big_d, log_r, up, out)
    terms = 4 * (big_d + 2) + 8
    return _Law(a.zero * b.zero, out), (terms + 2 * n) * _U * 1.01


def _far(x: Array, y: Array, big_d: int, log_r: float, up: bool, out: Array) -> None:
    """Pairs x_i, y_j with j - i > D: sum in [v_j, v_{j+1}], split with the mean kept."""
    n = x.size
    if n <= big_d + 1:
        return
    mass = np.cumsum(x)[: n - big_d - 1]  # sum_{i <= j - D - 1} x_i, for j = D + 1 .. n - 1
    # first[j] = sum_{i <= j - D - 1} x_i r^(i - j): first[j + 1] = first[j] / r + x_{j-D} r^-(D+1)
    # (a contracting recurrence: no overflow, relative error below 3 u per step)
    first = _recurrence(x, math.exp(-(big_d + 1) * log_r), math.exp(-log_r))[: n - big_d - 1]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        q = first / (math.expm1(log_r) * mass)
    # fmin / fmax also send a 0/0 of underflowed masses to the safe end
    q = np.fmin(q * (1 + 8 * n * _U) + FRACTION_SLACK, 1.0) if up else q * (1 - 8 * n * _U)
    q = np.fmin(np.fmax(q, 0.0), 1.0)
    part = y[big_d + 1 :] * mass
    out[big_d + 1 : n] += part * (1.0 - q)
    out[big_d + 2 : n + 1] += part * q


def _recurrence(x: Array, scale: float, decay: float) -> Array:
    """y with y_0 = scale x_0 and y_k = decay y_(k-1) + scale x_k (each step rounded as
    written: a product, a product and a sum), in one pass without a filter library."""
    steps = itertools.accumulate((scale * x).tolist(), lambda y, v: decay * y + v)
    return np.fromiter(steps, dtype=float, count=x.size)


def _power(law: _Law, count: int, log_r: float, up: bool) -> tuple[_Law, float]:
    """law^{*count} by binary powering, and the log of its relative error factor."""
    result: _Law | None = None
    log_err = 0.0
    base, base_err = law, 0.0
    while True:
        if count & 1:
            if result is None:
                result, log_err = base, base_err
            else:
                result, e = _convolve(result, base, log_r, up)
                log_err += base_err + math.log1p(e)
        count >>= 1
        if not count:
            break
        base, e = _convolve(base, base, log_r, up)
        base_err = 2 * base_err + math.log1p(e)
    assert result is not None
    return result, log_err


def geometric_tables(sigma: float, t: int, epsilons: Array) -> GeometricTables:
    """Certified upper bounds of delta_remove and delta_add of 1-of-``t`` random allocation of a
    Gaussian step of multiplier ``sigma`` on ``epsilons`` (add/remove)."""
    mu = 1.0 / sigma
    log_r = math.log1p(RATIO_STEP)
    c = np.exp(np.asarray(epsilons, dtype=float))
    log_top = max(mu * (mu + Z_HIGH) - 0.5 * mu * mu, math.log(t))
    log_x0 = min(-mu * Z_LOW - 0.5 * mu * mu, math.log(t) - float(np.log(c[-1])) - math.log(16))
    cells = math.ceil((log_top - log_x0) / log_r)
    # the dropped mass L > top: the add hinge is 0 there (top >= t); remove charges
    # E[S / t; some L_i > top] <= E[L; L > top] + (t - 1) P(L > top)
    z_top = (log_x0 + cells * log_r + 0.5 * mu * mu) / mu
    p_top = float(_tail(np.array(z_top))) * (1 + NDTR_REL)
    m_top = float(_tail(np.array(z_top - mu))) * (1 + NDTR_REL)
    charge = (m_top + (t - 1) * p_top) * (1 + 1e-12)
    out: dict[str, Array] = {}
    size = 0
    for direction in ("remove", "add"):
        up = direction == "remove"
        law, rel = _cell_law(mu, log_x0, log_r, cells, up)
        total, log_err = _power(law, t, log_r, up)
        factor = math.exp(log_err + t * math.log1p(rel)) * (1 + 1e-12)
        k = np.arange(total.w.size, dtype=float)
        ratio = np.exp(log_x0 + k * log_r - math.log(t))  # v_k / t
        # v_k computed with relative error below 8 u (|log v_k| + 1): raised by it
        ratio *= 1 + 8 * _U * (np.abs(log_x0 + k * log_r) + 2)
        # operations whose result is subnormal lose at most 2^-1074 each beyond the relative
        # model: at most 64 convolutions of at most 8 n (D + 2) operations; the lost mass,
        # times the largest hinge value, is charged
        lost = 64 * 8.0 * total.w.size * (_shifts(log_r, up)[0] + 2) * 2.0**-1074
        log_v = log_x0 + total.w.size * log_r - math.log(t)
        top = math.exp(log_v) if log_v < 700 else math.inf
        out[direction] = _hinge(total, ratio, c, up) * factor + lost * (top + 1)
        size = total.w.size
    remove = np.minimum(out["remove"] + charge, 1.0)
    add = np.minimum(out["add"], 1.0)
    return GeometricTables(remove, add, size, {"tail_remove": charge})


def _hinge(law: _Law, ratio: Array, c: Array, up: bool) -> Array:
    """sum_k w_k h(v_k / t) (and the zero atom) for h = (x - c)_+ (up) or (1 - c x)_+, summed
    term by term (nonnegative terms), with the rounding of each term charged; in blocks of
    epsilons (bounded memory)."""
    value = np.empty(c.size)
    for lo in range(0, c.size, HINGE_BLOCK):
        cb = c[lo : lo + HINGE_BLOCK, None]
        if up:
            terms = np.maximum(ratio[None, :] - cb, 0.0)
            slack = 4 * _U * (ratio[None, :] * (ratio[None, :] > cb)) @ law.w
        else:
            terms = np.maximum(1.0 - cb * ratio[None, :], 0.0)
            slack = 4 * _U * (cb * ratio[None, :] < 1.0) @ law.w
        value[lo : lo + HINGE_BLOCK] = (terms @ law.w) * (1 + 2 * law.w.size * _U) + slack
    if not up:
        value = value + law.zero
    return value
