"""The MNIST pen-stroke subset of the trajectory paper's Table 1, read as trajectory data."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dpledger.core.errors import InvalidParameterError
from dpledger.plugins.trajectories.data import (
    UNIT_SQUARE_CENTER,
    UNIT_SQUARE_RADIUS,
    TrajectoryData,
    uniform_times,
    validate_marginals,
)

__all__ = ["load_mnist_strokes"]


def load_mnist_strokes(path: str | Path, digit: int) -> TrajectoryData:
    """Load one digit of the MNIST pen-stroke subset (``marg_d``, ``traj_d``, ``T_d`` arrays).

    ``marginals`` are the paper's event-level data (``marg_d``: every source sequence gives one
    point at one time); ``paths`` are the full reference trajectories ``traj_d``.
    """
    p = Path(path)
    if not p.is_file():
        raise InvalidParameterError(
            "path",
            f"no file {p.name!r} at the given location",
            "pass the path of mnist_strokes_subset.npz",
        )
    with np.load(p) as z:
        key = f"marg_{digit}"
        if key not in z.files:
            have = sorted(int(k.split("_")[1]) for k in z.files if k.startswith("marg_"))
            raise InvalidParameterError(
                "digit", f"{digit!r} is not in the file", f"use one of {have}"
            )
        marg = np.asarray(z[key], dtype=np.float64)
        traj = np.asarray(z[f"traj_{digit}"], dtype=np.float64)
        T = int(z[f"T_{digit}"])
    if marg.shape[0] != T or traj.shape[1] != T:
        raise InvalidParameterError(
            "path",
            f"digit {digit}: T_{digit}={T} disagrees with array shapes",
            "rebuild the file with consistent T",
        )
    marginals = validate_marginals(marg, UNIT_SQUARE_RADIUS, UNIT_SQUARE_CENTER)
    return TrajectoryData(marginals, traj, uniform_times(T), UNIT_SQUARE_RADIUS, UNIT_SQUARE_CENTER)
