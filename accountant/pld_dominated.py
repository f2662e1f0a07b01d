"""Lower bounds: a dominated discrete pair of an exact profile (:func:`discretise_lower`).

Its masses lie below those of a pair the mechanism dominates, checked point by point against
certified values of the true curve, so compositions of such pairs certify lower bounds.
"""

from __future__ import annotations

import math

import attrs
import numpy as np

from dpledger.accountant.isotonic import isotonic_regression
from dpledger.accountant.pld_discrete import (
    LOWER_DEFLATION,
    MAX_LOSS,
    Array,
    DiscretePLD,
    U,
)
from dpledger.accountant.pld_read import (
    DISCOUNT_SPAN,
)
from dpledger.accountant.profiles_base import InfinitySplit, Profile
from dpledger.accountant.profiles_sampled import InfinityAtom

__all__ = [
    "MAX_LOWER_SCALE_LOSS",
    "RECURSION_ABS",
    "InfinityAtom",
    "InfinitySplit",
    "discretise_lower",
    "recursion_error",
]


# -- lower bounds: a dominated discrete pair ---------------------------------------------------
#: most relative deflation of the masses a dominated pair may take before it is given up
MAX_LOWER_SCALE_LOSS = 1e-6


#: absolute error allowed per value of the positive recursions (subnormal products)
RECURSION_ABS = 1e-300


#: bounds (lower, upper) of a P-only mass beside a sub-pair (:class:`InfinityAtom`): none
_NO_ATOM = (0.0, 0.0)


def _secant_floor(lo: Array, hi: Array, ratio: float) -> Array:
    """At every point j >= 2, a value below the extension to ``x_j`` of the true curve's secant
    through points j-1 and j-2 (a convex curve lies above it there); ``lo``/``hi`` bracket
    the curve at the points, spaced so that ``(x_j - x_{j-1}) / (x_{j-1} - x_{j-2}) = ratio``.
    Entries 0 and 1 are -infinity (no such secant)."""
    out = np.full(lo.size, -np.inf)
    out[2:] = _extension_floor(lo[1:-1], hi[:-2], ratio)
    return out


def _extension_floor(near_lo: Array, far_hi: Array, ratio: float) -> Array:
    """Values below the secants through a far and a near point of a convex curve, extended
    past the near point by ``ratio`` times their distance (:func:`_secant_floor`, per pair)."""
    diff = near_lo - far_hi  # at most the true increment
    # a larger factor on a negative increment (a smaller one on a positive) stays below
    step = np.where(diff < 0, ratio * (1 + 4 * U), ratio * (1 - 4 * U))
    step *= diff
    # near_lo + step - 4 u (|near_lo| + |step|), in two buffers (the same operations)
    slack = np.abs(near_lo)
    slack += np.abs(step, out=diff)  # diff is not read again
    slack *= 4 * U
    out = np.add(near_lo, step, out=step)
    out -= slack
    return np.asarray(out, dtype=np.float64)


def _segment_limits(
    lo: Array, left_ext: Array, right_ext: Array, mid: tuple[Array, Array], *, increasing: bool
) -> tuple[Array, Array]:
    """Per segment ``[j, j+1]``, limits (on ``z_j``, on ``z_{j+1}``) under which the chord of
    the points stays below a convex curve bracketed below by ``lo``, monotone as stated. Of
    the four rules the one that lowers the points least is used:

    - left: ``z_j <= lo_j`` and ``z_{j+1}`` under the secant through j-1, j extended
      (``left_ext[j+1]``): the chord is then under that extension, which is under the curve;
    - right: the mirror image (``right_ext[j]`` from the secant through j+1, j+2);
    - mid: ``z_j`` under the secant through the segment's midpoint m and j+1 extended back,
      ``z_{j+1}`` under the secant through j and m extended on (``mid``): the first secant's
      slope is at least the curve's at m, the second's at most, so both limits are under the
      curve's tangent at m, and so is the chord; each point is lowered about a quarter as much
      as by the left or right rule;
    - flat: both under the curve's value at the end where it is lower (monotonicity).

    A rule with a negative limit is not used (the pair's curve is nonnegative)."""
    a_lo, b_lo = lo[:-1], lo[1:]
    flat = a_lo if increasing else b_lo
    rules = [(a_lo, left_ext[1:]), (right_ext[:-1], b_lo), mid]
    best_a, best_b = np.array(flat, dtype=np.float64), np.array(flat, dtype=np.float64)
    best_cost = (a_lo - best_a) + (b_lo - best_b)
    # each rule's cost and choice in fixed buffers (the same values as out of place)
    cost, part = np.empty_like(best_cost), np.empty_like(best_cost)
    use, sign = np.empty(best_cost.shape, dtype=bool), np.empty(best_cost.shape, dtype=bool)
    for lim_a, lim_b in rules:
        with np.errstate(invalid="ignore"):
            np.subtract(a_lo, lim_a, out=cost)
            cost += np.subtract(b_lo, lim_b, out=part)
            np.greater_equal(lim_a, 0, out=use)
            use &= np.greater_equal(lim_b, 0, out=sign)
            use &= np.less(cost, best_cost, out=sign)
        np.copyto(best_a, lim_a, where=use)
        np.copyto(best_b, lim_b, where=use)
        np.copyto(best_cost, cost, where=use)
    return best_a, best_b


