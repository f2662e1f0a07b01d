"""Per-record (individual) accounting with the individual Rényi filter (an extension).

Feldman & Zrnic (2021) charge each record its own Rényi loss at each step instead of the
worst case: a Gaussian sum query of noise standard deviation s to which record i contributes
a vector of norm g_i (its clipped gradient, say) costs record i a g_i^2 / (2 s^2) at order a,
however large the clipping bound. A record takes part in a step only if, with that step's
charge, some order a still has its sum within B(a) = eps - log(k / delta) / (a - 1) (the
budgets of the store's ``renyi`` rule); otherwise it is left out of the step (its data unused)
from then on. Their theorem: for every record, the whole adaptive run is (eps, delta)-DP with
respect to that record (the charge is predictable given the past outputs and the record's
own value, so the supermartingale argument of the filter holds per record; a record left out
costs nothing).

This is an in-memory API for a training loop, labelled an extension: it is not a budget
store rule, and its per-record numbers depend on the records' data, so they are private (use
them to decide who takes part, never publish them).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpledger.budget.odometer import renyi_odometer
from dpledger.budget.rules import DEFAULT_ORDERS, renyi_budgets
from dpledger.core.errors import InvalidParameterError

__all__ = ["IndividualRenyiFilter", "gaussian_costs"]


def gaussian_costs(
    norms: ArrayLike, noise_std: float, orders: Sequence[float]
) -> NDArray[np.float64]:
    """Each record's Rényi charge of one Gaussian sum query, ``(records, orders)``:
    a g_i^2 / (2 s^2), rounded up (the Gaussian mechanism's RDP at sensitivity g_i)."""
    g = np.asarray(norms, dtype=np.float64)
    if g.ndim != 1 or not np.all(np.isfinite(g)) or np.any(g < 0):
        raise InvalidParameterError(
            "norms", "must be finite norms >= 0, one per record", "pass |g_i|"
        )
    if not noise_std > 0:
        raise InvalidParameterError("noise_std", f"must be > 0, got {noise_std}", "pass s > 0")
    a = np.asarray(orders, dtype=np.float64)
    cost = np.outer(g * g, a) / (2.0 * float(noise_std) ** 2)
    return np.where(cost > 0, np.nextafter(cost * (1 + 1e-12), np.inf), 0.0)


class IndividualRenyiFilter:
    """Feldman & Zrnic's individual Rényi filter over ``n_records`` records at total
    (``epsilon``, ``delta``) per record, at the orders given (the ``renyi`` rule's by default)."""

    def __init__(
        self,
        n_records: int,
        epsilon: float,
        delta: float,
        orders: Sequence[float] = DEFAULT_ORDERS,
    ) -> None:
        if isinstance(n_records, bool) or not isinstance(n_records, int) or n_records < 1:
            raise InvalidParameterError("n_records", f"must be >= 1, got {n_records!r}", "pass n")
        if not epsilon > 0 or not 0 < delta < 1:
            raise InvalidParameterError(
                "epsilon", f"need epsilon > 0 and 0 < delta < 1, got {epsilon}, {delta}", "fix them"
            )
        if not orders or not all(1 < float(a) < np.inf for a in orders):
            raise InvalidParameterError(
                "orders", f"must be orders > 1, got {orders!r}", "e.g. [2, 4, 8]"
            )
        self.orders = [float(a) for a in orders]
        self.epsilon, self.delta = float(epsilon), float(delta)
        self.budgets = np.asarray(renyi_budgets(self.orders, self.epsilon, self.delta))
        self.rdp = np.zeros((n_records, len(self.orders)))
        self.halted = np.zeros(n_records, dtype=bool)
        self.steps = np.zeros(n_records, dtype=np.int64)

    def _check(self, costs: ArrayLike) -> NDArray[np.float64]:
        c = np.asarray(costs, dtype=np.float64)
        if c.shape != self.rdp.shape or np.any(np.isnan(c)) or np.any(c < 0):
            raise InvalidParameterError(
                "costs",
                f"must be >= 0 of shape {self.rdp.shape}, got {c.shape}",
                "one row per record",
            )
        return c

    def _add(self, c: NDArray[np.float64]) -> NDArray[np.float64]:
        """The sums with ``c`` added, rounded up where something is added."""
        return np.where(c > 0, np.nextafter(self.rdp + c, np.inf), self.rdp)

    def admits(self, costs: ArrayLike) -> NDArray[np.bool_]:
        """Which records may take part in a step of these per-record charges (nothing booked)."""
        c = self._check(costs)
        sums = self._add(c)
        fits: NDArray[np.bool_] = ~self.halted & np.any(sums <= self.budgets, axis=1)
        return fits

    def step(self, costs: ArrayLike) -> NDArray[np.bool_]:
        """Book a step: the records admitted are charged, the others are halted for good (they
        must be left out of this step and every later one). The mask of records admitted."""
        c = self._check(costs)
        mask = self.admits(c)
        self.rdp[mask] = self._add(c)[mask]
        self.halted |= ~mask
        self.steps[mask] += 1
        return mask

    def spent(self, record: int, delta: float | None = None) -> float:
        """Record ``record``'s certified loss so far, at every time at once (the ``renyi``
        odometer of its own sums), at ``delta`` (the total's by default). Private: it depends
        on the record's data."""
        return renyi_odometer(self.orders, list(self.rdp[record]), delta or self.delta)
