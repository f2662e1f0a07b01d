"""Data for the trajectory method: a seedable multimodal generator, the MNIST-stroke loader,
and validation of time marginals.

Marginals are a sequence of ``T`` arrays ``[N_i, d]`` (one array per observation time; every
point belongs to a different person in the event-level setting). ``N_i`` may differ between
times; the dimension ``d`` may not.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from dpledger.plugin import InvalidParameterError

#: digits of the MNIST-stroke subset used in the paper's Table 1
MNIST_DIGITS: tuple[int, ...] = (1, 2, 3, 6, 7, 9)
#: public domain of the MNIST-stroke coordinates: the unit square, inside this ball
UNIT_SQUARE_CENTER: tuple[float, float] = (0.5, 0.5)
UNIT_SQUARE_RADIUS: float = math.sqrt(0.5)


def uniform_times(T: int) -> np.ndarray:
    """Observation times ``t_i = (i-1)/(T-1)`` on [0, 1]."""
    if isinstance(T, bool) or not isinstance(T, int | np.integer) or T < 2:
        raise InvalidParameterError("T", f"must be an integer >= 2, got {T!r}", "use T >= 2 times")
    return np.linspace(0.0, 1.0, int(T))


def validate_marginals(
    marginals: Any,
    radius: float | None = None,
    center: Sequence[float] | None = None,
    field: str = "marginals",
) -> list[np.ndarray]:
    """Check and convert marginals to a list of float64 arrays ``[N_i, d]``.

    Raises :class:`InvalidParameterError` for fewer than 2 times, empty marginals, arrays that
    are not 2-D, differing dimensions, NaN/inf points, and points farther than ``radius`` from
    ``center`` (the public bound that the sensitivity analysis relies on).
    """
    items = _marginal_items(marginals, field)
    out: list[np.ndarray] = []
    dim: int | None = None
    for i, item in enumerate(items):
        arr = _marginal_array(item, i, dim, field)
        dim = arr.shape[1]
        out.append(arr)
    if radius is not None:
        _check_in_ball(out, radius, center, dim or 0, field)
    return out


def _marginal_items(marginals: Any, field: str) -> list[Any]:
    """The marginals as a list of at least two items (a [T, N, d] array or a sequence)."""
    if isinstance(marginals, np.ndarray):
        if marginals.ndim != 3:
            raise InvalidParameterError(
                field,
                f"array must have shape [T, N, d], got {marginals.shape}",
                "pass a [T, N, d] array or a list of T arrays [N_i, d]",
            )
        items: list[Any] = list(marginals)
    elif isinstance(marginals, Sequence) and not isinstance(marginals, str | bytes):
        items = list(marginals)
    else:
        raise InvalidParameterError(
            field,
            f"expected a sequence of arrays, got {type(marginals).__name__}",
            "pass a list of T arrays of shape [N_i, d]",
        )
    if len(items) < 2:
        raise InvalidParameterError(
            field,
            f"needs at least 2 time marginals, got {len(items)}",
            "pass T >= 2 marginals (trajectories need two times)",
        )
    return items


def _marginal_array(item: Any, i: int, dim: int | None, field: str) -> np.ndarray:
    """Marginal ``i`` as a finite, non-empty float64 array ``[N_i, d]`` with ``d >= 1`` (and
    ``d == dim`` when the earlier marginals fix it)."""
    name = f"{field}[{i}]"
    if (
        isinstance(item, Sequence)
        and not isinstance(item, str | bytes)
        and len({len(r) if isinstance(r, Sequence) else -1 for r in item}) > 1
    ):
        raise InvalidParameterError(
            name,
            "is ragged: its points have different numbers of coordinates",
            "give every point of every marginal the same dimension d",
        )
    try:
        arr = np.asarray(item, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidParameterError(
            name, "is not a numeric array", "pass an array of shape [N_i, d]"
        ) from None
    if arr.ndim != 2:
        raise InvalidParameterError(
            name, f"must be 2-D [N_i, d], got shape {arr.shape}", "reshape to [N_i, d]"
        )
    if arr.shape[0] == 0:
        raise InvalidParameterError(
            name, "is empty", "every observation time needs at least one point; drop the time"
        )
    if arr.shape[1] == 0:
        raise InvalidParameterError(name, "has dimension 0", "pass points with d >= 1")
    if dim is not None and arr.shape[1] != dim:
        raise InvalidParameterError(
            name,
            f"has dimension {arr.shape[1]} but {field}[0] has dimension {dim}",
            "give all marginals the same point dimension",
        )
    if not np.all(np.isfinite(arr)):
        bad = int(np.argwhere(~np.isfinite(arr))[0, 0])
        raise InvalidParameterError(
            name,
            f"point {bad} contains NaN or infinite values",
            "drop or impute non-finite points before the run",
        )
    return arr


def _check_in_ball(
    marginals: list[np.ndarray],
    radius: float,
    center: Sequence[float] | None,
    dim: int,
    field: str,
) -> None:
    """Every point within the public ``radius`` of ``center`` (default: the origin)."""
    if not (isinstance(radius, int | float) and math.isfinite(radius) and radius > 0):
        raise InvalidParameterError(
            "radius", f"must be > 0 and finite, got {radius!r}", "pass the public data radius"
        )
    c = np.zeros(dim) if center is None else np.asarray(center, dtype=np.float64)
    if c.shape != (dim,):
        raise InvalidParameterError(
            "center",
            f"must have {dim} coordinates, got shape {c.shape}",
            "pass the public centre of the data ball",
        )
    for i, arr in enumerate(marginals):
        dist = np.linalg.norm(arr - c, axis=1)
        j = int(np.argmax(dist))
        if dist[j] > radius * (1.0 + 1e-12):
            raise InvalidParameterError(
                f"{field}[{i}]",
                f"point {j} lies at distance {dist[j]:.6g} > radius {radius:.6g} from the centre",
                "declare a larger public radius or project points into the ball before the run",
            )


def project_to_ball(points: np.ndarray, radius: float, center: Sequence[float]) -> np.ndarray:
    """Project points onto the closed ball (a data-independent, per-point map)."""
    c = np.asarray(center, dtype=np.float64)
    diff = points - c
    norm = np.linalg.norm(diff, axis=-1, keepdims=True)
    scale = np.minimum(1.0, radius / np.maximum(norm, 1e-300))
    out: np.ndarray = c + diff * scale
    return out


@attrs.frozen
class TrajectoryData:
    """Marginals, the ground-truth paths they came from, and the public domain."""

    marginals: list[np.ndarray]
    paths: np.ndarray  # [n_paths, T, d] ground-truth trajectories (for path-space metrics)
    times: np.ndarray
    radius: float
    center: tuple[float, ...]


def _curve(branch: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Branch 0: upper semicircle, 1: line, 2: lower semicircle; all from (-1,0) to (1,0)."""
    x = np.where(branch == 1, -1.0 + 2.0 * t, -np.cos(np.pi * t))
    y = np.where(branch == 0, np.sin(np.pi * t), np.where(branch == 2, -np.sin(np.pi * t), 0.0))
    return np.stack([x, y], axis=-1)


