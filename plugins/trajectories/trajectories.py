"""Sample paths from composed transport plans, evaluable at any time in ``[t_1, t_U]``.

A path picks a particle at the first time uniformly and then follows the conditional plans
``gamma_u(. | x_u)`` (Theorem C.1). Between grid times it is a Brownian bridge of the reference
process ``W^D``, whose transition kernel ``exp(-|x-y|^2 / (2 D dt))`` is the Gibbs kernel of the
entropic plans (cost ``|x-y|^2/2``, regularisation ``D dt``): variance ``D`` per unit time.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import numpy as np

from dpledger.plugin import InvalidParameterError


@attrs.frozen
class PathSample:
    """``points[n, u]`` is path ``n`` at grid time ``times[u]`` (particle ``indices[n, u]``)."""

    indices: np.ndarray
    points: np.ndarray
    times: np.ndarray
    diffusivity: float


def sample_paths(
    particles: np.ndarray,
    plans: Sequence[np.ndarray],
    times: Sequence[float],
    n_paths: int,
    diffusivity: float,
    rng: np.random.Generator,
) -> PathSample:
    """Draw ``n_paths`` chains through the particles following the plans' conditionals."""
    X = np.asarray(particles, dtype=np.float64)
    ts = np.asarray(times, dtype=np.float64)
    U = X.shape[0]
    if len(plans) != U - 1 or ts.shape != (U,):
        raise InvalidParameterError(
            "plans", f"need {U - 1} plans and {U} times", "pass the plans of consecutive times"
        )
    if not diffusivity > 0:
        raise InvalidParameterError("diffusivity", f"got {diffusivity!r}", "pass D > 0")
    idx = np.empty((n_paths, U), dtype=np.int64)
    idx[:, 0] = rng.integers(0, X.shape[1], n_paths)
    for u, P in enumerate(plans):
        P = np.clip(np.asarray(P, dtype=np.float64), 0.0, None)
        cond = P / np.maximum(P.sum(1, keepdims=True), 1e-300)
        cdf = np.cumsum(cond[idx[:, u]], axis=1)
        r = rng.random(n_paths)[:, None] * cdf[:, -1:]
        idx[:, u + 1] = np.minimum((cdf < r).sum(1), P.shape[1] - 1)
    pts = X[np.arange(U)[None, :], idx]
    return PathSample(idx, pts, ts, float(diffusivity))


def evaluate(paths: PathSample, query: Sequence[float], rng: np.random.Generator) -> np.ndarray:
    """Path positions at arbitrary query times (Brownian bridges between grid points).

    Query times are visited in increasing order; each new point is drawn conditionally on the
    previous one and the next grid point, so the joint law over all queries is correct.
    Returns ``[n_paths, len(query), d]`` in the order of ``query``.
    """
    q = np.asarray(query, dtype=np.float64)
    ts = paths.times
    if q.ndim != 1 or np.any(q < ts[0]) or np.any(q > ts[-1]):
        raise InvalidParameterError(
            "query", f"times must lie in [{ts[0]}, {ts[-1]}]", "query inside the fitted window"
        )
    n, _, d = paths.points.shape
    out = np.empty((n, len(q), d))
    order = np.argsort(q, kind="stable")
    cur_t = ts[0]
    cur_x = paths.points[:, 0].copy()
    for j in order:
        t = q[j]
        u = min(int(np.searchsorted(ts, t, side="right")) - 1, len(ts) - 2)
        if cur_t < ts[u]:  # passed grid point(s): restart from the knot
            cur_t, cur_x = ts[u], paths.points[:, u].copy()
        t_next, x_next = ts[u + 1], paths.points[:, u + 1]
        if t >= t_next:
            cur_t, cur_x = t_next, x_next.copy()
        elif t > cur_t:
            frac = (t - cur_t) / (t_next - cur_t)
            var = paths.diffusivity * (t - cur_t) * (t_next - t) / (t_next - cur_t)
            cur_x = cur_x + frac * (x_next - cur_x) + np.sqrt(var) * rng.standard_normal((n, d))
            cur_t = t
        out[:, j] = cur_x
    return out
