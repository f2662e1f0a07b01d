"""Discretised privacy-loss distributions: connect-the-dots PMFs and FFT composition.

Upper bounds: every component curve is replaced by the chord ("connect-the-dots", Doroshenko et
al. 2022) through its values on a loss grid of spacing ``h``. The chord of a convex curve lies
above it, so the resulting discrete pair dominates the mechanism, and dominating pairs compose
(Zhu, Dong & Wang 2022). Floating-point masses are clamped and the chord is re-checked on the
grid: any deficit is added to the mass at +infinity.

Lower bounds: the same chord shifted down by one grid step lies below the true curve of an exact
profile, so composing shifted chords (= the upper composition shifted by ``count * h``) gives a
dominated pair.

Composition multiplies FFTs of length ``N`` (cyclic). Chernoff bounds on the discretised sum
choose a window ``[a, b]`` that holds all but ``tail`` mass; mass above ``b`` is charged to delta,
mass below ``a`` (aliased upwards) is subtracted from lower bounds. FFT round-off is estimated
from the most negative output value and charged to delta as well.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray
from scipy import fft as sfft
from scipy import special

from dpledger.accountant.profiles import REL_MARGIN, Profile
from dpledger.core.errors import BoundUnavailable

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
    d = profile(eps)
    # enforce monotonicity (a curve is non-increasing); raising values keeps it an upper bound
    d = np.maximum.accumulate(d[::-1])[::-1]
    checked = np.array(d)  # the curve the chord must dominate
    # build the chord through slightly raised values, so that the round-off of the masses below
    # stays under the raise and the re-check finds no deficit (a deficit is charged to +infinity
    # for every epsilon, which would dominate queries at delta ~ 1e-15)
    d = np.minimum(1.0, d * (1 + CHORD_RAISE))
    if eps[-1] <= EXTENDED_ABOVE:
        p_mass, q_mass = _chord_masses(profile, eps, d)
    else:
        # x = e^eps in extended precision; the check reads the Q-masses of the stored P-masses
        p_ext, _ = _chord_masses(profile, eps, d, np.longdouble)
        p_mass = np.asarray(p_ext, dtype=np.float64)
        q_mass = p_mass.astype(np.longdouble) * np.exp(-eps.astype(np.longdouble))
    inf_mass = float(d[-1])
    deficit = _chord_deficit(eps, checked, p_mass, q_mass, inf_mass)
    if deficit > 0:
        inf_mass += deficit
    return DiscretePLD(j_lo, p_mass, min(inf_mass, 1.0), h)


def _chord_masses(
    profile: Profile, eps: Array, d: Array, dtype: type[np.floating[Any]] = np.float64
) -> tuple[NDArray[Any], NDArray[Any]]:
    """(P-masses, Q-masses) of the chord through ``d`` at ``eps`` (linear in x = e^eps, of type
    ``dtype``); ``d`` is raised in place below zero where the excess curve gives a higher value."""
    x = np.exp(eps.astype(dtype))
    dx = np.diff(x)
    slopes = np.empty(eps.size + 1, dtype=dtype)
    slopes[0] = (1.0 - d[0]) / x[0]
    slopes[1:-1] = (d[:-1] - d[1:]) / dx
    slopes[-1] = 0.0
    q_mass = slopes[:-1] - slopes[1:]
    neg = eps < 0
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
    q_mass = np.maximum(q_mass, 0.0)
    return x * q_mass, q_mass


def _chord_deficit(
    eps: Array, checked: Array, p_mass: Array, q_mass: Array, inf_mass: float
) -> float:
    """How far the chord falls below the curve it must dominate, on the grid points eps >= 0.

    The chord's value at eps_i is inf + sum_{j>i} p_j (1 - e^{eps_i - eps_j}), evaluated in
    extended precision (below zero both sides are ~1 - e^eps and the comparison is round-off).
    """
    nonneg = eps >= 0
    if not nonneg.any():
        return 0.0
    k0 = int(np.argmax(nonneg))
    pl = p_mass[k0:].astype(np.longdouble)
    ql = q_mass[k0:].astype(np.longdouble)
    tail_p, terms = _blocked_suffix(pl)
    tail_q, _ = _blocked_suffix(ql)
    chord = inf_mass + tail_p - np.exp(eps[k0:].astype(np.longdouble)) * tail_q
    gap = checked[k0:].astype(np.longdouble) - chord
    # the extended-precision evaluation itself errs by at most `terms` u_ext times
    # (tail_p + x tail_q), and x tail_q <= tail_p + inf_mass
    slack = 4 * (terms + 4) * np.finfo(np.longdouble).eps * (tail_p + inf_mass)
    return max(float(np.max(gap + 2 * slack)), 0.0)


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


def _log_mgf(pld: DiscretePLD, lam: Array) -> Array:
    """log sum_j p_j exp(lam * l_j) for every lam (finite part only).

    The grid is uniform, so with ``j = a B + b`` the sum factors into a matrix product of
    ``p_{aB+b} / max_b p`` and ``e^{lam h b}`` (both at most 1 after scaling, ``|lam| h B`` at
    most MGF_BLOCK_SPAN so that no kept term underflows), followed by a log-sum-exp over the
    blocks: ``n + B T`` exponentials instead of ``n T``. Each value is a sum of positive terms
    with relative error below ``(B + 16) u``."""
    lam = np.asarray(lam, dtype=np.float64)
    key = lam.tobytes()
    known = pld.mgf_memo.get(key)
    if known is None:
        known = _log_mgf_blocked(pld, lam)
        if len(pld.mgf_memo) < MGF_MEMO_SIZE:
            pld.mgf_memo[key] = known
    return known.copy()


#: most tilt vectors whose log-MGF one discretised PLD keeps
MGF_MEMO_SIZE = 64


def _log_mgf_blocked(pld: DiscretePLD, lam: Array) -> Array:
    """:func:`_log_mgf`, computed."""
    masses = pld.masses
    if not (masses > 0).any():
        return np.full(lam.shape, -np.inf)
    n = masses.size
    reach = float(np.max(np.abs(lam))) * pld.h
    block = max(1, min(math.isqrt(n) + 1, int(MGF_BLOCK_SPAN / reach) if reach > 0 else n))
    if block < 16 or n * lam.size < MGF_DIRECT_WORK:
        return _log_mgf_direct(pld, lam)
    pad = (-n) % block
    rows = np.concatenate([masses, np.zeros(pad)]).reshape(-1, block)
    top = rows.max(axis=1)
    live = top > 0
    rows, top = rows[live], top[live]
    starts = (np.nonzero(live)[0] * block + pld.offset) * pld.h  # loss of each row's first point
    steps = np.arange(block) * pld.h
    shift = np.maximum(0.0, lam * steps[-1])  # max over b of lam h b
    grow = np.exp(steps[:, None] * lam[None, :] - shift[None, :])  # (B, T), at most 1
    sums = (rows / top[:, None]) @ grow  # (A, T), positive
    with np.errstate(divide="ignore"):
        logs = np.log(sums + MGF_FLOOR) + np.log(top)[:, None] + shift[None, :]
    logs = logs + starts[:, None] * lam[None, :]
    peak = logs.max(axis=0)
    return np.asarray(peak + np.log(np.exp(logs - peak[None, :]).sum(axis=0)), dtype=np.float64)


def _log_mgf_direct(pld: DiscretePLD, lam: Array) -> Array:
    """:func:`_log_mgf` term by term (for steep exponents, where blocks would be short)."""
    pos = pld.masses > 0
    logp = np.log(pld.masses[pos])
    losses = pld.losses[pos]
    out = np.empty(lam.shape, dtype=np.float64)
    rows = max(1, (1 << 21) // max(losses.size, 1))  # bound the temporary to ~16 MB
    for start in range(0, lam.size, rows):
        part = lam[start : start + rows]
        x = logp[None, :] + part[:, None] * losses[None, :]
        top = x.max(axis=1)
        out[start : start + rows] = top + np.log(np.exp(x - top[:, None]).sum(axis=1))
    return out


#: below this many terms the direct sum is cheaper than the blocks' set-up
MGF_DIRECT_WORK = 1 << 18
#: largest |lam| h B within one block of :func:`_log_mgf` (e^-500 is far above underflow)
MGF_BLOCK_SPAN = 500.0
#: bound on a block's terms lost to underflow (each below e^-745 after scaling)
MGF_FLOOR = 1e-290


#: unit roundoff of IEEE double
U = 2.0**-53
#: constant ``c`` of the normwise FFT error bound ``||fl(F x) - F x||_2 <= c u log2(n) ||F x||_2``
#: assumed for scipy's pocketfft (forward and inverse, real or complex); Higham (2002, Thm 24.2)
#: gives about 6 for radix 2; proofs_checks/pld_tilted_fft measures it below 1
FFT_ERROR_CONSTANT = 16.0
#: relative error of one complex multiplication (Higham, Lemma 3.5: sqrt(2) gamma_2), rounded up
CMUL_ERROR = 3.0 * U
#: component masses below this are moved to +infinity (upper) or dropped (lower)
TINY_MASS = 1e-280
#: absolute error floor per spectrum entry (underflow of subnormal products)
ABS_FLOOR = 1e-290
#: tilts tried by the Chernoff searches
THETAS = np.geomspace(1e-3, 1e5, 64)


@attrs.frozen
class ComposedPLD:
    """Certified per-point brackets of the composed P-masses on a window, and the tail charges.

    ``upper[i]`` and ``lower[i]`` bracket the exact mass of the discretised sum at loss
    ``(offset + i) h`` (wrapped contributions aside, see :func:`wrap_above`).
    """

    offset: int
    upper: Array
    lower: Array
    inf_mass: float
    h: float
    tilt: float
    #: P(S >= top of the window): charged to upper bounds
    upper_tail: float
    #: P(S < bottom of the window): charged to upper bounds below the window, and (times
    #: e^{-tilt W}) subtracted from lower bounds as mass wrapped to the top
    lower_tail: float
    #: component masses below TINY_MASS moved out of the composition (charged to upper bounds)
    dropped: float
    total_count: int
    #: (theta, log E[e^{(tilt + theta) S}]) pairs for the wrap-around bound of lower bounds
    wrap_thetas: tuple[tuple[float, float], ...]
    #: the largest certified error of the tilted PMF (for diagnostics)
    tilted_error: float
    #: every component is a dominated pair: lower bounds need no shift (:func:`lower_shift`)
    dominated: bool = False
    #: the compositions whose sum this is (each bounds its own wrap-around, at its own tilt)
    parts: tuple[ComposedPLD, ...] = ()

    @property
    def losses(self) -> Array:
        return np.asarray((self.offset + np.arange(self.upper.size)) * self.h, dtype=float)

    @property
    def width(self) -> float:
        return float(self.upper.size) * self.h


def log_mgf_total(plds: Sequence[tuple[DiscretePLD, int]], lam: Array) -> Array:
    """log E[e^{lam S}] of the discretised sum (finite part), for every lam."""
    out = np.zeros(lam.shape, dtype=np.float64)
    for pld, count in plds:
        out += count * _log_mgf(pld, lam)
    return out


def tilt_for_delta(plds: Sequence[tuple[DiscretePLD, int]], delta: float) -> float:
    """The Chernoff-optimal tilt for the tail level ``delta`` (where epsilon(delta) lies)."""
    values = (log_mgf_total(plds, THETAS) - math.log(delta)) / THETAS
    return float(THETAS[int(np.argmin(values))])


def chernoff_epsilon(plds: Sequence[tuple[DiscretePLD, int]], delta: float) -> float:
    """The Chernoff estimate of epsilon(delta), min over tilts of (K(tilt) - log delta) / tilt
    (an estimate only: it orders the directions to compose)."""
    return float(np.min((log_mgf_total(plds, THETAS) - math.log(delta)) / THETAS))


def tilt_for_epsilon(plds: Sequence[tuple[DiscretePLD, int]], eps: float) -> float:
    """The Chernoff-optimal tilt for the tail above ``eps`` (0 if eps is below the mean)."""
    values = log_mgf_total(plds, THETAS) - THETAS * eps
    i = int(np.argmin(values))
    return float(THETAS[i]) if values[i] < 0 else 0.0


def chernoff_level(plds: Sequence[tuple[DiscretePLD, int]], eps: float) -> float:
    """The Chernoff bound on P(S > eps): the order of delta(eps), for choosing windows."""
    values = log_mgf_total(plds, THETAS) - THETAS * eps
    return max(1e-300, min(1.0, math.exp(float(np.min(values)))))


def tilted_window(
    plds: Sequence[tuple[DiscretePLD, int]],
    tilt: float,
    tail: float,
    untilted_tail: float | None = None,
) -> tuple[float, float]:
    """[a, b] holding all but ``tail`` of the tilted distribution on each side (Chernoff);
    ``b`` is lowered to where the *untilted* tail is below ``untilted_tail`` if that is lower
    (heavy-tailed components otherwise stretch the tilted window far beyond what matters)."""
    k0 = float(log_mgf_total(plds, np.array([tilt]))[0])
    up = log_mgf_total(plds, tilt + THETAS) - k0
    dn = log_mgf_total(plds, tilt - THETAS) - k0
    log_tail = math.log(tail)
    b = float(np.min((up - log_tail) / THETAS))
    if untilted_tail is not None:
        plain = log_mgf_total(plds, THETAS)
        b = min(b, float(np.min((plain - math.log(untilted_tail)) / THETAS)))
    a = float(np.max((log_tail - dn) / THETAS))
    lowest = sum(c * float(p.losses[0]) for p, c in plds)
    highest = sum(c * float(p.losses[-1]) for p, c in plds)
    a = lowest if not math.isfinite(a) else max(a, lowest)
    b = highest if not math.isfinite(b) else min(b, highest)
    return a, max(b, a)


def _power(z: NDArray[np.complex128], k: int) -> NDArray[np.complex128]:
    """z**k by binary exponentiation (relative error at most (1 + CMUL_ERROR)^(k-1) - 1)."""
    result: NDArray[np.complex128] | None = None
    base = z
    while True:
        if k & 1:
            result = base if result is None else result * base
        k >>= 1
        if not k:
            break
        base = base * base
    assert result is not None
    return result


def _full_sum(values: Array, n: int) -> float:
    """Sum over the full (Hermitian) spectrum of per-entry values given on the rfft half."""
    if n % 2 == 0:
        return float(values[0] + 2.0 * values[1:-1].sum() + values[-1])
    return float(values[0] + 2.0 * values[1:].sum())


def _chernoff_upper(plds: Sequence[tuple[DiscretePLD, int]], thetas: Array, x: float) -> float:
    """P(S >= x) <= min_theta E[e^{theta S}] e^{-theta x} (theta > 0), rounded up."""
    vals = log_mgf_total(plds, thetas) - thetas * x
    best = float(np.min(vals))
    return math.exp(min(0.0, best + 1e-9 * (1.0 + abs(best))))


def _near(theta: float) -> Array:
    return np.asarray(theta * np.array([0.5, 0.8, 1.0, 1.25, 2.0]), dtype=float)


def _exp_up(x: Array, extra: Array | float) -> Array:
    """e^(x + extra) with x rounded up by a relative 1e-10 (0 where x = -inf: a spectrum entry
    that is exactly zero, where adding the slack would give inf - inf)."""
    finite = np.where(np.isfinite(x), x, 0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.where(np.isneginf(x), 0.0, np.exp(x + 1e-10 * np.abs(finite) + extra))


@attrs.define
class _SpectrumProduct:
    """The product of the components' tilted spectra, with what bounds its error."""

    n: int
    fft_rel: float
    spectrum: NDArray[np.complex128] | None = None
    #: log of the probability that no component's loss is +infinity
    log_inf_keep: float = 0.0
    dropped: float = 0.0
    c_parts: list[float] = attrs.Factory(list)
    c_abs: float = 0.0
    log_in_up: float = 0.0  # sum k log1p(-rho_in) (negated when untilting)
    log_in_dn: float = 0.0  # sum k log1p(rho_in)
    log_pow: float = 0.0  # log of (1 + relative error of the computed spectrum product)
    log_c_sum: Array | None = None
    log_b_sum: Array | None = None
    ratio_sum: Array | None = None

    def add(self, pld: DiscretePLD, count: int, tilt: float) -> None:
        """Multiply in ``count`` copies of one component's tilted spectrum."""
        masses = pld.masses
        keep = masses >= TINY_MASS
        self.dropped += float(masses[~keep].sum()) * (1 + 4 * U * masses.size) * count
        idx = (pld.offset + np.nonzero(keep)[0]).astype(np.int64)
        logp = np.log(masses[keep])
        lt = tilt * (idx * pld.h)
        expo = logp + lt
        top = float(expo.max())
        c = top + math.log(float(np.exp(expo - top).sum()))
        t = np.exp(expo - c)
        # relative error of every t_j: the exponent's rounding plus exp's own
        rho_in = 4 * U * (float(np.abs(logp).max()) + float(np.abs(lt).max()) + abs(c) + 4.0)
        rho_in += 2 * U * math.ceil(t.size / self.n)  # collisions of the cyclic placement
        arr = np.zeros(self.n)
        np.add.at(arr, idx % self.n, t)
        s_up = float(t.sum()) * (1 + rho_in) * (1 + 2 * U * (t.size + 2))
        l2 = math.sqrt(float(np.dot(t, t))) * (1 + rho_in) * (1 + 2 * U * (t.size + 2))
        f = sfft.rfft(arr)
        # ||fl(F x) - F x||_inf <= min(c u log2(n) ||x||_1, c u log2(n) sqrt(n) ||x||_2)
        r = self.fft_rel * min(s_up, math.sqrt(self.n) * l2) * (1 + 1e-6)
        self._bound(f, r, s_up, count)
        g = f if count == 1 else _power(f, count)
        self.log_pow += (count - 1) * math.log1p(CMUL_ERROR)
        if self.spectrum is None:
            self.spectrum = g
        else:
            self.spectrum = self.spectrum * g
            self.log_pow += math.log1p(CMUL_ERROR)
        self.c_parts.append(count * c)
        self.c_abs += count * abs(c)
        self.log_in_up += count * math.log1p(-rho_in)
        self.log_in_dn += count * math.log1p(rho_in)
        self.log_inf_keep += count * math.log1p(-pld.inf_mass)

    def _bound(self, f: NDArray[np.complex128], r: float, s_up: float, count: int) -> None:
        """Accumulate the per-frequency moduli that bound the product's error."""
        bmod = np.abs(f) * (1 + 4 * U)
        cmod = np.maximum(np.minimum(bmod + r, s_up), bmod)
        with np.errstate(divide="ignore"):
            log_c = count * np.log(cmod)
            log_b = count * np.log(bmod)
        ratio = (r * count) / cmod
        self.log_c_sum = log_c if self.log_c_sum is None else self.log_c_sum + log_c
        self.log_b_sum = log_b if self.log_b_sum is None else self.log_b_sum + log_b
        self.ratio_sum = ratio if self.ratio_sum is None else self.ratio_sum + ratio

    def tilted_error(self) -> float:
        """Max-norm error of the inverse transform of the product against the exact one."""
        assert self.spectrum is not None and self.log_c_sum is not None
        assert self.log_b_sum is not None and self.ratio_sum is not None
        n = self.n
        # per-frequency error of the computed spectrum product against the exact one
        with np.errstate(divide="ignore", over="ignore"):
            err_prop = _exp_up(self.log_c_sum, np.log(self.ratio_sum) + 1e-10)
            err_round = math.expm1(self.log_pow * (1 + 1e-9)) * _exp_up(self.log_b_sum, 0.0)
        err = err_prop + err_round + ABS_FLOOR
        sq = self.spectrum.real**2 + self.spectrum.imag**2
        # inverse transform: ||fl(F^-1 Y) - F^-1 Y||_inf <= c u log2(n) ||Y||_1 / n
        norm1 = _full_sum(np.sqrt(sq), n) * (1 + 4 * U * n)
        tilted_err = (_full_sum(err, n) / n) * (1 + 4 * U * n) + self.fft_rel * norm1 / n
        return tilted_err * (1 + 1e-6)


