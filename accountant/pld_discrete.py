"""The loss grid of discretised privacy-loss distributions, and the connect-the-dots PMF of an
upper-bound curve.

Every component curve is replaced by the chord ("connect-the-dots", Doroshenko et al. 2022)
through its values on a loss grid of spacing ``h``. The chord of a convex curve lies above it, so
the resulting discrete pair dominates the mechanism, and dominating pairs compose (Zhu, Dong &
Wang 2022). Floating-point masses are clamped and the chord is re-checked on the grid: any deficit
is added to the mass at +infinity.
"""

from __future__ import annotations

import math
from typing import (
    Any,
)

import attrs
import numpy as np
from numpy.typing import (
    NDArray,
)

from dpledger.accountant.profiles_base import (
    REL_MARGIN,
    Profile,
)

__all__ = [
    "CHORD_RAISE",
    "EXTENDED_ABOVE",
    "LOWER_DEFLATION",
    "MAX_CERTIFIED_EPSILON",
    "MAX_FFT_LEN",
    "MAX_LOSS",
    "MAX_UPPER_LOSS",
    "SUBNORMAL_SLACK",
    "Array",
    "DiscretePLD",
    "U",
    "discretise",
]


Array = NDArray[np.float64]


#: largest finite privacy loss represented on the grid below zero, and on the grid of
#: :func:`discretise_lower` (whose slopes are taken in double precision in x = e^eps)
MAX_LOSS = 600.0


#: losses above this make :func:`discretise` work in extended precision (e^eps overflows a
#: double near 709.8)
EXTENDED_ABOVE = 700.0


#: largest finite privacy loss on the upper grid: e^eps must fit the extended type (it does up
#: to ~11356 where ``long double`` is the x87 80-bit type; elsewhere the grid stops at MAX_LOSS)
MAX_UPPER_LOSS = 11000.0 if math.log(float(np.finfo(np.longdouble).max)) > 11100 else MAX_LOSS


#: single-release roots are searched up to this epsilon (and the curve's accurate range):
#: beyond, the upper bound is reported as unbounded and the lower one capped
MAX_CERTIFIED_EPSILON = 1e5


#: largest FFT length (complex128 rfft of 2^23 doubles is ~70 MB)
MAX_FFT_LEN = 1 << 23


#: relative raise of the curve values the chord is built through
CHORD_RAISE = 1e-9


#: absolute allowance per curve value: below the smallest normal double each operation rounds
#: by up to half of 2^-1074, which relative allowances do not cover (a value takes a few such
#: operations; added to a normal value it rounds away, so nothing at normal values moves)
SUBNORMAL_SLACK = 64 * 2.0**-1074


#: relative excess of a chord's curve values over the true curve of an exact profile
#: (REL_MARGIN of the profile, twice, and the raise above)
LOWER_DEFLATION = 2 * REL_MARGIN + CHORD_RAISE


@attrs.frozen
class DiscretePLD:
    """P-masses at losses ``(offset + i) * h`` plus a mass at +infinity."""

    offset: int
    masses: Array
    inf_mass: float
    h: float
    #: the masses are at most those of a pair the mechanism dominates (:func:`discretise_lower`)
    dominated: bool = False
    #: a chord's (not dominated) relative excess for lower bounds: its finite part's curve at
    #: every grid point is at most ``1 + excess`` times the true curve plus ``slack``, and its
    #: finite mass at most ``1 + excess`` (:func:`_chord_excess`)
    excess: float = LOWER_DEFLATION
    slack: float = 0.0
    #: log-MGF values already computed, by the bytes of the tilts (the masses never change)
    mgf_memo: dict[bytes, Array] = attrs.field(factory=dict, init=False, eq=False, repr=False)

    @property
    def losses(self) -> Array:
        return np.asarray((self.offset + np.arange(self.masses.size)) * self.h, dtype=float)


