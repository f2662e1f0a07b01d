"""Confidence bounds for empirical privacy audits.

All bounds are one-sided Clopper–Pearson (exact binomial) intervals. From counts of a fixed event
``S`` under two output distributions, :func:`epsilon_lower_bound` gives an epsilon that the
mechanism's true epsilon exceeds with probability at least ``1 - alpha``:

    Pr[M(A) in S] <= e^eps Pr[M(B) in S] + delta   for every S
    =>  eps >= ln((p_A - delta) / p_B)

with ``p_A`` replaced by its lower and ``p_B`` by its upper confidence bound, each at ``alpha/2``.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from dpledger.core.errors import InvalidParameterError


def _check_alpha(alpha: float) -> float:
    if not (isinstance(alpha, int | float) and 0.0 < float(alpha) < 1.0):
        raise InvalidParameterError("alpha", f"must lie in (0, 1), got {alpha!r}", "pass e.g. 0.05")
    return float(alpha)


def _check_delta(delta: float) -> float:
    if not (isinstance(delta, int | float) and 0.0 <= float(delta) < 1.0):
        raise InvalidParameterError("delta", f"must lie in [0, 1), got {delta!r}", "pass e.g. 1e-3")
    return float(delta)


def _check_counts(k: NDArray[np.float64], n: NDArray[np.float64]) -> None:
    if np.any(n < 1) or np.any(k < 0) or np.any(k > n):
        raise InvalidParameterError("counts", "need 0 <= k <= n and n >= 1", "pass hit counts")


def cp_upper(k: ArrayLike, n: ArrayLike, alpha: float) -> NDArray[np.float64]:
    """One-sided upper ``1 - alpha`` Clopper–Pearson bound on a binomial proportion."""
    alpha = _check_alpha(alpha)
    k_arr = np.asarray(k, dtype=float)
    n_arr = np.asarray(n, dtype=float)
    _check_counts(k_arr, n_arr)
    full = k_arr >= n_arr
    a = np.where(full, 1.0, k_arr + 1.0)
    b = np.where(full, 1.0, n_arr - k_arr)
    out = np.where(full, 1.0, stats.beta.ppf(1.0 - alpha, a, b))
    return np.asarray(out, dtype=float)


def cp_lower(k: ArrayLike, n: ArrayLike, alpha: float) -> NDArray[np.float64]:
    """One-sided lower ``1 - alpha`` Clopper–Pearson bound on a binomial proportion."""
    alpha = _check_alpha(alpha)
    k_arr = np.asarray(k, dtype=float)
    n_arr = np.asarray(n, dtype=float)
    _check_counts(k_arr, n_arr)
    empty = k_arr <= 0
    a = np.where(empty, 1.0, k_arr)
    b = n_arr - k_arr + 1.0
    out = np.where(empty, 0.0, stats.beta.ppf(alpha, a, b))
    return np.asarray(out, dtype=float)


def epsilon_lower_bounds(
    k_a: ArrayLike, n_a: int, k_b: ArrayLike, n_b: int, delta: float, alpha: float
) -> NDArray[np.float64]:
    """Vectorised :func:`epsilon_lower_bound` over arrays of hit counts."""
    delta = _check_delta(delta)
    p_a = cp_lower(k_a, n_a, alpha / 2.0)
    p_b = cp_upper(k_b, n_b, alpha / 2.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.log(np.maximum(p_a - delta, 0.0)) - np.log(p_b)
    return np.asarray(np.where(p_a > delta, np.maximum(ratio, 0.0), 0.0), dtype=float)


def epsilon_lower_bound(
    k_a: int, n_a: int, k_b: int, n_b: int, delta: float, alpha: float
) -> float:
    """Epsilon lower bound (confidence ``1 - alpha``) from hits of one event under A and B.

    ``k_a`` of ``n_a`` outputs of ``M(A)`` and ``k_b`` of ``n_b`` outputs of ``M(B)`` fell in
    the event. The event must have been chosen on other samples.
    """
    return float(epsilon_lower_bounds(k_a, n_a, k_b, n_b, delta, alpha))


def epsilon_estimate(k_a: int, n_a: int, k_b: int, n_b: int, delta: float) -> float:
    """Plug-in estimate ``ln((k_a/n_a - delta) / (k_b/n_b))`` (no confidence; for reporting)."""
    p_a = k_a / n_a
    p_b = k_b / n_b
    if p_a <= delta:
        return 0.0
    if p_b == 0.0:
        return math.inf
    return max(0.0, math.log((p_a - delta) / p_b))


def ceiling(n_a: int, n_b: int, delta: float, alpha: float) -> float:
    """Largest epsilon lower bound ``n_a``/``n_b`` samples can certify (a perfect separator).

    Approximately ``ln(n / ln(2/alpha))``: 3.28 for n=100, 5.60 for n=1000 at alpha=0.05.
    """
    return epsilon_lower_bound(n_a, n_a, 0, n_b, delta, alpha)


def required_samples(
    p_a: float, p_b: float, delta: float, resolution: float, alpha: float
) -> float:
    """Samples per side so that ``eps - eps_lower <= resolution`` (normal approximation).

    ``n = z^2 [p_a(1-p_a)/(p_a-delta)^2 + (1-p_b)/p_b] / r^2`` for the event probabilities
    ``p_a``, ``p_b`` of the optimal event; dominated by ``1/p_b`` when ``p_b`` is small.
    """
    alpha = _check_alpha(alpha)
    delta = _check_delta(delta)
    if not (0.0 < p_b <= 1.0 and delta < p_a <= 1.0):
        raise InvalidParameterError(
            "p_a", f"need delta < p_a <= 1 and 0 < p_b <= 1, got {p_a!r}, {p_b!r}", "fix the event"
        )
    if not resolution > 0:
        raise InvalidParameterError("resolution", "must be > 0", "pass e.g. 0.1")
    z = float(stats.norm.ppf(1.0 - alpha / 2.0))
    var = p_a * (1.0 - p_a) / (p_a - delta) ** 2 + (1.0 - p_b) / p_b
    return z * z * var / (resolution * resolution)
