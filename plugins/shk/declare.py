"""The privacy event an SHK release declares: Theorem 3 (pure) or Theorem 4 + Theorem 2 (KL).

* Pure (Theorem 3): ``TimeProfiledPureDPEvent(floor, 2B, t)``, i.e. ``ε(t) = S + 2B e^{−t}`` with
  ``S = min(2Δ_pot, Δ_osc)`` (A1 / A1′) and ``B = 2κ + β·loss_range ≥ osc(log ρ_0/π_D)`` for
  every dataset (``osc log ρ_0 = 2κ`` for the von Mises ``ρ_0``, ``osc V_D ≤ β·loss_range``).
* Particle sampler: ``NonPrivateEvent`` per draw. Its birth–death rate uses a kernel density
  estimate, so its law (and its mean-field limit) is not the flow the theorems cover, and that
  law's log-ratio between neighbours exceeds ``ε(t)`` (docs/methods/shk.md).
* KL (Theorem 4 with Theorem 2): ``ApproxDPEvent(ε_a, H̄(t)/ε_a)`` where ``H̄(t)`` is Theorem 2's
  KL bound minimised over the Young parameter ``c`` on a grid (every ``c ∈ (0, 1)`` is valid).
  It needs (A2) ``‖∇V_D − ∇V_D′‖∞ ≤ Δ_grad`` (``2β/n`` for the cosine loss) and (A3) a common
  LSI constant ``λ`` of every ``π_D`` (default Holley–Stroock ``e^{−β·loss_range}`` from the
  uniform law on the circle, whose LSI constant is 1).

Nothing here imports torch or POT; every bound is rounded upwards.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import attrs
import numpy as np

from dpledger.plugin import (
    Adjacency,
    ApproxDPEvent,
    Event,
    InvalidParameterError,
    NonPrivateEvent,
    SelfComposedEvent,
)
from dpledger.plugins.shk import bounds
from dpledger.plugins.shk.events import TimeProfiledPureDPEvent
from dpledger.plugins.shk.params import SHKMethodParams

#: Young-parameter grid over which Theorem 2's bound is minimised (any c in (0, 1) is valid).
C_GRID = tuple(float(c) for c in np.linspace(0.02, 0.98, 49))

TIER_THEOREM = "exact-flow theorem"
TIER_NONE = "no privacy guarantee"
TIER_SOLVER = {
    "grid": "released sample from the finite-volume grid solver (approximation)",
    "particles": "released sample from the birth–death particle sampler, whose law the theorem "
    "does not cover",
}
#: why the particle sampler is not certified (stated in the tier note and the summary)
PARTICLES_REASON = (
    "the particle sampler's birth–death rate uses a kernel density estimate, so its law is not "
    "the SHK flow's; the log-ratio of its mean-field law between neighbours exceeds ε(t) "
    "(e.g. 0.22 against 0.20 at β = 5, n = 100, t = 15)"
)


def _up(x: float) -> float:
    return math.nextafter(x, math.inf)


def as_params(params: SHKMethodParams | Mapping[str, Any]) -> SHKMethodParams:
    """Validated parameters from a mapping (unknown keys are refused)."""
    if isinstance(params, SHKMethodParams):
        return params
    if not isinstance(params, Mapping):
        raise InvalidParameterError("params", "expected a mapping", "pass a dict of parameters")
    names = {f.name for f in SHKMethodParams.__attrs_attrs__}
    unknown = sorted(set(params) - names)
    if unknown:
        raise InvalidParameterError(
            f"shk.{unknown[0]}", "is not a parameter", f"use {sorted(names)}"
        )
    for key in ("t", "beta", "n"):
        if key not in params:
            raise InvalidParameterError(key, "is missing", f"pass {key!r}")
    return SHKMethodParams(**params)


def potential_sensitivities(p: SHKMethodParams) -> tuple[float, float]:
    """``(Δ_pot, Δ_osc)`` bounding ``‖V_D − V_D′‖∞`` and ``osc(V_D − V_D′)`` over neighbours."""
    pot = _up(p.beta * p.loss_range / p.n)
    osc = _up(2.0 * pot)
    return (p.delta_pot or pot, p.delta_osc or osc)


def target_floor(p: SHKMethodParams) -> tuple[float, str]:
    """``S = min(2Δ_pot, Δ_osc)`` and the assumption it comes from (``A1`` or ``A1_prime``)."""
    pot, osc = potential_sensitivities(p)
    two_pot = _up(2.0 * pot)
    return (two_pot, "A1") if two_pot < osc else (osc, "A1_prime")


def initial_oscillation_bound(p: SHKMethodParams) -> float:
    """``B = 2κ + β·loss_range`` (data-independent bound on ``osc log(ρ_0/π_D)``)."""
    return _up(2.0 * p.rho0_kappa + _up(p.beta * p.loss_range))


def pure_event(p: SHKMethodParams) -> TimeProfiledPureDPEvent:
    """Theorem 3 for one draw: ``ε(t) = S + 2B e^{−t}``."""
    floor, _ = target_floor(p)
    return TimeProfiledPureDPEvent(
        floor_epsilon=floor, transient_epsilon=_up(2.0 * initial_oscillation_bound(p)), time=p.t
    )


def grad_sensitivity(p: SHKMethodParams) -> float:
    """(A2) ``Δ_grad``: ``2β/n`` for the cosine loss, else the declared value."""
    if p.loss == "cosine":
        return _up(2.0 * p.beta / p.n)
    if p.grad_sensitivity is None:
        raise InvalidParameterError(
            "grad_sensitivity", "is missing", "pass a bound on ‖∇V_D − ∇V_D′‖∞"
        )
    return float(p.grad_sensitivity)


def lsi_constant(p: SHKMethodParams) -> float:
    """(A3) common LSI constant; default Holley–Stroock ``e^{−osc V} ≥ e^{−β·loss_range}``."""
    if p.lsi_constant is not None:
        return float(p.lsi_constant)
    return math.nextafter(bounds.holley_stroock_lsi(p.beta * p.loss_range), 0.0)


def kl_bound(p: SHKMethodParams) -> tuple[float, float]:
    """Theorem 2's ``H̄(t) ≥ KL(ρ_t^D ‖ ρ_t^{D′})`` minimised over ``C_GRID``, and the best c."""
    s_tar, _ = target_floor(p)
    b, dg, lam = initial_oscillation_bound(p), grad_sensitivity(p), lsi_constant(p)
    values = [bounds.kl_bound_theorem2(p.t, c, dg, s_tar, b, lam) for c in C_GRID]
    i = int(np.argmin(values))
    return values[i], C_GRID[i]


