"""Adapter over prv-accountant 0.2.0 (Gopi, Lee & Wutschitz 2021), a cross-check backend.

The library is imported lazily, so this module imports without it. Every library failure
(including ``RuntimeError("Discrete mean differs ...")`` and ``ValueError("Floating point errors
will dominate ...")``) becomes :class:`BoundUnavailable`. Only the library's *upper* bound is
reported, never its estimate.

Lower bounds: the library's lower bound has been observed above the true epsilon by almost
three times ``eps_error`` (S11: sigma=0.6, q=0.1, 1000 steps), so no margin of a few
``eps_error`` makes it safe. This backend therefore reports ``epsilon_lower = 0`` (and
``delta_lower = 0``) and keeps the library's value in ``details["library_lower"]``.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

from dpledger.accountant.base import (
    Accountant,
    DeltaBound,
    EpsilonBound,
    identical_delta,
    infinite_epsilon,
)
from dpledger.accountant.conversions import merged_gaussian_multiplier
from dpledger.core.errors import BoundUnavailable
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
    ShuffledBatchesEvent,
    flatten,
)

_PURE = PureDPEvent | ExponentialMechanismEvent | ReportNoisyMaxEvent | RandomizedResponseEvent

#: absolute epsilon error passed to the library
EPS_ERROR = 0.01
#: delta error relative to the queried delta
DELTA_ERROR_REL = 1e-3
#: absolute delta error used for delta(epsilon) queries
DELTA_ERROR_ABS = 1e-10

# (kind, parameters) describing one PRV; hashable so that equal PRVs are grouped
_Spec = tuple[str, tuple[float, ...]]


class PRVAccountant(Accountant):
    """Numerical composition of privacy random variables with a certified error bracket."""

    name = "prv"

    def _unsupported_reason(self, event: Event) -> str | None:
        leaves = flatten(event)
        reason = self._scale_reason(leaves)
        if reason is not None:
            return reason
        for leaf, _ in leaves:
            if isinstance(leaf, _PURE | ApproxDPEvent) and leaf.epsilon > 0:
                return (
                    f"{leaf.describe()}: prv-accountant 0.2.0 under-reports compositions of "
                    "pure-DP mechanisms (measured: 100 x 1-DP gives 72.0 at delta 1e-6, the exact "
                    "value is 83.5); the closed-form backend composes them exactly"
                )
            if isinstance(
                leaf, GaussianEvent | LaplaceEvent | NonPrivateEvent | ApproxDPEvent | _PURE
            ):
                continue
            if isinstance(leaf, PoissonSampledEvent):
                if self.adjacency.relation != "add_remove":
                    return f"{leaf.describe()}: the PRV library analyses add/remove adjacency only"
                inner = flatten(leaf.event)
                if (
                    len(inner) != 1
                    or inner[0][1] != 1
                    or not isinstance(inner[0][0], GaussianEvent)
                ):
                    return f"{leaf.describe()}: only a single Gaussian may be Poisson-subsampled"
                sigma = inner[0][0].noise_multiplier / self.adjacency.sensitivity_factor
                if sigma < MIN_SAMPLED_MULTIPLIER:
                    return (
                        f"{leaf.describe()}: noise multiplier below {MIN_SAMPLED_MULTIPLIER} "
                        "(the library needs minutes and gigabytes there; PLD and RDP cover it)"
                    )
                continue
            if isinstance(leaf, ShuffledBatchesEvent):
                if self.adjacency.relation != "replace_one":
                    return f"{leaf.describe()}: {SHUFFLED_NEEDS_REPLACE_ONE}"
                inner = flatten(leaf.event)
                if not all(isinstance(e, GaussianEvent) for e, _ in inner):
                    return f"{leaf.describe()}: only Gaussians may run on shuffled batches here"
                continue
            return f"{leaf.describe()} is not supported by the PRV backend"
        return None

    def _scale_reason(self, leaves: list[tuple[Event, int]]) -> str | None:
        """Why the library should not be asked (too many components, counts or extreme noise),
        counting the ledger too; None if it may."""
        everything = leaves + [x for e, k in self._ledger for x in _times(flatten(e), k)]
        distinct = {leaf for leaf, _ in everything if not isinstance(leaf, GaussianEvent)}
        if len(distinct) > MAX_DISTINCT_COMPONENTS:
            return (
                f"{len(distinct)} distinct components (more than {MAX_DISTINCT_COMPONENTS}): "
                "the library's time and memory grow with each one; PLD and RDP cover them"
            )
        total = sum(k for _, k in everything)
        if total > MAX_COMPOSITIONS:
            return (
                f"{_count_text(total)} compositions (more than {MAX_COMPOSITIONS:.0e}): beyond the "
                "library's tested range; PLD and RDP cover them"
            )
        s = self.adjacency.sensitivity_factor
        for leaf, _ in everything:
            inner = (
                leaf.event if isinstance(leaf, PoissonSampledEvent | ShuffledBatchesEvent) else leaf
            )
            for node in flatten(inner):
                if isinstance(node[0], GaussianEvent | LaplaceEvent):
                    sigma = node[0].noise_multiplier / s
                    if not MIN_NOISE <= sigma <= MAX_NOISE:
                        return (
                            f"{node[0].describe()}: noise multiplier outside "
                            f"[{MIN_NOISE:g}, {MAX_NOISE:g}], where the library's grid fails"
                        )
        return None

    def _specs(self) -> tuple[bool, dict[_Spec, int]]:
        """(non_private, {prv spec: count}) of the ledger."""
        s = self.adjacency.sensitivity_factor
        specs: dict[_Spec, int] = {}
        non_private = False
        for event, mult in self._ledger:
            for outer, outer_count in flatten(event):
                # a shuffled epoch costs the events of one batch (each record is in one batch)
                parts = (
                    [(e, outer_count * k) for e, k in flatten(outer.event)]
                    if isinstance(outer, ShuffledBatchesEvent)
                    else [(outer, outer_count)]
                )
                for leaf, count in parts:
                    spec = _spec(leaf, s)
                    if spec is None:
                        non_private = non_private or isinstance(leaf, NonPrivateEvent)
                        continue
                    specs[spec] = specs.get(spec, 0) + count * mult
        return non_private, _merge_gaussians(specs)

    def _build(self, specs: dict[_Spec, int], delta_error: float) -> tuple[Any, list[int]]:
        try:
            from prv_accountant import PRVAccountant as LibAccountant
            from prv_accountant import privacy_random_variables as prv
        except ImportError as exc:
            raise BoundUnavailable("prv", f"prv-accountant is not installed ({exc})") from None
        prvs: list[Any] = []
        counts: list[int] = []
        for (kind, params), count in specs.items():
            if kind == "gaussian":
                prvs.append(prv.GaussianMechanism(noise_multiplier=params[0]))
            elif kind == "poisson_gaussian":
                prvs.append(
                    prv.PoissonSubsampledGaussianMechanism(
                        sampling_probability=params[0], noise_multiplier=params[1]
                    )
                )
            elif kind == "laplace":
                prvs.append(prv.LaplaceMechanism(mu=params[0]))
            elif kind == "pure":
                prvs.append(prv.PureDPMechanism(eps=params[0]))
            else:
                prvs.append(prv.ApproximateDPMechanism(epsilon=params[0], delta=params[1]))
            counts.append(int(count))
        acc = LibAccountant(
            prvs=prvs, eps_error=EPS_ERROR, delta_error=delta_error, max_self_compositions=counts
        )
        return acc, counts

    def _epsilon(self, delta: float) -> EpsilonBound:
        non_private, specs = self._specs()
        if non_private:
            return infinite_epsilon(delta, self.name)
        if not specs:
            return EpsilonBound(0.0, 0.0, delta, self.name)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                acc, counts = self._build(specs, delta * DELTA_ERROR_REL)
                lower, estimate, upper = acc.compute_epsilon(
                    delta=delta, num_self_compositions=counts
                )
            except BoundUnavailable:
                raise
            except Exception as exc:  # the library signals numerical trouble by raising
                raise BoundUnavailable("prv", f"{type(exc).__name__}: {exc}") from None
        upper = float(upper)
        if math.isnan(upper) or upper < 0:
            raise BoundUnavailable("prv", f"library returned an invalid upper bound {upper!r}")
        details = _details(lower, estimate, caught)
        details["delta_error"] = delta * DELTA_ERROR_REL
        return EpsilonBound(max(upper, 0.0), 0.0, delta, self.name, details)

    def _delta(self, epsilon: float) -> DeltaBound:
        non_private, specs = self._specs()
        if non_private:
            return DeltaBound(1.0, 1.0, epsilon, self.name)
        if not specs:
            return identical_delta(epsilon, self.name)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                acc, counts = self._build(specs, DELTA_ERROR_ABS)
                lower, estimate, upper = acc.compute_delta(
                    epsilon=epsilon, num_self_compositions=counts
                )
            except BoundUnavailable:
                raise
            except Exception as exc:
                raise BoundUnavailable("prv", f"{type(exc).__name__}: {exc}") from None
        upper = float(upper)
        if math.isnan(upper):
            raise BoundUnavailable("prv", "library returned NaN")
        details = _details(lower, estimate, caught)
        details["delta_error"] = DELTA_ERROR_ABS
        return DeltaBound(min(1.0, max(upper, 0.0)), 0.0, epsilon, self.name, details)


#: the library is not asked about more distinct (non-Gaussian) components than this
MAX_DISTINCT_COMPONENTS = 64
#: ... nor about more compositions in total
MAX_COMPOSITIONS = 10**6
#: ... nor about noise multipliers (per sensitivity) outside this range
MIN_NOISE = 1e-3
MAX_NOISE = 1e6


def _times(leaves: list[tuple[Event, int]], k: int) -> list[tuple[Event, int]]:
    return [(leaf, n * k) for leaf, n in leaves]


#: below this (merged) Gaussian noise multiplier the library's grid needs gigabytes; the
#: closed-form and PLD backends cover that regime
MIN_GAUSSIAN_MULTIPLIER = 0.05
#: the same for a Poisson-subsampled Gaussian (measured: sigma 0.1, q 0.05, 100 steps takes
#: 80 s in the library)
MIN_SAMPLED_MULTIPLIER = 0.4


def _merge_gaussians(specs: dict[_Spec, int]) -> dict[_Spec, int]:
    """Unsampled Gaussians compose exactly into one: 1/s^2 = sum k_i / s_i^2 (rounded down)."""
    gaussians = [(p[0], k) for (kind, p), k in specs.items() if kind == "gaussian"]
    if not gaussians:
        return specs
    out = {spec: k for spec, k in specs.items() if spec[0] != "gaussian"}
    sigma = merged_gaussian_multiplier(gaussians)
    if sigma < MIN_GAUSSIAN_MULTIPLIER:
        raise BoundUnavailable(
            "prv",
            f"composed Gaussian noise multiplier {sigma:.3g} is below "
            f"{MIN_GAUSSIAN_MULTIPLIER} (epsilon in the hundreds); left to the other backends",
        )
    out[("gaussian", (sigma,))] = 1
    return out


def _spec(leaf: Event, s: float) -> _Spec | None:
    """The PRV of one leaf (noise multipliers divided by the sensitivity factor)."""
    if isinstance(leaf, GaussianEvent):
        return "gaussian", (leaf.noise_multiplier / s,)
    if isinstance(leaf, PoissonSampledEvent):
        q = leaf.sampling_probability
        if q == 0.0:
            return None
        inner = flatten(leaf.event)[0][0]
        assert isinstance(inner, GaussianEvent)
        if q == 1.0:
            return "gaussian", (inner.noise_multiplier,)
        return "poisson_gaussian", (q, inner.noise_multiplier)
    if isinstance(leaf, LaplaceEvent):
        return "laplace", (s / leaf.noise_multiplier,)
    if isinstance(leaf, ApproxDPEvent):
        if leaf.delta == 0:
            return ("pure", (leaf.epsilon,)) if leaf.epsilon > 0 else None
        return "approx", (leaf.epsilon, leaf.delta)
    if isinstance(leaf, _PURE):
        return ("pure", (float(leaf.epsilon),)) if leaf.epsilon > 0 else None
    return None


def _details(lower: Any, estimate: Any, caught: list[warnings.WarningMessage]) -> dict[str, Any]:
    details: dict[str, Any] = {
        "library_lower": float(lower),
        "library_estimate": float(estimate),
        "eps_error": EPS_ERROR,
    }
    try:
        from importlib.metadata import version

        details["library_version"] = version("prv-accountant")
    except Exception:  # pragma: no cover - metadata missing
        details["library_version"] = "unknown"
    if caught:
        details["library_warnings"] = sorted({str(w.message) for w in caught})
    return details


def _count_text(n: int) -> str:
    """A composition count for a message (an integer of any size)."""
    return f"{n:.3g}" if n.bit_length() <= 1000 else f"an integer of {len(str(n))} digits"
