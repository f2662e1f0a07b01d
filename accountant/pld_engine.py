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

The code lives in one module per job: the loss grid and connect-the-dots PMFs
(:mod:`~dpledger.accountant.pld_discrete`), Chernoff tilts and windows
(:mod:`~dpledger.accountant.pld_tilt`), the tilted FFT composition
(:mod:`~dpledger.accountant.pld_fft`), reading (epsilon, delta) off a composition
(:mod:`~dpledger.accountant.pld_read`) and dominated pairs
(:mod:`~dpledger.accountant.pld_dominated`); this module re-exports their names.
"""

from __future__ import annotations

from dpledger.accountant.pld_discrete import (
    CHORD_RAISE,
    EXTENDED_ABOVE,
    LOWER_DEFLATION,
    MAX_CERTIFIED_EPSILON,
    MAX_FFT_LEN,
    MAX_LOSS,
    MAX_UPPER_LOSS,
    Array,
    DiscretePLD,
    U,
    discretise,
)
from dpledger.accountant.pld_dominated import (
    MAX_LOWER_SCALE_LOSS,
    RECURSION_ABS,
    discretise_lower,
    recursion_error,
)
from dpledger.accountant.pld_fft import (
    ABS_FLOOR,
    CMUL_ERROR,
    FFT_ERROR_CONSTANT,
    TINY_MASS,
    ComposedPLD,
    _SpectrumProduct,
    _tails,
    _untilted,
    compose,
    infinite_mass,
)
from dpledger.accountant.pld_read import (
    BELOW_RANGE_MASS,
    DISCOUNT_SPAN,
    SUM_SLACK,
    delta_at,
    epsilon_for,
    excess_mass,
    lower_shift,
    rounding_bias,
    wrap_above,
)
from dpledger.accountant.pld_tilt import (
    MGF_BLOCK_SPAN,
    MGF_FLOOR,
    MGF_MEMO_SIZE,
    THETAS,
    _log_mgf,
    _log_mgf_split,
    chernoff_epsilon,
    chernoff_level,
    log_mgf_total,
    tilt_for_delta,
    tilt_for_epsilon,
    tilted_window,
)

__all__ = [
    "ABS_FLOOR",
    "BELOW_RANGE_MASS",
    "CHORD_RAISE",
    "CMUL_ERROR",
    "DISCOUNT_SPAN",
    "EXTENDED_ABOVE",
    "FFT_ERROR_CONSTANT",
    "LOWER_DEFLATION",
    "MAX_CERTIFIED_EPSILON",
    "MAX_FFT_LEN",
    "MAX_LOSS",
    "MAX_LOWER_SCALE_LOSS",
    "MAX_UPPER_LOSS",
    "MGF_BLOCK_SPAN",
    "MGF_FLOOR",
    "MGF_MEMO_SIZE",
    "RECURSION_ABS",
    "SUM_SLACK",
    "THETAS",
    "TINY_MASS",
    "Array",
    "ComposedPLD",
    "DiscretePLD",
    "U",
    "_SpectrumProduct",
    "_log_mgf",
    "_log_mgf_split",
    "_tails",
    "_untilted",
    "chernoff_epsilon",
    "chernoff_level",
    "compose",
    "delta_at",
    "discretise",
    "discretise_lower",
    "epsilon_for",
    "excess_mass",
    "infinite_mass",
    "log_mgf_total",
    "lower_shift",
    "recursion_error",
    "rounding_bias",
    "tilt_for_delta",
    "tilt_for_epsilon",
    "tilted_window",
    "wrap_above",
]