def compose(
    plds: Sequence[tuple[DiscretePLD, int]],
    window: tuple[float, float],
    tilt: float = 0.0,
    coarse: Sequence[tuple[DiscretePLD, int]] | None = None,
) -> ComposedPLD:
    """Compose ``count`` copies of each PLD (same grid spacing) on ``window``, tilted by ``tilt``.

    The masses are tilted, ``t_j = p_j e^{tilt l_j - c}``, composed by FFT (the power of each
    spectrum by binary exponentiation), and untilted. Every floating-point error is bounded
    per frequency and turned into a per-point bracket; see proofs_checks/pld_tilted_fft.
    ``coarse`` (the same PLDs on a coarser grid) only guides the Chernoff tilts of the tails.
    """
    h = plds[0][0].h
    lo_idx = math.floor(window[0] / h)
    width = math.ceil(window[1] / h) - lo_idx + 1
    n = sfft.next_fast_len(max(width, 2), real=True)
    if n > MAX_FFT_LEN:
        raise BoundUnavailable("pld", f"composition window needs {n} grid points at h={h:g}")
    product = _SpectrumProduct(n, FFT_ERROR_CONSTANT * U * math.log2(n))
    for pld, count in plds:
        product.add(pld, count, tilt)
    tilted_err = product.tilted_error()
    assert product.spectrum is not None
    out = np.roll(sfft.irfft(product.spectrum, n), -(lo_idx % n))
    upper, lower = _untilted(out, tilted_err, product, plds, lo_idx, h, tilt)
    tails = _tails(plds, coarse if coarse is not None else plds, lo_idx, n, h, tilt)
    return ComposedPLD(
        offset=lo_idx,
        upper=upper,
        lower=lower,
        inf_mass=infinite_mass(product.log_inf_keep, len(plds)),
        h=h,
        tilt=tilt,
        upper_tail=tails[0],
        lower_tail=tails[1],
        dropped=product.dropped,
        total_count=sum(c for _, c in plds),
        wrap_thetas=tails[2],
        tilted_error=tilted_err,
        dominated=all(p_.dominated for p_, _ in plds),
    )


