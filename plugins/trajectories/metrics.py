"""Utility metrics (exact W2 via ``ot.emd2``) and a Fig.-1-style figure."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import ot

from dpledger.plugin import InvalidParameterError


def w2(A: np.ndarray, B: np.ndarray) -> float:
    """Exact 2-Wasserstein distance between uniform empirical measures on the rows of A and B."""
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[1]:
        raise InvalidParameterError(
            "points",
            f"shapes {A.shape} and {B.shape} are not [n, d] with equal d",
            "pass two point clouds of the same dimension",
        )
    a = np.full(len(A), 1.0 / len(A))
    b = np.full(len(B), 1.0 / len(B))
    cost = ot.emd2(a, b, ot.dist(A, B), numItermax=1_000_000)
    return float(np.sqrt(max(float(cost), 0.0)))


def marginal_w2(true: Sequence[np.ndarray], generated: Sequence[np.ndarray]) -> np.ndarray:
    """W2 between true and generated marginals at every time."""
    if len(true) != len(generated):
        raise InvalidParameterError(
            "generated",
            f"{len(generated)} marginals for {len(true)} true ones",
            "compare the same set of times",
        )
    return np.array([w2(t, g) for t, g in zip(true, generated, strict=True)])


def figure1(
    true_paths: np.ndarray,
    marginals: Sequence[np.ndarray],
    private_means: Sequence[np.ndarray] | None,
    generated_paths: np.ndarray,
    path: str | Path | None = None,
    n_show: int = 50,
    title: str = "",
) -> Any:
    """Four panels: example trajectories, marginals, private means, generated paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 4, figsize=(14, 3.6))
    cmap = plt.get_cmap("viridis")
    T = len(marginals)
    for p in true_paths[:n_show]:
        ax[0].plot(p[:, 0], p[:, 1], lw=0.6, alpha=0.6)
    for i, mg in enumerate(marginals):
        ax[1].scatter(mg[:, 0], mg[:, 1], s=2, color=cmap(i / max(T - 1, 1)))
    if private_means is not None:
        for i, mu in enumerate(private_means):
            mu = np.atleast_2d(mu)
            ax[2].scatter(mu[:, 0], mu[:, 1], s=25, color=cmap(i / max(T - 1, 1)))
    for p in generated_paths[:n_show]:
        ax[3].plot(p[:, 0], p[:, 1], lw=0.6, alpha=0.6)
    names = ("trajectories", "marginals", "private warm start", "generated paths")
    for a, name in zip(ax, names, strict=True):
        a.set_title(name)
        a.set_aspect("equal")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
        plt.close(fig)
    return fig