def make_multimodal(
    N: int = 3000,
    T: int = 10,
    blur_var: float = 0.005,
    seed: int = 0,
    radius: float = 1.25,
) -> TrajectoryData:
    """The paper's multimodal data: thirds on an upper semicircle, a line and a lower semicircle.

    Every point of every marginal comes from a different person (``N*T`` paths, one point each);
    points are blurred by ``N(0, blur_var I)`` and projected onto the public ball of ``radius``
    around the origin so that the declared radius holds. ``paths`` holds the full blurred
    trajectories of all ``N*T`` people.
    """
    for name, val in (("N", N), ("T", T)):
        if isinstance(val, bool) or not isinstance(val, int) or val < (2 if name == "T" else 1):
            raise InvalidParameterError(name, f"invalid value {val!r}", "pass N >= 1 and T >= 2")
    if not (blur_var >= 0 and math.isfinite(blur_var)):
        raise InvalidParameterError("blur_var", f"got {blur_var!r}", "pass a variance >= 0")
    rng = np.random.default_rng(seed)
    times = uniform_times(T)
    n_paths = N * T
    branch = np.arange(n_paths) % 3
    rng.shuffle(branch)
    clean = _curve(branch[:, None], times[None, :])  # [n_paths, T, 2]
    noisy = clean + math.sqrt(blur_var) * rng.standard_normal(clean.shape)
    noisy = project_to_ball(noisy, radius, (0.0, 0.0))
    owner = np.arange(n_paths).reshape(N, T)  # person owner[j, i] gives point j at time i
    marginals = [noisy[owner[:, i], i, :].copy() for i in range(T)]
    return TrajectoryData(marginals, noisy, times, float(radius), (0.0, 0.0))