def _untilted(
    out: Array,
    tilted_err: float,
    product: _SpectrumProduct,
    plds: Sequence[tuple[DiscretePLD, int]],
    lo_idx: int,
    h: float,
    tilt: float,
) -> tuple[Array, Array]:
    """Per-point (upper, lower) brackets of the composed masses from the tilted output."""
    n = out.size
    # untilt: p_l = t_l exp(C - tilt l), with C = sum k c
    big_c = math.fsum(product.c_parts)
    tilted_losses = tilt * ((lo_idx + np.arange(n)) * h)
    log_g = big_c - tilted_losses
    rho_g = 4 * U * (product.c_abs + float(np.abs(tilted_losses).max()) + 4.0) + 8 * U * len(plds)
    # lower bounds: each chord was built from curve values at most (1 + LOWER_DEFLATION) times
    # the true ones; the mixture of that pair (weight 1/(1+rho)) with a lossless pair is dominated
    # by the mechanism, and its composition has at least (1+rho)^-K times the chord's delta
    # (pairs from :func:`discretise_lower` were deflated when they were built)
    chords = sum(c for p_, c in plds if not p_.dominated)
    # (in place: these arrays are the size of the window)
    upper = out + tilted_err
    lower = np.maximum(out - tilted_err, 0.0)
    with np.errstate(divide="ignore"):
        np.log(upper, out=upper)
        np.log(lower, out=lower)
    upper += log_g
    upper += -product.log_in_up + rho_g + 4 * U
    lower += log_g
    lower -= product.log_in_dn + rho_g + 4 * U
    lower -= chords * math.log1p(LOWER_DEFLATION)
    for arr in (upper, lower):
        np.minimum(arr, 0.0, out=arr)
        np.exp(arr, out=arr)
    return upper, lower


