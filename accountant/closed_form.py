"""Exact closed-form accounting for the compositions that have one.

* Any composition of unsampled Gaussians is a Gaussian with
  ``mu = sqrt(sum (s / sigma_i)^2)`` (``s`` = the adjacency's sensitivity factor); its profile
  is the analytic one of Balle & Wang (2018, Thm 8).
* k identical pure eps0-DP events compose optimally as in Kairouz, Oh & Viswanath (2015);
  one Laplace mechanism alone has its exact profile. Heterogeneous pure events are bounded
  above by min(basic composition, KOV at the largest eps) and below by the exact value of a
  sub-composition that is itself exact (sub-compositions can only have smaller profiles).
* The exact KOV sum costs O(k) per evaluation, so beyond :data:`KOV_MAX_COUNT` compositions
  the upper bound is min(basic composition, Hoeffding's bound on the composed dominating
  pairs): ``delta(eps) <= P[L > eps] <= exp(-(eps - m)^2 / (2 v))`` with
  ``m = sum eps_i tanh(eps_i / 2)`` and ``v = sum eps_i^2`` (the privacy loss of binary
  randomized response at eps_i, which dominates every eps_i-DP release, is +-eps_i). Lower
  bounds then use sub-compositions of at most KOV_MAX_COUNT events and a few thresholds.

Approximate (eps, p)-DP events are failure p, else randomized response at eps (their exact
worst case, Kairouz, Oh & Viswanath 2015): the composition is ``P + (1 - P) delta_pure`` with
``P = 1 - prod (1 - p_i)^k_i``.

Laplace noise counts as pure ``eps0 = s / noise_multiplier``; randomized response, the
exponential mechanism and report-noisy-max count as pure at their epsilon. Only black-box
pure-DP events and binary randomized response have binary randomized response as their
exact worst case, so only they feed KOV *lower* bounds. The exponential mechanism
(``eps``-bounded range) has its exact curve as both bounds for one release, and for several the
attained optimal non-adaptive composition of bounded-range pairs as its lower bound
(:mod:`dpledger.accountant.exp_mech_composition`); several at one epsilon, and nothing else,
have their optimal adaptive composition bracketed on a lattice, both bounds, and several at
epsilons within a factor ``MAX_SPREAD`` the programme at the smallest below and at the largest
above (:mod:`dpledger.accountant.br_adaptive`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import attrs
import numpy as np

from dpledger.accountant.base import Accountant, DeltaBound, EpsilonBound, infinite_epsilon
from dpledger.accountant.br_adaptive import MAX_SPREAD, spread_br_delta, spread_br_epsilon
from dpledger.accountant.conversions import (
    REL_SLACK,
    KOVProfile,
    U,
    gaussian_delta_bracket,
    laplace_delta_bracket,
    randomized_response_delta_lower,
    solve_epsilon,
)
from dpledger.accountant.exp_mech_composition import (
    br_delta_bracket,
    br_ledger_delta_lower,
    br_ledger_epsilon_lower,
)
from dpledger.accountant.gaussian_extreme import gaussian_delta_extreme, gaussian_epsilon_extreme
from dpledger.core.basic_composition import basic_composition_epsilon
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
    ShuffledBatchesEvent,
    flatten,
)

_PURE = PureDPEvent | ExponentialMechanismEvent | ReportNoisyMaxEvent | RandomizedResponseEvent

#: largest composition count for which the exact KOV sum (O(k) per evaluation) is used
KOV_MAX_COUNT = 10_000
#: largest number of exact sub-composition lower profiles (thresholds of the epsilons)
MAX_LOWER_PROFILES = 4
#: a lower crossing beyond the root finder's range is reported as this (if verified)
LOWER_SEARCH_LIMIT = 1e11
#: above this GDP parameter epsilon(delta) exceeds 1e11 and the Gaussian profile is not
#: evaluated (its floating-point error terms would overflow): the bound is infinite
MAX_GAUSSIAN_MU = 1e6
#: one exponential mechanism up to this epsilon is read off its exact curve (above it, e^eps0
#: overflows and the pure-DP bounds apply)
MAX_BR_EPS0 = 700.0
#: absolute slack of the joint failure mass of approximate-DP events (covers subnormal values)
TINY = 1e-320


def _as_float(n: int) -> float:
    """An exact integer as a float, infinity beyond the double range (counts may be huge)."""
    return float(n) if n.bit_length() <= 1023 else math.inf


def _times(n: int, x: float) -> float:
    """``n * x`` for a non-negative count ``n`` and ``x >= 0``, saturating at infinity."""
    if x == 0.0 or n == 0:
        return 0.0
    return _as_float(n) * x


@attrs.frozen
class _Pure:
    """One pure-type leaf: its epsilon, count, and how its exact worst case is known."""

    eps: float
    count: int
    kind: str  # "rr" (worst case = binary RR), "laplace", "rr_k" (k-ary RR), "br" (bounded
    # range: the exponential mechanism), "opaque"
    buckets: int = 2
    #: the epsilon exactly where ``eps`` is rounded (a Laplace leaf's sensitivity over its
    #: noise multiplier): basic composition sums it exactly and rounds up
    exact: Fraction | None = None


@attrs.frozen
class _Summary:
    non_private: bool = False
    gauss_terms: tuple[tuple[float, int], ...] = ()  # (s / sigma, count)
    pure: tuple[_Pure, ...] = ()
    #: bracket of P = 1 - prod (1 - p)^k over the (0, p) events (their joint failure mass)
    fail: tuple[float, float] = (0.0, 0.0)

    def with_failure(
        self, profile: Callable[[float], float], upper: bool
    ) -> Callable[[float], float]:
        """The profile of the composition with the (0, p) events: P + (1 - P) delta_rest."""
        p = self.fail[1] if upper else self.fail[0]
        if p == 0.0:
            return profile
        slack = 1 + 4 * U if upper else 1 - 4 * U

        def composed(e: float) -> float:
            rest = profile(e)
            return min(1.0, (rest + p * (1.0 - rest)) * slack)

        return composed


class ClosedFormAccountant(Accountant):
    """Exact profiles of Gaussian compositions and of pure-DP compositions."""

    name = "closed_form"

    # -- support ---------------------------------------------------------------------------
    def _leaf_reason(self, leaf: Event) -> str | None:
        if isinstance(leaf, GaussianEvent | LaplaceEvent | NonPrivateEvent | _PURE):
            return None
        if isinstance(leaf, ApproxDPEvent):
            # (eps, p): failure p, else randomized response at eps (its exact worst case,
            # Kairouz et al. 2015): delta = p + (1 - p) delta_rest
            return None
        if isinstance(leaf, ShuffledBatchesEvent):
            return (
                f"{leaf.describe()}: shuffled batches have a closed-form upper bound (one batch's "
                "events per epoch) but no closed-form lower bound; the PLD backend gives the "
                "bracket and the RDP backend the upper bound"
            )
        if leaf.children():
            return f"{leaf.describe()}: sampled events have no closed form"
        return f"{leaf.describe()} has no closed form"

    def _unsupported_reason(self, event: Event) -> str | None:
        leaves = flatten(event)
        supported: set[type] = set()  # support is decided by the leaf's class alone
        for leaf, _ in leaves:
            if type(leaf) in supported:
                continue
            reason = self._leaf_reason(leaf)
            if reason is not None:
                return reason
            supported.add(type(leaf))
        everything = [leaf for leaf, _ in leaves] + [
            e for ev, _ in self._ledger for e, _ in flatten(ev)
        ]
        if not any(isinstance(e, GaussianEvent) for e in everything):
            return None  # no Gaussian: nothing to mix (the pure leaves are not looked at)
        pure = [e for e in everything if not isinstance(e, GaussianEvent | NonPrivateEvent)]
        if any(_pure_eps(e, self.adjacency.sensitivity_factor) > 0 for e in pure):
            return (
                "a composition that mixes Gaussian and pure-DP events (e.g. "
                f"{pure[0].describe()}) has no closed form"
            )
        return None

    # -- summary of the ledger ----------------------------------------------------------------
    def _summary(self) -> _Summary:
        s = self.adjacency.sensitivity_factor
        gauss: list[tuple[float, int]] = []
        pure: list[_Pure] = []
        non_private = False
        log_keep: list[float] = []
        for event, mult in self._ledger:
            for leaf, count in flatten(event):
                n = count * mult
                if isinstance(leaf, NonPrivateEvent):
                    non_private = True
                elif isinstance(leaf, ApproxDPEvent):
                    log_keep.append(_as_float(n) * math.log1p(-leaf.delta))
                    if leaf.epsilon > 0:
                        pure.append(_Pure(float(leaf.epsilon), n, "rr", 2))
                elif isinstance(leaf, GaussianEvent):
                    gauss.append((s / leaf.noise_multiplier, n))
                else:
                    eps = _pure_eps(leaf, s)
                    if eps > 0:
                        exact = None
                        if isinstance(leaf, LaplaceEvent):
                            exact = Fraction(s) / Fraction(leaf.noise_multiplier)
                        pure.append(_Pure(eps, n, *_pure_kind(leaf), exact=exact))
        fail = (0.0, 0.0)
        if log_keep:
            total = math.fsum(log_keep)
            p = -math.expm1(total)
            err = 8 * U * (len(log_keep) + 4)
            # relative error only (an absolute U here answered inf at every delta below 1e-16);
            # TINY covers subnormal p
            fail = (max(0.0, p * (1 - err) - TINY), min(1.0, p * (1 + err) + TINY))
        return _Summary(non_private, tuple(gauss), tuple(pure), fail)

    def _profiles(
        self, summary: _Summary
    ) -> tuple[Callable[[float], float], Callable[[float], float], dict[str, Any]]:
        """(upper profile, lower profile, details) of the whole ledger."""
        if summary.gauss_terms:
            n = len(summary.gauss_terms)
            mu = _gdp_mu(summary.gauss_terms)
            if not mu <= MAX_GAUSSIAN_MU:  # also catches inf
                return (
                    lambda e: 1.0,
                    lambda e: 0.0,
                    {
                        "mu": mu,
                        "profile": "gaussian",
                        "note": f"mu above {MAX_GAUSSIAN_MU:g}: epsilon exceeds 1e11",
                    },
                )
            mu_hi = mu * (1 + 8 * U * (n + 4))
            mu_lo = mu * (1 - 8 * U * (n + 4))
            return (
                lambda e: gaussian_delta_bracket(e, mu_hi)[1],
                lambda e: gaussian_delta_bracket(e, mu_lo)[0],
                {"mu": mu, "profile": "gaussian"},
            )
        pure = summary.pure
        total = sum(p.count for p in pure)
        single = _single_release(pure) if total == 1 else None
        if single is not None:
            return single
        eps_max = max(p.eps for p in pure) * (1 + 4 * U)
        basic = basic_composition_epsilon(
            (p.count, p.eps if p.exact is None else p.exact) for p in pure
        )
        identical = len({p.eps for p in pure}) == 1
        exact_kov = total <= KOV_MAX_COUNT
        tail = _hoeffding(pure) if not exact_kov else KOVProfile(eps_max, total).upper

        def upper(e: float) -> float:
            return 0.0 if e >= basic else tail(e)

        lowers = _pure_lower_profiles(pure)

        def lower(e: float) -> float:
            return max((f(e) for f in lowers), default=0.0)

        details = {
            "profile": ("kov" if identical else "kov_max_and_basic")
            if exact_kov
            else "hoeffding_and_basic",
            "eps0_max": eps_max,
            "count": total,
            "basic_composition": basic,
        }
        return upper, lower, details

    # -- queries -------------------------------------------------------------------------------
    def _epsilon(self, delta: float) -> EpsilonBound:
        # overflows in the error terms of extreme parameters give inf (upper) or are clamped
        # to 0 (lower): both are safe, so numpy's warnings are not needed
        with np.errstate(all="ignore"):
            return self._epsilon_bound(delta)

    def _delta(self, epsilon: float) -> DeltaBound:
        with np.errstate(all="ignore"):
            return self._delta_bound(epsilon)

    def _epsilon_bound(self, delta: float) -> EpsilonBound:
        summary = self._summary()
        if summary.non_private:
            return infinite_epsilon(delta, self.name)
        p_lo, p_hi = summary.fail
        if delta <= p_lo:  # the (0, p) events alone exceed delta at every epsilon
            return infinite_epsilon(delta, self.name)
        if not summary.gauss_terms and not summary.pure:
            if delta <= p_hi:
                return EpsilonBound(math.inf, 0.0, delta, self.name, {"fail": p_hi})
            return EpsilonBound(0.0, 0.0, delta, self.name)
        extreme = _extreme_gaussian(summary)
        if extreme is not None and p_hi == 0.0:
            hi, lo = gaussian_epsilon_extreme(*extreme, delta)
            return EpsilonBound(hi, lo, delta, self.name, _extreme_details(extreme))
        upper, lower, details = self._profiles(summary)
        if p_hi > 0.0:
            details = {**details, "fail": p_hi}
        if p_hi >= delta:
            eps_hi = math.inf
            eps_lo = solve_epsilon(lambda e: 1.0, summary.with_failure(lower, False), delta)[1]
        elif details.get("profile") == "hoeffding_and_basic":
            # the Hoeffding profile inverts in closed form (and may lie beyond the root finder);
            # with (0, p) events the rest must reach (delta - P) / (1 - P), rounded down
            rest = (delta - p_hi) / (1.0 - p_lo) * (1 - 4 * U)
            eps_hi = min(hoeffding_epsilon(summary.pure, rest), details["basic_composition"])
            eps_lo = solve_epsilon(lambda e: 1.0, summary.with_failure(lower, False), delta)[1]
        else:
            eps_hi, eps_lo = solve_epsilon(
                summary.with_failure(upper, True), summary.with_failure(lower, False), delta
            )
        if math.isinf(eps_lo):
            # the lower crossing lies beyond the root finder's range: keep a verified point only
            eps_lo = LOWER_SEARCH_LIMIT if lower(LOWER_SEARCH_LIMIT) >= delta else 0.0
        eps_lo = max(eps_lo, br_ledger_epsilon_lower(_bounded_range(summary), delta))
        adaptive = _adaptive_releases(summary)
        found = None if adaptive is None else spread_br_epsilon(delta, *adaptive)
        if found is not None:
            eps_lo, eps_hi = max(eps_lo, found[0]), min(eps_hi, found[1])
            details = {**details, "adaptive_bounded_range": found}
        if "basic_composition" in details and delta > p_hi:
            # basic composition certifies (sum eps, P) only: below P's upper bound it says nothing
            eps_hi = min(eps_hi, details["basic_composition"])
            eps_lo = min(eps_lo, eps_hi)
        return EpsilonBound(eps_hi, eps_lo, delta, self.name, details)

    def _delta_bound(self, epsilon: float) -> DeltaBound:
        summary = self._summary()
        if summary.non_private:
            return DeltaBound(1.0, 1.0, epsilon, self.name)
        if not summary.gauss_terms and not summary.pure:
            exact = max(0.0, -math.expm1(min(epsilon, 0.0)))

            def empty_hi(e: float) -> float:
                return min(1.0, exact * (1 + REL_SLACK))

            def empty_lo(e: float) -> float:
                return exact * (1 - REL_SLACK)

            hi = summary.with_failure(empty_hi, True)(epsilon)
            lo = summary.with_failure(empty_lo, False)(epsilon)
            return DeltaBound(hi, min(lo, hi), epsilon, self.name)
        extreme = _extreme_gaussian(summary)
        if extreme is not None and summary.fail[1] == 0.0:
            hi, lo = gaussian_delta_extreme(*extreme, epsilon)
            return DeltaBound(hi, lo, epsilon, self.name, _extreme_details(extreme))
        upper, lower, details = self._profiles(summary)
        hi = summary.with_failure(upper, True)(epsilon)
        lo = summary.with_failure(lower, False)(epsilon)
        lo = max(lo, br_ledger_delta_lower(_bounded_range(summary), epsilon))
        adaptive = _adaptive_releases(summary)
        found = None if adaptive is None else spread_br_delta(epsilon, *adaptive)
        if found is not None:
            lo, hi = max(lo, found[0]), min(hi, found[1])
            details = {**details, "adaptive_bounded_range": found}
        return DeltaBound(hi, min(lo, hi), epsilon, self.name, details)


def _single_release(
    pure: tuple[_Pure, ...],
) -> tuple[Callable[[float], float], Callable[[float], float], dict[str, Any]] | None:
    """(upper, lower, details) of one Laplace or exponential-mechanism release: its exact
    curve, rounded both ways (the bounded-range curve is attained at every epsilon)."""
    eps0 = pure[0].eps
    if pure[0].kind == "laplace":
        return (
            lambda e: laplace_delta_bracket(e, eps0)[1],
            lambda e: laplace_delta_bracket(e, eps0)[0],
            {"eps0": eps0, "profile": "laplace"},
        )
    if pure[0].kind == "br" and eps0 <= MAX_BR_EPS0:
        return (
            lambda e: br_delta_bracket(e, eps0)[1],
            lambda e: br_delta_bracket(e, eps0)[0],
            {"eps0": eps0, "profile": "bounded_range"},
        )
    return None


def _bounded_range(summary: _Summary) -> list[tuple[float, int]]:
    """(eps0, count) of the exponential-mechanism releases: their sub-composition's attained
    lower bound holds for the whole ledger (the other events only add to its curve)."""
    return [(p.eps, p.count) for p in summary.pure if p.kind == "br"]


def _adaptive_releases(summary: _Summary) -> tuple[float, float, int] | None:
    """(smallest eps0, largest eps0, count) when the ledger is ``count >= 2``
    exponential-mechanism releases and nothing else, their epsilons within a factor
    MAX_SPREAD: their optimal adaptive composition is bracketed
    (:mod:`~dpledger.accountant.br_adaptive`), at one epsilon by its programme, at several by
    the programme at the smallest (lower) and at the largest (upper), as their order may itself
    be adaptive and the order changes the optimum."""
    pure = summary.pure
    if summary.gauss_terms or summary.fail[1] > 0.0 or not pure:
        return None
    if any(p.kind != "br" for p in pure):
        return None
    low, high = min(p.eps for p in pure), max(p.eps for p in pure)
    if high > low * MAX_SPREAD:
        return None
    count = sum(p.count for p in pure)
    return (low, high, count) if count >= 2 else None


def _extreme_gaussian(summary: _Summary) -> tuple[float, float] | None:
    """(μ rounded down, μ rounded up) of a Gaussian-only ledger whose μ is above
    MAX_GAUSSIAN_MU (and finite): its profile is evaluated in ``t`` (:mod:`gaussian_extreme`)."""
    if not summary.gauss_terms or summary.pure:
        return None
    mu = _gdp_mu(summary.gauss_terms)
    if not MAX_GAUSSIAN_MU < mu < math.inf:
        return None
    slack = 8 * U * (len(summary.gauss_terms) + 4)
    return mu * (1 - slack), mu * (1 + slack)


def _extreme_details(mus: tuple[float, float]) -> dict[str, Any]:
    return {"mu": mus[1], "profile": "gaussian", "evaluated": "in t = eps/mu - mu/2 (erfcx)"}


def _gdp_mu(terms: tuple[tuple[float, int], ...]) -> float:
    """sqrt(sum k (s/sigma)^2), scaled by the largest ratio so that it neither under- nor
    overflows for noise multipliers of 1e-300 or 1e300 (inf beyond the double range)."""
    top = max(r for r, _ in terms)
    total = math.fsum(_as_float(k) * (r / top) * (r / top) for r, k in terms)
    return top * math.sqrt(total)


def _pure_eps(leaf: Event, sensitivity_factor: float) -> float:
    if isinstance(leaf, LaplaceEvent):
        return sensitivity_factor / leaf.noise_multiplier
    if isinstance(leaf, _PURE | ApproxDPEvent):
        return float(leaf.epsilon)
    return 0.0


def _pure_kind(leaf: Event) -> tuple[str, int]:
    if isinstance(leaf, LaplaceEvent):
        return "laplace", 2
    if isinstance(leaf, PureDPEvent):
        return "rr", 2
    if isinstance(leaf, RandomizedResponseEvent):
        return ("rr", 2) if leaf.num_buckets == 2 else ("rr_k", leaf.num_buckets)
    if isinstance(leaf, ExponentialMechanismEvent):
        return "br", 2
    return "opaque", 2


def _hoeffding(pure: tuple[_Pure, ...]) -> Callable[[float], float]:
    """Upper profile ``exp(-(eps - m)^2 / (2 v))`` (1 below the mean ``m``), safely rounded.

    The composed dominating pair's privacy loss is a sum of independent +-eps_i steps of mean
    eps_i tanh(eps_i / 2) under P, and delta(eps) <= P[L > eps] (Hoeffding, range 2 eps_i).
    """
    m, v = _hoeffding_terms(pure)

    def profile(e: float) -> float:
        if not (math.isfinite(m) and 0.0 < v < math.inf) or e <= m:
            return 1.0
        t = (e - m) * (1 - 4 * U)
        z = t / v * t / 2.0 * (1 - 8 * U)  # rounded down: the bound is exp(-z)
        return min(1.0, math.exp(-z) * (1 + REL_SLACK))

    return profile


def _hoeffding_terms(pure: tuple[_Pure, ...]) -> tuple[float, float]:
    """(mean, variance proxy) of the composed loss, both rounded up; (count * eps) first, so
    that tiny epsilons times huge counts neither underflow nor overflow needlessly."""
    m = math.fsum(_times(p.count, p.eps) * math.tanh(p.eps / 2.0) for p in pure)
    v = math.fsum(_times(p.count, p.eps) * p.eps for p in pure)
    inflate = 1 + 8 * U * (len(pure) + 4)
    return m * inflate, v * inflate


def hoeffding_epsilon(pure: tuple[_Pure, ...], delta: float) -> float:
    """The epsilon at which the Hoeffding profile equals ``delta``: m + sqrt(2 v log(1/delta)).

    ``sqrt(v)`` is taken as ``top * sqrt(v / top^2)``, ``top`` the largest epsilon, so that a
    variance proxy below the float range (10^6 steps of 1e-300) is not read as 0; the mean's
    terms that underflow are charged a subnormal unit each, and the result one more."""
    m, _ = _hoeffding_terms(pure)
    top = max(p.eps for p in pure)
    if top == 0.0:
        return 0.0
    ratio = math.fsum(_times(p.count, p.eps / top) * (p.eps / top) for p in pure)
    ratio = ratio * (1 + 8 * U * (len(pure) + 4)) + len(pure) * 1e-300  # each term's underflow
    root = top * math.sqrt(2.0 * ratio * -math.log(delta)) * (1 + 4 * U)
    eps = (m + len(pure) * TINY + root) * (1 + 16 * U) + TINY
    return eps if math.isfinite(eps) else math.inf


def _thresholds(values: list[float]) -> list[float]:
    """At most MAX_LOWER_PROFILES of the sorted ``values``, always keeping the largest."""
    if len(values) <= MAX_LOWER_PROFILES:
        return values
    step = (len(values) - 1) / (MAX_LOWER_PROFILES - 1)
    return sorted({values[round(i * step)] for i in range(MAX_LOWER_PROFILES)})


def _pure_lower_profiles(pure: tuple[_Pure, ...]) -> list[Callable[[float], float]]:
    """Exact lower profiles of sub-compositions whose worst case is known exactly.

    A sub-composition has a smaller profile, so a threshold subset of the epsilons and counts
    capped at KOV_MAX_COUNT keep every profile a lower bound while bounding the cost.
    """
    out: list[Callable[[float], float]] = []
    rr = [p for p in pure if p.kind == "rr"]
    for v in _thresholds(sorted({p.eps for p in rr})):
        k = min(KOV_MAX_COUNT, sum(p.count for p in rr if p.eps >= v))
        out.append(KOVProfile(v * (1 - 4 * U), k).lower)
    laplace = [p.eps for p in pure if p.kind == "laplace"]
    if laplace:
        out.append(functools.partial(_laplace_lower, eps0=max(laplace) * (1 - 4 * U)))
    rr_k = sorted((p for p in pure if p.kind == "rr_k"), key=lambda p: p.eps)
    for p in rr_k[-MAX_LOWER_PROFILES:]:
        out.append(functools.partial(_rr_k_lower, eps0=p.eps * (1 - 4 * U), num_buckets=p.buckets))
    return out


def _laplace_lower(eps: float, eps0: float) -> float:
    return laplace_delta_bracket(eps, eps0)[0]


def _rr_k_lower(eps: float, eps0: float, num_buckets: int) -> float:
    if eps >= eps0:
        return 0.0  # the loss of k-ary randomized response never exceeds eps0
    if eps0 > 700.0:
        return 0.0  # e^eps0 overflows: 0 is a valid (if loose) lower bound
    return randomized_response_delta_lower(eps, eps0, num_buckets)
