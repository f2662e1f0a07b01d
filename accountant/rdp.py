"""Rényi-DP accountant: an upper bound for every supported composition, never a lower one.

Per-order RDP values add under composition; the (eps, delta) conversion is the improved one of
Canonne, Kamath & Steinke (2020, Prop. 12) / Asoodeh et al. (2021). Supported: Gaussian,
Poisson-subsampled Gaussian (add/remove only: the Poisson analysis of Mironov, Talwar & Zhang
2019 is for add/remove), Laplace, and pure-DP-type events (pure DP, randomized response,
exponential mechanism, report-noisy-max, approximate DP with delta = 0). For purely pure-DP
ledgers the result is also capped by basic composition. RDP certifies no lower bound, so
``epsilon_lower`` is 0.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpledger.accountant.base import Accountant, DeltaBound, EpsilonBound, infinite_epsilon
from dpledger.accountant.conversions import U, rdp_to_delta, rdp_to_epsilon
from dpledger.accountant.rdp_orders import (
    FloatArray,
    default_orders,
    gaussian_rdp,
    laplace_rdp,
    poisson_gaussian_rdp,
    pure_dp_rdp,
)
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import BoundUnavailable, InvalidParameterError
from dpledger.core.events import (
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
    flatten,
)

_PURE = PureDPEvent | ExponentialMechanismEvent | ReportNoisyMaxEvent | RandomizedResponseEvent


def effective_gaussian_mu(event: Event, sensitivity_factor: float = 1.0) -> float | Event:
    """mu = sqrt(sum (s/sigma)^2) of a composition of Gaussians, or the offending sub-event.

    Gaussians on the same (sub)sample compose into one Gaussian query with post-processing.
    """
    total = 0.0
    for leaf, count in flatten(event):
        if not isinstance(leaf, GaussianEvent):
            return leaf
        total += count * (sensitivity_factor / leaf.noise_multiplier) ** 2
    return math.sqrt(total)


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

    # -- support ---------------------------------------------------------------------------
    def _unsupported_reason(self, event: Event) -> str | None:
        for leaf, _ in flatten(event):
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
        elif isinstance(leaf, _PURE | ApproxDPEvent):
            eps = float(leaf.epsilon)
            out = pure_dp_rdp(o, eps) if eps > 0 else np.zeros_like(o)
        elif isinstance(leaf, PoissonSampledEvent):
            mu = effective_gaussian_mu(leaf.event)
            assert isinstance(mu, float)
            sigma = 1.0 / (mu * (1 + 16 * U))
            out = poisson_gaussian_rdp(o, leaf.sampling_probability, sigma)
        else:  # pragma: no cover - guarded by _unsupported_reason
            raise BoundUnavailable(self.name, f"unsupported {leaf.describe()}")
        self._cache[leaf] = out
        return out

    def _invalidate(self) -> None:
        self._total = None

    def rdp(self) -> FloatArray:
        """The composed RDP curve on :attr:`orders` (inf = excluded or non-private)."""
        if self._total is None:
            total = np.zeros_like(self.orders)
            for event, mult in self._ledger:
                for leaf, count in flatten(event):
                    with np.errstate(invalid="ignore"):
                        total = total + (count * mult) * self._leaf_rdp(leaf)
            self._total = total * (1 + 4 * U * max(1, len(self._ledger)))
        return self._total.copy()

    def _non_private(self) -> bool:
        return any(
            isinstance(leaf, NonPrivateEvent) for e, _ in self._ledger for leaf, _ in flatten(e)
        )

    def _basic_pure(self) -> float | None:
        """Basic-composition epsilon when every leaf is pure, else None."""
        total: list[float] = []
        s = self.adjacency.sensitivity_factor
        for event, mult in self._ledger:
            for leaf, count in flatten(event):
                if isinstance(leaf, LaplaceEvent):
                    total.append(count * mult * s / leaf.noise_multiplier)
                elif isinstance(leaf, _PURE | ApproxDPEvent):
                    total.append(count * mult * float(leaf.epsilon))
                else:
                    return None
        return math.fsum(total) * (1 + 8 * U * (len(total) + 2))

    def _details(self, order: float | None, curve: FloatArray) -> dict[str, Any]:
        excluded = [
            float(a) for a, r in zip(self.orders, curve, strict=True) if not math.isfinite(r)
        ]
        details: dict[str, Any] = {"order": order, "excluded_orders": excluded}
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
            raise BoundUnavailable(self.name, "every RDP order failed numerically")
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
            raise BoundUnavailable(self.name, "every RDP order failed numerically")
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