def kl_event(p: SHKMethodParams) -> ApproxDPEvent | None:
    """Theorem 4: ``(ε_a, H̄(t)/ε_a)``-DP; None when that δ is not below 1 (vacuous)."""
    if p.approx_epsilon is None:
        raise InvalidParameterError("approx_epsilon", "is missing", "pass an epsilon > 0")
    delta = bounds.hockey_stick_from_kl(kl_bound(p)[0], p.approx_epsilon)
    return ApproxDPEvent(p.approx_epsilon, delta) if delta < 1.0 else None


def certified(p: SHKMethodParams) -> bool:
    """Whether a draw carries a certificate: only the grid solver's law is covered."""
    return p.solver == "grid"


def single_release(p: SHKMethodParams) -> Event:
    """The certificate of one draw, per ``p.certificate``; none for the particle sampler."""
    if not certified(p):
        return NonPrivateEvent()
    pure = pure_event(p)
    if p.certificate == "pure":
        return pure
    approx = kl_event(p)
    if p.certificate == "kl":
        if approx is None:
            raise InvalidParameterError(
                "certificate",
                "the KL / hockey-stick certificate is vacuous (δ ≥ 1) here",
                "use certificate = 'pure' or 'tighter', a larger approx_epsilon or a larger t",
            )
        return approx
    assert p.target_delta is not None
    if approx is not None and approx.delta <= p.target_delta and approx.epsilon < pure.epsilon:
        return approx
    return pure


