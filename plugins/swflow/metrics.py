"""Metrics: sliced Wasserstein distance and the Frechet distance of Gaussian fits (numpy).

:func:`sliced_wasserstein` matches POT's ``ot.sliced_wasserstein_distance`` (uniform weights,
``(mean_j W_p^p(theta_j))^(1/p)``) exactly for the same projections; it is exact for samples
of different sizes (piecewise-constant quantile functions on the merged grid).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpledger.plugin import InvalidParameterError
from dpledger.plugins.swflow.data import check_records

FloatArray = NDArray[np.float64]


def _merged_grid(n: int, m: int) -> tuple[FloatArray, NDArray[np.int64], NDArray[np.int64]]:
    """Interval lengths of the merged CDF grid and the order-statistic index on each side."""
    cuts = np.unique(np.concatenate([np.arange(1, n + 1) / n, np.arange(1, m + 1) / m]))
    cuts[-1] = 1.0
    lengths = np.diff(np.concatenate([[0.0], cuts]))
    mids = cuts - lengths / 2
    ix = np.minimum((mids * n).astype(np.int64), n - 1)
    iy = np.minimum((mids * m).astype(np.int64), m - 1)
    return lengths, ix, iy


def sliced_wasserstein(
    x: Any,
    y: Any,
    projections: Any = None,
    *,
    num_projections: int = 200,
    seed: int = 0,
    p: int = 2,
) -> float:
    """Sliced ``W_p`` between the empirical measures of ``x`` and ``y`` (rows).

    ``projections`` is ``d x K`` (POT's layout); without it ``num_projections`` random unit
    directions are drawn from ``seed``.
    """
    a = check_records(x, field="x")
    b = check_records(y, field="y")
    if a.shape[1] != b.shape[1]:
        raise InvalidParameterError(
            "y", f"has {b.shape[1]} columns but x has {a.shape[1]}", "compare same-dimension data"
        )
    if projections is None:
        g = np.random.default_rng(seed).standard_normal((a.shape[1], num_projections))
        projections = g / np.linalg.norm(g, axis=0, keepdims=True)
    proj = np.asarray(projections, dtype=np.float64)
    if proj.ndim != 2 or proj.shape[0] != a.shape[1]:
        raise InvalidParameterError(
            "projections",
            f"must be d x K with d = {a.shape[1]}, got {proj.shape}",
            "pass directions as columns",
        )
    xs = np.sort(a @ proj, axis=0)
    ys = np.sort(b @ proj, axis=0)
    lengths, ix, iy = _merged_grid(xs.shape[0], ys.shape[0])
    per_proj = lengths @ np.abs(xs[ix] - ys[iy]) ** p
    return float(np.mean(per_proj) ** (1.0 / p))


def _psd_sqrt(mat: FloatArray) -> FloatArray:
    vals, vecs = np.linalg.eigh((mat + mat.T) / 2)
    return np.asarray((vecs * np.sqrt(np.clip(vals, 0.0, None))) @ vecs.T)


def frechet_gaussian(mu1: Any, cov1: Any, mu2: Any, cov2: Any) -> float:
    """``||mu1 - mu2||^2 + tr(S1 + S2 - 2 (S1^{1/2} S2 S1^{1/2})^{1/2})``."""
    m1, m2 = np.asarray(mu1, dtype=np.float64), np.asarray(mu2, dtype=np.float64)
    s1, s2 = np.atleast_2d(cov1).astype(np.float64), np.atleast_2d(cov2).astype(np.float64)
    root1 = _psd_sqrt(s1)
    cross = _psd_sqrt(root1 @ s2 @ root1)
    value = float(np.sum((m1 - m2) ** 2) + np.trace(s1) + np.trace(s2) - 2 * np.trace(cross))
    return max(value, 0.0)
