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

import attrs
import numpy as np
from numpy.typing import NDArray
from scipy import fft as sfft

from dpledger.accountant.profiles import REL_MARGIN, Profile
from dpledger.core.errors import BoundUnavailable

Array = NDArray[np.float64]
#: largest finite privacy loss represented on the grid
MAX_LOSS = 600.0
#: epsilons above this are reported as unbounded (upper) or capped (lower): e^eps would overflow
MAX_CERTIFIED_EPSILON = 700.0
#: largest FFT length (complex128 rfft of 2^23 doubles is ~70 MB)
MAX_FFT_LEN = 1 << 23


@attrs.frozen
class DiscretePLD:
    """P-masses at losses ``(offset + i) * h`` plus a mass at +infinity."""

    offset: int
    masses: Array
    inf_mass: float
    h: float

    @property
    def losses(self) -> Array:
        return np.asarray((self.offset + np.arange(self.masses.size)) * self.h, dtype=float)


def discretise(profile: Profile, h: float) -> DiscretePLD:
    """Connect-the-dots PMF of an upper-bound curve on the grid ``j * h``."""
    # losses beyond +-MAX_LOSS are lumped: above into the mass at +infinity, below into the
    # lowest grid point (both on the safe side); this keeps e^eps finite
    j_lo = math.floor(max(profile.loss_lo, -MAX_LOSS) / h)
    j_hi = math.ceil(min(profile.loss_hi, MAX_LOSS) / h)
    if j_hi <= j_lo:
        j_hi = j_lo + 1
    eps: Array = np.asarray((j_lo + np.arange(j_hi - j_lo + 1)) * h, dtype=np.float64)
    d = profile(eps)
    # enforce monotonicity (a curve is non-increasing); raising values keeps it an upper bound
    d = np.maximum.accumulate(d[::-1])[::-1]
    x = np.exp(eps)
    dx = np.diff(x)
    slopes = np.empty(eps.size + 1)
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
        cs = np.empty(k + 1)
        cs[0] = c[0] / x[0]
        cs[1:k] = np.diff(c) / dx[: k - 1]
        cs[k] = 1.0 - slopes[k]
        q_mass[:k] = cs[1:] - cs[:-1]
        d[:k] = np.maximum(d[:k], -np.expm1(eps[:k]) + c)
    q_mass = np.maximum(q_mass, 0.0)
    p_mass = x * q_mass
    inf_mass = float(d[-1])
    # re-check the chord on the grid: value at eps_i = inf + sum_{j>i} p_j (1 - e^{eps_i - eps_j})
    tail_p = np.concatenate([np.cumsum(p_mass[::-1])[::-1][1:], [0.0]])
    tail_q = np.concatenate([np.cumsum(q_mass[::-1])[::-1][1:], [0.0]])
    chord = inf_mass + tail_p - x * tail_q
    # (only where eps >= 0: below, both sides are ~1 - e^eps and the comparison is round-off)
    nonneg = eps >= 0
    deficit = float(np.max(d[nonneg] - chord[nonneg])) if nonneg.any() else 0.0
    if deficit > 0:
        inf_mass += deficit
    return DiscretePLD(j_lo, p_mass, min(inf_mass, 1.0), h)


def _log_mgf(pld: DiscretePLD, lam: Array) -> Array:
    """log sum_j p_j exp(lam * l_j) for every lam (finite part only)."""
    pos = pld.masses > 0
    if not pos.any():
        return np.full(lam.shape, -np.inf)
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


@attrs.frozen
class ComposedPLD:
    """The composed finite PMF on a window, with the bounds needed to certify it."""

    offset: int
    masses: Array
    inf_mass: float
    h: float
    upper_tail: float
    lower_tail: float
    fft_error: float
    total_count: int

    @property
    def losses(self) -> Array:
        return np.asarray((self.offset + np.arange(self.masses.size)) * self.h, dtype=float)


