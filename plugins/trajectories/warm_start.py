"""The private warm start of the particles (numpy; every draw through the noise source):
public initialisation, noisy means, or noisy grid counts and sums, released per statistic
jointly over the marginals (event level) or one marginal at a time (user level)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import special

from dpledger.plugin import Adjacency
from dpledger.plugins.trajectories.declare import (
    TrajectoryParams,
    WarmStart,
    warm_start_multipliers,
)
from dpledger.plugins.trajectories.noise import NoiseSource

__all__ = ["warm_start"]


def _public_init(
    ws: WarmStart, m: int, d: int, center: np.ndarray, radius: float, noise: NoiseSource, i: int
) -> np.ndarray:
    z = noise.public_normal((m, d), f"t{i}/init")
    if ws.public_init == "uniform":  # uniform on the box around the ball, via Phi(z)
        uniform: np.ndarray = center - radius + 2.0 * radius * special.ndtr(z)
        return uniform
    mean = center if ws.public_mean is None else np.asarray(ws.public_mean, dtype=np.float64)
    gaussian: np.ndarray = mean + ws.public_std * z
    return gaussian


def _allocate(weights: np.ndarray, m: int) -> np.ndarray:
    """Deterministic largest-remainder allocation of ``m`` particles."""
    w = np.clip(weights, 0.0, None)
    w = np.full_like(w, 1.0 / len(w)) if w.sum() <= 0 else w / w.sum()
    raw = w * m
    n = np.floor(raw).astype(int)
    rest = m - n.sum()
    n[np.argsort(-(raw - n), kind="stable")[:rest]] += 1
    return np.asarray(n)


def _groups(U: int, joint: bool) -> list[list[int]]:
    """Slices released together: all (event level) or one marginal at a time (user level)."""
    return [list(range(U))] if joint else [[u] for u in range(U)]


def warm_start(
    data: Sequence[np.ndarray],
    index: Sequence[int],
    params: TrajectoryParams,
    adjacency: Adjacency,
    noise: NoiseSource,
    n_public: Sequence[int],
    joint: bool = True,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Initial particles ``[U, m, d]`` and the released statistics.

    ``joint``: one release over all marginals per statistic (event level); otherwise one per
    marginal.
    """
    ws = params.warm_start
    d = data[0].shape[1]
    c = np.zeros(d) if params.center is None else np.asarray(params.center, dtype=np.float64)
    R, m = params.radius, params.m
    mult = warm_start_multipliers(ws, adjacency)
    U = len(data)
    X = np.empty((U, m, d))
    info: dict[str, Any] = {"kind": ws.kind, "means": [], "contributions": []}
    if ws.kind == "none":
        for u, i in enumerate(index):
            X[u] = _public_init(ws, m, d, c, R, noise, i)
            info["contributions"].append(())
        return X, info
    if ws.kind == "mean":
        contrib = [R / n_public[u] for u in range(U)]
        queries = [(data[u] - c).sum(0) / n_public[u] for u in range(U)]
        names = [f"t{i}/warm/mean" for i in index]
        noisy = _released(noise, queries, contrib, mult[0], names, joint)
        for u, i in enumerate(index):
            mean = c + noisy[u]
            X[u] = mean + ws.spread * noise.public_normal((m, d), f"t{i}/spread")
            info["means"].append(mean)
            info["contributions"].append((contrib[u],))
        return X, info
    return _grid_warm_start(data, index, params, mult, noise, joint, X, info)


def _released(
    noise: NoiseSource,
    queries: Sequence[np.ndarray],
    contributions: Sequence[float],
    multiplier: float,
    names: Sequence[str],
    joint: bool,
) -> list[np.ndarray]:
    """The noisy ``queries`` (one per marginal, with its contribution bound and step name),
    released in groups: all in one when ``joint``, else one per marginal."""
    noisy: list[np.ndarray] = [np.empty(0)] * len(queries)
    for grp in _groups(len(queries), joint):
        out = noise.release(
            [queries[u] for u in grp],
            [contributions[u] for u in grp],
            multiplier,
            [names[u] for u in grp],
        )
        for u, o in zip(grp, out, strict=True):
            noisy[u] = o
    return noisy


def _grid_warm_start(
    data: Sequence[np.ndarray],
    index: Sequence[int],
    params: TrajectoryParams,
    mult: Sequence[float],
    noise: NoiseSource,
    joint: bool,
    X: np.ndarray,
    info: dict[str, Any],
) -> tuple[np.ndarray, dict[str, Any]]:
    """The grid warm start: noisy cell counts, then noisy sums within the ``components``
    heaviest cells; particles are allotted to the cells by their counts around their means."""
    ws = params.warm_start
    U, m, d = X.shape
    c = np.zeros(d) if params.center is None else np.asarray(params.center, dtype=np.float64)
    R = params.radius
    g = ws.grid
    width = 2.0 * R / g
    r_cell = 0.5 * width * math.sqrt(d)
    flats, counts = [], []
    for Y in data:
        cell = np.clip(np.floor((Y - (c - R)) / width).astype(int), 0, g - 1)
        flat = np.ravel_multi_index(tuple(cell.T), (g,) * d)
        flats.append(flat)
        counts.append(np.bincount(flat, minlength=g**d).astype(np.float64))
    names = [f"t{i}/warm/counts" for i in index]
    noisy_counts = _released(noise, counts, [1.0] * U, mult[0], names, joint)
    k = min(ws.components, g**d)
    tops, centres, sums = [], [], []
    for u in range(U):
        top = np.argsort(-noisy_counts[u], kind="stable")[:k]
        cen = (c - R) + width * (np.stack(np.unravel_index(top, (g,) * d), 1) + 0.5)
        sm = np.zeros((k, d))
        for r, cell_id in enumerate(top):
            sm[r] = (data[u][flats[u] == cell_id] - cen[r]).sum(0)
        tops.append(top)
        centres.append(cen)
        sums.append(sm)
    names = [f"t{i}/warm/sums" for i in index]
    noisy_sums = _released(noise, sums, [r_cell] * U, mult[1], names, joint)
    for u, i in enumerate(index):
        nc = noisy_counts[u][tops[u]]
        means = centres[u] + np.clip(
            noisy_sums[u] / np.maximum(nc, 1.0)[:, None], -width / 2, width / 2
        )
        alloc = _allocate(nc, m)
        spread = ws.spread if ws.spread > 0 else width / 2
        pts = np.repeat(means, alloc, axis=0)
        X[u] = pts + spread * noise.public_normal((m, d), f"t{i}/spread")
        info["means"].append(means)
        info["contributions"].append((1.0, r_cell))
        info.setdefault("weights", []).append(alloc / m)
    return X, info
