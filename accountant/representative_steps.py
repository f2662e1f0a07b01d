"""Cell widths for representatives chosen from a rounding goal, per shape and parameter.

One step for every leaf spends the component budget evenly, though parameters differ in how
much their rounding moves the composed epsilon (a Gaussian's noise more than a sampling rate)
and kinds differ in how much of the composition they carry. Here every (shape, parameter) gets
its own cell width in the logarithm, ``range / 2^m`` (never finer than REPRESENTATIVE_STEP):
starting from one or two cells per range, the width whose halving lowers the rounding cost
most per added component is halved until the cost is within the goal or the budget of
components is spent. The layout is used only where it rounds less than the one step for all.

The rounding cost is measured with a proxy of each leaf's contribution to the composition (a
second moment of its privacy loss: ``eps^2``, ``1 / sigma^2``, ``q^2 (e^c - 1)`` for a sampled
leaf of proxy ``c``), summed over the leaves: the relative change of the sum when every member
takes its cell's costliest (cheapest) parameters. The proxy only chooses cells; soundness never
rests on it (any cells give certified bounds: ``proofs_checks/representatives/proof.md``).
"""

from __future__ import annotations

import math
from collections.abc import Hashable

import numpy as np

from dpledger.accountant.representatives import REPRESENTATIVE_STEP, Steps, Table

__all__ = ["ROUNDING_GOAL", "rounding_cost", "weighted_steps"]

#: the relative change of the proxy sum the rounding may make (upper and lower side each)
ROUNDING_GOAL = 2e-3
#: the most refinements tried (each one evaluates one cell layout per parameter)
MAX_REFINEMENTS = 200

_EPSILON_KINDS = frozenset(
    {"pure_dp", "exponential_mechanism", "report_noisy_max", "randomized_response", "approx_dp"}
)


def _proxy(shape: Hashable, values: np.ndarray) -> np.ndarray:
    """A second moment of each leaf's privacy loss at ``values`` (rows: leaves, columns: the
    shape's parameters as magnitudes), increasing in each costly parameter."""
    assert isinstance(shape, tuple)
    kind = shape[0]
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        if kind in ("poisson_sampled", "sampled_without_replacement"):
            inner = _proxy(shape[1], values[:, 1:])
            return np.asarray(values[:, 0] ** 2 * np.expm1(np.minimum(inner, 700.0)), dtype=float)
        if kind in ("gaussian", "laplace"):
            return np.asarray(1.0 / values[:, 0] ** 2)
        if kind in _EPSILON_KINDS:
            return np.asarray(values[:, 0] ** 2)
    raise ValueError(f"no rounding proxy for {kind!r}")


def _weighted(shape: Hashable) -> tuple[bool, ...]:
    """Which of a shape's parameters the proxy weighs (an approximate-DP delta it does not:
    that one takes the finest step of its shape)."""
    assert isinstance(shape, tuple)
    kind = shape[0]
    if kind in ("poisson_sampled", "sampled_without_replacement"):
        return (True, *_weighted(shape[1]))
    if kind == "approx_dp":
        return (True, False)
    return (True,)


class _Shape:
    """One shape's members: their proxies and the cost of a layout of cell widths. A layout
    gives each parameter a depth ``m``: cells of width ``top / 2^m`` in the logarithm, so a
    deeper layout splits cells and never rounds further than a shallower one."""

    def __init__(self, table: Table, shape: Hashable) -> None:
        self.table = table
        self.shape = shape
        self.logs = table.logs[shape]
        self.counts = np.array([m[2] for m in table.rows[shape]], dtype=float)
        self.costly = np.array(table.rows[shape][0][1], dtype=bool)
        self.weighted = np.array(_weighted(shape), dtype=bool)
        self.proxy = _proxy(shape, np.exp(self.logs))
        self.total = float(np.dot(self.counts, self.proxy))
        self.top = np.array([_top_width(column) for column in self.logs.T])
        #: the deepest depth per parameter: its step at least REPRESENTATIVE_STEP
        finest = math.log1p(REPRESENTATIVE_STEP)
        self.deepest = tuple(max(0, math.floor(math.log2(t / finest))) for t in self.top)
        self.memo: dict[tuple[int, ...], tuple[float, float, int]] = {}

    def steps(self, depths: tuple[int, ...]) -> np.ndarray:
        """The step per parameter (unweighted parameters: the finest weighted one's)."""
        # a width beyond e^700 rounds nothing more finely, and its step would overflow
        widths = np.minimum(self.top / 2.0 ** np.array(depths, dtype=float), 700.0)
        finest = float(np.min(widths[self.weighted]))
        return np.asarray(np.expm1(np.where(self.weighted, widths, finest)), dtype=float)

    def cost(self, depths: tuple[int, ...]) -> tuple[float, float, int]:
        """(proxy added by rounding up, proxy removed by rounding down, cells) at ``depths``."""
        found = self.memo.get(depths)
        if found is None:
            found = self.memo[depths] = self.cost_at(self.steps(depths))
        return found

    def cost_at(self, steps: float | np.ndarray) -> tuple[float, float, int]:
        """(proxy added by rounding up, proxy removed by rounding down, cells) at ``steps``."""
        layout: Steps = steps if isinstance(steps, float) else {self.shape: steps}
        keys = self.table.cell_keys(self.shape, layout)
        order = np.argsort(keys, kind="stable")
        logs, counts, proxy = self.logs[order], self.counts[order], self.proxy[order]
        starts = np.flatnonzero(np.r_[True, np.diff(keys[order]) != 0])
        cells = int(starts.size)
        inverse = np.cumsum(np.r_[True, np.diff(keys[order]) != 0]) - 1
        sides = []
        for up in (True, False):
            larger = self.costly == up  # per parameter: the side the representative takes
            extreme = np.empty((cells, logs.shape[1]))
            for j in range(logs.shape[1]):
                fold = np.maximum if larger[j] else np.minimum
                extreme[:, j] = fold.reduceat(logs[:, j], starts)
            rep = _proxy(self.shape, np.exp(extreme))[inverse]
            sides.append(abs(float(np.dot(counts, rep - proxy))))
        return sides[0], sides[1], cells


