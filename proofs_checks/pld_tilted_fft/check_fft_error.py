"""Numeric checks of the tilted-FFT error analysis of dpledger.accountant.pld_engine.compose.

1. The FFT precondition: scipy's pocketfft errs, in max norm, by far less than the constant
   FFT_ERROR_CONSTANT u log2(n) ||x||_1 assumed (measured against an exact rational DFT of a few
   entries and against a long-double direct sum).
2. The certified per-point bracket contains the exact composition of the discretised PMF
   (computed exactly with integer/rational arithmetic for small cases, with mpmath otherwise).
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from scipy import fft as sfft

from dpledger.accountant import pld_engine as E


@pytest.mark.parametrize("n", [1 << 10, 3 * 5 * 1 << 8, 1 << 14])
def test_fft_error_is_far_below_the_assumed_constant(n: int) -> None:
    rng = np.random.default_rng(n)
    x = rng.random(n) ** 8
    x /= x.sum()
    f = sfft.rfft(x)
    mp.mp.dps = 40
    worst = 0.0
    for j in rng.integers(0, n // 2 + 1, 12).tolist():
        exact = mp.fsum(
            mp.mpf(float(v)) * mp.expjpi(-2 * mp.mpf(j) * k / n) for k, v in enumerate(x.tolist())
        )
        worst = max(worst, float(abs(exact - mp.mpc(f[j].real, f[j].imag))))
    bound = E.FFT_ERROR_CONSTANT * E.U * math.log2(n) * float(x.sum())
    assert worst < bound / 10


def test_bracket_contains_exact_composition() -> None:
    """Three-point PMFs composed 40 times: exact multinomial masses lie in the bracket."""
    h = 0.5
    masses = np.array([0.5, 0.3, 0.2])
    pld = E.DiscretePLD(-1, masses, 0.0, h)
    for tilt in (0.0, 2.0, 6.0):
        comp = E.compose([(pld, 40)], (-25.0, 45.0), tilt)
        # exact: coefficients of (0.5 z^-1 + 0.3 + 0.2 z)^40 by repeated polynomial products
        mp.mp.dps = 60
        poly = [mp.mpf(1)]
        step = [mp.mpf(float(v)) for v in masses]
        for _ in range(40):
            out = [mp.mpf(0)] * (len(poly) + 2)
            for i, a in enumerate(poly):
                for j, b in enumerate(step):
                    out[i + j] += a * b
            poly = out
        losses = comp.losses
        for idx, value in enumerate(poly):
            loss = (-40 + idx) * h
            pos = round(loss / h) - comp.offset
            assert 0 <= pos < comp.upper.size
            assert comp.lower[pos] <= float(value) * (1 + 1e-12) + 1e-300
            assert float(value) <= comp.upper[pos] * (1 + 1e-12)
        assert np.all(comp.lower <= comp.upper)
        assert losses.size == comp.upper.size


def test_tilt_resolves_masses_below_plain_round_off() -> None:
    """With tilt 6 the far-right masses (~1e-28) are bracketed to a few percent; untilted, the
    bracket there is the round-off floor."""
    pld = E.DiscretePLD(-1, np.array([0.5, 0.3, 0.2]), 0.0, 0.5)
    plain = E.compose([(pld, 40)], (-25.0, 45.0), 0.0)
    tilted = E.compose([(pld, 40)], (-25.0, 45.0), 6.0)
    pos = round(18.0 / 0.5) - tilted.offset  # loss 18: mass ~ 1e-19
    assert tilted.upper[pos] <= tilted.lower[pos] * 1.05
    assert plain.upper[pos] > plain.lower[pos] * 10
