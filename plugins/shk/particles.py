"""Birth–death Langevin particle sampler (Lu, Lu & Nolen) on flat tori (periodic boxes in R^d).

Each step: an Euler–Maruyama Langevin move ``x ← x − ∇V(x)dt + √(2dt) ξ`` wrapped into the box,
then birth–death with rate ``β_i = log K_h*μ(x_i) + V(x_i) − mean_j(·)`` where ``K_h*μ`` is a
Gaussian KDE over all particles (self included) with wrapped (minimum-image) distances. Particle
``i`` jumps with probability ``1 − e^{−|β_i| dt}``: if ``β_i > 0`` it is killed and replaced by a
copy of a uniformly chosen other particle, if ``β_i < 0`` it is duplicated over a uniformly chosen
other particle. The particle law approximates the SHK flow; the paper's theorem is about the exact
flow, so this sampler carries no privacy guarantee of its own beyond that approximation.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from dpledger.plugin import InvalidParameterError
from dpledger.plugins.shk.torus import FloatArray

ArrayFn = Callable[[FloatArray], FloatArray]


def _box(
    low: FloatArray | float, high: FloatArray | float, d: int
) -> tuple[FloatArray, FloatArray]:
    lo = np.broadcast_to(np.asarray(low, dtype=np.float64), (d,)).copy()
    hi = np.broadcast_to(np.asarray(high, dtype=np.float64), (d,)).copy()
    if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) and np.all(hi > lo)):
        raise InvalidParameterError("box", "needs finite low < high", "pass e.g. (-π, π)")
    return lo, hi


def wrap(x: FloatArray, low: FloatArray, high: FloatArray) -> FloatArray:
    """Map points into the periodic box ``[low, high)``."""
    return np.asarray(low + np.mod(x - low, high - low))


def wrapped_kde_log(x: FloatArray, low: FloatArray, high: FloatArray, bw: float) -> FloatArray:
    """Log of the Gaussian KDE at every particle, minimum-image distances, self included."""
    period = high - low
    diff = x[:, None, :] - x[None, :, :]
    diff -= period * np.round(diff / period)
    d2 = np.sum(diff**2, axis=-1) / bw**2
    d = x.shape[1]
    m = -0.5 * d2
    top = np.max(m, axis=1, keepdims=True)
    lse = top[:, 0] + np.log(np.mean(np.exp(m - top), axis=1))
    return np.asarray(lse - d * math.log(math.sqrt(2.0 * math.pi) * bw))


def birth_death_langevin(
    x0: FloatArray,
    potential: ArrayFn,
    grad: ArrayFn,
    t_final: float,
    dt: float,
    rng: np.random.Generator,
    low: FloatArray | float = -math.pi,
    high: FloatArray | float = math.pi,
    bandwidth: float | None = None,
    birth_death: bool = True,
) -> FloatArray:
    """Run the particle system to ``t_final``; ``x0`` has shape (n, d) (or (n,) for d = 1).

    ``potential``/``grad`` map an (n, d) array to (n,) values / (n, d) gradients. Default
    bandwidth: Silverman's rule ``1.06 σ n^{−1/5}`` with σ the mean box side / √12.
    """
    x = np.asarray(x0, dtype=np.float64)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[0] < 2:
        raise InvalidParameterError("x0", "needs shape (n, d) with n >= 2", "pass more particles")
    if not (math.isfinite(t_final) and t_final >= 0):
        raise InvalidParameterError("t", f"must be >= 0, got {t_final!r}", "pass t >= 0")
    if not (math.isfinite(dt) and dt > 0):
        raise InvalidParameterError("dt", f"must be > 0, got {dt!r}", "pass a small positive dt")
    n, d = x.shape
    lo, hi = _box(low, high, d)
    default_bw = 1.06 * float(np.mean(hi - lo)) / math.sqrt(12) * n ** (-0.2)
    bw = default_bw if bandwidth is None else bandwidth
    if not (math.isfinite(bw) and bw > 0):
        raise InvalidParameterError("bandwidth", "must be > 0", "pass a positive bandwidth")
    x = wrap(x, lo, hi)
    steps = math.ceil(t_final / dt) if t_final > 0 else 0
    h = t_final / steps if steps else 0.0
    for _ in range(steps):
        x = wrap(x - grad(x) * h + math.sqrt(2.0 * h) * rng.standard_normal(x.shape), lo, hi)
        if not birth_death:
            continue
        rate = wrapped_kde_log(x, lo, hi, bw) + potential(x)
        rate -= rate.mean()
        jump = rng.random(n) < -np.expm1(-np.abs(rate) * h)
        for i in rng.permutation(np.flatnonzero(jump)):
            j = int(rng.integers(n - 1))
            j += j >= i
            if rate[i] > 0:
                x[i] = x[j]
            else:
                x[j] = x[i]
    return x
