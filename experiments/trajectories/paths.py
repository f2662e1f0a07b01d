"""Path-level tools of the trajectory paper's evaluation: exact OT plans between consecutive
particle sets (Fig. 3's paths) and the W2 between path distributions (Table 1)."""

from __future__ import annotations

import numpy as np
import ot

from dpledger.core.errors import InvalidParameterError
from dpledger.plugins.trajectories.metrics import w2

__all__ = ["exact_plans", "path_w2"]


def exact_plans(particles: np.ndarray) -> list[np.ndarray]:
    """Exact OT plans (``ot.emd``, cost ``|x-y|^2/2``) between consecutive particle sets."""
    out = []
    for u in range(len(particles) - 1):
        A, B = particles[u], particles[u + 1]
        a = np.full(len(A), 1.0 / len(A))
        b = np.full(len(B), 1.0 / len(B))
        out.append(ot.emd(a, b, 0.5 * ot.dist(A, B)))
    return out


def path_w2(true_paths: np.ndarray, generated_paths: np.ndarray) -> float:
    """W2 between path distributions, paths as points of R^{T d} with cost mean_t |x_t - y_t|^2."""
    tp = np.asarray(true_paths, dtype=np.float64)
    gp = np.asarray(generated_paths, dtype=np.float64)
    if tp.ndim != 3 or tp.shape[1:] != gp.shape[1:]:
        raise InvalidParameterError(
            "generated_paths",
            f"shape {gp.shape} does not match {tp.shape}",
            "pass paths [n, T, d] on the same time grid",
        )
    T = tp.shape[1]
    return float(w2(tp.reshape(len(tp), -1), gp.reshape(len(gp), -1)) / np.sqrt(T))