def _top_width(column: np.ndarray) -> float:
    """The shallowest cell width: the least power of two at least the column's range of
    finite logarithms (its values then fall in one or two cells)."""
    finite = column[np.isfinite(column)]
    spread = float(np.ptp(finite)) if finite.size else 0.0
    return float(2.0 ** math.ceil(math.log2(max(spread, math.log1p(REPRESENTATIVE_STEP)))))


def rounding_cost(table: Table, steps: Steps) -> tuple[float, float]:
    """(relative proxy change rounding up, the same rounding down) at ``steps``."""
    shapes = [_Shape(table, s) for s in table.rows]
    total = sum(s.total for s in shapes)
    up = down = 0.0
    for s in shapes:
        a, b, _ = s.cost_at(steps if isinstance(steps, float) else steps[s.shape])
        up, down = up + a, down + b
    return (up / total, down / total) if total > 0 else (0.0, 0.0)


def weighted_steps(
    table: Table, uniform: float, goal: float = ROUNDING_GOAL
) -> dict[Hashable, np.ndarray] | None:
    """Steps per shape and parameter that round within ``goal`` with no more components than
    the one ``uniform`` step leaves, refined greedily by proxy cost removed per component
    added; None when they round no better than ``uniform`` (by the proxy), or when the proxy
    sum is not a finite positive number."""
    shapes = [_Shape(table, s) for s in table.rows]
    total = sum(s.total for s in shapes)
    if not (math.isfinite(total) and total > 0):
        return None
    spread = [d for s in shapes for d, w in zip(s.deepest, s.weighted, strict=True) if w and d]
    if len(spread) <= 1:
        return None  # one parameter varies: equal widths on the finer grid are as good
    limit = table.count(uniform)
    depths = {s.shape: tuple(0 for _ in s.weighted) for s in shapes}
    for _ in range(MAX_REFINEMENTS):
        costs = {s.shape: s.cost(depths[s.shape]) for s in shapes}
        up = sum(c[0] for c in costs.values())
        down = sum(c[1] for c in costs.values())
        cells = len(table.fixed) + sum(c[2] for c in costs.values())
        if max(up, down) <= goal * total:
            break
        best = _best_refinement(shapes, depths, costs, limit - cells)
        if best is None:
            break
        depths[best[0]] = best[1]
    plain = [s.cost_at(uniform) for s in shapes]
    if max(up, down) >= max(sum(c[0] for c in plain), sum(c[1] for c in plain)):
        return None
    return {s.shape: s.steps(depths[s.shape]) for s in shapes}


def _best_refinement(
    shapes: list[_Shape],
    depths: dict[Hashable, tuple[int, ...]],
    costs: dict[Hashable, tuple[float, float, int]],
    room: int,
) -> tuple[Hashable, tuple[int, ...]] | None:
    """The one-parameter deepening that removes the most proxy cost per component it adds,
    among those within ``room`` more components; None when none removes any."""
    best: tuple[float, Hashable, tuple[int, ...]] | None = None
    for s in shapes:
        now = depths[s.shape]
        for j, weighted in enumerate(s.weighted):
            if not weighted or now[j] >= s.deepest[j]:
                continue
            trial = (*now[:j], now[j] + 1, *now[j + 1 :])
            a, b, n = s.cost(trial)
            added = n - costs[s.shape][2]
            gain = costs[s.shape][0] + costs[s.shape][1] - a - b
            if added > room or gain <= 0:
                continue
            score = gain / max(added, 1)
            if best is None or score > best[0]:
                best = (score, s.shape, trial)
    return None if best is None else (best[1], best[2])
