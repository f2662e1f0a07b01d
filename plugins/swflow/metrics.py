"""Metrics and figures: sliced Wasserstein distance, Frechet distance, sample grids (numpy).

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


def frechet_distance(features_a: Any, features_b: Any) -> float:
    """Frechet distance between Gaussian fits of two feature sets (rows)."""
    a = check_records(features_a, field="features_a")
    b = check_records(features_b, field="features_b")
    if a.shape[0] < 2 or b.shape[0] < 2:
        raise InvalidParameterError(
            "features_a", "needs at least two rows per set", "pass more samples"
        )
    return frechet_gaussian(a.mean(0), np.cov(a, rowvar=False), b.mean(0), np.cov(b, rowvar=False))


def sample_grid(
    images: Any, path: Any, *, rows: int = 8, cols: int = 8, side: int = 8, title: str | None = None
) -> None:
    """Save ``rows x cols`` flattened ``side x side`` images as one PNG (Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arr = check_records(images, field="images")
    if arr.shape[1] != side * side:
        raise InvalidParameterError(
            "images", f"rows must have {side * side} pixels", "pass flattened square images"
        )
    fig, axes = plt.subplots(rows, cols, figsize=(cols * 0.6, rows * 0.6 + 0.4))
    for k, ax in enumerate(np.asarray(axes).ravel()):
        ax.axis("off")
        if k < arr.shape[0]:
            ax.imshow(arr[k].reshape(side, side), cmap="gray_r", vmin=0.0, vmax=1.0)
    if title:
        fig.suptitle(title, fontsize=8)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def scatter_panels(panels: list[tuple[str, Any]], target: Any, path: Any) -> None:
    """Particles (green) over the target sample (grey), one panel per entry (toy problem)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tgt = check_records(target, field="target")
    fig, axes = plt.subplots(1, len(panels), figsize=(3 * len(panels), 3), squeeze=False)
    for ax, (name, pts) in zip(axes[0], panels, strict=True):
        p = check_records(pts, field="particles")
        ax.scatter(tgt[:, 0], tgt[:, 1], s=2, c="0.7")
        ax.scatter(p[:, 0], p[:, 1], s=2, c="green")
        ax.set_title(name, fontsize=8)
        ax.set_xlim(-3.5, 3.5)
        ax.set_ylim(-3.5, 3.5)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
