"""A certified lower bound for the random-allocation pair from its likelihood ratio.

The pair ``P = (1/t) sum_i N(mu e_i, I_t)`` vs ``Q = N(0, I_t)`` is the remove pair of 1-of-t
random allocation of a Gaussian step (noise ``1 / mu``) and, with ``mu = 2 / sigma``, the pair
of the max-of-batch-sums attack on shuffled batches under replace-one. Its likelihood ratio is
``dP/dQ = S / t`` with ``S = L_1 + ... + L_t``, ``L_i = exp(mu x_i - mu^2 / 2)``; the maximum of
the outputs (:func:`~dpledger.accountant.profiles.max_of_batches_pair`) discards most of it
when ``mu`` is small.

Here each output is post-processed to the index of its cell in a partition of ``(0, inf)``
whose cells have conditional means ``E_Q[L | cell]`` at lattice points ``j h`` (to rounding),
and the last cell ``(b, inf)`` is an outcome of its own ("some output in the top cell"). The
sum of the lattice values of the cell indices is a further post-processing. Given it, the
likelihood ratio is ``(1/t) sum_i E_Q[L_i | cell_i]``, within a relative ``rho`` of
``u / t`` (``u`` the lattice sum). Lower bounds of the laws of ``u`` under ``Q`` (cell masses
from ``ndtr`` with error bounds, exact convolution with its rounding bounded, mass beyond the
window dropped) and ``P(u) = E_Q[ratio; u]`` give a pair of sub-probability masses below the
true ones, outcome by outcome, with their ratios bracketed: its hockey-stick curves lie below
the true curves in both directions (proofs_checks/allocation_ratio).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import attrs
import numpy as np
from numpy.typing import NDArray
from scipy import special

from dpledger.accountant.conversions import NDTR_REL
from dpledger.accountant.discrete_pair import DiscretePair
from dpledger.accountant.nonnegative_convolution import nonnegative_convolve

Array = NDArray[np.float64]

_U = 2.0**-53
#: most cells of one output's partition (each is one lattice point at most)
MAX_CELLS = 1 << 14
#: most lattice points of the window of a sum
MAX_POINTS = 1 << 14
#: the top cell starts where one output exceeds it with at most this probability over t,
#: or lower when the window of the sum cannot reach that far, but not below TOP_MASS_MOST
TOP_MASS = 1e-13
TOP_MASS_MOST = 1e-2
#: cells whose certified conditional mean is farther than this (relative) from their lattice
#: point are dropped (the outcome "some output in a dropped cell" is discarded)
REL_CAP = 1e-9
#: lattice step of L, in standard deviations of L (coarser if the window needs it)
STEP_PER_SD = 1.0 / 8.0
#: far from 0 the cells widen to this fraction of their left end (fewer cells in the tail)
WIDTH_REL = 1.0 / 64.0


def _sf(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def _cdf(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


def _cell_gap(mu: float, a_z: float, b_z: float, v: float) -> float:
    """E[L; a < L <= b] - v P(a < L <= b), in z coordinates, on the side without cancellation."""
    if a_z > 0:
        moment = _sf(a_z - mu) - _sf(b_z - mu)
        mass = _sf(a_z) - _sf(b_z)
    else:
        moment = _cdf(b_z - mu) - _cdf(a_z - mu)
        mass = _cdf(b_z) - _cdf(a_z)
    return moment - v * mass


def _right_edge(mu: float, a_z: float, v: float) -> float:
    """The z of the right end ``b`` of the cell ``(a, b]`` whose conditional mean is ``v``
    (bisection; any edge is valid, this one makes the cell's mean close to ``v``)."""
    lo = (math.log(v) + 0.5 * mu * mu) / mu  # b = v: the mean is below v
    hi = lo + 1.0
    while _cell_gap(mu, a_z, hi, v) < 0:
        hi = lo + 2 * (hi - lo)
        if hi > 60.0:
            return math.inf
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if _cell_gap(mu, a_z, mid, v) < 0:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15 * max(1.0, abs(hi)):
            break
    return 0.5 * (lo + hi)


def _matched_edges(mu: float, h: float, big: float) -> tuple[Array, Array]:
    """(z of the cell edges, lattice index of each cell): cells from 0 up to ``big`` (the top
    cell lies beyond), each with its conditional mean at a lattice point at least half a
    width above its left end, the width ``max(h, WIDTH_REL a)``."""
    edges = [-math.inf]
    index: list[int] = []
    while len(index) < MAX_CELLS:
        a_z = edges[-1]
        a = 0.0 if a_z == -math.inf else math.exp(mu * a_z - 0.5 * mu * mu)
        j = math.floor((a + 0.5 * max(h, WIDTH_REL * a)) / h) + 1
        if a >= big or _sf(a_z - mu) <= j * h * _sf(a_z):  # beyond big, or no such cell
            break
        b_z = _right_edge(mu, a_z, j * h)
        if not math.isfinite(b_z) or b_z <= a_z:
            break
        edges.append(b_z)
        index.append(j)
    return np.asarray(edges, dtype=float), np.asarray(index, dtype=np.int64)


def _cells(mu: float, z: Array) -> tuple[Array, Array, Array, Array]:
    """(mass, mass error, first moment, moment error) of L on the cells between the edges
    ``z`` (in z coordinates): differences of ``ndtr`` taken on the side without cancellation,
    each value within NDTR_REL relative."""
    sf, cdf = special.ndtr(-z), special.ndtr(z)
    sf_m, cdf_m = special.ndtr(mu - z), special.ndtr(z - mu)
    use_cdf = z[1:] <= 0
    mass = np.where(use_cdf, cdf[1:] - cdf[:-1], sf[:-1] - sf[1:])
    moment = np.where(use_cdf, cdf_m[1:] - cdf_m[:-1], sf_m[:-1] - sf_m[1:])
    scale = np.where(use_cdf, cdf[1:] + cdf[:-1], sf[:-1] + sf[1:])
    scale_m = np.where(use_cdf, cdf_m[1:] + cdf_m[:-1], sf_m[:-1] + sf_m[1:])
    err_mass = NDTR_REL * scale + 4 * _U * np.abs(mass)
    err_moment = NDTR_REL * scale_m + 4 * _U * np.abs(moment)
    return mass, err_mass, moment, err_moment


def _top_bounds(mu: float, z_top: float) -> tuple[float, float, float, float]:
    """(lower, upper) of the Q mass of the top cell (outputs above ``z_top``) and of its
    P-shifted mass E_Q[L; top] = P(N(mu, 1) > z_top)."""
    q_top = float(special.ndtr(-z_top))
    p_top = float(special.ndtr(mu - z_top))
    return (
        q_top * (1 - NDTR_REL),
        min(q_top * (1 + NDTR_REL), 1.0),
        p_top * (1 - NDTR_REL),
        min(p_top * (1 + NDTR_REL), 1.0),
    )


def _one_output(mu: float, h: float, big: float) -> tuple[Array, float, tuple[float, ...]]:
    """(lower bounds of the masses of one output's lattice values 0, h, 2h, ..., the relative
    bound rho of every kept cell's conditional mean against its lattice value, and bounds
    (lower, upper) of the top cell's Q mass and of its P-shifted mass E_Q[L; top])."""
    z, index = _matched_edges(mu, h, big)
    mass, err_mass, moment, err_moment = _cells(mu, z)
    m_lo = mass - err_mass
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_lo = (moment - err_moment) / (mass + err_mass) * (1 - 4 * _U)
        mean_hi = (moment + err_moment) / m_lo * (1 + 4 * _U)
    value = index * h
    rel = np.maximum(mean_hi / value - 1.0, 1.0 - mean_lo / value) + 4 * _U
    keep = (m_lo > 0) & np.isfinite(rel) & (rel <= REL_CAP)
    law = np.zeros(int(index[-1]) + 1 if index.size else 1)
    law[index[keep]] = m_lo[keep] * (1 - 4 * _U)
    rho = float(rel[keep].max()) if keep.any() else 0.0
    tops = _top_bounds(mu, float(z[-1]))
    return law, rho, tops


def _top_outcome(
    t: int, tops: tuple[float, ...], shifted: int = 1
) -> tuple[float, float, float, float]:
    """(P lower, P upper, Q lower, Q upper) of "some output in the top cell": under Q each
    output is there with probability q, under P each of the ``shifted`` ones with probability
    p (E_Q[L; top]) and the others with q; both are increasing in p and q."""
    q_lo, q_hi, p_lo, p_hi = tops

    def some(p: float, q: float, shifted: int) -> float:
        if p >= 1.0 or q >= 1.0:
            return 1.0
        return -math.expm1(shifted * math.log1p(-p) + (t - shifted) * math.log1p(-q))

    slack = 16 * _U * t
    return (
        some(p_lo, q_lo, shifted) * (1 - slack),
        min(some(p_hi, q_hi, shifted) * (1 + slack), 1.0),
        some(q_lo, q_lo, 0) * (1 - slack),
        min(some(q_hi, q_hi, 0) * (1 + slack), 1.0),
    )


def _grid(mu: float, t: int, top_mass: float = TOP_MASS) -> tuple[float, float]:
    """(lattice step h, top edge big): the window of the sum of t outputs, within
    ``14 sd sqrt(t)`` of its mean ``t`` (and not below 0) and one value up to ``big`` above,
    fits in MAX_POINTS (big is shortened first, then h coarsened); some output exceeds big
    with probability about ``top_mass`` under Q."""
    sd = math.sqrt(math.expm1(mu * mu))
    spread = 14.0 * sd * math.sqrt(t) + min(14.0 * sd * math.sqrt(t), float(t))  # from >= 0

    def quantile(mass: float) -> float:  # P(L > x) = mass / t
        return math.exp(-mu * float(special.ndtri(mass / t)) - 0.5 * mu * mu)

    big, least = quantile(top_mass), max(quantile(TOP_MASS_MOST), 8.0 * (1.0 + sd))
    h = STEP_PER_SD * min(sd, 1.0)
    big = min(big, max((MAX_POINTS * h - spread) / 1.5, least))
    return max(h, (spread + 1.5 * big) / MAX_POINTS), big


def _windowed_sum(law: Array, t: int, big: float, h: float) -> tuple[int, Array, float]:
    """(offset, lower bounds of the masses of the sum of t lattice values at indices offset,
    offset + 1, ...): binary powering by direct convolution; a partial sum of n copies keeps
    the indices within 14 of its standard deviations of its mean (and one value up to big
    above), the mass outside is dropped (the terms are nonnegative). The convolutions'
    rounding (each entry within ``(terms + 2) u`` relative) is divided out."""
    values = np.arange(law.size) * h
    total = float(law.sum())
    mean = float((law * values).sum()) / total if total > 0 else 0.0
    sd = (
        math.sqrt(max(float((law * values * values).sum()) / total - mean * mean, 0.0))
        if total > 0
        else 0.0
    )

    def window(n: int) -> tuple[int, int]:
        lo = math.floor((n * mean - 14.0 * sd * math.sqrt(n)) / h) - 2
        hi = math.ceil((n * mean + 14.0 * sd * math.sqrt(n) + 1.5 * big) / h) + 2
        return max(lo, 0), hi

    def cut(off: int, arr: Array, n: int) -> tuple[int, Array]:
        lo, hi = window(n)
        a, b = max(lo - off, 0), max(min(hi - off, arr.size), 0)
        return off + a, arr[a:b].copy()

    def conv(x: tuple[int, Array], y: tuple[int, Array]) -> tuple[int, Array, float]:
        full, rel = nonnegative_convolve(x[1], y[1])
        return x[0] + y[0], full, math.log1p(rel)

    base, n_base, base_err = cut(0, law, 1), 1, 0.0
    result: tuple[int, Array] | None = None
    n_result, err, k = 0, 0.0, t
    while True:
        if k & 1:
            if result is None:
                result, n_result, err = base, n_base, base_err
            else:
                off, arr, e = conv(result, base)
                n_result += n_base
                result, err = cut(off, arr, n_result), err + base_err + e
        k >>= 1
        if not k:
            break
        off, arr, e = conv(base, base)
        n_base *= 2
        base, base_err = cut(off, arr, n_base), 2 * base_err + e
    assert result is not None
    return result[0], result[1] * math.exp(-err) * (1 - 1e-12), err


@functools.lru_cache(maxsize=16)
def allocation_ratio_pair(mu: float, t: int):  # type: ignore[no-untyped-def]
    """The post-processed pair of the module docstring, as a
    :class:`~dpledger.accountant.discrete_pair.DiscretePair` that brackets a sub-pair of it (for the
    lattice outcomes the Q masses are lower bounds, used as the sub-pair's exact masses, and
    the P masses are the ratio bounds times them); the last outcome is the top cell."""
    h, big = _grid(mu, t)
    law, rho, tops = _one_output(mu, h, big)
    offset, q, _ = _windowed_sum(law, t, big, h)
    j = np.nonzero(q > 0)[0]
    q = q[j]
    ratio = (j + offset) * h / t
    p_lo = ratio * (1 - rho) * q * (1 - 8 * _U)
    p_hi = ratio * (1 + rho) * q * (1 + 8 * _U)
    top = _top_outcome(t, tops)
    return DiscretePair(
        np.append(p_lo, top[0]),
        np.append(p_hi, top[1]),
        np.append(q, top[2]),
        np.append(q, top[3]),
    )


# k of t steps: the lattice sum of the cell values, with the laws of both sides computed.
#
# For a record in k of the t steps (1 <= k < t) the pair is ``P = C(t, k)^-1 sum_{|S| = k}
# N(mu 1_S, I_t)`` vs ``Q = N(0, I_t)``. Its likelihood ratio is an elementary symmetric
# polynomial of the L_i, not a function of the lattice sum u; but u is still a post-processing,
# and under both laws it is a sum of independent cell values: under Q of t null outputs, under
# P (whatever S) of t - k null outputs and k shifted ones, whose cell masses are E_Q[L; cell].
# Both laws are computed with lower and upper bounds on every mass (proofs_checks/allocation_ratio).

#: outcomes beyond the first and the last with every mass bound at least this are merged
TAIL_MASS = 1e-30
#: the top cell of the lattice sum starts where some output exceeds it with this probability
#: (coarser than TOP_MASS: the convolutions are the cost, and below it nothing changes)
SUM_TOP_MASS = 1e-10


@attrs.frozen
class _Part:
    """A sum of n independent lattice values: the computed masses at indices offset, offset +
    1, ... lie within ``e^{+-err}`` (relative) of the exact masses kept by the windows, which
    are below the exact law entrywise and lack at most ``lost`` of its mass; ``full`` bounds
    the exact law's total mass."""

    offset: int
    masses: Array
    n: int
    err: float
    lost: float
    full: float


def _laws(
    mu: float, h: float, big: float, power: float = 1.0
) -> tuple[Array, Array, Array, Array, tuple[float, ...]]:
    """(Q lower, Q upper, shifted lower, shifted upper) masses of one output's lattice value
    0, h, 2h, ... below the top cell (the shifted output's mass of a cell is E_Q[L; cell]), and
    the top cell's bounds as in :func:`_one_output`. Every cell below the top one is kept. The
    cells are those of ``L^power`` (up to a constant factor: ``mu power`` in place of ``mu``)."""
    z, index = _matched_edges(mu * power, h, big)
    if np.any(np.diff(index) <= 0):  # by construction each cell has its own lattice point
        raise AssertionError("two cells share a lattice point")
    mass, err_mass, moment, err_moment = _cells(mu, z)
    size = int(index[-1]) + 1 if index.size else 1

    def law(value: Array, err: Array, sign: float) -> Array:
        out = np.zeros(size)
        out[index] = np.maximum(value + sign * err, 0.0) * (1 + sign * 4 * _U)
        return out

    tops = _top_bounds(mu, float(z[-1]))
    return (
        law(mass, err_mass, -1.0),
        law(mass, err_mass, 1.0),
        law(moment, err_moment, -1.0),
        law(moment, err_moment, 1.0),
        tops,
    )


def _window(law: Array, h: float, most: int) -> Callable[[int], tuple[int, int]]:
    """The window of a sum of n values of ``law``: ``most`` points from 14 of its standard
    deviations below its mean (not below 0). For the null law, :func:`_grid` makes this reach
    14 standard deviations above the mean and one value up to ``big`` more; a window cuts
    mass from every later sum, so it is kept no narrower than the budget."""
    values = np.arange(law.size) * h
    total = float(law.sum())
    mean = float((law * values).sum()) / total if total > 0 else 0.0
    var = float((law * values * values).sum()) / total - mean * mean if total > 0 else 0.0
    sd = math.sqrt(max(var, 0.0))

    def window(n: int) -> tuple[int, int]:
        lo = max(math.floor((n * mean - 14.0 * sd * math.sqrt(n)) / h) - 2, 0)
        return lo, lo + most

    return window


def _join(x: _Part, y: _Part) -> _Part:
    """The sum of two independent partial sums, by direct convolution (each entry within
    ``(terms + 2) u`` relative). The exact laws F satisfy ``|F_x * F_y| - |W_x * W_y| <= lost_x
    |F_y| + |F_x| lost_y`` for the kept parts W."""
    masses = np.convolve(x.masses, y.masses)
    terms = min(x.masses.size, y.masses.size)
    return _Part(
        x.offset + y.offset,
        masses,
        x.n + y.n,
        x.err + y.err + math.log1p(terms * _U * 1.01 + 2 * _U),
        (x.lost * y.full + x.full * y.lost) * (1 + 4 * _U),
        x.full * y.full * (1 + 2 * _U),
    )


def _cut(part: _Part, window: Callable[[int], tuple[int, int]]) -> _Part:
    """Keep the window of ``part``; the dropped computed mass, inflated by its rounding bound,
    is added to ``lost``."""
    lo, hi = window(part.n)
    a = min(max(lo - part.offset, 0), part.masses.size)
    b = max(min(hi - part.offset, part.masses.size), a)
    dropped = math.fsum(part.masses[:a]) + math.fsum(part.masses[b:]) + 1e-300
    lost = (part.lost + dropped * math.exp(part.err) * (1 + 4 * _U)) * (1 + 2 * _U)
    return attrs.evolve(part, offset=part.offset + a, masses=part.masses[a:b].copy(), lost=lost)


def _power(law: Array, n: int, window: Callable[[int], tuple[int, int]]) -> _Part:
    """The sum of n independent values of the lattice law (n >= 1), by binary powering with
    every partial sum cut to its window."""
    full = math.fsum(law) * (1 + 2 * _U)
    base = _cut(_Part(0, law, 1, 0.0, 0.0, full), window)
    result: _Part | None = None
    while True:
        if n & 1:
            result = base if result is None else _cut(_join(result, base), window)
        n >>= 1
        if not n:
            break
        base = _cut(_join(base, base), window)
    assert result is not None
    return result


def _sides(null: Array, shifted: Array, t: int, k: int, h: float) -> tuple[_Part, _Part]:
    """(Q, P) laws of the lattice sum: t - k null values plus k null (Q) or shifted (P) ones."""
    null_window = _window(null, h, MAX_POINTS)
    rest = _power(null, t - k, null_window)
    q = _join(rest, _power(null, k, null_window))
    p = _join(rest, _power(shifted, k, _window(shifted, h, MAX_POINTS)))
    return q, p


def _relative_bound(lower: Array, upper: Array) -> tuple[float, float, float]:
    """(r, z, total) with ``upper <= (1 + r) lower + zeta`` entrywise, ``zeta`` the upper
    masses where the lower one is 0 (``z`` their total) and ``total >= (1 + r)|lower| + z``, all
    rounded up."""
    pos = lower > 0
    ratio = float(np.max(upper[pos] / lower[pos])) if pos.any() else 1.0
    r = max(ratio * (1 + 8 * _U) - 1.0, 0.0)
    z = math.fsum(upper[~pos]) * (1 + 2 * _U)
    return r, z, ((1 + r) * math.fsum(lower) + z) * (1 + 8 * _U)


def _aligned(
    part: _Part, start: int, stop: int, factor: float, extra: float
) -> tuple[Array, Array]:
    """(lower, upper) bounds at indices start .. stop - 1 of the exact masses of the law whose
    lower-side computation is ``part``: its computed masses deflated by their rounding bound;
    and, for the law of the upper masses, at most ``factor`` times the lower side's exact law
    plus ``extra``, the computed masses inflated and raised by the lost mass (each entry of an
    exact law is at most the kept entry plus all the lost mass). 1e-300 absolute covers
    underflow in the products."""
    lo, hi = np.zeros(stop - start), np.zeros(stop - start)
    a = part.offset - start
    lo[a : a + part.masses.size] = part.masses * math.exp(-part.err) * (1 - 1e-12)
    hi[a : a + part.masses.size] = part.masses * math.exp(part.err) * (1 + 1e-12)
    hi = (hi + part.lost * (1 + 1e-12) + 1e-300) * factor * (1 + 4 * _U) + extra
    return np.maximum(lo - 1e-300, 0.0), hi


def _sum_bounds(
    mu: float, t: int, k: int, power: float
) -> tuple[int, tuple[Array, ...], tuple[float, ...]]:
    """(first index, (P lower, P upper, Q lower, Q upper) of the lattice sums from it on, the
    top cell's bounds). Only the lower laws are convolved: with ``hi <= (1 +
    r) lo + zeta`` per output, the exact upper law of a sum of n outputs is at most ``(1 +
    r)^n`` times the lower one plus ``n z total^(n - 1)`` in all (the terms with a zeta factor)."""
    h, big = _grid(mu * power, t, SUM_TOP_MASS)
    null_lo, null_hi, shift_lo, shift_hi, tops = _laws(mu, h, big, power)
    q, p = _sides(null_lo, shift_lo, t, k, h)
    r_n, z_n, total_n = _relative_bound(null_lo, null_hi)
    r_s, z_s, total_s = _relative_bound(shift_lo, shift_hi)
    most = max(total_n, total_s) ** (t - 1) * (1 + 8 * t * _U)
    start = min(q.offset, p.offset)
    stop = max(q.offset + q.masses.size, p.offset + p.masses.size)
    factor_q = math.exp(t * math.log1p(r_n)) * (1 + 1e-12)
    factor_p = math.exp((t - k) * math.log1p(r_n) + k * math.log1p(r_s)) * (1 + 1e-12)
    q_lower, q_upper = _aligned(q, start, stop, factor_q, t * z_n * most * (1 + 4 * _U))
    extra_p = ((t - k) * z_n + k * z_s) * most * (1 + 8 * _U)
    p_lower, p_upper = _aligned(p, start, stop, factor_p, extra_p)
    return start, (p_lower, p_upper, q_lower, q_upper), tops


def _merged_tails(*bounds: Array) -> tuple[Array, ...]:
    """The outcomes between the first and the last one with every bound at least TAIL_MASS,
    each tail beyond them merged into one outcome (a union of events: lower bounds summed and
    deflated, upper bounds summed and inflated, by their rounding bounds). Outcomes of
    negligible mass would otherwise carry losses of hundreds."""
    big_enough = np.nonzero(np.min(np.vstack(bounds), axis=0) >= TAIL_MASS)[0]
    first, last = (int(big_enough[0]), int(big_enough[-1]) + 1) if big_enough.size else (0, 0)
    out = []
    for i, b in enumerate(bounds):
        factor = 1 + (b.size + 4) * _U * (1 if i % 2 else -1)  # lower, upper, lower, upper
        below, above = math.fsum(b[:first]) * factor, math.fsum(b[last:]) * factor
        out.append(np.concatenate([[below], b[first:last], [above]]))
    return tuple(out)


@functools.lru_cache(maxsize=16)
def allocation_sum_pair(mu: float, t: int, k: int, power: float = 1.0) -> DiscretePair:
    """The lattice sum of the cell values of the t outputs (the top cell an outcome of its
    own) under ``P`` (k of the t outputs shifted by ``mu``, 1 <= k < t) and ``Q`` (none), as a
    :class:`~dpledger.accountant.discrete_pair.DiscretePair` with every mass bracketed; the
    negligible tails are merged into one outcome each. The cells are those of the likelihood
    ratios raised to ``power`` (any partition is a valid post-processing; below 1 it weighs
    many moderate outputs more, as the product terms do when k / t is not small)."""
    if not 1 <= k < t:
        raise ValueError(f"need 1 <= k < t, got k={k}, t={t}")
    _, bounds, tops = _sum_bounds(mu, t, k, power)
    bounds = _merged_tails(*bounds)
    top = _top_outcome(t, tops, k)
    return DiscretePair(*(np.append(b, x) for b, x in zip(bounds, top, strict=True)))