def discretise(profile: Profile, h: float) -> DiscretePLD:
    """Connect-the-dots PMF of an upper-bound curve on the grid ``j * h``."""
    # losses below -MAX_LOSS are lumped into the lowest grid point, losses above the curve's
    # accurate range or MAX_UPPER_LOSS into the mass at +infinity (both on the safe side)
    top = min(profile.loss_hi, profile.accurate_hi, MAX_UPPER_LOSS)
    j_lo = math.floor(max(profile.loss_lo, -MAX_LOSS) / h)
    j_hi = math.ceil(top / h)
    if j_hi <= j_lo:
        j_hi = j_lo + 1
    eps: Array = np.asarray((j_lo + np.arange(j_hi - j_lo + 1)) * h, dtype=np.float64)
    d = _curve_read(profile, eps)
    # a positive value near the subnormal range may read a few units of 2^-1074 low; a value
    # read as 0 stays 0 (a pure curve's zeros are exact)
    np.add(d, SUBNORMAL_SLACK, out=d, where=d > 0.0)
    # enforce monotonicity (a curve is non-increasing); raising values keeps it an upper bound
    d = np.maximum.accumulate(d[::-1])[::-1]
    checked = np.array(d)  # the curve the chord must dominate
    # build the chord through slightly raised values, so that the round-off of the masses below
    # stays under the raise and the re-check finds no deficit (a deficit is charged to +infinity
    # for every epsilon, which would dominate queries at delta ~ 1e-15)
    d = np.minimum(1.0, d * (1 + CHORD_RAISE))
    if eps[-1] <= EXTENDED_ABOVE:
        p_mass, _, excess_c = _chord_masses(profile, eps, d, h)
    else:
        # x = e^eps in extended precision; the check reads the stored P-masses
        p_ext, _, excess_c = _chord_masses(profile, eps, d, h, np.longdouble)
        p_mass = np.asarray(p_ext, dtype=np.float64)
    inf_mass = float(d[-1])
    stored = _stored_curve(p_mass, h)
    deficit = _chord_deficit(eps, checked, stored, inf_mass)
    if deficit > 0:
        inf_mass += deficit
    rho, slack = _chord_excess(eps, checked, excess_c, stored)
    return DiscretePLD(j_lo, p_mass, min(inf_mass, 1.0), h, excess=rho, slack=slack)


def _curve_read(profile: Profile, eps: Array) -> Array:
    """The curve at the grid ``eps`` (increasing) where the chord reads it: with two or more
    negative points, :func:`_chord_masses` takes the masses below the last of them from the
    excess curve, and no value of the curve below that point reaches the masses (nor the
    monotone envelope above it), so it is not evaluated there (1 stands in). Each point's
    value is the one the curve gives it alone."""
    skip = max(int(np.count_nonzero(eps < 0)) - 1, 0)
    if skip == 0:
        return profile(eps)
    d = np.ones(eps.size, dtype=np.float64)
    d[skip:] = profile(eps[skip:])
    return d


def _chord_masses(
    profile: Profile, eps: Array, d: Array, h: float, dtype: type[np.floating[Any]] = np.float64
) -> tuple[NDArray[Any], NDArray[Any], Array | None]:
    """(P-masses, Q-masses, excess values) of the chord through ``d`` at ``eps`` (linear in
    x = e^eps, of type ``dtype``); ``d`` is raised in place below zero where the excess curve
    gives a higher value. With two or more negative points, ``d`` is read from the last of them
    on only, and the masses below it come from the excess curve, whose values at the negative
    points (made non-decreasing and raised) are returned (None otherwise)."""
    x = np.exp(eps.astype(dtype))
    # the steps as x e^h - x, not differences of rounded exponentials (near x = 1 those err by
    # about 2u / h relative, beyond CHORD_RAISE on fine grids)
    dx = x[:-1] * np.expm1(np.asarray(h, dtype=dtype))
    slopes = np.empty(eps.size + 1, dtype=dtype)
    slopes[0] = (1.0 - d[0]) / x[0]
    slopes[1:-1] = (d[:-1] - d[1:]) / dx
    slopes[-1] = 0.0
    q_mass = slopes[:-1] - slopes[1:]
    neg = eps < 0
    excess_c: Array | None = None
    if neg.sum() > 1:
        # where delta ~ 1 - e^eps, work with the excess c = delta - (1 - e^eps) to avoid
        # cancellation: slope = 1 - c', so q-masses are differences of c-slopes
        k = int(neg.sum())
        c = profile.excess(eps[:k])
        c = np.maximum.accumulate(c)  # c is non-decreasing in eps; raising keeps an upper bound
        c = c * (1 + CHORD_RAISE)  # continuous with the raise of d at eps = 0 (where d = c)
        cs = np.empty(k + 1, dtype=dtype)
        cs[0] = c[0] / x[0]
        cs[1:k] = np.diff(c) / dx[: k - 1]
        cs[k] = 1.0 - slopes[k]
        q_mass[:k] = cs[1:] - cs[:-1]
        d[:k] = np.maximum(d[:k], -np.expm1(eps[:k]) + c)
        excess_c = np.asarray(c, dtype=np.float64)
    q_mass = np.maximum(q_mass, 0.0)
    return x * q_mass, q_mass, excess_c