def _tails(
    plds: Sequence[tuple[DiscretePLD, int]],
    guide: Sequence[tuple[DiscretePLD, int]],
    lo_idx: int,
    n: int,
    h: float,
    tilt: float,
) -> tuple[float, float, tuple[tuple[float, float], ...]]:
    """(mass at or above the window's top, mass below its bottom, (theta, log E[e^{(tilt +
    theta) S}]) pairs for the wrap-around bound) of the discretised sum, by Chernoff at tilts
    guided by ``guide``."""
    bottom = lo_idx * h
    top_x = (lo_idx + n) * h
    th_up = float(THETAS[int(np.argmin(log_mgf_total(guide, THETAS) - THETAS * top_x))])
    upper_tail = _chernoff_upper(plds, _near(th_up), top_x)
    th_dn = float(THETAS[int(np.argmin(log_mgf_total(guide, -THETAS) + THETAS * bottom))])
    below = float(np.min(log_mgf_total(plds, -_near(th_dn)) + _near(th_dn) * bottom))
    lower_tail = min(1.0, math.exp(min(0.0, below + 1e-9 * (1 + abs(bottom) * th_dn))))
    # wrap-around from above, for thresholds near the tilted centre
    mid = bottom + 0.5 * n * h
    wrap = log_mgf_total(guide, tilt + THETAS) - THETAS * (mid + n * h) - tilt * mid
    th_w = float(THETAS[int(np.argmin(wrap))])
    ths = np.concatenate([[0.0], th_w * np.geomspace(1 / 64, 64, 19)])
    k_fine = log_mgf_total(plds, tilt + ths)
    return (
        upper_tail,
        lower_tail,
        tuple((float(a_), float(b_)) for a_, b_ in zip(ths, k_fine, strict=True)),
    )