def _assumption(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value not in ("A1", "A1_prime"):
        raise InvalidParameterError("assumption", f"unknown value {value!r}", "use A1 or A1_prime")


def _nonneg(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not (math.isfinite(value) and value >= 0):
        raise InvalidParameterError(attribute.name, f"must be >= 0, got {value!r}", "pass >= 0")


@attrs.frozen
class SHKParams:
    """Theorem 3 with an explicitly stated loss sensitivity (no loss family, no data).

    ``sensitivity`` bounds ``‖L_D − L_D′‖∞`` (``assumption="A1"``) or ``osc(L_D − L_D′)``
    (``"A1_prime"``) over all neighbours; ``B = 2κ + β·loss_range``.
    """

    t: float = attrs.field(validator=_nonneg)
    beta: float = attrs.field(validator=_nonneg)
    sensitivity: float = attrs.field(validator=_nonneg)
    assumption: str = attrs.field(default="A1_prime", validator=_assumption)
    loss_range: float = attrs.field(default=2.0, validator=_nonneg)
    rho0_kappa: float = attrs.field(default=0.0, validator=_nonneg)
    rho0_mu: float = 0.0
    n_samples: int = 1

    def event(self) -> TimeProfiledPureDPEvent:
        """``TimeProfiledPureDPEvent(S, 2B, t)`` with ``S = βΔ`` (A1′) or ``2βΔ`` (A1)."""
        floor = _up(self.beta * self.sensitivity)
        if self.assumption == "A1":
            floor = _up(2.0 * floor)
        b = _up(2.0 * self.rho0_kappa + _up(self.beta * self.loss_range))
        return TimeProfiledPureDPEvent(floor, _up(2.0 * b), self.t)


def release_epsilon(params: SHKParams | SHKMethodParams | Mapping[str, Any]) -> float:
    """ε(t) of one draw (Theorem 3), rounded up."""
    if isinstance(params, SHKParams):
        return float(params.event().epsilon)
    return float(pure_event(as_params(params)).epsilon)


def declare_shk_release(
    params: SHKMethodParams | SHKParams | Mapping[str, Any], adjacency: Adjacency | None = None
) -> Event:
    """The event the run may spend: ``n_samples`` composed draws of :func:`single_release`.

    The sensitivities hold for add/remove and replace-one row neighbours alike (``adjacency``
    only selects the relation; user-level lifting is left to the accountant).
    """
    if isinstance(params, SHKParams):
        one: Event = params.event()
        count = params.n_samples
    else:
        p = as_params(params)
        one, count = single_release(p), p.n_samples
    return one if count == 1 else SelfComposedEvent(one, count)


def tier(p: SHKMethodParams) -> str:
    """``"exact-flow theorem; released sample from … (approximation)"``, or, for the particle
    sampler, ``"no privacy guarantee; released sample from …"``."""
    head = TIER_THEOREM if certified(p) else TIER_NONE
    return f"{head}; {TIER_SOLVER[p.solver]}"


def certificate_summary(params: SHKMethodParams | Mapping[str, Any]) -> dict[str, Any]:
    """Public description of the declared certificate: tier, assumptions and its terms."""
    p = as_params(params)
    if not certified(p):
        return {
            "tier": tier(p),
            "certificate": "none",
            "epsilon": math.inf,
            "reason": PARTICLES_REASON,
            "fix": "use solver = 'grid' for a certified release",
            "t": p.t,
            "n_samples": p.n_samples,
        }
    pure = pure_event(p)
    one = single_release(p)
    floor, assumption = target_floor(p)
    pot, osc = potential_sensitivities(p)
    out: dict[str, Any] = {
        "tier": tier(p),
        "certificate": "kl_hockey_stick" if isinstance(one, ApproxDPEvent) else "pure",
        "epsilon": one.epsilon if isinstance(one, ApproxDPEvent) else pure.epsilon,
        "theorem": "Theorem 3 (pure DP of the exact SHK flow's time-t law)",
        "assumption": assumption,
        "pure_epsilon": pure.epsilon,
        "epsilon_floor": floor,
        "transient": pure.transient_epsilon,
        "B": initial_oscillation_bound(p),
        "delta_pot": pot,
        "delta_osc": osc,
        "t": p.t,
        "n_samples": p.n_samples,
        "assumptions": [
            "Θ is the 1-D torus (compact, no boundary); V_D = β·L_D is C² and 2π-periodic",
            "ρ_0 ∝ exp(κ cos(x − μ)) is positive, smooth and independent of the data",
            f"every per-record loss lies in [0, {p.loss_range}] and every dataset has at least "
            f"n = {p.n} records",
            "A1: ‖V_D − V_D′‖∞ ≤ Δ_pot" if assumption == "A1" else "A1′: osc(V_D − V_D′) ≤ Δ_osc",
            "the theorem covers the exact flow's law; the released sample comes from the "
            "finite-volume grid solver, whose semi-discrete flow obeys the same bound (docs/"
            "methods/shk.md) and whose RK4 time stepping is checked numerically over a sweep",
        ],
    }
    if p.certificate != "pure":
        out["kl"] = _kl_summary(p)
    return out


def _kl_summary(p: SHKMethodParams) -> dict[str, Any]:
    """The (eps, delta) certificate's terms (Theorem 4 with Theorem 2's KL bound)."""
    h, c = kl_bound(p)
    approx = kl_event(p)
    return {
        "theorem": "Theorem 4 with Theorem 2's KL bound",
        "kl_bound": h,
        "c": c,
        "grad_sensitivity": grad_sensitivity(p),
        "lsi_constant": lsi_constant(p),
        "lsi_source": "declared" if p.lsi_constant is not None else "Holley–Stroock",
        "epsilon": p.approx_epsilon,
        "delta": approx.delta if approx is not None else 1.0,
        "assumptions": [
            "A2: ‖∇V_D − ∇V_D′‖∞ ≤ grad_sensitivity",
            "A3: every π_D satisfies an LSI with constant lsi_constant",
            "R_0, R′_0 ≤ B",
        ],
    }