def _window(
    plds: Sequence[tuple[DiscretePLD, int]], tail: float
) -> tuple[float, float, float, float]:
    lam = np.geomspace(1e-3, 1e5, 64)
    log_up = np.zeros_like(lam)
    log_dn = np.zeros_like(lam)
    both = np.concatenate([lam, -lam])
    for pld, count in plds:
        values = _log_mgf(pld, both)
        log_up += count * values[: lam.size]
        log_dn += count * values[lam.size :]
    log_tail = math.log(tail)
    b_candidates = (log_up - log_tail) / lam
    a_candidates = (log_tail - log_dn) / lam
    ib = int(np.argmin(b_candidates))
    ia = int(np.argmax(a_candidates))
    b = float(b_candidates[ib])
    a = float(a_candidates[ia])
    # the discretised sum never leaves [sum of lowest losses, sum of highest losses]
    lowest = sum(c * float(p.losses[0]) for p, c in plds)
    highest = sum(c * float(p.losses[-1]) for p, c in plds)
    a = lowest if not math.isfinite(a) else max(a, lowest)
    b = highest if not math.isfinite(b) else min(b, highest)
    return a, b, float(lam[ib]), float(lam[ia])


def window(
    plds: Sequence[tuple[DiscretePLD, int]], tail: float
) -> tuple[float, float, float, float]:
    """(a, b, lam_b, lam_a): Chernoff window holding all but ``tail`` mass on each side."""
    return _window(plds, tail)