def wrap_above(pld: ComposedPLD, x: float) -> float:
    """Bound on the untilted mass wrapped from above the window onto losses > ``x``.

    A loss L >= top lands at L - mW (W the window width) with weight e^{tilt (L - landing)};
    landing above x needs L > x + W, so with y = max(x + W, top) the total is at most
    e^{-tilt x} E[e^{tilt S}; S >= y] <= e^{K(tilt + theta) - tilt x - theta y}.
    """
    if pld.parts:
        return min(1.0, math.fsum(wrap_above(part, x) for part in pld.parts) * (1 + 8 * U))
    w = pld.width
    top = (pld.offset + pld.upper.size) * pld.h
    y = max(x + w, top - 8 * U * abs(top))
    best = min(k - pld.tilt * x - th * y for th, k in pld.wrap_thetas)
    return math.exp(min(0.0, best + 1e-9 * (1.0 + abs(best))))


def _below_wrap(pld: ComposedPLD) -> float:
    """Mass wrapped from below the window onto its top, untilted (a bound)."""
    if pld.parts:
        return math.fsum(_below_wrap(part) for part in pld.parts) * (1 + 8 * U)
    return pld.lower_tail * math.exp(-pld.tilt * pld.width)


def infinite_mass(log_keep: float, terms: int) -> float:
    """1 - e^log_keep rounded up: the probability that some component's loss is +infinity,
    from the sum of ``terms`` values count * log1p(-m) (not (1 - m)^count, which is 1 in
    floating point for m below 1e-16)."""
    return min(1.0, -math.expm1(log_keep * (1 + 4 * U * (terms + 4))) * (1 + 4 * U))


def _suffix(arr: Array) -> Array:
    """s_i = sum_{k > i} arr_k."""
    return np.concatenate([np.cumsum(arr[::-1])[::-1][1:], [0.0]])


