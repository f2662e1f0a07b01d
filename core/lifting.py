"""Lift a release declared at row level to a user-level adjacency.

A row-level event describes a release with respect to one row's contribution bound ``C``. When
a user contributes at most ``k`` rows, the same release must be re-stated with respect to one
user. Each rule below is a proven statement; the tightest one that applies is used and named:

* ``gaussian_l2_sensitivity_xk``: removing (or replacing) one user is a path of at most ``k``
  row-level steps, so by the triangle inequality the query's L2 contribution bound becomes
  ``k·C`` and ``GaussianEvent(σ)`` becomes ``GaussianEvent(σ/k)``.
* ``laplace_l1_sensitivity_xk``: the same argument in L1: ``LaplaceEvent(b)`` becomes
  ``LaplaceEvent(b/k)``.
* ``exponential_mechanism_sensitivity_xk`` / ``report_noisy_max_sensitivity_xk``: the utility (or
  count) sensitivity grows by ``k`` at a fixed noise scale, which is the same mechanism at ``k·ε``.
* ``pure_group_privacy``: an ε-DP release is ``k·ε``-DP for groups of ``k`` rows (pure DP and
  randomized response, which is applied per row and so cannot be re-parametrised).
* ``approx_group_privacy``: an (ε, δ)-DP release is (kε, k·e^{(k−1)ε}·δ)-DP for groups of ``k``
  rows; when that delta reaches 1 the guarantee is vacuous and the release becomes non-private.
* ``compose_distributes``: lifting distributes over (self-)composition: each part is lifted.

Row-sampled events (Poisson, without replacement or shuffled batches) have no proven lift here:
a user's ``k`` rows are sampled independently, so neither amplification nor group privacy
applies as stated.
They raise :class:`LiftingError` with the fix (sample users, declare the release at user level).
Every number is rounded toward the safe side (up for ε and δ, down for noise multipliers).
"""

from __future__ import annotations

import math
from fractions import Fraction

from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import LiftingError
from dpledger.core.events import (
    ApproxDPEvent,
    ComposedEvent,
    Event,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    NoOpEvent,
    PoissonSampledEvent,
    PureDPEvent,
    RandomAllocationEvent,
    RandomizedResponseEvent,
    ReportNoisyMaxEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    ShuffledBatchesEvent,
    TabulatedProfileEvent,
    canonical,
)

RULE_UNCHANGED = "unchanged_k1"
RULE_DECLARED_USER = "declared_user_level"
RULE_GAUSSIAN = "gaussian_l2_sensitivity_xk"
RULE_LAPLACE = "laplace_l1_sensitivity_xk"
RULE_EM = "exponential_mechanism_sensitivity_xk"
RULE_RNM = "report_noisy_max_sensitivity_xk"
RULE_PURE = "pure_group_privacy"
RULE_APPROX = "approx_group_privacy"
RULE_APPROX_VACUOUS = "approx_group_privacy_vacuous"
RULE_COMPOSE = "compose_distributes"
RULE_TABLE = "tabulated_group_privacy"

#: what each rule means, for people reading a report or `dpledger account`
RULE_TEXT: dict[str, str] = {
    RULE_UNCHANGED: "one row per unit, so the event already protects one unit; used as is",
    RULE_DECLARED_USER: "the method declares its event per user: used as declared",
    RULE_GAUSSIAN: "Gaussian noise: L2 sensitivity times k rows per unit",
    RULE_LAPLACE: "Laplace noise: L1 sensitivity times k rows per unit",
    RULE_EM: "exponential mechanism: score sensitivity times k rows per unit",
    RULE_RNM: "report-noisy-max: score sensitivity times k rows per unit",
    RULE_PURE: "pure DP: group privacy, epsilon times k",
    RULE_APPROX: "approximate DP: group privacy, (k eps, k e^((k - 1) eps) delta)",
    RULE_APPROX_VACUOUS: "approximate DP: group privacy gives delta >= 1 (no guarantee)",
    RULE_COMPOSE: "a composition: each part lifted on its own",
    RULE_TABLE: (
        "tabulated profile: group privacy at every tabulated point, (k eps, k e^((k - 1) eps) "
        "delta)"
    ),
}


#: every rule name this module can return
RULES: tuple[str, ...] = (
    RULE_UNCHANGED,
    RULE_DECLARED_USER,
    RULE_GAUSSIAN,
    RULE_LAPLACE,
    RULE_EM,
    RULE_RNM,
    RULE_PURE,
    RULE_APPROX,
    RULE_APPROX_VACUOUS,
    RULE_COMPOSE,
    RULE_TABLE,
)


def mul_up(a: float, b: float) -> float:
    """``a*b`` rounded toward +inf (exact product compared with the float result)."""
    p = a * b
    if math.isfinite(p) and Fraction(p) < Fraction(a) * Fraction(b):
        p = math.nextafter(p, math.inf)
    return p


def div_down(a: float, k: int) -> float:
    """``a/k`` rounded toward 0 (a smaller noise multiplier is the safe side)."""
    p = a / k
    if p > 0 and Fraction(p) > Fraction(a) / k:
        p = math.nextafter(p, 0.0)
    return p


def exp_up(x: float) -> float:
    """An upper bound on ``e^x`` (libm's exp is within one ulp; two steps up cover it)."""
    return math.nextafter(math.nextafter(math.exp(x), math.inf), math.inf)