def compose(
    plds: Sequence[tuple[DiscretePLD, int]],
    tail: float = 1e-18,
    chernoff: tuple[float, float, float, float] | None = None,
) -> ComposedPLD:
    """Compose ``count`` copies of each PLD (all on the same grid spacing).

    ``chernoff`` may carry a window computed on a coarser grid; the tail masses are always
    recomputed exactly for the PMFs composed here, so a stale window costs tightness only.
    """
    h = plds[0][0].h
    total = sum(c for _, c in plds)
    a, b, lam_b, lam_a = chernoff if chernoff is not None else _window(plds, tail)
    lo_idx = math.floor(a / h)
    hi_idx = math.ceil(b / h)
    width = hi_idx - lo_idx + 1
    n = sfft.next_fast_len(max(width, 2), real=True)
    if n > MAX_FFT_LEN:
        raise BoundUnavailable("pld", f"composition window needs {n} grid points at h={h:g}")
    spectrum = np.ones(n // 2 + 1, dtype=complex)
    inf_keep = 1.0
    for pld, count in plds:
        arr = np.zeros(n)
        idx = (pld.offset + np.arange(pld.masses.size)) % n
        np.add.at(arr, idx, pld.masses)
        f = sfft.rfft(arr)
        spectrum *= f if count == 1 else f**count
        inf_keep *= (1.0 - pld.inf_mass) ** count
    out = sfft.irfft(spectrum, n)
    out = np.roll(out, -(lo_idx % n))
    fft_err = 4.0 * max(0.0, -float(out.min()))
    fft_err += 64 * np.finfo(float).eps * float(np.abs(out).max())
    out = np.maximum(out, 0.0)
    # exact tail masses of the discretised sum beyond the window, by Chernoff at the chosen lambdas
    lams = np.array([lam_b, -lam_a])
    mgfs = [(c, _log_mgf(p, lams)) for p, c in plds]
    lu = math.fsum(c * float(v[0]) for c, v in mgfs)
    # P(S >= first index past the window)
    upper_tail = math.exp(min(0.0, lu - lam_b * (lo_idx + n) * h))
    ld = math.fsum(c * float(v[1]) for c, v in mgfs)
    lower_tail = math.exp(min(0.0, ld + lam_a * lo_idx * h))
    return ComposedPLD(
        offset=lo_idx,
        masses=out,
        inf_mass=1.0 - inf_keep,
        h=h,
        upper_tail=upper_tail,
        lower_tail=lower_tail,
        fft_error=fft_err,
        total_count=total,
    )


def _suffix(arr: Array) -> Array:
    """s_i = sum_{k > i} arr_k."""
    return np.concatenate([np.cumsum(arr[::-1])[::-1][1:], [0.0]])


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
#: 10 standard deviations are below 1e-23; bounded supports have none)
BELOW_RANGE_MASS = 1e-22


def lower_shift(pld: ComposedPLD, eta: float) -> float:
    """Shift s such that S >= S_chord - s except with probability ``eta`` (Hoeffding)."""
    k = pld.total_count
    return k * rounding_bias(pld.h) + pld.h * math.sqrt(k * math.log(1.0 / eta) / 2.0)


def excess_mass(pld: ComposedPLD) -> float:
    """How far the composed P-masses exceed a probability distribution's total.

    Rounding in the chord differences leaves tiny masses of both signs between grid points;
    clamping the negative ones adds mass (measured: 1e-6 for one pure 1-DP component at 2^18
    points). Extra mass only raises hockey-stick values, so lower bounds subtract twice this
    excess (the clamped part plus the same again for rounding on kept masses), FFT noise
    included.
    """
    total = float(pld.masses.sum()) + pld.inf_mass + pld.masses.size * pld.fft_error
    return max(0.0, total - 1.0)


def _lower_terms(pld: ComposedPLD, eta: float) -> tuple[Array, float, float]:
    # the chord was built from delta values inflated by REL_MARGIN: deflate the masses' effect
    losses = pld.losses - lower_shift(pld, eta)
    extra = -(pld.lower_tail + eta + pld.total_count * (BELOW_RANGE_MASS + 2 * REL_MARGIN))
    return losses, extra - 2.0 * excess_mass(pld), -pld.fft_error


def delta_at(pld: ComposedPLD, eps: float, *, upper: bool, eta: float = 1e-12) -> float:
    """Certified delta(eps): upper bound (charges tails and FFT error) or lower bound.

    The lower bound drops the mass at infinity and shifts the chord composition down by
    :func:`lower_shift`, losing ``eta`` of probability.
    """
    if upper:
        losses, extra, err = pld.losses, pld.inf_mass + pld.upper_tail, pld.fft_error
    else:
        losses, extra, err = _lower_terms(pld, eta)
    above = losses > eps
    with np.errstate(over="ignore"):
        finite = float(np.sum(pld.masses[above] * -np.expm1(eps - losses[above])))
    val = extra + finite + err * int(above.sum())
    return min(1.0, val) if upper else max(0.0, val)


def epsilon_for(pld: ComposedPLD, delta: float, *, upper: bool) -> float:
    """Upper: smallest eps >= 0 with delta_upper(eps) <= delta.

    Lower: the crossing point of delta_lower (with ``eta = delta / 1000``), so that every smaller
    eps has true delta >= delta.
    """
    masses = pld.masses
    if upper:
        losses, extra, err = pld.losses, pld.inf_mass + pld.upper_tail, pld.fft_error
    else:
        losses, extra, err = _lower_terms(pld, delta * 1e-3)
    if extra >= delta:
        return math.inf
    a = _suffix(masses)
    with np.errstate(over="ignore", invalid="ignore"):
        b = _suffix(np.where(masses > 0, masses * np.exp(-losses), 0.0))
    counts = (masses.size - 1 - np.arange(masses.size)).astype(float)
    with np.errstate(over="ignore", invalid="ignore"):
        on_grid = extra + a - np.exp(losses) * b + err * counts
    ok = np.nonzero(on_grid <= delta)[0]
    if ok.size == 0:
        # upper: nothing on the window certifies delta; lower: delta_lower exceeds delta on the
        # whole window, so the true epsilon is at least its last loss
        if upper:
            return math.inf
        last = float(np.nextafter(losses[-1], -math.inf))
        return min(max(0.0, last), MAX_CERTIFIED_EPSILON)
    i = int(ok[0])
    if i == 0:
        num = extra + float(masses.sum()) + err * masses.size - delta
        den = float(np.sum(masses * np.exp(-losses)))
        eps = math.log(num) - math.log(den) if num > 0 and den > 0 else -math.inf
        eps = min(eps, float(losses[0]))
    else:
        num = extra + a[i - 1] + err * counts[i - 1] - delta
        den = b[i - 1]
        eps = math.log(num) - math.log(den) if num > 0 and den > 0 else float(losses[i - 1])
        eps = min(max(eps, float(losses[i - 1])), float(losses[i]))
    eps = float(np.nextafter(eps, math.inf if upper else -math.inf))
    if eps > MAX_CERTIFIED_EPSILON:
        # e^eps overflows double precision near 709.8: nothing that large can be certified
        return math.inf if upper else MAX_CERTIFIED_EPSILON
    return max(0.0, eps)
