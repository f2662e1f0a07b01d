"""Per-record bounds of the projection release ``Y Theta^T`` (numpy/scipy only).

A record ``y`` in the unit ball contributes the row ``Theta y`` (``Theta``: ``N_theta x d``
with unit rows). Two bounds on ``||Theta u||`` for unit ``u``:

* :func:`operator_norm_bound`: the exact ``sigma_max(Theta)``, rounded up. ``Theta`` is drawn
  independently of the data, so this holds for every record with probability one.
* :func:`bernstein_w`: the paper's probabilistic bound ``||Theta u||^2 <= w`` for a *fixed*
  ``u`` with probability ``>= 1 - p`` over ``Theta`` (Lemma 1). ``<theta, u>^2`` is
  ``Beta(1/2, (d-1)/2)`` (mean ``1/d``, variance ``2(d-1)/(d^2 (d+2))``, values in ``[0, 1]``),
  so Bernstein's inequality gives a rigorous ``w``; the paper's ``N_theta > 30`` branch uses a
  normal quantile (:func:`clt_w`), a CLT approximation that is not a bound, and is only
  reproduced for comparison.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray
from scipy.stats import norm

from dpledger.plugin import InvalidParameterError

#: relative safety margin on computed bounds (covers the SVD's rounding error)
_ROUND_UP = 1.0 + 1e-9


def sample_projections(rng: np.random.Generator, num: int, dim: int) -> NDArray[np.float64]:
    """``num`` directions uniform on the unit sphere of ``R^dim`` (rows)."""
    if num < 1 or dim < 1:
        raise InvalidParameterError(
            "num_projections",
            f"cannot draw {num} directions in dimension {dim}",
            "use at least one projection and data with at least one column",
        )
    theta = rng.standard_normal((num, dim))
    norms = np.linalg.norm(theta, axis=1, keepdims=True)
    while np.any(norms == 0):  # pragma: no cover - probability zero
        theta = rng.standard_normal((num, dim))
        norms = np.linalg.norm(theta, axis=1, keepdims=True)
    return np.asarray(theta / norms, dtype=np.float64)


def operator_norm_bound(theta: NDArray[np.float64]) -> float:
    """``sigma_max(theta)`` rounded up: ``||theta u|| <= bound`` for every unit ``u``."""
    if theta.ndim != 2 or theta.size == 0:
        raise InvalidParameterError("theta", "must be a non-empty matrix", "pass N_theta x d")
    smax = float(np.linalg.norm(theta, ord=2))
    # also never exceed the trivial sqrt(N_theta) (each row has norm 1 up to rounding)
    return min(smax, math.sqrt(theta.shape[0]) * (1 + 1e-12)) * _ROUND_UP


def _check(num: int, dim: int, failure_probability: float) -> None:
    if num < 1 or dim < 1:
        raise InvalidParameterError(
            "num_projections", f"got {num} in dimension {dim}", "use positive sizes"
        )
    if not 0 < failure_probability < 1:
        raise InvalidParameterError(
            "failure_probability",
            f"must lie in (0, 1), got {failure_probability!r}",
            "pass e.g. 1e-9",
        )


def bernstein_w(num: int, dim: int, failure_probability: float) -> float:
    """Rigorous ``w``: ``P(sum_j <theta_j, u>^2 > w) <= failure_probability`` for fixed unit u.

    Bernstein: ``P(S - N/d >= t) <= exp(-t^2 / (2 (N v + t/3)))`` for summands in ``[0, 1]``
    with variance ``v``; solved for ``t``. Capped at ``N`` (each summand is at most 1).
    """
    _check(num, dim, failure_probability)
    v = 2.0 * (dim - 1) / (dim * dim * (dim + 2.0))
    log_term = math.log(1.0 / failure_probability)
    t = log_term / 3.0 + math.sqrt(log_term * log_term / 9.0 + 2.0 * num * v * log_term)
    return min(num / dim + t, float(num)) * _ROUND_UP


def clt_w(num: int, dim: int, failure_probability: float) -> float:
    """The paper's Eq. (23) (normal quantile ``z_{1-p}``): an approximation, not a bound."""
    _check(num, dim, failure_probability)
    z = float(norm.isf(failure_probability))
    return num / dim + z / dim * math.sqrt(2.0 * num * (dim - 1) / (dim + 2.0))


def record_bound(
    theta: NDArray[np.float64], sensitivity_bound: str, failure_probability: float
) -> float:
    """The per-record bound ``C`` used to scale the noise of one release with ``theta``."""
    if sensitivity_bound == "operator_norm":
        return operator_norm_bound(theta)
    if sensitivity_bound == "probabilistic":
        return math.sqrt(bernstein_w(theta.shape[0], theta.shape[1], failure_probability))
    raise InvalidParameterError(
        "sensitivity_bound",
        f"unknown bound {sensitivity_bound!r}",
        "use 'operator_norm' or 'probabilistic'",
    )


def classical_gaussian_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """``sqrt(2 ln(1.25/delta)) * sensitivity / epsilon`` (proven only for epsilon < 1)."""
    return math.sqrt(2.0 * math.log(1.25 / delta)) * sensitivity / epsilon


def gaussian_exact_delta(epsilon: float, sigma: float, sensitivity: float = 1.0) -> float:
    """Exact ``delta(epsilon)`` of the Gaussian mechanism (Balle & Wang 2018, Theorem 8)."""
    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    return float(norm.cdf(a - b) - math.exp(epsilon) * norm.cdf(-a - b))
