"""An independent reference for compositions of many distinct two-point leaves (binary randomized
response at epsilon_i, and the approximate-DP pair, which adds a lump at +infinity).

Each epsilon_i is rounded to a lattice of spacing ``g``: up, the pairs dominate the leaves; down,
they are dominated (randomized response grows with epsilon), so the two lattice compositions
bracket the true epsilon(delta). The lattice composition is read exactly from the product of
the leaves' characteristic functions (an FFT over a window of 10 standard deviations, whose
tails hold about e^-50 of the mass; plain floating point, written apart from the accountant's
engine).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def _lattice_distribution(units: np.ndarray, g: float) -> tuple[np.ndarray, np.ndarray]:
    """(losses, P-masses) of the sum of the independent losses +-units_i g."""
    values, counts = np.unique(units, return_counts=True)
    e = values * g
    p = np.exp(e) / (1 + np.exp(e))  # P-probability of the loss +e
    mean = float(np.sum(counts * (2 * p - 1) * e))
    var = float(np.sum(counts * (1 - (2 * p - 1) ** 2) * e * e))
    half = int((abs(mean) + 10 * math.sqrt(var)) / g) + 10
    n = 1 << math.ceil(math.log2(2 * half + 1))
    w = 2j * np.pi * np.arange(n // 2 + 1) / n
    log_phi = np.zeros(n // 2 + 1, dtype=complex)
    for v, c, pv in zip(values, counts, p, strict=True):
        log_phi += c * np.log(pv * np.exp(-w * v) + (1 - pv) * np.exp(w * v))
    masses = np.maximum(np.fft.irfft(np.exp(log_phi), n), 0.0)
    index = np.arange(n)
    return np.where(index < n // 2, index, index - n) * g, masses


def _epsilon(losses: np.ndarray, masses: np.ndarray, delta: float, lump: float) -> float:
    """epsilon(delta) of the composition: delta(eps) = lump + (1 - lump) E[(1 - e^(eps-L))+]."""

    def delta_at(eps: float) -> float:
        above = losses > eps
        tail = float(np.sum(masses[above] * -np.expm1(eps - losses[above])))
        return lump + (1 - lump) * tail

    lo, hi = 0.0, float(losses.max())
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if delta_at(mid) > delta else (lo, mid)
    return hi


def two_point_bracket(
    epsilons: Sequence[float], delta: float, g: float, deltas: Sequence[float] = ()
) -> tuple[float, float]:
    """(below, above) the true epsilon(delta) of the composition of binary randomized response
    at each of ``epsilons`` (with ``deltas``: the approximate-DP pairs at (epsilon_i,
    delta_i))."""
    lump = -math.expm1(math.fsum(math.log1p(-d) for d in deltas))
    eps = np.asarray(epsilons, dtype=float)
    out = []
    for units in (np.floor(eps / g), np.ceil(eps / g)):
        losses, masses = _lattice_distribution(units.astype(np.int64), g)
        out.append(_epsilon(losses, masses, delta, lump))
    return out[0], out[1]
