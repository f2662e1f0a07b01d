"""Monte Carlo reference for delta(eps) of Poisson-subsampled Gaussian DP-SGD (remove direction).

delta(eps) = E_P[(1 - e^{eps - L})_+] with L the sum of the per-step losses
log(1 - q + q e^{(2x - 1) / (2 sigma^2)}) and x ~ P = (1 - q) N(0, sigma^2) + q N(1, sigma^2).
At small delta the expectation is carried by a few steps with a large x, so plain sampling sees
nothing. Each step is drawn instead from the defensive mixture (1 - r) P + r N(mu, sigma^2) and
weighted by the exact density ratio: the estimate is unbiased whatever r and mu are, and it
comes with its standard error. It shares no code and no discretisation with the accountant.
"""

from __future__ import annotations

import math

import numpy as np


def remove_direction_delta(
    sigma: float,
    q: float,
    steps: int,
    epsilons: list[float],
    *,
    heavy_mean: float,
    heavy_rate: float,
    samples: int,
    seed: int = 0,
) -> list[tuple[float, float]]:
    """(estimate, standard error) of delta(eps) for every eps in ``epsilons``."""
    rng = np.random.default_rng(seed)
    chunk = max(1, min(samples, 20_000_000 // steps))
    sums = np.zeros(len(epsilons))
    squares = np.zeros(len(epsilons))
    done = 0
    while done < samples:
        m = min(chunk, samples - done)
        done += m
        heavy = rng.random((m, steps)) < heavy_rate
        selected = rng.random((m, steps)) < q
        x = rng.standard_normal((m, steps)) * sigma + np.where(heavy, heavy_mean, selected * 1.0)
        # log densities up to the common Gaussian constant, which cancels in the ratio
        log_p = np.logaddexp(
            math.log1p(-q) - 0.5 * (x / sigma) ** 2, math.log(q) - 0.5 * ((x - 1) / sigma) ** 2
        )
        log_h = -0.5 * ((x - heavy_mean) / sigma) ** 2
        log_g = np.logaddexp(math.log1p(-heavy_rate) + log_p, math.log(heavy_rate) + log_h)
        weight = np.exp((log_p - log_g).sum(axis=1))
        # log(1 - q + q e^t), without overflow at large t (tiny sigma)
        loss = np.logaddexp(math.log1p(-q), math.log(q) + (2 * x - 1) / (2 * sigma**2))
        loss = loss.sum(axis=1)
        for j, eps in enumerate(epsilons):
            value = -np.expm1(np.minimum(eps - loss, 0.0)) * weight
            sums[j] += value.sum()
            squares[j] += (value * value).sum()
    means = sums / samples
    errors = np.sqrt(np.maximum(squares / samples - means**2, 0.0) / samples)
    return [(float(a), float(b)) for a, b in zip(means, errors, strict=True)]


def heavy_step_mean(sigma: float, q: float, loss: float) -> float:
    """The x at which one step's loss equals ``loss`` (where the heavy component is centred)."""
    # log(e^loss - 1 + q) = loss + log1p((q - 1) e^-loss), without overflow
    return 0.5 + sigma**2 * (loss + math.log1p((q - 1) * math.exp(-loss)) - math.log(q))