#: the stored finite curve at every grid point, its finite mass, and the relative error count
#: of both (:func:`_stored_curve`)
_Stored = tuple[NDArray[np.longdouble], NDArray[np.longdouble], float]


def _stored_curve(p_mass: Array, h: float) -> _Stored:
    """The curve of the stored finite P-masses ``p_j`` at the grid losses ``j h``, at every
    grid point: ``S_i = sum_{j > i} p_j (1 - e^{-(j - i) h})``, summed without cancellation as
    ``S_i = (1 - e^{-h}) sum_{l >= i} e^{-(l - i) h} P_l`` with ``P_l = sum_{j > l} p_j`` (all
    terms non-negative), in extended precision, so its round-off is relative to ``S_i`` itself;
    and the finite mass ``p_0 + P_0``. Each errs by at most ``count u_ext`` of itself."""
    pl = p_mass.astype(np.longdouble)
    tail_p, terms = _blocked_suffix(pl)
    mass = np.array([pl[0] + tail_p[0]], dtype=np.longdouble)
    chord_s, more = _discounted_suffix(tail_p, h)
    return chord_s, mass, (terms + more + 8) * float(np.finfo(np.longdouble).eps)


def _chord_deficit(eps: Array, checked: Array, stored: _Stored, inf_mass: float) -> float:
    """How far the chord falls below the curve it must dominate, on the grid points eps >= 0:
    the chord is the curve of the stored pair, ``inf + S_i`` (:func:`_stored_curve`)."""
    nonneg = eps >= 0
    if not nonneg.any():
        return 0.0
    k0 = int(np.argmax(nonneg))
    chord_s, _, count = stored
    chord = chord_s[k0:] + inf_mass
    # each S_i is a sum of non-negative rounded terms: its error is at most count u_ext S_i,
    # and adding the mass at infinity rounds once more
    gap = checked[k0:].astype(np.longdouble)
    gap -= chord
    chord *= count
    chord *= 2
    gap += chord
    return max(float(np.max(gap)), 0.0)


#: a curve value whose certified lower bound is below this is covered by the chord's additive
#: slack rather than its relative excess (near the subnormal range relative errors are large)
CHORD_TINY = 1e-250