def _recursion_block(n: int, h: float) -> int:
    """Block length of :func:`_positive_recursion`: about sqrt(n), with factors e^{+-jh} within
    a block kept far from overflow."""
    return max(1, min(math.isqrt(n) + 1, int(DISCOUNT_SPAN / abs(h))))


def _positive_recursion(h: float, inputs: Array, *, reverse: bool = False) -> Array:
    """y_j = e^h y_{j-1} + inputs_j with y_{-1} = 0 (from the end when ``reverse``; ``h`` may
    be negative), for nonnegative inputs. Within a block, ``y_j = e^{jh} sum_{i <= j} e^{-ih}
    inputs_i`` by a cumulative sum; blocks are chained by their carries. Every value is a sum of
    nonnegative terms, each with a small relative error (:func:`recursion_error`)."""
    values = inputs[::-1] if reverse else inputs
    n = values.size
    block = _recursion_block(n, h)
    pad = (-n) % block
    rows = np.concatenate([values, np.zeros(pad)]).reshape(-1, block)
    j = np.arange(block)
    grow = np.exp(j * h)
    within = np.cumsum(rows * np.exp(-j * h), axis=1) * grow
    powers = grow * math.exp(h)  # e^{(j+1) h}: the carry of the previous block, j+1 steps on
    carry = 0.0
    out = np.empty_like(within)
    for r in range(rows.shape[0]):
        out[r] = within[r] + carry * powers
        carry = float(out[r, -1])
    flat = np.asarray(out.reshape(-1)[:n], dtype=np.float64)
    return flat[::-1] if reverse else flat


