"""Exact closed-form accounting for the compositions that have one.

* Any composition of unsampled Gaussians is a Gaussian with
  ``mu = sqrt(sum (s / sigma_i)^2)`` (``s`` = the adjacency's sensitivity factor); its profile
  is the analytic one of Balle & Wang (2018, Thm 8).
* k identical pure eps0-DP events compose optimally as in Kairouz, Oh & Viswanath (2015);
  one Laplace mechanism alone has its exact profile. Heterogeneous pure events are bounded
  above by min(basic composition, KOV at the largest eps) and below by the exact value of a
  sub-composition that is itself exact (sub-compositions can only have smaller profiles).

Laplace noise counts as pure ``eps0 = s / noise_multiplier``; randomized response, the
exponential mechanism and report-noisy-max count as pure at their epsilon. Only black-box
pure-DP events and binary randomized response have binary randomized response as their
exact worst case, so only they feed KOV *lower* bounds.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import attrs

from dpledger.accountant.base import Accountant, DeltaBound, EpsilonBound, infinite_epsilon
from dpledger.accountant.conversions import (
    REL_SLACK,
    U,
    gaussian_delta_bracket,
    kov_delta_bracket,
    laplace_delta_bracket,
    randomized_response_delta_lower,
    solve_epsilon,
)
from dpledger.core.events import (
    ApproxDPEvent,
    Event,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    PureDPEvent,
    RandomizedResponseEvent,
    ReportNoisyMaxEvent,
    flatten,
)

_PURE = PureDPEvent | ExponentialMechanismEvent | ReportNoisyMaxEvent | RandomizedResponseEvent


@attrs.frozen
class _Pure:
    """One pure-type leaf: its epsilon, count, and how its exact worst case is known."""

    eps: float
    count: int
    kind: str  # "rr" (worst case = binary RR), "laplace", "rr_k" (k-ary RR), "opaque"
    buckets: int = 2


@attrs.frozen
class _Summary:
    non_private: bool = False
    gauss_terms: tuple[float, ...] = ()
    pure: tuple[_Pure, ...] = ()


class ClosedFormAccountant(Accountant):
    """Exact profiles of Gaussian compositions and of pure-DP compositions."""

    name = "closed_form"

    # -- support ---------------------------------------------------------------------------
    def _leaf_reason(self, leaf: Event) -> str | None:
        if isinstance(leaf, GaussianEvent | LaplaceEvent | NonPrivateEvent | _PURE):
            return None
        if isinstance(leaf, ApproxDPEvent):
            return f"{leaf.describe()} is approximate DP, which has no exact composition here"
        if leaf.children():
            return f"{leaf.describe()}: sampled events have no closed form"
        return f"{leaf.describe()} has no closed form"

    def _unsupported_reason(self, event: Event) -> str | None:
        leaves = flatten(event)
        for leaf, _ in leaves:
            reason = self._leaf_reason(leaf)
            if reason is not None:
                return reason
        everything = [leaf for leaf, _ in leaves] + [
            e for ev, _ in self._ledger for e, _ in flatten(ev)
        ]
        has_gauss = any(isinstance(e, GaussianEvent) for e in everything)
        pure = [e for e in everything if not isinstance(e, GaussianEvent | NonPrivateEvent)]
        if has_gauss and any(_pure_eps(e, self.adjacency.sensitivity_factor) > 0 for e in pure):
            return (
                "a composition that mixes Gaussian and pure-DP events (e.g. "
                f"{pure[0].describe()}) has no closed form"
            )
        return None

    # -- summary of the ledger ----------------------------------------------------------------
    def _summary(self) -> _Summary:
        s = self.adjacency.sensitivity_factor
        gauss: list[float] = []
        pure: list[_Pure] = []
        non_private = False
        for event, mult in self._ledger:
            for leaf, count in flatten(event):
                n = count * mult
                if isinstance(leaf, NonPrivateEvent):
                    non_private = True
                elif isinstance(leaf, GaussianEvent):
                    gauss.append(n * (s / leaf.noise_multiplier) ** 2)
                else:
                    eps = _pure_eps(leaf, s)
                    if eps > 0:
                        pure.append(_Pure(eps, n, *_pure_kind(leaf)))
        return _Summary(non_private, tuple(gauss), tuple(pure))

    def _profiles(
        self, summary: _Summary
    ) -> tuple[Callable[[float], float], Callable[[float], float], dict[str, Any]]:
        """(upper profile, lower profile, details) of the whole ledger."""
        if summary.gauss_terms:
            n = len(summary.gauss_terms)
            mu2 = math.fsum(summary.gauss_terms)
            mu_hi = math.sqrt(mu2) * (1 + 8 * U * (n + 4))
            mu_lo = math.sqrt(mu2) * (1 - 8 * U * (n + 4))
            return (
                lambda e: gaussian_delta_bracket(e, mu_hi)[1],
                lambda e: gaussian_delta_bracket(e, mu_lo)[0],
                {"mu": math.sqrt(mu2), "profile": "gaussian"},
            )
        pure = summary.pure
        total = sum(p.count for p in pure)
        if total == 1 and pure[0].kind == "laplace":
            eps0 = pure[0].eps
            return (
                lambda e: laplace_delta_bracket(e, eps0)[1],
                lambda e: laplace_delta_bracket(e, eps0)[0],
                {"eps0": eps0, "profile": "laplace"},
            )
        eps_max = max(p.eps for p in pure) * (1 + 4 * U)
        basic = math.fsum(p.eps * p.count for p in pure) * (1 + 8 * U * (len(pure) + 2))
        identical = len({p.eps for p in pure}) == 1

        def upper(e: float) -> float:
            if e >= basic:
                return 0.0
            return kov_delta_bracket(e, eps_max, total)[1]

        lowers = _pure_lower_profiles(pure)

        def lower(e: float) -> float:
            return max((f(e) for f in lowers), default=0.0)

        details = {
            "profile": "kov" if identical else "kov_max_and_basic",
            "eps0_max": eps_max,
            "count": total,
            "basic_composition": basic,
        }
        return upper, lower, details

    # -- queries -------------------------------------------------------------------------------
    def _epsilon(self, delta: float) -> EpsilonBound:
        summary = self._summary()
        if summary.non_private:
            return infinite_epsilon(delta, self.name)
        if not summary.gauss_terms and not summary.pure:
            return EpsilonBound(0.0, 0.0, delta, self.name)
        upper, lower, details = self._profiles(summary)
        eps_hi, eps_lo = solve_epsilon(upper, lower, delta)
        if "basic_composition" in details:
            eps_hi = min(eps_hi, details["basic_composition"])
            eps_lo = min(eps_lo, eps_hi)
        return EpsilonBound(eps_hi, eps_lo, delta, self.name, details)

    def _delta(self, epsilon: float) -> DeltaBound:
        summary = self._summary()
        if summary.non_private:
            return DeltaBound(1.0, 1.0, epsilon, self.name)
        if not summary.gauss_terms and not summary.pure:
            exact = max(0.0, -math.expm1(epsilon))
            return DeltaBound(
                min(1.0, exact * (1 + REL_SLACK)), exact * (1 - REL_SLACK), epsilon, self.name
            )
        upper, lower, details = self._profiles(summary)
        hi = upper(epsilon)
        return DeltaBound(hi, min(lower(epsilon), hi), epsilon, self.name, details)


def _pure_eps(leaf: Event, sensitivity_factor: float) -> float:
    if isinstance(leaf, LaplaceEvent):
        return sensitivity_factor / leaf.noise_multiplier
    if isinstance(leaf, _PURE):
        return float(leaf.epsilon)
    return 0.0


def _pure_kind(leaf: Event) -> tuple[str, int]:
    if isinstance(leaf, LaplaceEvent):
        return "laplace", 2
    if isinstance(leaf, PureDPEvent):
        return "rr", 2
    if isinstance(leaf, RandomizedResponseEvent):
        return ("rr", 2) if leaf.num_buckets == 2 else ("rr_k", leaf.num_buckets)
    return "opaque", 2


def _pure_lower_profiles(pure: tuple[_Pure, ...]) -> list[Callable[[float], float]]:
    """Exact lower profiles of sub-compositions whose worst case is known exactly."""
    out: list[Callable[[float], float]] = []
    rr = [p for p in pure if p.kind == "rr"]
    for v in sorted({p.eps for p in rr}):
        k = sum(p.count for p in rr if p.eps >= v)
        out.append(functools.partial(_kov_lower, eps0=v * (1 - 4 * U), k=k))
    laplace = [p.eps for p in pure if p.kind == "laplace"]
    if laplace:
        out.append(functools.partial(_laplace_lower, eps0=max(laplace) * (1 - 4 * U)))
    for p in pure:
        if p.kind == "rr_k":
            out.append(
                functools.partial(
                    randomized_response_delta_lower, eps0=p.eps * (1 - 4 * U), num_buckets=p.buckets
                )
            )
    return out


def _kov_lower(eps: float, eps0: float, k: int) -> float:
    return kov_delta_bracket(eps, eps0, k)[0]


def _laplace_lower(eps: float, eps0: float) -> float:
    return laplace_delta_bracket(eps, eps0)[0]
