"""Scores and pictures of the experiments' samples: the Frechet distance of feature sets, a grid
of digit images and the toy problem's particle panels."""

from __future__ import annotations

from typing import Any

import numpy as np

from dpledger.core.errors import InvalidParameterError
from dpledger.plugins.swflow.data import check_records
from dpledger.plugins.swflow.metrics import frechet_gaussian

__all__ = ["frechet_distance", "sample_grid", "scatter_panels"]


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