def _lift(event: Event, k: int, rules: list[str], release: str) -> Event:
    if isinstance(event, NoOpEvent | NonPrivateEvent):
        return event
    if isinstance(event, GaussianEvent):
        rules.append(RULE_GAUSSIAN)
        return GaussianEvent(div_down(event.noise_multiplier, k))
    if isinstance(event, LaplaceEvent):
        rules.append(RULE_LAPLACE)
        return LaplaceEvent(div_down(event.noise_multiplier, k))
    if isinstance(event, ExponentialMechanismEvent):
        rules.append(RULE_EM)
        return ExponentialMechanismEvent(mul_up(float(k), event.epsilon))
    if isinstance(event, ReportNoisyMaxEvent):
        rules.append(RULE_RNM)
        return ReportNoisyMaxEvent(mul_up(float(k), event.epsilon))
    if isinstance(event, PureDPEvent | RandomizedResponseEvent):
        rules.append(RULE_PURE)
        return PureDPEvent(mul_up(float(k), event.epsilon))
    if isinstance(event, ApproxDPEvent):
        eps = mul_up(float(k), event.epsilon)
        growth = exp_up(mul_up(float(k - 1), event.epsilon))
        delta = mul_up(mul_up(float(k), growth), event.delta)
        if not delta < 1.0:
            rules.append(RULE_APPROX_VACUOUS)
            return NonPrivateEvent()
        rules.append(RULE_APPROX)
        return ApproxDPEvent(eps, delta)
    if isinstance(event, TabulatedProfileEvent):
        rules.append(RULE_TABLE)
        return _lift_table(event, k)
    if isinstance(event, SelfComposedEvent):
        rules.append(RULE_COMPOSE)
        return SelfComposedEvent(_lift(event.event, k, rules, release), event.count)
    if isinstance(event, ComposedEvent):
        rules.append(RULE_COMPOSE)
        return ComposedEvent(tuple(_lift(e, k, rules, release) for e in event.events))
    if isinstance(
        event,
        PoissonSampledEvent
        | SampledWithoutReplacementEvent
        | ShuffledBatchesEvent
        | RandomAllocationEvent,
    ):
        raise LiftingError(
            f"release {release!r}: {event.kind} samples rows, and a row-sampled event has no "
            f"proven lift to users with up to {k} rows (amplification and group privacy do not "
            "combine here). Fix: sample users rather than rows and declare the release at user "
            "level (declared_unit = 'user'), or bound contributions to 1 row per user upstream"
        )
    raise LiftingError(
        f"release {release!r}: no lifting rule for {event.kind} to users with up to {k} rows. "
        "Fix: declare the release at user level (declared_unit = 'user') with its user-level "
        "event, or report at row level"
    )


def _lift_table(event: TabulatedProfileEvent, k: int) -> Event:
    """Group privacy point by point: each (eps, delta) of the table becomes
    (k eps, k e^((k - 1) eps) delta) for units of k rows (Dwork & Roth 2014, Thm 2.2 and its
    approximate form); the lifted points are again upper bounds of a hockey-stick curve.
    Points below epsilon 0 have no group-privacy form and are dropped (the curve below 0 is
    then read from the lifted table of the other direction)."""

    def points(deltas: tuple[float, ...]) -> list[tuple[float, float]]:
        out = []
        for eps, delta in zip(event.epsilons, deltas, strict=True):
            if eps < 0:
                continue
            lifted = mul_up(mul_up(float(k), exp_up(mul_up(float(k - 1), eps))), delta)
            out.append((mul_up(float(k), eps), min(1.0, lifted)))
        return out

    remove = points(event.deltas)
    if not remove:
        return NonPrivateEvent()
    add = None if event.deltas_add is None else [d for _, d in points(event.deltas_add)]
    return TabulatedProfileEvent(
        [e for e, _ in remove],
        [d for _, d in remove],
        add,
        relation=event.relation,
        name=f"{event.name} lifted to {k} rows".strip(),
    )


def _dedupe(rules: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(rules))


def lift_event(
    event: Event, k: int, *, release: str = "<release>"
) -> tuple[Event, tuple[str, ...]]:
    """Lift a row-level ``event`` to a unit of at most ``k`` rows; return (event, rule names)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise LiftingError(
            f"release {release!r}: max_contributions must be an integer >= 1, got {k!r}. "
            "Fix: pass a positive contribution bound"
        )
    if not isinstance(event, Event):
        raise LiftingError(
            f"release {release!r}: expected an Event, got {type(event).__name__}. "
            "Fix: pass an event object"
        )
    event = canonical(event)
    if k == 1:
        return event, (RULE_UNCHANGED,)
    rules: list[str] = []
    lifted = _lift(event, k, rules, release)
    return lifted, _dedupe(rules) or (RULE_UNCHANGED,)


def lift_release(
    event: Event,
    adjacency: Adjacency,
    *,
    declared_unit: str = "row",
    max_contributions: int | None = None,
    release: str = "<release>",
) -> tuple[Event, tuple[str, ...]]:
    """State a release's event w.r.t. ``adjacency``'s unit; return (event, rule names).

    ``declared_unit='user'`` means the event is already stated per user (e.g. per-user clipping)
    and is not lifted. ``max_contributions`` overrides the adjacency's bound when a contribution
    bound upstream is tighter.
    """
    if declared_unit not in ("row", "user"):
        raise LiftingError(
            f"release {release!r}: unknown declared_unit {declared_unit!r}. "
            "Fix: use 'row' or 'user'"
        )
    if declared_unit == "user":
        if adjacency.unit != "user":
            raise LiftingError(
                f"release {release!r} is declared at user level but the source protects rows. "
                "Fix: declare it at row level (declared_unit = 'row') or make the source's "
                "adjacency user level"
            )
        return event, (RULE_DECLARED_USER,)
    if adjacency.unit == "row":
        return event, (RULE_UNCHANGED,)
    k = adjacency.max_contributions if max_contributions is None else max_contributions
    return lift_event(event, k, release=release)
