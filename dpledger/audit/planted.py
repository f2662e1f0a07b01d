"""Planted-bug (mutation) mechanisms: each claims less privacy loss than it spends.

Every mechanism here is a small, real implementation on concrete datasets whose declared
parameters contain one classic mistake. ``claimed_epsilon(delta)`` is the exact epsilon of the
*declared* mechanism (the tightest honest-looking claim); ``true_epsilon(delta)`` is the exact
epsilon of what the code does. An auditor that works must report ``epsilon_lower`` above the
claim (and, being sound, below the truth). ``CONTROLS`` are correct mechanisms that must never
be flagged.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from dpledger.audit.reference import (
    gaussian_epsilon,
    subsampled_gaussian_epsilon,
)

Array = NDArray[np.float64]
Sampler = Callable[[Any, int, np.random.Generator], Array]


@attrs.frozen
class PlantedMechanism:
    """A mechanism, a neighbouring pair, its (possibly wrong) claim and its exact truth."""

    name: str
    bug: str
    sampler: Sampler
    d: Array
    d_prime: Array
    claimed_epsilon: Callable[[float], float]
    true_epsilon: Callable[[float], float]
    deltas: tuple[float, ...]


def _clip(x: Array, bound: float) -> Array:
    return np.clip(x, -bound, bound)


# -- 1. sensitivity off by 2x -------------------------------------------------------------
def laplace_sum_declared_sensitivity_1(data: Array, n: int, rng: np.random.Generator) -> Array:
    """Sum of values clipped to [-1, 1] with Laplace noise for epsilon = 1.

    Bug: the replace-one sensitivity of the sum is U - L = 2, but the noise is scaled to 1.
    """
    epsilon, declared_sensitivity = 1.0, 1.0
    total = float(np.sum(_clip(data, 1.0)))
    return total + rng.laplace(0.0, declared_sensitivity / epsilon, n)


# -- 2. noise off by sqrt(2) --------------------------------------------------------------
def gaussian_sum_sigma_confusion(data: Array, n: int, rng: np.random.Generator) -> Array:
    """Sum of values clipped to [-1, 1] with Gaussian noise, noise multiplier 1 declared.

    Bug: the density exp(-x^2 / sigma^2) convention is used, so the std is sigma / sqrt(2).
    """
    sigma = 1.0
    total = float(np.sum(_clip(data, 1.0)))
    return total + rng.normal(0.0, sigma / math.sqrt(2.0), n)


# -- 3. sampling rate under-declared ------------------------------------------------------
DECLARED_RATE, ACTUAL_RATE = 0.1, 0.5


def poisson_gaussian_wrong_rate(data: Array, n: int, rng: np.random.Generator) -> Array:
    """Poisson-subsampled Gaussian sum (sigma = 1) declared at q = 0.1.

    Bug: the batch-inclusion probability is computed from the wrong dataset size and is 0.5.
    """
    return _poisson_gaussian_sum(data, n, rng, ACTUAL_RATE)


def _poisson_gaussian_sum(data: Array, n: int, rng: np.random.Generator, q: float) -> Array:
    clipped = _clip(np.asarray(data, dtype=float), 1.0)
    included = rng.random((n, len(clipped))) < q
    return np.asarray(included @ clipped, dtype=float) + rng.normal(0.0, 1.0, n)


# -- 4. non-private mean ------------------------------------------------------------------
def mean_without_noise(data: Array, n: int, rng: np.random.Generator) -> Array:
    """Mean of values clipped to [0, 1], claimed 1-DP. Bug: the noise step is missing."""
    return np.full(n, float(np.mean(np.clip(data, 0.0, 1.0))))


# -- 5. one-direction accounting ----------------------------------------------------------
def poisson_gaussian(data: Array, n: int, rng: np.random.Generator) -> Array:
    """Poisson-subsampled (q = 0.5) Gaussian sum with sigma = 1; correct as implemented.

    Bug (in the claim): only the add direction ``(N(0), mixture)`` was accounted; the remove
    direction ``(mixture, N(0))`` dominates.
    """
    return _poisson_gaussian_sum(data, n, rng, 0.5)


# -- controls -----------------------------------------------------------------------------
def laplace_sum(data: Array, n: int, rng: np.random.Generator) -> Array:
    """Correct: sum of values clipped to [-1, 1] (replace-one sensitivity 2), epsilon = 1."""
    total = float(np.sum(_clip(data, 1.0)))
    return total + rng.laplace(0.0, 2.0 / 1.0, n)


def gaussian_sum(data: Array, n: int, rng: np.random.Generator) -> Array:
    """Correct: sum of values clipped to [-1, 1] under add/remove (sensitivity 1), sigma = 1."""
    total = float(np.sum(_clip(data, 1.0)))
    return total + rng.normal(0.0, 1.0, n)


def _subsampled_epsilon(q: float, directions: tuple[str, ...]) -> Callable[[float], float]:
    def eps(delta: float) -> float:
        return float(subsampled_gaussian_epsilon(q, 1.0, delta, directions))

    return eps


def _arr(*values: float) -> Array:
    return np.array(values, dtype=float)


_BOTH = ("add", "remove")

PLANTED: dict[str, PlantedMechanism] = {
    m.name: m
    for m in (
        PlantedMechanism(
            "sensitivity_halved",
            "replace-one sum sensitivity declared 1, true 2 (claimed eps 1, true 2)",
            laplace_sum_declared_sensitivity_1,
            _arr(0.3, -0.2, -1.0),
            _arr(0.3, -0.2, 1.0),
            lambda delta: 1.0,
            lambda delta: 2.0,
            (0.0,),
        ),
        PlantedMechanism(
            "noise_sqrt2",
            "Gaussian std sigma/sqrt(2) instead of sigma (claimed mu 1, true sqrt 2)",
            gaussian_sum_sigma_confusion,
            _arr(0.5, -0.25),
            _arr(0.5, -0.25, 1.0),
            lambda delta: gaussian_epsilon(1.0, delta),
            lambda delta: gaussian_epsilon(math.sqrt(2.0), delta),
            (1e-2,),
        ),
        PlantedMechanism(
            "sampling_rate_underdeclared",
            f"Poisson rate declared {DECLARED_RATE}, actual {ACTUAL_RATE}",
            poisson_gaussian_wrong_rate,
            _arr(0.0, 0.0),
            _arr(0.0, 0.0, 1.0),
            _subsampled_epsilon(DECLARED_RATE, _BOTH),
            _subsampled_epsilon(ACTUAL_RATE, _BOTH),
            (1e-3,),
        ),
        PlantedMechanism(
            "non_private_mean",
            "mean released without noise, claimed eps 1",
            mean_without_noise,
            _arr(0.2, 0.4, 0.6),
            _arr(0.2, 0.4, 0.6, 1.0),
            lambda delta: 1.0,
            lambda delta: math.inf,
            (0.0,),
        ),
        PlantedMechanism(
            "one_direction",
            "Poisson(q=0.5) Gaussian accounted in the add direction only",
            poisson_gaussian,
            _arr(0.0, 0.0),
            _arr(0.0, 0.0, 1.0),
            _subsampled_epsilon(0.5, ("add",)),
            _subsampled_epsilon(0.5, _BOTH),
            (1e-3,),
        ),
    )
}

CONTROLS: dict[str, PlantedMechanism] = {
    m.name: m
    for m in (
        PlantedMechanism(
            "laplace_eps1",
            "correct replace-one Laplace sum, eps 1",
            laplace_sum,
            _arr(0.3, -0.2, -1.0),
            _arr(0.3, -0.2, 1.0),
            lambda delta: 1.0,
            lambda delta: 1.0,
            (0.0,),
        ),
        PlantedMechanism(
            "gaussian_sigma1",
            "correct add/remove Gaussian sum, sigma 1 (mu 1)",
            gaussian_sum,
            _arr(0.5, -0.25),
            _arr(0.5, -0.25, 1.0),
            lambda delta: gaussian_epsilon(1.0, delta),
            lambda delta: gaussian_epsilon(1.0, delta),
            (1e-2, 1e-3),
        ),
    )
}