def _discounted_suffix(arr: Array, h: float) -> Array:
    """B_i = sum_{k > i} arr_k e^{-(k - i) h}, in blocks short enough that no factor overflows."""
    n = arr.size
    out = np.empty(n)
    block = max(1, int(DISCOUNT_SPAN / h))
    j = np.arange(min(n, block))
    down, up = np.exp(-j * h), np.exp(j * h)  # e^{-jh}, e^{jh} (shared by every block)
    carry = 0.0  # B at the last index of the block being processed
    for start in range(((n - 1) // block) * block, -1, -block):
        m = min(n, start + block) - start
        w = arr[start : start + m] * down[:m]
        # S_i = sum_{start <= k < end, k > i} w_k
        suffix = np.concatenate([np.cumsum(w[::-1])[::-1][1:], [0.0]])
        out[start : start + m] = up[:m] * suffix + down[:m][::-1] * carry
        carry = math.exp(-h) * (float(arr[start]) + float(out[start]))
    return out


#: largest loss span of one block of :func:`_discounted_suffix` (e^50 is far from overflow)
DISCOUNT_SPAN = 50.0


def rounding_bias(h: float) -> float:
    """Largest mean upward move of a loss by the connect-the-dots split of a bin of width h.

    A loss ``l = e_lo + u`` moves to ``e_lo + h`` with probability
    ``(1 - e^{-u}) / (1 - e^{-h})`` (this preserves its P- and Q-mass), so its mean move is
    ``h (1 - e^{-u})/(1 - e^{-h}) - u``, at most about ``h^2 / 8``.
    """
    u = np.linspace(0.0, h, 257)
    moves = h * -np.expm1(-u) / -math.expm1(-h) - u
    return float(moves.max()) * (1 + 1e-6) + 1e-300


#: probability that any component's loss lies below its discretised range (Gaussian tails at
#: 10 standard deviations are below 1e-23; bounded supports have none; losses lumped below
#: -MAX_LOSS have P-mass at most e^-MAX_LOSS ~ 2.6e-261)
BELOW_RANGE_MASS = 1e-22


def lower_shift(pld: ComposedPLD, eta: float) -> float:
    """Shift s such that S >= S_chord - s except with probability ``eta`` (Hoeffding); 0 for
    a composition of dominated pairs, whose profile is below the mechanism's as it is."""
    if pld.dominated:
        return 0.0
    k = pld.total_count
    return k * rounding_bias(pld.h) + pld.h * math.sqrt(k * math.log(1.0 / eta) / 2.0)


def _upper_extra(pld: ComposedPLD) -> float:
    return pld.inf_mass + pld.upper_tail + pld.dropped


def excess_mass(pld: ComposedPLD) -> float:
    """How far the lower brackets of the composed masses sum above a distribution's total.

    Rounding in the per-point brackets leaves up to ~1e-7 (measured: one pure 10-DP component
    at 2^18 points) more mass than a distribution holds. Extra mass only raises hockey-stick
    values, so lower bounds subtract twice this excess (the excess itself, and as much again
    for rounding on the kept masses).
    """
    return max(0.0, float(pld.lower.sum()) - 1.0)


def _lower_extra(pld: ComposedPLD, eta: float) -> float:
    """Mass subtracted from every lower bound (wrap-around from above excepted)."""
    below_wrap = _below_wrap(pld)
    if pld.dominated:
        return below_wrap + 2.0 * excess_mass(pld)
    return below_wrap + eta + pld.total_count * BELOW_RANGE_MASS + 2.0 * excess_mass(pld)


#: relative rounding slack of the suffix sums over n terms (per term)
SUM_SLACK = 8 * U


def delta_at(pld: ComposedPLD, eps: float, *, upper: bool, eta: float = 1e-12) -> float:
    """Certified delta(eps): upper bound (charges tails) or lower bound.

    The lower bound drops the mass at infinity and shifts the chord composition down by
    :func:`lower_shift`, losing ``eta`` of probability.
    """
    losses = pld.losses
    if upper:
        masses = pld.upper
        extra = _upper_extra(pld) + (pld.lower_tail if eps < losses[0] else 0.0)
    else:
        masses = pld.lower
        shift = lower_shift(pld, eta)
        losses = losses - shift
        extra = -(_lower_extra(pld, eta) + wrap_above(pld, eps + shift))
    above = losses > eps
    terms = masses[above] * -np.expm1(eps - losses[above])
    finite = float(terms.sum())
    slack = SUM_SLACK * masses.size * float(masses[above].sum())
    if upper:
        return min(1.0, extra + finite + slack)
    return max(0.0, extra + finite - slack)


def _crossing(
    masses: Array, losses: Array, h: float, extra: float, delta: float, upper: bool
) -> tuple[int, Array, Array]:
    a = _suffix(masses)
    b = _discounted_suffix(masses, h)
    slack = SUM_SLACK * masses.size * a
    on_grid = extra + (a - b) + (slack if upper else -slack)
    ok = np.nonzero(on_grid <= delta)[0]
    return (int(ok[0]) if ok.size else -1), a + (slack if upper else -slack), b


def _solve(losses: Array, i: int, a: Array, b: Array, extra: float, delta: float) -> float:
    """eps in [l_{i-1}, l_i] with extra + a_{i-1} - e^{eps - l_{i-1}} b_{i-1} = delta."""
    num = extra + float(a[i - 1]) - delta
    den = float(b[i - 1])
    if num <= 0 or den <= 0:
        return float(losses[i - 1])
    eps = float(losses[i - 1]) + math.log(num) - math.log(den)
    return min(max(eps, float(losses[i - 1])), float(losses[i]))


def epsilon_for(pld: ComposedPLD, delta: float, *, upper: bool) -> float:
    """Upper: smallest eps >= 0 with delta_upper(eps) <= delta.

    Lower: the crossing point of delta_lower (with ``eta = delta / 1000``), so that every smaller
    eps has true delta >= delta.
    """
    losses = pld.losses
    if upper:
        extra = _upper_extra(pld)
        if extra >= delta:
            return math.inf
        i, a, b = _crossing(pld.upper, losses, pld.h, extra, delta, True)
        if i < 0:
            return math.inf
        eps = _below_window(pld, extra, delta) if i == 0 else _solve(losses, i, a, b, extra, delta)
        eps = eps + 1e-12 * (1.0 + abs(eps))
        return max(0.0, float(np.nextafter(eps, math.inf)))
    eta = delta * 1e-3
    shift = lower_shift(pld, eta)
    shifted = losses - shift
    base = -_lower_extra(pld, eta)
    guess = _lower_pass(pld, shifted, base, delta)
    for x0 in (guess - 0.05 * abs(guess) - 10 * pld.h, float(shifted[0])):
        eps = _lower_pass(pld, shifted, base - wrap_above(pld, x0 + shift), delta)
        if eps >= x0 or eps == 0.0:
            return max(0.0, float(np.nextafter(eps, -math.inf)))
    return 0.0


def _lower_pass(pld: ComposedPLD, shifted: Array, extra: float, delta: float) -> float:
    i, a, b = _crossing(pld.lower, shifted, pld.h, extra, delta, False)
    if i < 0:
        return float(shifted[-1])
    if i == 0:
        return 0.0
    eps = _solve(shifted, i, a, b, extra, delta)
    return max(float(shifted[i - 1]), eps - 1e-9 * (1.0 + abs(eps)))


def _below_window(pld: ComposedPLD, extra: float, delta: float) -> float:
    """Smallest eps <= l_0 with extra + P(S < l_0) + sum_l m_l (1 - e^{eps - l}) <= delta."""
    losses = pld.losses
    num = extra + pld.lower_tail + float(pld.upper.sum()) * (1 + SUM_SLACK * pld.upper.size)
    num -= delta
    if pld.lower_tail >= 0.5 * delta:
        return float(losses[0])
    if num <= 0:
        return 0.0
    pos = pld.upper > 0
    lse = float(special.logsumexp(np.log(pld.upper[pos]) - losses[pos]))
    eps = math.log(num) - lse
    return min(float(losses[0]), eps)


# -- lower bounds: a dominated discrete pair ---------------------------------------------------
#: most relative deflation of the masses a dominated pair may take before it is given up
MAX_LOWER_SCALE_LOSS = 1e-6
#: absolute error allowed per value of the positive recursions (subnormal products)
RECURSION_ABS = 1e-300


def _secant_floor(lo: Array, hi: Array, ratio: float) -> Array:
    """At every point j >= 2, a value below the extension to ``x_j`` of the true curve's secant
    through points j-1 and j-2 (a convex curve lies above it there); ``lo``/``hi`` bracket
    the curve at the points, spaced so that ``(x_j - x_{j-1}) / (x_{j-1} - x_{j-2}) = ratio``.
    Entries 0 and 1 are -infinity (no such secant)."""
    out = np.full(lo.size, -np.inf)
    diff = lo[1:-1] - hi[:-2]  # at most the true increment
    # a larger factor on a negative increment (a smaller one on a positive) stays below
    factor = np.where(diff < 0, ratio * (1 + 4 * U), ratio * (1 - 4 * U))
    ext = lo[1:-1] + diff * factor
    out[2:] = ext - 4 * U * (np.abs(lo[1:-1]) + np.abs(diff * factor))
    return out


def _segment_limits(
    lo: Array, left_ext: Array, right_ext: Array, *, increasing: bool
) -> tuple[Array, Array]:
    """Per segment ``[j, j+1]``, limits (on ``z_j``, on ``z_{j+1}``) under which the chord of
    the points stays below a convex curve bracketed below by ``lo``, monotone as stated. Of
    the three rules the one that lowers the points least is used:

    - left: ``z_j <= lo_j`` and ``z_{j+1}`` under the secant through j-1, j extended
      (``left_ext[j+1]``): the chord is then under that extension, which is under the curve;
    - right: the mirror image (``right_ext[j]`` from the secant through j+1, j+2);
    - flat: both under the curve's value at the end where it is lower (monotonicity).

    A rule with a negative limit is not used (the pair's curve is nonnegative)."""
    a_lo, b_lo = lo[:-1], lo[1:]
    flat = a_lo if increasing else b_lo
    rules = [(a_lo, left_ext[1:]), (right_ext[:-1], b_lo), (flat, flat)]
    best_a, best_b = rules[-1]
    best_cost = (a_lo - best_a) + (b_lo - best_b)
    for lim_a, lim_b in rules[:-1]:
        with np.errstate(invalid="ignore"):
            cost = (a_lo - lim_a) + (b_lo - lim_b)
            use = (lim_a >= 0) & (lim_b >= 0) & (cost < best_cost)
        best_a = np.where(use, lim_a, best_a)
        best_b = np.where(use, lim_b, best_b)
        best_cost = np.where(use, cost, best_cost)
    return np.asarray(best_a, dtype=np.float64), np.asarray(best_b, dtype=np.float64)


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
    from scipy.optimize import isotonic_regression

    return np.asarray(isotonic_regression(slopes, weights=widths).x, dtype=np.float64)


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
    j_lo = min(math.floor(max(profile.loss_lo, -MAX_LOSS) / h), -2)
    j_hi = max(math.ceil(min(profile.loss_hi, MAX_LOSS) / h), 3)
    eps: Array = np.asarray(np.arange(j_lo, j_hi + 1) * h, dtype=np.float64)
    k = -j_lo  # eps[k] == 0.0; points below k are read in c-space, from k on in H-space
    z_c, z_h = _points_below(profile, eps, k, h)
    if np.any(z_c < 0) or np.any(z_h[k:] < 0):
        return None
    p = _minorant_masses(z_c, z_h, np.exp(eps), k)
    return _certified_lower(p, eps, z_c[:k], z_h, k, h, j_lo)


def _brackets(profile: Profile, eps: Array, k: int) -> tuple[Array, Array, Array, Array]:
    """(lo_c, hi_c, lo_h, hi_h): the curve bracketed at the points, as its excess c in the
    points below zero and the three after (near zero there is no cancellation either way), and
    as delta itself everywhere."""
    shrink = 1.0 / (1.0 + LOWER_DEFLATION) * (1 - 8 * U)
    hi_h = np.array(profile(eps), dtype=np.float64)
    kc = k + 3
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


def _points_below(profile: Profile, eps: Array, k: int, h: float) -> tuple[Array, Array]:
    """(z_c at points 0..k, z_h at every point): values whose chords stay under the curve;
    z_c is 0 at the first point (the pair's curve is 1 - x before it), z_h is 0 at the last."""
    lo_c, hi_c, lo_h, hi_h = _brackets(profile, eps, k)
    ratio, inverse = math.exp(h), math.exp(-h)
    left_c = _secant_floor(lo_c, hi_c, ratio)
    # c(0) = 0 at x = 0: the secant through (0, 0) and the first point, extended, is c_0 e^h
    left_c[1] = float(lo_c[0]) * ratio * (1 - 8 * U)
    right_c = _secant_floor(lo_c[::-1], hi_c[::-1], inverse)[::-1]
    left_h = _secant_floor(lo_h, hi_h, ratio)
    right_h = _secant_floor(lo_h[::-1], hi_h[::-1], inverse)[::-1]
    # segments up to point k (x = 1, where c = delta) in c-space, where c increases; from
    # point k on in H-space, where the curve decreases
    ca, cb = _segment_limits(lo_c[: k + 1], left_c[: k + 1], right_c[: k + 1], increasing=True)
    ha, hb = _segment_limits(lo_h[k:], left_h[k:], right_h[k:], increasing=False)
    z_c = np.array(lo_c[: k + 1])
    z_c[:-1] = np.minimum(z_c[:-1], ca)
    z_c[1:] = np.minimum(z_c[1:], cb)
    z_c[0] = 0.0
    z_h = np.array(lo_h)
    z_h[k:-1] = np.minimum(z_h[k:-1], ha)
    z_h[k + 1 :] = np.minimum(z_h[k + 1 :], hb)
    z_h[k] = min(float(z_h[k]), float(z_c[k]))
    z_h[-1] = 0.0
    z_c[k] = z_h[k]
    return z_c, z_h


def _minorant_masses(z_c: Array, z_h: Array, x: Array, k: int) -> Array:
    """P-masses of the greatest convex minorant of the points (below them, so below the
    curve): c-slopes up to point k and H-slopes from there, each side keeping its end points,
    pooled across point k where the two sides meet concavely; masses are slope differences
    times ``x`` (slope -1 before the first point, 0 after the last)."""
    dx = np.diff(x)
    sc = _convex_slopes(np.diff(z_c) / dx[:k], dx[:k])
    sh = _convex_slopes(np.diff(z_h[k:]) / dx[k:], dx[k:])
    if sh[0] + 1.0 < sc[-1]:
        sc, sh = _pool_junction(sc, sh, dx, k)
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
    from scipy.optimize import isotonic_regression

    joined = np.concatenate([sc - 1.0, sh])
    result = isotonic_regression(joined, weights=dx)
    blocks = np.asarray(result.blocks)
    i = int(np.searchsorted(blocks, k - 1, side="right")) - 1
    a, b = int(blocks[i]), int(blocks[i + 1])
    pooled = float(result.x[a])
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
    p: Array, eps: Array, z_c: Array, z_h: Array, k: int, h: float, offset: int
) -> DiscretePLD | None:
    """``p`` scaled down until the pair it completes is checked below the points ``z``:
    ``sum_{i > j} p_i (1 - e^{eps_j - eps_i}) <= z_h[j]`` for eps_j >= 0 and
    ``sum_{i < j} p_i (e^{eps_j - eps_i} - 1) <= z_c[j]`` below; None when that costs more than
    MAX_LOWER_SCALE_LOSS. The laws are completed to probability one by a lossless mass at 0
    and the imbalance at +h or -h, which needs ``e^{-h} <= R_Q / R_P <= e^h`` for the
    remainders R_P = 1 - sum p and R_Q = 1 - sum p e^{-eps}."""
    p = _drop_beyond_zeros(p, z_c, z_h, k)
    s_p = math.fsum(p.tolist())  # correctly rounded sums; each q_i errs by a few u
    s_q = math.fsum((p * np.exp(-eps)).tolist())
    err_p = 8 * U * s_p + 1e-300
    err_q = 16 * U * s_q + 1e-300
    f_val, c_val = _curve_at_points(p, h, k)
    big = max(s_p + err_p, s_q + err_q)
    gap = abs(s_p - s_q) + err_p + err_q
    gamma = max(4 * gap / math.expm1(h), 1e-15)
    limit = math.exp(h) * (1 - 8 * U)
    for _ in range(4):
        if gamma > MAX_LOWER_SCALE_LOSS:
            return None
        scale = (1.0 - gamma) / big
        r_p_lo, r_p_hi = 1.0 - scale * (s_p + err_p), 1.0 - scale * (s_p - err_p)
        r_q_lo, r_q_hi = 1.0 - scale * (s_q + err_q), 1.0 - scale * (s_q - err_q)
        if not (
            r_p_lo > 0 and r_q_lo > 0 and r_p_hi <= r_q_lo * limit and r_q_hi <= r_p_lo * limit
        ):
            gamma *= 4
            continue
        fs = f_val * scale * (1 + 4 * U)
        # completion: (a, a) at loss 0 and the imbalance at +h (P short) or -h (Q short);
        # only a mass at +h is seen by the checks, at eps = 0, as b (1 - e^{-h}) = R_P - R_Q
        fs[0] += max(0.0, r_p_hi - r_q_lo) * (1 + 4 * U)
        cs = c_val * scale * (1 + 4 * U)
        if np.any((fs > 0) & (z_h[k:] <= 0)) or np.any((cs > 0) & (z_c <= 0)):
            return None
        with np.errstate(divide="ignore", invalid="ignore"):
            worst = max(
                float(np.max(np.where(fs > 0, fs / z_h[k:], 0.0))),
                float(np.max(np.where(cs > 0, cs / z_c, 0.0))),
            )
        if worst <= 1.0:
            return DiscretePLD(offset, p * scale * (1 - 4 * U), 0.0, h, dominated=True)
        gamma = 1.0 - (1.0 - gamma) / (worst * (1 + 1e-9))
    return None