def _chord_excess(
    eps: Array, checked: Array, excess_c: Array | None, stored: _Stored
) -> tuple[float, float]:
    """(excess, slack) of a chord for lower bounds, measured on the stored masses: at every
    grid point the stored finite curve (:func:`_stored_curve`, rounded up) is at most
    ``1 + excess`` times a lower bound of the true curve where that is at least CHORD_TINY, and
    at most ``slack`` elsewhere; the finite mass is at most ``1 + excess``. The lower bounds of
    the true curve: the curve read, less the subnormal allowance, over ``1 + 2 REL_MARGIN`` (an
    exact profile's readings are within REL_MARGIN of it, and the monotone envelope only takes
    readings at larger losses); at the negative points read through the excess curve,
    ``1 - e^eps`` plus the excess (unraised) over ``1 + 2 REL_MARGIN``. Clamped negative slope
    differences and rounded masses can raise the stored curve above the raise of the values it
    was built through (by up to ~1e-16 R / h^2 over a stretch of width R where the curve is
    linear in e^eps); this measures what the mixture argument of the lower bounds needs."""
    chord_s, mass, count = stored
    up = 1 + count
    shrink = (1 - 8 * U) / (1 + 2 * REL_MARGIN)
    ref = np.maximum(checked - SUBNORMAL_SLACK, 0.0) * shrink
    if excess_c is not None:
        k = excess_c.size
        ref[:k] = (-np.expm1(eps[:k]) + excess_c / (1 + CHORD_RAISE)) * shrink
    big = ref >= CHORD_TINY
    ratio = float(np.max(chord_s[big] * up / ref[big])) if big.any() else 0.0
    ratio = max(ratio, float(mass[0] * up))
    excess = max(LOWER_DEFLATION, (ratio - 1.0) * (1 + 8 * U) + 8 * U)
    slack = float(np.max(chord_s[~big])) * (1 + 2 * count) if (~big).any() else 0.0
    return excess, slack


def _discounted_suffix(
    tail: NDArray[np.longdouble], h: float
) -> tuple[NDArray[np.longdouble], float]:
    """(S_i = (1 - e^{-h}) sum_{l >= i} e^{-(l - i) h} tail_l, error count) in blocks short
    enough that e^{-h} to the block length stays far from underflow; every term is
    non-negative, so each S_i errs by at most ``count`` u_ext S_i."""
    n = tail.size
    step = np.longdouble(h)
    block = max(1, min(math.isqrt(n) + 1, int(600.0 / max(h, 1e-300))))
    pad = (-n) % block
    rows = np.concatenate([tail, np.zeros(pad, dtype=tail.dtype)]).reshape(-1, block)
    offsets = np.arange(block, dtype=np.longdouble) * step
    down = np.exp(-offsets)  # e^{-(l - s) h} within a block starting at s
    # W_i = sum_{l >= i, in the block} e^{-(l - i) h} t_l, as e^{(i - s) h} times a suffix sum
    within = np.cumsum((rows * down)[:, ::-1], axis=1)[:, ::-1] * np.exp(offsets)
    # the sum from each block's start onwards, carried back block by block
    carry = np.zeros(rows.shape[0] + 1, dtype=tail.dtype)
    jump = np.exp(-np.longdouble(block) * step)
    for r in range(rows.shape[0] - 1, -1, -1):
        carry[r] = within[r, 0] + jump * carry[r + 1]
    # e^{-(block - (i - s)) h} times the next block's sum
    after = np.exp(-(np.longdouble(block) * step - offsets))[None, :] * carry[1:, None]
    within += after
    total = within.reshape(-1)[:n]
    total *= -np.expm1(-step)
    return total, float(2 * block + 3 * rows.shape[0] + 16)


def _blocked_suffix(values: NDArray[np.longdouble]) -> tuple[NDArray[np.longdouble], float]:
    """(s_i = sum_{k > i} values_k, error count): summed in blocks, so that each s_i is a sum
    of at most ``count`` rounded additions (its error is at most count u |s_i| for values >= 0)."""
    n = values.size
    block = max(1, math.isqrt(n))
    pad = (-n) % block
    padded = np.concatenate([values, np.zeros(pad, dtype=values.dtype)]).reshape(-1, block)
    within = np.cumsum(padded[:, ::-1], axis=1)[:, ::-1]  # sum from position to block end
    totals = within[:, 0]
    after = np.concatenate([np.cumsum(totals[::-1])[::-1][1:], np.zeros(1, dtype=values.dtype)])
    inclusive = (within + after[:, None]).reshape(-1)[:n]
    suffix = np.concatenate([inclusive[1:], np.zeros(1, dtype=values.dtype)])
    return suffix, float(2 * block + padded.shape[0] + 2)


#: unit roundoff of IEEE double
U = 2.0**-53
