"""Rényi-DP accountant: an upper bound for every supported composition, never a lower one.

Per-order RDP values add under composition; the (eps, delta) conversion is the improved one of
Canonne, Kamath & Steinke (2020, Prop. 12) / Asoodeh et al. (2021). Supported: Gaussian,
Poisson-subsampled Gaussian (add/remove only: the Poisson analysis of Mironov, Talwar & Zhang
2019 is for add/remove), Laplace, and pure-DP-type events (pure DP, randomized response,
exponential mechanism, report-noisy-max, approximate DP with delta = 0), and tabulated RDP curves
(a plugin mechanism characterised by its curve, under the curve's relation). For purely pure-DP
ledgers the result is also capped by basic composition. RDP certifies no lower bound, so
``epsilon_lower`` is 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from fractions import Fraction
from typing import Any

import numpy as np

from dpledger.accountant.base import Accountant, DeltaBound, EpsilonBound, infinite_epsilon
from dpledger.accountant.conversions import U, rdp_to_delta, rdp_to_epsilon
from dpledger.accountant.rdp_orders import (
    FloatArray,
    bounded_range_rdp,
    bounded_range_rdp_rows,
    default_orders,
    gaussian_rdp,
    laplace_rdp,
    poisson_gaussian_rdp,
    pure_dp_rdp,
)
from dpledger.accountant.representatives import Table
from dpledger.core.adjacency import Adjacency
from dpledger.core.basic_composition import basic_composition_epsilon
from dpledger.core.errors import BoundUnavailable, InvalidParameterError
from dpledger.core.events import (
    SHUFFLED_NEEDS_REPLACE_ONE,
    ApproxDPEvent,
    Event,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    PoissonSampledEvent,
    PureDPEvent,
    RandomizedResponseEvent,
    ReportNoisyMaxEvent,
    SampledWithoutReplacementEvent,
    ShuffledBatchesEvent,
    TabulatedRDPEvent,
    flatten,
)

_PURE = PureDPEvent | ExponentialMechanismEvent | ReportNoisyMaxEvent | RandomizedResponseEvent

#: the leaf classes :meth:`RDPAccountant._leaf_reason` supports whatever their parameters
_SUPPORTED_TYPES: frozenset[type[Event]] = frozenset(
    {
        GaussianEvent,
        LaplaceEvent,
        NonPrivateEvent,
        PureDPEvent,
        ExponentialMechanismEvent,
        ReportNoisyMaxEvent,
        RandomizedResponseEvent,
    }
)

_NO_FINITE_ORDER = "the RDP curve is infinite at every order"

#: above this many distinct Poisson-subsampled leaves, (q, sigma) are rounded to dominating
#: representatives on a geometric grid (q up, sigma down: the RDP of the subsampled Gaussian
#: grows with q and falls with sigma), and above this many other distinct leaves, their
#: parameters too (epsilons up, noise down: :mod:`~dpledger.accountant.representatives`) ...
MAX_DISTINCT_SAMPLED = 64
#: ... of this initial relative step, coarsened until at most MAX_DISTINCT_SAMPLED remain
REPRESENTATIVE_STEP = 1e-3
#: up to this many distinct exponential-mechanism leaves keep their exact curves (one closed
#: form each, about 60 microseconds) and are left out of that rounding
MAX_EXACT_BOUNDED_RANGE = 4096


def effective_gaussian_mu(event: Event, sensitivity_factor: float = 1.0) -> float | Event:
    """mu = sqrt(sum (s/sigma)^2) of a composition of Gaussians, or the offending sub-event.

    Gaussians on the same (sub)sample compose into one Gaussian query with post-processing.
    """
    if isinstance(event, GaussianEvent):  # the common leaf, without a walk of its tree
        return sensitivity_factor / event.noise_multiplier
    parts: list[tuple[float, int]] = []
    for leaf, count in flatten(event):
        if not isinstance(leaf, GaussianEvent):
            return leaf
        parts.append((sensitivity_factor / leaf.noise_multiplier, count))
    if not parts:
        return 0.0
    # scaled by the largest ratio so that neither 1e-300 nor 1e300 noise under- or overflows
    top = max(r for r, _ in parts)
    total = math.fsum(_as_float(k) * (r / top) * (r / top) for r, k in parts)
    return top * math.sqrt(total)


def _as_float(n: int) -> float:
    """An exact count as a float, infinity beyond the double range."""
    return float(n) if n.bit_length() <= 1023 else math.inf


class RDPAccountant(Accountant):
    """Sum of per-order RDP curves over a wide order grid."""

    name = "rdp"

    def __init__(
        self, adjacency: Adjacency | None = None, orders: FloatArray | list[float] | None = None
    ) -> None:
        super().__init__(adjacency)
        grid = default_orders() if orders is None else np.asarray(orders, dtype=float)
        if grid.ndim != 1 or grid.size == 0 or not np.all(np.isfinite(grid)) or np.any(grid <= 1):
            raise InvalidParameterError(
                "orders",
                "must be a non-empty list of finite orders > 1",
                "pass e.g. [1.5, 2, 8, 32]",
            )
        self.orders = np.unique(grid)
        self._cache: dict[Event, FloatArray] = {}
        self._total: FloatArray | None = None
        self._representative_step: float | None = None
        self._merged_leaves: dict[Event, int] | None = None
        #: the last event whose support was checked, and its leaves
        self._walked: tuple[Event | None, list[tuple[Event, int]]] = (None, [])

    # -- support ---------------------------------------------------------------------------
    def _unsupported_reason(self, event: Event) -> str | None:
        walked, flat = self._walked
        if event is not walked:  # compose checks again the event just checked: walk it once
            flat = flatten(event)
            self._walked = (event, flat)
        # the kinds supported by their exact type alone are not looked at one by one
        sampled = self.adjacency.relation == "add_remove"
        rest = (
            leaf
            for leaf, _ in flat
            if type(leaf) not in _SUPPORTED_TYPES
            and not (
                sampled and type(leaf) is PoissonSampledEvent and type(leaf.event) is GaussianEvent
            )
        )
        for leaf in dict.fromkeys(rest):
            reason = self._leaf_reason(leaf)
            if reason is not None:
                return reason
        return None

    def _leaf_reason(self, leaf: Event) -> str | None:
        if isinstance(leaf, GaussianEvent | LaplaceEvent | NonPrivateEvent | _PURE):
            return None
        if isinstance(leaf, ApproxDPEvent):
            return (
                None
                if leaf.delta == 0
                else f"{leaf.describe()} has delta > 0, which RDP cannot express"
            )
        if isinstance(leaf, PoissonSampledEvent):
            if self.adjacency.relation != "add_remove":
                return (
                    f"{leaf.describe()}: Poisson-subsampling RDP is only analysed for add/remove "
                    "adjacency, not replace-one"
                )
            inner = effective_gaussian_mu(leaf.event)
            if isinstance(inner, Event):
                return (
                    f"{leaf.describe()}: only Gaussian sub-events are supported, "
                    f"not {inner.describe()}"
                )
            return None
        if isinstance(leaf, SampledWithoutReplacementEvent):
            return (
                f"{leaf.describe()}: sampling without replacement is not supported by the "
                "RDP backend"
            )
        if isinstance(leaf, TabulatedRDPEvent):
            if leaf.relation != self.adjacency.relation:
                return (
                    f"{leaf.describe()} was tabulated under {leaf.relation}, not "
                    f"{self.adjacency.relation}; tabulate it under the relation of the source"
                )
            return None
        if isinstance(leaf, ShuffledBatchesEvent):
            if self.adjacency.relation != "replace_one":
                return f"{leaf.describe()}: {SHUFFLED_NEEDS_REPLACE_ONE}"
            for inner, _ in flatten(leaf.event):
                if inner.children() or self._leaf_reason(inner) is not None:
                    return (
                        f"{leaf.describe()}: the RDP backend needs unsampled Gaussian, Laplace "
                        f"or pure-DP events per batch, not {inner.describe()}"
                    )
            return None
        return f"{leaf.describe()} is not supported by the RDP backend"

    # -- curves -------------------------------------------------------------------------------
    def _leaf_rdp(self, leaf: Event) -> FloatArray:
        cached = self._cache.get(leaf)
        if cached is not None:
            return cached
        s = self.adjacency.sensitivity_factor
        o = self.orders
        if isinstance(leaf, NonPrivateEvent):
            out = np.full_like(o, np.inf)
        elif isinstance(leaf, GaussianEvent):
            out = gaussian_rdp(o, s / leaf.noise_multiplier)
        elif isinstance(leaf, LaplaceEvent):
            out = laplace_rdp(o, s / leaf.noise_multiplier * (1 + 2 * U))
        elif isinstance(leaf, ExponentialMechanismEvent):
            out = bounded_range_rdp(o, float(leaf.epsilon))
        elif isinstance(leaf, _PURE | ApproxDPEvent):
            eps = float(leaf.epsilon)
            out = pure_dp_rdp(o, eps) if eps > 0 else np.zeros_like(o)
        elif isinstance(leaf, PoissonSampledEvent):
            mu = effective_gaussian_mu(leaf.event)
            assert isinstance(mu, float)
            if mu == 0.0:
                out = np.zeros_like(o)
            else:
                with np.errstate(over="ignore"):
                    sigma = 1.0 / (mu * (1 + 16 * U))
                out = (
                    np.full_like(o, np.inf)
                    if sigma == 0.0
                    else poisson_gaussian_rdp(o, leaf.sampling_probability, sigma)
                )
        elif isinstance(leaf, TabulatedRDPEvent):
            out = tabulated_rdp(o, leaf)
        elif isinstance(leaf, ShuffledBatchesEvent):
            # each record is in exactly one batch: an epoch costs the batch's events once
            out = np.zeros_like(o)
            for inner, count in flatten(leaf.event):
                with np.errstate(invalid="ignore", over="ignore"):
                    out = out + _as_float(count) * self._leaf_rdp(inner)
        else:  # pragma: no cover - guarded by _unsupported_reason
            raise BoundUnavailable(self.name, f"unsupported {leaf.describe()}")
        self._cache[leaf] = out
        return out

    def _bounded_range_curves(self, leaves: Iterable[Event]) -> None:
        """The curves of the exponential-mechanism leaves not yet known, found together (one
        pass over a 2-d array, the same values as :meth:`_leaf_rdp` finds one by one)."""
        todo = [e for e in leaves if type(e) is ExponentialMechanismEvent and e not in self._cache]
        if len(todo) < 2:
            return
        rows = bounded_range_rdp_rows(self.orders, [float(e.epsilon) for e in todo])
        for leaf, row in zip(todo, rows, strict=True):
            self._cache[leaf] = row

    def _invalidate(self) -> None:
        self._total = None
        self._representative_step = None
        self._merged_leaves = None

    def _merged(self) -> dict[Event, int]:
        """Every distinct leaf of the ledger and its total count (the tree walked once)."""
        if self._merged_leaves is None:
            merged: dict[Event, int] = {}
            walked, flat = self._walked
            for event, mult in self._ledger:
                for leaf, count in flat if event is walked else flatten(event):
                    merged[leaf] = merged.get(leaf, 0) + count * mult
            self._merged_leaves = merged
        return self._merged_leaves

    def _leaves(self) -> dict[Event, int]:
        """Distinct leaves of the ledger and their total counts; many distinct Poisson-sampled
        Gaussians, and many distinct other leaves, are replaced by dominating representatives
        (see MAX_DISTINCT_SAMPLED)."""
        merged = dict(self._merged())
        sampled: dict[Event, float] = {}
        for e in merged:
            if isinstance(e, PoissonSampledEvent):
                mu = effective_gaussian_mu(e.event)
                if isinstance(mu, float) and _groupable(mu):
                    sampled[e] = mu
        merged = self._grouped_others(merged, set(sampled))
        if len(sampled) <= MAX_DISTINCT_SAMPLED:
            return merged
        out = {e: k for e, k in merged.items() if e not in sampled}
        step, cells = _sampled_cells(sampled)
        for rep, total in _sampled_representatives(sampled, merged, cells, step):
            out[rep] = out.get(rep, 0) + total
        self._representative_step = step
        return out

    def _grouped_others(self, merged: dict[Event, int], sampled: set[Event]) -> dict[Event, int]:
        """``merged`` with its leaves other than ``sampled`` rounded to at most
        MAX_DISTINCT_SAMPLED dominating representatives when there are more
        (:mod:`~dpledger.accountant.representatives`: epsilons up, noise down); up to
        MAX_EXACT_BOUNDED_RANGE exponential-mechanism leaves keep their own curves."""
        others = {e: k for e, k in merged.items() if e not in sampled}
        if len(others) <= MAX_DISTINCT_SAMPLED:
            return merged
        exact = {e for e in others if isinstance(e, ExponentialMechanismEvent)}
        if len(exact) > MAX_EXACT_BOUNDED_RANGE:
            exact = set()
        others = {e: k for e, k in others.items() if e not in exact}
        if len(others) <= MAX_DISTINCT_SAMPLED:
            return merged
        table = Table(others)
        step = table.step(MAX_DISTINCT_SAMPLED)
        out = table.grouped(step, up=True)
        out.update((e, merged[e]) for e in sampled | exact)
        self._representative_step = max(step, self._representative_step or 0.0)
        return out

    def rdp(self) -> FloatArray:
        """The composed RDP curve on :attr:`orders` (inf = excluded or non-private)."""
        if self._total is None:
            total = np.zeros_like(self.orders)
            leaves = self._leaves()
            self._bounded_range_curves(leaves)
            for leaf, count in leaves.items():
                with np.errstate(invalid="ignore", over="ignore"):
                    total = total + _as_float(count) * self._leaf_rdp(leaf)
            self._total = total * (1 + 4 * U * max(1, len(self._ledger), len(leaves)))
        return self._total.copy()

    def _non_private(self) -> bool:
        return any(isinstance(leaf, NonPrivateEvent) for leaf in self._merged())

    def _basic_pure(self) -> float | None:
        """Basic-composition epsilon when every leaf is pure, else None."""
        terms: list[tuple[int, float | Fraction]] = []
        s = Fraction(self.adjacency.sensitivity_factor)
        for leaf, count in self._merged().items():
            if isinstance(leaf, LaplaceEvent):
                terms.append((count, s / Fraction(leaf.noise_multiplier)))
            elif isinstance(leaf, _PURE | ApproxDPEvent):
                terms.append((count, float(leaf.epsilon)))
            else:
                return None
        return basic_composition_epsilon(terms)

    def _details(self, order: float | None, curve: FloatArray) -> dict[str, Any]:
        excluded = [
            float(a) for a, r in zip(self.orders, curve, strict=True) if not math.isfinite(r)
        ]
        details: dict[str, Any] = {"order": order, "excluded_orders": excluded}
        if self._representative_step is not None:
            details["representative_step"] = self._representative_step
        finite = self.orders[np.isfinite(curve)]
        if order is not None and finite.size and order in (finite[0], finite[-1]):
            details["warning"] = (
                f"optimal RDP order {order:g} is at the edge of the order grid "
                f"[{finite[0]:g}, {finite[-1]:g}]; a wider grid may give a smaller bound"
            )
        return details

    # -- queries -------------------------------------------------------------------------------
    def _epsilon(self, delta: float) -> EpsilonBound:
        if self._non_private():
            return infinite_epsilon(delta, self.name)
        curve = self.rdp()
        if not np.any(np.isfinite(curve)):
            # infinite at every order (e.g. noise of 1e-300): infinity is the certified bound
            return EpsilonBound(math.inf, 0.0, delta, self.name, {"note": _NO_FINITE_ORDER})
        eps, order = rdp_to_epsilon(self.orders, curve, delta)
        details = self._details(order, curve)
        basic = self._basic_pure()
        if basic is not None and basic < eps:
            eps = basic
            details["capped_by"] = "basic composition"
        return EpsilonBound(eps, 0.0, delta, self.name, details)

    def _delta(self, epsilon: float) -> DeltaBound:
        if self._non_private():
            return DeltaBound(1.0, 1.0, epsilon, self.name)
        curve = self.rdp()
        if not np.any(np.isfinite(curve)):
            return DeltaBound(1.0, 0.0, epsilon, self.name, {"note": _NO_FINITE_ORDER})
        if epsilon < 0:
            # delta(eps) <= 1 - e^eps + e^eps delta(0) for eps < 0
            d0, order = rdp_to_delta(self.orders, curve, 0.0)
            d = min(1.0, -math.expm1(epsilon) + math.exp(epsilon) * d0 + 4 * U)
            return DeltaBound(d, 0.0, epsilon, self.name, self._details(order, curve))
        d, order = rdp_to_delta(self.orders, curve, epsilon)
        details = self._details(order, curve)
        basic = self._basic_pure()
        if basic is not None and epsilon >= basic:
            d = 0.0
            details["capped_by"] = "basic composition"
        return DeltaBound(d, 0.0, epsilon, self.name, details)


def tabulated_rdp(orders: FloatArray, event: TabulatedRDPEvent) -> FloatArray:
    """A tabulated RDP curve read at ``orders``: the value at the same order, else at the next
    tabulated order above (RDP is non-decreasing in the order), +inf beyond the last one."""
    table = np.asarray(event.orders, dtype=float)
    values = np.append(np.asarray(event.rdp, dtype=float), np.inf)
    return np.asarray(values[np.searchsorted(table, orders, side="left")], dtype=float)


def _sampled_cells(sampled: dict[Event, float]) -> tuple[float, np.ndarray]:
    """(step, each leaf's cell as a row of its (q, mu) grid indices): the step doubles from
    REPRESENTATIVE_STEP until at most MAX_DISTINCT_SAMPLED cells remain."""
    rates = np.array([e.sampling_probability for e in sampled])  # type: ignore[attr-defined]
    mus = np.array(list(sampled.values()))
    step = REPRESENTATIVE_STEP
    while True:
        cells = np.stack([_grid_array(rates, step), _grid_array(mus, step)], axis=1)
        # one integer per cell (grid indices are far below 2^31 in size)
        keys = cells[:, 0] * (1 << 32) + cells[:, 1]
        if len(np.unique(keys)) <= MAX_DISTINCT_SAMPLED:
            return step, cells
        step *= 2.0


def _sampled_representatives(
    sampled: dict[Event, float], merged: dict[Event, int], cells: np.ndarray, step: float
) -> list[tuple[Event, int]]:
    """Per cell: the sampled Gaussian at its top corner (rate up, noise down; never below a
    member's own parameters) and its members' total count."""
    counts = [merged[e] for e in sampled]
    if sum(counts) < 1 << 62:  # the cells' totals fit in 64 bits: grouped in arrays
        rates = [e.sampling_probability for e in sampled]  # type: ignore[attr-defined]
        return _grouped_cells(rates, list(sampled.values()), counts, cells, step)
    groups: dict[tuple[int, int], list[Any]] = {}
    for (e, mu), (iq, imu) in zip(sampled.items(), cells.tolist(), strict=True):
        q = e.sampling_probability  # type: ignore[attr-defined]
        found = groups.get((iq, imu))
        if found is None:
            groups[(iq, imu)] = [q, mu, merged[e]]
        else:
            found[0], found[1], found[2] = max(found[0], q), max(found[1], mu), found[2] + merged[e]
    out: list[tuple[Event, int]] = []
    for (iq, imu), (q_top, mu_top, total) in groups.items():
        q = min(1.0, max(_cell_value(iq, step), q_top))
        mu = max(_cell_value(imu, step), mu_top)
        out.append((PoissonSampledEvent(q, GaussianEvent(_noise_for(mu))), total))
    return out


def _grouped_cells(
    rates: list[float], mus: list[float], counts: list[int], cells: np.ndarray, step: float
) -> list[tuple[Event, int]]:
    """:func:`_sampled_representatives` in arrays (the same cells in the same order, the same
    top corners: a maximum of floats is one of them, exactly), for totals below 2^62."""
    _, iq = np.unique(cells[:, 0], return_inverse=True)
    imus, imu = np.unique(cells[:, 1], return_inverse=True)
    key = np.reshape(iq, -1) * imus.size + np.reshape(imu, -1)  # one per cell, exactly
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # the cells in the order of their first members
    rank = np.empty(first.size, dtype=np.intp)
    rank[order] = np.arange(first.size)
    cell = rank[np.reshape(inverse, -1)]
    q_top = np.full(first.size, -np.inf)
    mu_top = np.full(first.size, -np.inf)
    np.maximum.at(q_top, cell, np.asarray(rates, dtype=float))
    np.maximum.at(mu_top, cell, np.asarray(mus, dtype=float))
    totals = np.zeros(first.size, dtype=np.int64)
    np.add.at(totals, cell, np.asarray(counts, dtype=np.int64))
    out: list[tuple[Event, int]] = []
    corners = cells[first[order]].tolist()
    for (iq, imu), q_max, mu_max, total in zip(
        corners, q_top.tolist(), mu_top.tolist(), totals.tolist(), strict=True
    ):
        q = min(1.0, max(_cell_value(iq, step), q_max))
        mu = max(_cell_value(imu, step), mu_max)
        out.append((PoissonSampledEvent(q, GaussianEvent(_noise_for(mu))), total))
    return out


def _grid_array(x: np.ndarray, step: float) -> np.ndarray:
    """:func:`_grid` of every entry of ``x`` (> 0)."""
    rate = math.log1p(step)
    index = np.ceil(np.log(x) / rate)
    while True:
        low = np.exp(index * rate) < x
        if not low.any():
            return np.asarray(index, dtype=np.int64)
        index = index + low


def _grid(x: float, step: float) -> int:
    """Index of the grid point ``(1 + step)^i`` at or above ``x`` (> 0), checked as evaluated."""
    i = math.ceil(math.log(x) / math.log1p(step))
    while _cell_value(i, step) < x:
        i += 1
    return i


def _cell_value(index: int, step: float) -> float:
    return math.exp(index * math.log1p(step))


def _noise_for(mu: float) -> float:
    """The noise multiplier of GDP parameter ``mu``, rounded down (more privacy loss)."""
    return math.nextafter(1.0 / mu * (1 - 4 * U), 0.0)


def _groupable(mu: float | Event) -> bool:
    """A positive finite GDP parameter (zero and infinite ones keep their exact curves)."""
    return isinstance(mu, float) and 0.0 < mu < math.inf