def recursion_error(n: int, h: float) -> float:
    """Relative error bound of :func:`_positive_recursion` over ``n`` values: a term passes
    through at most ``block`` additions of a cumulative sum, two exponentials and three
    products (a few u each), and at most ``blocks`` carries (a product and a sum each)."""
    block = _recursion_block(n, h)
    blocks = -(-n // block)
    return U * (block + 3 * blocks + 8 * (2 + abs(h) * block)) * 1.01


def _convex_slopes(slopes: Array, widths: Array) -> Array:
    """Slopes of the greatest convex minorant of the piecewise-linear curve with these segment
    slopes and widths (pool-adjacent-violators): it lies below the curve and meets it at
    both ends."""
    return isotonic_regression(slopes, widths)[0]


def discretise_lower(profile: Profile, h: float) -> DiscretePLD | None:
    """P-masses at losses ``j * h`` that are at most those of a discrete pair the mechanism
    dominates, for an exact profile; None when the floating-point checks cannot certify them.

    The pair's curve is piecewise linear in ``x = e^eps`` through points below the true curve
    whose chords stay below it (:func:`_segment_limits`), then lowered to their greatest convex
    minorant. Left of zero the curve is handled as its excess ``c = delta - (1 - x)``, without
    cancellation. The masses are slope differences, scaled down slightly and checked in
    floating point against the points; the masses that complete both laws to probability one
    sit at losses 0 and ``+-h``. Unlike the shifted chord, the error is of second order in
    ``h`` where the curve is smooth, like the upper bound's. See
    proofs_checks/pld_dominated_pair.
    """
    if isinstance(profile, InfinitySplit):
        return _split_lower(profile, h)
    if isinstance(profile, InfinityAtom):
        return _atom_lower(profile, h)
    return _dominated(profile, h, _NO_ATOM)


def _dominated(profile: Profile, h: float, atom: tuple[float, float]) -> DiscretePLD | None:
    """:func:`discretise_lower` of a pair, or, for ``atom`` = bounds of a mass ``m`` > 0, of a
    sub-pair of P-mass ``1 - m`` and Q-mass 1 whose curve is ``profile`` (its masses sum to at
    most ``1 - m``; the P-only mass is the caller's)."""
    j_lo = min(math.floor(max(profile.loss_lo, -MAX_LOSS) / h), -2)
    j_hi = max(math.ceil(min(profile.loss_hi, MAX_LOSS) / h), 3)
    eps: Array = np.asarray(np.arange(j_lo, j_hi + 1) * h, dtype=np.float64)
    k = -j_lo  # eps[k] == 0.0; points below k are read in c-space, from k on in H-space
    z_c, z_h = _points_below(profile, eps, k, h, atom)
    if np.any(z_c < 0) or np.any(z_h[k:] < 0):
        return None
    p = _minorant_masses(z_c, z_h, np.exp(eps), k, capped=atom != _NO_ATOM)
    return _certified_lower(p, eps, z_c[:k], z_h, k, h, j_lo, atom)


def _atom_lower(profile: InfinityAtom, h: float) -> DiscretePLD | None:
    """``mass[0]`` (at most ``m``) at +infinity beside the dominated sub-pair of ``rest``
    (P-mass at most ``1 - m``, Q-mass at most 1); when the sub-pair is not certified, the
    dominated pair of the whole curve (no mass at +infinity). A range cut short (a lower
    pair may end anywhere: its curve is 0 beyond its last point) cuts the sub-pair's too."""
    m_lo, m_hi = profile.mass
    if not 0.0 < m_lo <= m_hi < 1.0:
        return _dominated(profile, h, _NO_ATOM)
    rest = profile.rest
    if profile.loss_hi < rest.loss_hi:  # the curve's range was cut: so is the sub-pair's
        rest = attrs.evolve(rest, loss_hi=profile.loss_hi)
    pair = _dominated(rest, h, profile.mass)
    if pair is None:
        return _dominated(profile, h, _NO_ATOM)
    return DiscretePLD(pair.offset, pair.masses, m_lo, h, dominated=True)


def _split_lower(profile: InfinitySplit, h: float) -> DiscretePLD | None:
    """``inf_lower`` at +infinity and ``1 - inf_lower`` times the finite part's dominated pair
    (its masses scaled down past the rounding of ``1 - inf_lower`` and of the products). A
    finite part with no loss but 0 (identical laws: randomized response at 0), which the
    construction declines, is the pair of one outcome, which every pair dominates."""
    pair = discretise_lower(profile.finite, h)
    if pair is None and profile.finite.loss_lo == 0.0 == profile.finite.loss_hi:
        pair = DiscretePLD(-2, np.array([0.0, 0.0, 1.0, 0.0, 0.0]), 0.0, h, dominated=True)
    if pair is None or not 0.0 < profile.inf_lower < 1.0:
        return pair
    keep = (1.0 - profile.inf_lower) * (1 - 8 * U)
    return DiscretePLD(pair.offset, pair.masses * keep, profile.inf_lower, h, dominated=True)


def _brackets(
    profile: Profile, eps: Array, k: int, after: int = 3, atom: tuple[float, float] = _NO_ATOM
) -> tuple[Array, Array, Array, Array]:
    """(lo_c, hi_c, lo_h, hi_h): the curve bracketed at the points, as its excess c in the
    points below zero and the ``after`` after (near zero there is no cancellation either way),
    and as delta itself everywhere. With ``atom`` (bounds of ``m``) the curve is a sub-pair's
    of P-mass ``1 - m`` and its excess is over ``1 - m - x``."""
    if atom != _NO_ATOM:
        return _atom_brackets(profile, eps, k, after, atom)
    shrink = 1.0 / (1.0 + LOWER_DEFLATION) * (1 - 8 * U)
    hi_h = _curve_from(profile, eps, k if profile.dual is not None else 0)
    kc = k + after
    one_minus_x = -np.expm1(eps[:kc])
    if profile.dual is not None:
        hi_c = np.asarray(profile.excess(eps[:kc]), dtype=np.float64) * (1 + 4 * U)
        lo_c = hi_c * shrink
    else:
        hi_c = hi_h[:kc] - one_minus_x + 4 * U
        lo_c = np.maximum(hi_h[:kc] * shrink - one_minus_x - 4 * U, 0.0)
    lo_h = hi_h * shrink
    lo_h[:k] = np.maximum(lo_c[:k] + one_minus_x[:k] - 4 * U, 0.0)
    hi_h[:k] = np.minimum(hi_c[:k] + one_minus_x[:k] + 4 * U, 1.0)
    return lo_c, hi_c, lo_h, hi_h


def _curve_from(profile: Profile, eps: Array, start: int) -> Array:
    """The curve at the points ``eps[start:]`` (each point's value is the one the curve gives
    it alone); the points before ``start``, whose values are replaced from the excess, hold 1."""
    if start <= 0:
        return np.array(profile(eps), dtype=np.float64)
    out = np.ones(eps.size, dtype=np.float64)
    out[start:] = profile(eps[start:])
    return out


def _atom_brackets(
    profile: Profile, eps: Array, k: int, after: int, atom: tuple[float, float]
) -> tuple[Array, Array, Array, Array]:
    """:func:`_brackets` of a sub-pair's curve of P-mass ``1 - m`` (``m`` within ``atom``):
    the excess is ``c = delta - (1 - m - x)`` (from the curve: the sub-pair has no dual);
    ``1 - x`` and the sums round by at most ``6u`` in all, ``m`` is charged at its bound on
    the safe side of each bracket, and the upper excess is at least 0 (every excess is)."""
    m_lo, m_hi = atom
    shrink = 1.0 / (1.0 + LOWER_DEFLATION) * (1 - 8 * U)
    hi_h = np.array(profile(eps), dtype=np.float64)
    kc = k + after
    one_minus_x = -np.expm1(eps[:kc])
    hi_c = np.maximum(hi_h[:kc] - one_minus_x + m_hi + 6 * U, 0.0)
    lo_c = np.maximum(hi_h[:kc] * shrink - one_minus_x + m_lo - 6 * U, 0.0)
    lo_h = hi_h * shrink
    lo_h[:k] = np.maximum(lo_c[:k] + one_minus_x[:k] - m_hi - 6 * U, 0.0)
    hi_h[:k] = np.minimum(np.maximum(hi_c[:k] + one_minus_x[:k] - m_lo + 6 * U, 0.0), 1.0)
    return lo_c, hi_c, lo_h, hi_h


def _secant_floors(lo: Array, hi: Array, h: float, *, from_origin: bool) -> tuple[Array, Array]:
    """(left, right) extensions of the secants through the two points before, resp. after,
    every point of a grid of spacing ``h`` (:func:`_secant_floor`); with ``from_origin`` the
    second point's left extension is the secant through (0, 0) (where c(0) = 0) and the first
    point, extended: c_0 e^h."""
    left = _secant_floor(lo, hi, math.exp(h))
    if from_origin:
        left[1] = float(lo[0]) * math.exp(h) * (1 - 8 * U)
    right = _secant_floor(lo[::-1], hi[::-1], math.exp(-h))[::-1]
    return left, right


def _mid_limits(lo: Array, hi: Array, half: float) -> tuple[Array, Array]:
    """The mid rule's limits of every segment of a grid bracketed at its points and midpoints
    (``lo``/``hi`` on the grid of spacing ``half``, from a point to a point): on the segment's
    first point, the secant through its midpoint and last point extended back; on its last,
    the secant through its first point and midpoint extended on."""
    mid = lo[1::2]
    first = _extension_floor(mid, hi[2::2], math.exp(-half))
    last = _extension_floor(mid, hi[:-1:2], math.exp(half))
    return first, last


def _points_below(
    profile: Profile, eps: Array, k: int, h: float, atom: tuple[float, float] = _NO_ATOM
) -> tuple[Array, Array]:
    """(z_c at points 0..k, z_h at every point): values whose chords stay under the curve;
    z_c is 0 at the first point (the pair's curve is 1 - x before it), z_h is 0 at the last.

    The curve is bracketed on the grid of spacing ``h / 2`` (the points and the segments'
    midpoints, for the mid rule of :func:`_segment_limits`); ``(2 j) (h / 2)`` rounds to the
    same double as ``j h``, so the points are read at the same losses."""
    half = h / 2
    fine = np.asarray(np.arange(2 * round(eps[0] / h), 2 * round(eps[-1] / h) + 1) * half)
    lo_cf, hi_cf, lo_hf, hi_hf = _brackets(profile, fine, 2 * k, after=6, atom=atom)
    lo_c, hi_c, lo_h, hi_h = lo_cf[::2], hi_cf[::2], lo_hf[::2], hi_hf[::2]
    left_c, right_c = _secant_floors(lo_c, hi_c, h, from_origin=True)
    left_h, right_h = _secant_floors(lo_h, hi_h, h, from_origin=False)
    # the mid rule: each segment's midpoint with its far end, extended to the near end
    mid_c = _mid_limits(lo_cf[: 2 * k + 1], hi_cf[: 2 * k + 1], half)
    mid_h = _mid_limits(lo_hf[2 * k :], hi_hf[2 * k :], half)
    # segments up to point k (x = 1, where c = delta) in c-space, where c increases; from
    # point k on in H-space, where the curve decreases
    ca, cb = _segment_limits(
        lo_c[: k + 1], left_c[: k + 1], right_c[: k + 1], mid_c, increasing=True
    )
    ha, hb = _segment_limits(lo_h[k:], left_h[k:], right_h[k:], mid_h, increasing=False)
    z_c = np.array(lo_c[: k + 1])
    z_c[:-1] = np.minimum(z_c[:-1], ca)
    z_c[1:] = np.minimum(z_c[1:], cb)
    z_c[0] = 0.0
    z_h = np.array(lo_h)
    z_h[k:-1] = np.minimum(z_h[k:-1], ha)
    z_h[k + 1 :] = np.minimum(z_h[k + 1 :], hb)
    # at point k (x = 1) the excess is the curve plus m (0 without an atom): the point joins
    # both sides at the lower of the two, each lowered past the rounding of the shift
    m_lo, m_hi = atom
    if m_hi:
        z_h[k] = min(float(z_h[k]), (float(z_c[k]) - m_hi) * (1 - 2 * U))
        z_c[k] = min(float(z_c[k]), max((float(z_h[k]) + m_lo) * (1 - 2 * U), 0.0))
    else:
        z_h[k] = min(float(z_h[k]), float(z_c[k]))
        z_c[k] = z_h[k]
    z_h[-1] = 0.0
    return z_c, z_h


def _minorant_masses(z_c: Array, z_h: Array, x: Array, k: int, *, capped: bool = False) -> Array:
    """P-masses of the greatest convex minorant of the points (below them, so below the
    curve): c-slopes up to point k and H-slopes from there, each side keeping its end points,
    pooled across point k where the two sides meet concavely; masses are slope differences
    times ``x`` (slope -1 before the first point, 0 after the last). ``capped``: the slopes
    are then lowered to those of a non-increasing curve (c-slopes at most 1, H-slopes at most
    0; still non-decreasing), which a steep kink between two points can otherwise exceed."""
    dx = np.diff(x)
    sc = _convex_slopes(np.diff(z_c) / dx[:k], dx[:k])
    sh = _convex_slopes(np.diff(z_h[k:]) / dx[k:], dx[k:])
    if sh[0] + 1.0 < sc[-1]:
        sc, sh = _pool_junction(sc, sh, dx, k)
    if capped:
        sc, sh = np.minimum(sc, 1.0), np.minimum(sh, 0.0)
    q = np.empty(x.size)
    q[0] = sc[0]
    q[1:k] = sc[1:] - sc[:-1]
    q[k] = (sh[0] + 1.0) - sc[-1]
    q[k + 1 : -1] = sh[1:] - sh[:-1]
    q[-1] = -sh[-1]
    return np.asarray(x * np.maximum(q, 0.0), dtype=np.float64)


def _pool_junction(sc: Array, sh: Array, dx: Array, k: int) -> tuple[Array, Array]:
    """Both sides' convex slopes made one convex sequence: the block around the junction
    pooled to its width-weighted mean, in H-slopes (c-slopes are H-slopes plus one)."""
    values, blocks = isotonic_regression(np.concatenate([sc - 1.0, sh]), dx)
    i = int(np.searchsorted(blocks, k - 1, side="right")) - 1
    a, b = int(blocks[i]), int(blocks[i + 1])
    pooled = float(values[a])
    sc, sh = np.array(sc), np.array(sh)
    sc[a:] = pooled + 1.0
    sh[: b - k] = pooled
    return sc, sh


def _drop_beyond_zeros(p: Array, z_c: Array, z_h: Array, k: int) -> Array:
    """Where a point is 0 the pair's curve must be 0 there: no mass above it (H-space), or none
    below it (c-space). Such masses come from round-off and are dropped (a lower pair may drop
    masses: they are then completed at losses 0 and +-h like the rest)."""
    zero_h = np.nonzero(z_h[k:] <= 0)[0]
    zero_c = np.nonzero(z_c <= 0)[0]
    p = np.array(p)
    if zero_h.size:
        p[k + int(zero_h[0]) + 1 :] = 0.0
    if zero_c.size:
        p[: int(zero_c[-1])] = 0.0
    return p


def _curve_at_points(p: Array, h: float, k: int) -> tuple[Array, Array]:
    """Upper bounds of the pair's curve at the points from k on (F) and of its excess below
    (C), by the positive recursions ``F_j = e^{-h} F_{j+1} + (1 - e^{-h}) T_{j+1}``
    (``T_{j+1} = sum_{i > j} p_i``) and ``C_j = e^h C_{j-1} + (e^h - 1) B_{j-1}``
    (``B_{j-1} = sum_{i < j} p_i``), with their rounding (and the cumulative sums') charged."""
    m = p.size
    tail = np.concatenate([np.cumsum(p[::-1])[::-1][1:], [0.0]])
    head = np.concatenate([[0.0], np.cumsum(p)[:-1]])
    rel = recursion_error(m, h) + 2 * U * (m + 4)
    f_val = _positive_recursion(-h, -math.expm1(-h) * tail, reverse=True)
    c_val = _positive_recursion(h, math.expm1(h) * head)
    f_val = np.where(f_val > 0, f_val * (1 + rel) + RECURSION_ABS, 0.0)[k:]
    c_val = np.where(c_val > 0, c_val * (1 + rel) + RECURSION_ABS, 0.0)[:k]
    return f_val, c_val


def _certified_lower(
    p: Array,
    eps: Array,
    z_c: Array,
    z_h: Array,
    k: int,
    h: float,
    offset: int,
    atom: tuple[float, float] = _NO_ATOM,
) -> DiscretePLD | None:
    """``p`` scaled down until the pair it completes is checked below the points ``z``:
    ``sum_{i > j} p_i (1 - e^{eps_j - eps_i}) <= z_h[j]`` for eps_j >= 0 and
    ``sum_{i < j} p_i (e^{eps_j - eps_i} - 1) <= z_c[j]`` below; None when that costs more than
    MAX_LOWER_SCALE_LOSS. The laws are completed to probability one by a lossless mass at 0
    and the imbalance at +h or -h, which needs ``e^{-h} <= R_Q / R_P <= e^h`` for the
    remainders R_P = 1 - sum p and R_Q = 1 - sum p e^{-eps}; lower bounds of the completing
    atoms are part of the masses returned (:func:`_add_completion`). With ``atom`` (bounds of
    ``m``) P is completed to ``1 - m`` only: ``R_P = 1 - m - sum p``."""
    p = _drop_beyond_zeros(p, z_c, z_h, k)
    s_p, err_p, s_q, err_q = _mass_sums(p, eps)
    f_val, c_val = _curve_at_points(p, h, k)
    p_lo, p_hi, lift, big, gap = _totals(s_p, err_p, s_q, err_q, atom, h, z_c)
    gamma = max(4 * gap / math.expm1(h), 1e-15)
    limit = math.exp(h) * (1 - 8 * U)
    limit_q = math.exp(lift * h) * (1 - 8 * U) if lift > 1 else limit
    for _ in range(4):
        if gamma > MAX_LOWER_SCALE_LOSS:
            return None
        scale = (1.0 - gamma) / big
        r_p_lo, r_p_hi = p_lo - scale * (s_p + err_p), p_hi - scale * (s_p - err_p)
        r_q_lo, r_q_hi = 1.0 - scale * (s_q + err_q), 1.0 - scale * (s_q - err_q)
        if not (
            r_p_lo > 0 and r_q_lo > 0 and r_p_hi <= r_q_lo * limit and r_q_hi <= r_p_lo * limit_q
        ):
            gamma *= 4
            continue
        fs = f_val * scale * (1 + 4 * U)
        # completion: (a, a) at loss 0 and the imbalance at +h (P short) or -h (Q short);
        # only a mass at +h is seen by the checks, at eps = 0, as b (1 - e^{-h}) = R_P - R_Q
        fs[0] += max(0.0, r_p_hi - r_q_lo) * (1 + 4 * U)
        cs = c_val * scale * (1 + 4 * U)
        if lift > 1:
            _lifted_completion(cs, k, h, lift, max(0.0, r_q_hi - r_p_lo))
        if np.any((fs > 0) & (z_h[k:] <= 0)) or np.any((cs > 0) & (z_c <= 0)):
            return None
        with np.errstate(divide="ignore", invalid="ignore"):
            worst = max(
                float(np.max(np.where(fs > 0, fs / z_h[k:], 0.0))),
                float(np.max(np.where(cs > 0, cs / z_c, 0.0))),
            )
        if worst <= 1.0:
            masses = p * scale * (1 - 4 * U)
            _add_completion(masses, p, eps, k, h, scale, r_p_lo, atom, lift)
            return DiscretePLD(offset, masses, 0.0, h, dominated=True)
        gamma = 1.0 - (1.0 - gamma) / (worst * (1 + 1e-9))
    return None


def _fsum(values: Array) -> float:
    """``math.fsum(values.tolist())``: the same float (the buffer yields the same Python floats),
    without building the list."""
    return math.fsum(np.ascontiguousarray(values, dtype=np.float64).data)


def _mass_sums(p: Array, eps: Array) -> tuple[float, float, float, float]:
    """(sum p, its error bound, sum p e^{-eps}, its error bound)."""
    s_p = _fsum(p)  # correctly rounded sums; each q_i errs by a few u ...
    q_terms = p * np.exp(-eps)
    s_q = _fsum(q_terms)
    err_p = 8 * U * s_p + 1e-300
    # ... and by |eps_i| u more for the rounding of eps_i = fl(i h) inside the exponential
    spread = float(np.sum(q_terms * np.abs(eps))) * (1 + 2 * U * q_terms.size)
    err_q = 16 * U * s_q + 1.01 * U * spread + 1e-300
    return s_p, err_p, s_q, err_q


def _totals(
    s_p: float,
    err_p: float,
    s_q: float,
    err_q: float,
    atom: tuple[float, float],
    h: float,
    z_c: Array,
) -> tuple[float, float, int, float, float]:
    """(p_lo, p_hi, lift, big, gap): P's share of the finite outcomes, bracketed (1 without an
    atom), the steps ``lift`` of the loss ``-lift h`` of the atom that completes a Q-surplus
    (:func:`_atom_totals`), the divisor that makes both remainders positive, and the
    imbalance the first scale is sized for."""
    if atom == _NO_ATOM:
        return 1.0, 1.0, 1, max(s_p + err_p, s_q + err_q), abs(s_p - s_q) + err_p + err_q
    p_lo, p_hi, lift = _atom_totals(atom, h, z_c)
    big = max((s_p + err_p) / p_lo * (1 + 2 * U), s_q + err_q)
    gap = abs(s_q - s_p - atom[0]) + err_p + err_q + 4 * U
    return p_lo, p_hi, lift, big, gap


def _atom_totals(atom: tuple[float, float], h: float, z_c: Array) -> tuple[float, float, int]:
    """(lower, upper) bounds of a sub-pair's P-mass ``1 - m`` and the steps ``lift`` of its
    Q-surplus atom: R_Q / R_P is about ``1 / (1 - m)``, so the atom sits at a loss ``-lift h``
    at most ``2 log(1 - m)`` (1 step for ``m`` up to about ``h / 2``), and not below the last
    point of ``z_c`` (the points below 0) at 0 (no excess may reach such a point)."""
    m_lo, m_hi = atom
    p_lo, p_hi = (1.0 - m_hi) * (1 - 2 * U), (1.0 - m_lo) * (1 + 2 * U)
    zeros = np.flatnonzero(z_c <= 0.0)
    floor = int(zeros[-1]) if zeros.size else 0
    lift = max(1, min(math.ceil(-2.0 * math.log1p(-m_hi) / h), z_c.size - floor))
    return p_lo, p_hi, lift


def _lifted_completion(cs: Array, k: int, h: float, lift: int, gap: float) -> None:
    """Add to ``cs`` (in place) the excess of the Q-surplus atom at loss ``-lift h`` at the
    points above it: ``b (e^{eps_j + lift h} - 1)`` with ``b (e^{lift h} - 1)`` at most
    ``gap``, an upper bound of ``R_Q - R_P``."""
    b_hi = gap / math.expm1(lift * h) * (1 + 4 * U)
    # eps_j + lift h = (j - k + lift) h, taken as an integer times h (no cancellation)
    cs[k - lift + 1 : k] += b_hi * np.expm1(np.arange(1, lift) * h) * (1 + 4 * U)


def _add_completion(
    masses: Array,
    p: Array,
    eps: Array,
    k: int,
    h: float,
    scale: float,
    r_p_lo: float,
    atom: tuple[float, float] = _NO_ATOM,
    lift: int = 1,
) -> None:
    """Add to ``masses`` (in place) lower bounds of the atoms that complete the pair of the
    masses ``scale p`` to probability one: ``(a, a)`` at loss 0 (index ``k``) and the imbalance
    ``b`` at loss ``+h`` (``R_P > R_Q``: ``b (1 - e^{-h}) = R_P - R_Q``) or ``-h`` (``b (e^h - 1) =
    R_Q - R_P``), ``a = R_P - b``. Without them each composed step would lose the mass ``R_P``
    (the scale's shortfall, about ``1/h`` times the rounding of the sums), which adds up over
    many steps.

    ``R_P - R_Q = scale sum_i p_i (e^{-eps_i} - 1)`` is summed directly (terms with relative
    error at most ``(|eps_i| + 4) u``: ``expm1``, the product, and ``eps_i = fl(i h)``;
    ``fsum`` rounds once), not as the difference of two sums near one;
    ``r_p_lo`` is a lower bound of ``R_P``. When the sign of the imbalance is not certain, only
    ``a`` is added, below ``R_P`` less the larger of the two possible ``b``. With ``atom``
    (bounds of ``m``; P completed to ``1 - m``) the imbalance is that sum less ``m``, and a
    Q-surplus sits at loss ``-lift h`` (``b (e^{lift h} - 1) = R_Q - R_P``)."""
    terms = p * np.expm1(-eps)
    s_d = _fsum(terms)  # correctly rounded: errs by u |s_d|
    # each term errs by (|eps_i| + 4) u |t_i|; their sum is bounded in any order of summation
    spread = float(np.sum(np.abs(terms) * (np.abs(eps) + 4.0))) * (1 + 2 * U * terms.size)
    err = U * abs(s_d) + 1.01 * U * spread + 1e-300
    d_lo = scale * (s_d - err)
    d_hi = scale * (s_d + err)
    d_lo -= 2 * U * abs(d_lo) + 1e-300
    d_hi += 2 * U * abs(d_hi) + 1e-300
    if atom != _NO_ATOM:
        d_lo = (d_lo - atom[1]) - 2 * U * (abs(d_lo) + atom[1])
        d_hi = (d_hi - atom[0]) + 2 * U * (abs(d_hi) + atom[0])
    up, down = -math.expm1(-h), math.expm1(lift * h)  # 1 - e^{-h}, e^{lift h} - 1
    side, b_lo = 0, 0.0
    if d_lo > 0:
        side, b_lo, b_hi = 1, d_lo / up, d_hi / up
    elif d_hi < 0:
        side, b_lo, b_hi = -1, -d_hi / down, -d_lo / down
    else:
        b_hi = max(d_hi / up, -d_lo / down)
    b_lo *= 1 - 4 * U
    b_hi *= 1 + 4 * U
    a_lo = (r_p_lo - b_hi) - 4 * U * (abs(r_p_lo) + b_hi)
    if a_lo > 0:
        masses[k] = (masses[k] + a_lo) * (1 - 4 * U)
    if side and b_lo > 0:
        at = k + 1 if side > 0 else k - lift
        masses[at] = (masses[at] + b_lo) * (1 - 4 * U)
