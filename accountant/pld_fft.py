"""Tilted FFT composition of discretised PLDs, with certified round-off and tail bounds.

Composition multiplies FFTs of length ``N`` (cyclic). Chernoff bounds on the discretised sum
choose a window ``[a, b]`` that holds all but ``tail`` mass; mass above ``b`` is charged to delta,
mass below ``a`` (aliased upwards) is subtracted from lower bounds. FFT round-off is bounded per
point (proofs_checks/pld_tilted_fft) and charged to delta as well.
"""

from __future__ import annotations

import math
from collections.abc import (
    Sequence,
)

import attrs
import numpy as np
from numpy.typing import (
    NDArray,
)
from scipy import (
    fft as sfft,
)

from dpledger.accountant.pld_discrete import (
    MAX_FFT_LEN,
    Array,
    DiscretePLD,
    U,
)
from dpledger.accountant.pld_tilt import (
    THETAS,
    _chernoff_upper,
    _near,
    log_mgf_bound_total,
    log_mgf_total,
)
from dpledger.core.errors import (
    BoundUnavailable,
)

__all__ = [
    "ABS_FLOOR",
    "CMUL_ERROR",
    "FFT_ERROR_CONSTANT",
    "TINY_MASS",
    "ComposedPLD",
    "compose",
    "infinite_mass",
    "log_keep_of",
]


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
    #: subtracted from lower bounds: the chords' additive slack, sum of count times slack
    #: (:attr:`DiscretePLD.slack`), rounded up
    chord_slack: float = 0.0

    @property
    def losses(self) -> Array:
        return np.asarray((self.offset + np.arange(self.upper.size)) * self.h, dtype=float)

    @property
    def width(self) -> float:
        return float(self.upper.size) * self.h


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
    #: some component keeps no finite mass (its mass at +infinity is one, or every finite
    #: mass is below TINY_MASS): the composed finite part is zero (:func:`_void`)
    void: bool = False
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
        self.log_inf_keep += count * log_keep_of(pld.inf_mass)
        if pld.inf_mass >= 1.0:
            # every loss of this component is +infinity, and so is the composed loss (the
            # composed mass at +infinity is one): its finite masses are not read
            self.void = True
            return
        if not (keep.any() or pld.dominated):
            # a chord's masses sum to one with its mass at +infinity (up to rounding): with
            # that mass below one, some finite mass is kept; this one is not a valid input
            raise FloatingPointError("a chord keeps no finite mass and less than one at +inf")
        self.dropped += float(masses[~keep].sum()) * (1 + 4 * U * masses.size) * count
        if self.void or not keep.any():
            # no finite mass of this component is kept (all of it charged to upper bounds, as
            # dropped): the composed finite part is zero, and no spectrum is needed
            self.void = True
            return
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
    # a certain +infinity makes every composed loss infinite: no spectrum is needed at all
    product.void = any(pld.inf_mass >= 1.0 for pld, _ in plds)
    for pld, count in plds:
        product.add(pld, count, tilt)
    if product.void:
        return _void(product, plds, lo_idx, n, h)
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
        chord_slack=_chord_slack(plds),
    )


def _chord_slack(plds: Sequence[tuple[DiscretePLD, int]]) -> float:
    """Sum of count times additive slack over the chords (not dominated pairs), rounded up."""
    terms = [c * p_.slack for p_, c in plds if not p_.dominated and p_.slack > 0.0]
    return math.fsum(terms) * (1 + 4 * U * (len(terms) + 2)) if terms else 0.0


def _void(
    product: _SpectrumProduct,
    plds: Sequence[tuple[DiscretePLD, int]],
    lo_idx: int,
    n: int,
    h: float,
) -> ComposedPLD:
    """The composition of components one of which keeps no finite mass: no finite mass (zero
    brackets and tails, nothing wrapped: untilted, with log E[e^{0 S}; S finite] <= 0), the
    mass at +infinity (one where some component's is one) and the dropped masses."""
    return ComposedPLD(
        offset=lo_idx,
        upper=np.zeros(n),
        lower=np.zeros(n),
        inf_mass=infinite_mass(product.log_inf_keep, len(plds)),
        h=h,
        tilt=0.0,
        upper_tail=0.0,
        lower_tail=0.0,
        dropped=product.dropped,
        total_count=sum(c for _, c in plds),
        wrap_thetas=((0.0, 0.0),),
        tilted_error=0.0,
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
    # lower bounds: each chord's stored curve is at most (1 + rho) times that of the exact
    # rounding of its true pair onto the grid, plus its additive slack (subtracted when read),
    # rho its measured excess (at least LOWER_DEFLATION, mass included); so the composed curve
    # is at most prod (1+rho)^count times the exact roundings' composition plus the slacks
    # (proofs_checks/pld_tilted_fft; pairs from :func:`discretise_lower` were deflated when
    # built)
    chords = math.fsum(c * math.log1p(p_.excess) for p_, c in plds if not p_.dominated)
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
    lower -= chords * (1 + 4 * U * (len(plds) + 2))
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
    below = float(np.min(log_mgf_bound_total(plds, -_near(th_dn)) + _near(th_dn) * bottom))
    lower_tail = min(1.0, math.exp(min(0.0, below + 1e-9 * (1 + abs(bottom) * th_dn))))
    # wrap-around from above, for thresholds near the tilted centre
    mid = bottom + 0.5 * n * h
    wrap = log_mgf_total(guide, tilt + THETAS) - THETAS * (mid + n * h) - tilt * mid
    th_w = float(THETAS[int(np.argmin(wrap))])
    ths = np.concatenate([[0.0], th_w * np.geomspace(1 / 64, 64, 19)])
    k_fine = log_mgf_bound_total(plds, tilt + ths)
    return (
        upper_tail,
        lower_tail,
        tuple((float(a_), float(b_)) for a_, b_ in zip(ths, k_fine, strict=True)),
    )


def log_keep_of(inf_mass: float) -> float:
    """log(1 - inf_mass): -inf where the mass at +infinity is one (log1p(-1) raises)."""
    return -math.inf if inf_mass >= 1.0 else math.log1p(-inf_mass)


def infinite_mass(log_keep: float, terms: int) -> float:
    """1 - e^log_keep rounded up: the probability that some component's loss is +infinity,
    from the sum of ``terms`` values count * log1p(-m) (not (1 - m)^count, which is 1 in
    floating point for m below 1e-16)."""
    return min(1.0, -math.expm1(log_keep * (1 + 4 * U * (terms + 4))) * (1 + 4 * U))
