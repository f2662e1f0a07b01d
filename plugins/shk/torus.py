"""The periodic midpoint grid on the 1-D torus [−π, π) and potentials on it.

Cells have width ``Δx = 2π/N`` and midpoints ``x_i = −π + (i + ½)Δx``. A potential is a
vectorised callable ``V(x)`` that must be 2π-periodic (the theorem needs a boundaryless domain);
it is checked at the seam ``V(−π) = V(π)`` and at shifted points ``V(x) = V(x + 2π)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from dpledger.plugin import InvalidParameterError

Potential = Callable[[NDArray[np.float64]], NDArray[np.float64]]
FloatArray = NDArray[np.float64]

#: Default number of cells. The paper's reported grid quantities (e.g. ``‖V−V′‖∞ = 1.599920``
#: for ``h = 0.6 sin x + 1``) are exactly those of the N = 192 midpoint grid.
DEFAULT_CELLS = 192

#: Absolute tolerance of the periodicity check (``|V(x) − V(x + 2π)|``), relative to ``1 + |V|``.
PERIODICITY_TOL = 1e-8


class TorusGrid:
    """Periodic midpoint grid with ``n_cells`` cells on [−π, π)."""

    def __init__(self, n_cells: int = DEFAULT_CELLS) -> None:
        if isinstance(n_cells, bool) or not isinstance(n_cells, int | np.integer):
            raise InvalidParameterError(
                "n_cells", f"expected an int, got {n_cells!r}", "pass an integer such as 192"
            )
        if n_cells < 8:
            raise InvalidParameterError(
                "n_cells", f"must be >= 8, got {n_cells}", "use at least 8 cells (default 192)"
            )
        self.n_cells = int(n_cells)
        self.dx = 2.0 * math.pi / self.n_cells
        self.x: FloatArray = np.asarray(
            -math.pi + (np.arange(self.n_cells) + 0.5) * self.dx, dtype=np.float64
        )

    def integrate(self, f: FloatArray) -> float:
        """Midpoint-rule integral of cell values over the torus."""
        return float(np.sum(f) * self.dx)

    def gibbs(self, v: FloatArray) -> FloatArray:
        """Discrete Gibbs density ``π_i = e^{−V_i} / (Σ_j e^{−V_j} Δx)`` (computed stably)."""
        w = -(v - np.min(v))
        p = np.exp(w)
        return np.asarray(p / (np.sum(p) * self.dx), dtype=np.float64)

    def normalise(self, rho: FloatArray, field: str = "rho0") -> FloatArray:
        """Check that cell values form a positive density and rescale it to unit mass."""
        arr = np.asarray(rho, dtype=np.float64)
        if arr.shape != (self.n_cells,):
            raise InvalidParameterError(
                field,
                f"expected {self.n_cells} cell values, got shape {arr.shape}",
                "evaluate the density on TorusGrid(n_cells).x",
            )
        if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
            raise InvalidParameterError(
                field,
                "must be finite and strictly positive on every cell",
                "pass a positive density (the theorem needs ρ_0 > 0)",
            )
        return np.asarray(arr / self.integrate(arr), dtype=np.float64)


def check_potential(v: Potential, field: str = "potential") -> Potential:
    """Raise unless ``v`` is a finite, 2π-periodic vectorised callable."""
    if not callable(v):
        raise InvalidParameterError(
            field, f"expected a callable V(x), got {type(v).__name__}", "pass a function of x"
        )
    probe = np.linspace(-math.pi, math.pi, 33)
    try:
        a = np.asarray(v(probe), dtype=np.float64)
        b = np.asarray(v(probe + 2.0 * math.pi), dtype=np.float64)
    except Exception as exc:  # a user callable may raise anything
        raise InvalidParameterError(
            field, f"could not be evaluated on an array ({exc})", "make V accept numpy arrays"
        ) from exc
    if a.shape != probe.shape or b.shape != probe.shape:
        raise InvalidParameterError(
            field, "must return one value per input point", "make V vectorised (elementwise)"
        )
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise InvalidParameterError(
            field, "returned a non-finite value", "use a bounded, finite potential on the torus"
        )
    scale = 1.0 + np.maximum(np.abs(a), np.abs(b))
    seam = abs(a[0] - a[-1]) / scale[0]
    shift = float(np.max(np.abs(a - b) / scale))
    if seam > PERIODICITY_TOL or shift > PERIODICITY_TOL:
        raise InvalidParameterError(
            field,
            f"is not 2π-periodic (|V(−π) − V(π)| = {abs(a[0] - a[-1]):.3g}, "
            f"max |V(x) − V(x + 2π)| = {float(np.max(np.abs(a - b))):.3g})",
            "use a periodic potential on the torus, e.g. built from cos/sin of x",
        )
    return v


def evaluate(v: Potential, grid: TorusGrid, field: str = "potential") -> FloatArray:
    """Validated cell values of a potential on the grid."""
    check_potential(v, field)
    return np.asarray(v(grid.x), dtype=np.float64)


def check_beta(beta: float) -> float:
    """Inverse temperature β must be positive and finite."""
    if isinstance(beta, bool) or not isinstance(beta, int | float | np.floating):
        raise InvalidParameterError("beta", f"expected a number, got {beta!r}", "pass β > 0")
    b = float(beta)
    if not (math.isfinite(b) and b > 0):
        raise InvalidParameterError(
            "beta", f"must be > 0 and finite, got {beta!r}", "pass a positive inverse temperature"
        )
    return b


def check_data(points: Sequence[float] | FloatArray, field: str = "data") -> FloatArray:
    """Torus-valued observations: a non-empty, finite 1-D array (angles in radians)."""
    arr = np.asarray(points, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise InvalidParameterError(
            field, f"expected a non-empty 1-D array, got shape {arr.shape}", "pass a list of angles"
        )
    if not np.all(np.isfinite(arr)):
        raise InvalidParameterError(
            field, "contains a non-finite value", "drop or fix NaN/inf observations"
        )
    return arr


def cosine_loss(points: Sequence[float] | FloatArray) -> Potential:
    """Mean-estimation loss ``L_D(θ) = (1/n) Σ_i (1 − cos(θ − y_i))`` (range [0, 2])."""
    y = check_data(points)
    c, s = float(np.mean(np.cos(y))), float(np.mean(np.sin(y)))

    def loss(theta: FloatArray) -> FloatArray:
        t = np.asarray(theta, dtype=np.float64)
        return np.asarray(1.0 - (c * np.cos(t) + s * np.sin(t)), dtype=np.float64)

    return loss


def scaled(v: Potential, beta: float) -> Potential:
    """The exponential-mechanism potential ``β·L``."""
    b = check_beta(beta)

    def potential(theta: FloatArray) -> FloatArray:
        return np.asarray(b * np.asarray(v(theta), dtype=np.float64), dtype=np.float64)

    return potential


def von_mises_density(grid: TorusGrid, kappa: float = 0.0, mu: float = 0.0) -> FloatArray:
    """Normalised cell values of ``ρ_0 ∝ exp(κ cos(x − μ))`` (κ = 0 is the uniform density)."""
    if not (math.isfinite(kappa) and kappa >= 0):
        raise InvalidParameterError("kappa", f"must be >= 0, got {kappa!r}", "pass κ >= 0")
    if not math.isfinite(mu):
        raise InvalidParameterError("mu", "must be finite", "pass an angle in radians")
    return grid.normalise(np.exp(kappa * (np.cos(grid.x - mu) - 1.0)))


def osc(f: FloatArray) -> float:
    """Oscillation ``sup f − inf f`` of cell values."""
    return float(np.max(f) - np.min(f))
