"""Certified lower bounds from one product event on which the privacy loss is constant.

Some releases have an output event ``E`` on which the likelihood ratio of the two neighbouring
laws is a constant ``e^l``: with mass ``m`` under the law P of one dataset and ``m e^-l`` under
the law Q of its neighbour. The product of such events over independent releases has mass
``M = prod m_i`` under P and ``M e^-L`` under Q (``L = sum l_i``), so

    delta(eps) >= P(E) - e^eps Q(E) = M (1 - e^(eps - L)),
    epsilon(delta) >= L + log(1 - delta / M)            (delta < M).

Releases with such an event, for a record whose query value is 1 against none (add/remove)
or against a record whose value is 0 (replace-one: a difference of one, which every
sensitivity-1 query allows):

- a random allocation of one Laplace release per step (``k`` of ``t`` steps, scale ``b``): every
  step output at most the other records' sum has probability ``2^-t`` without the record and
  ``2^-(t-k) (e^(-1/b) / 2)^k = 2^-t e^(-k/b)`` with it (the record adds 1 to its ``k`` steps),
  wherever they fall: ``(l, m) = (k / b, 2^-t)``;
- one Laplace release: ``(1 / b, 1/2)``.

Pure-DP releases are left out: where a user's rows are lifted to a group by group privacy,
``PureDPEvent(k eps)`` stands for a bound, not for a release that runs (``k`` randomized
responses at ``eps`` are not one at ``k eps``), and its event would overstate the mass.

Under replace-one the record's value may also be 1 against -1 (a difference of two): every
output at most 1 below the other records' sum then has probability ``2^-t e^(-(t-k)/b)`` with
the value -1 in ``k`` steps and ``e^(-2k/b)`` times that with the value 1, so ``(2k / b,
2^-t e^(-(t-k)/b))`` for an allocation and ``(2 / b, 1/2)`` for one release; both families are
tried and the larger bound kept (each product is of one family: one pair of datasets).

Any sub-multiset of the ledger's releases is a sub-composition (post-processing), so the
largest bound over sub-multisets counts; for either query it is concave in the counts and its
gain per release is positive while ``l / -log m`` exceeds a threshold that grows with what is
taken, so the releases are taken in decreasing ``l / -log m``, each up to its best count
(:func:`_best_counts`). Where the PLD grid cannot hold the losses (steps of epsilon 1000) this
is the only lower bound; where it can, it sits within ``-log(1 - delta / M)`` of the pure cap.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import attrs

from dpledger.accountant.base import DeltaBound, EpsilonBound
from dpledger.accountant.exact_lower import raised_lower, worth_raising
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import Event, LaplaceEvent, RandomAllocationEvent, flatten

__all__ = [
    "constant_loss_events",
    "product_delta_lower",
    "product_epsilon_lower",
    "raise_product_lower",
]

#: relative margin charged to every sum and logarithm, beside 8 u per part summed (far above
#: their rounding)
_MARGIN = 1e-12
#: the most releases of one leaf taken (counts are exact integers in a float below 2^53)
_MAX_COUNT = 2**52
#: unit roundoff of IEEE double
_U = 2.0**-53

#: (loss l, log P-mass log m, count) of one leaf's constant-loss event
_Part = tuple[float, float, int]


def constant_loss_events(event: Event, *, apart: float = 1.0) -> list[_Part]:
    """The ledger's leaves that have a constant-loss event for records whose values are
    ``apart`` (1 or 2) apart, as (l, log m, count), in decreasing ``l / -log m`` (the order in
    which they are taken)."""
    parts: list[_Part] = []
    for leaf, count in flatten(event):
        found = _constant_loss(leaf, apart)
        if found is not None and found[0] > 0.0 and count > 0:
            # fewer releases are a sub-multiset too: counts beyond a float's integers are cut
            parts.append((found[0], found[1], min(count, _MAX_COUNT)))
    parts.sort(key=lambda p: -p[0] / -p[1])
    return parts


def _constant_loss(leaf: Event, apart: float) -> tuple[float, float] | None:
    """(l, log m) of one release's constant-loss event (module docstring), or None."""
    if isinstance(leaf, RandomAllocationEvent) and type(leaf.event) is LaplaceEvent:
        scale = float(leaf.event.noise_multiplier)
        t, k = leaf.num_steps, leaf.num_selected
        others = (t - k) / scale if apart > 1.0 else 0.0  # the other steps' outputs below -1
        return apart * k / scale, -t * math.log(2.0) - others
    if type(leaf) is LaplaceEvent:
        return apart / float(leaf.noise_multiplier), -math.log(2.0)
    return None


@attrs.frozen
class _Objective:
    """A bound as a function of the parts taken: ``value(L, A)`` (``A = -log M``, -inf where
    the event gives none) and ``peak(L, A, l, a)``, the real count of one more part (loss
    ``l``, ``a = -log m`` each) where the value, concave in that count, is largest."""

    value: Callable[[float, float], float]
    peak: Callable[[float, float, float, float], float]


def _best_counts(parts: list[_Part], objective: _Objective) -> float:
    """The largest ``objective.value(L, A)`` over counts ``0 <= c_i <= count_i``, taking the
    parts in order: each at its best count given those before it (an integer next to the real
    peak, or an end), and no further part once one is not taken in full."""
    total_l, total_a = 0.0, 0.0
    best = objective.value(0.0, 0.0)
    for loss, log_m, count in parts:
        a = -log_m
        peak = objective.peak(total_l, total_a, loss, a)
        near = [0, count]
        if math.isfinite(peak):
            floor = min(max(math.floor(peak), 0), count)
            near += [floor, min(floor + 1, count)]
        # ties (all -inf: too little loss yet for the delta objective) go to the larger count
        c = max(near, key=lambda n: (objective.value(total_l + n * loss, total_a + n * a), n))
        best = max(best, objective.value(total_l + c * loss, total_a + c * a))
        total_l, total_a = total_l + c * loss, total_a + c * a
        if c < count:
            break
    return best


def _epsilon_objective(delta: float, margin: float) -> _Objective:
    """``L + log(1 - delta e^A)``, every term charged to the low side; its peak in the count
    is where ``delta e^A = l / (l + a)``."""
    log_delta = math.log(delta)

    def value(total_l: float, total_a: float) -> float:
        if not math.isfinite(total_l):  # a sum that overflowed bounds nothing from below
            return -math.inf
        log_share = log_delta + total_a * (1 + margin) + margin
        if not log_share < 0.0:
            return -math.inf
        return total_l * (1 - margin) + math.log(-math.expm1(log_share)) * (1 + margin)

    def peak(total_l: float, total_a: float, loss: float, a: float) -> float:
        return (math.log(loss) - math.log(loss + a) - log_delta - total_a) / a

    return _Objective(value, peak)


def _delta_objective(epsilon: float, margin: float) -> _Objective:
    """``log M + log(1 - e^(epsilon - L))``, charged to the low side (-inf where ``L`` does
    not exceed ``epsilon``); its peak in the count is where ``e^(epsilon - L) = a / (l + a)``."""

    def value(total_l: float, total_a: float) -> float:
        gap = total_l * (1 - margin) - epsilon - margin * abs(epsilon)
        if not gap > 0.0:
            return -math.inf
        return -total_a * (1 + margin) - margin + math.log(-math.expm1(-gap)) * (1 + margin)

    def peak(total_l: float, total_a: float, loss: float, a: float) -> float:
        return (epsilon - total_l - math.log(a) + math.log(loss + a)) / loss

    return _Objective(value, peak)


def _margin(parts: list[_Part]) -> float:
    """The relative margin of sums over ``parts``."""
    return _MARGIN + 8 * _U * len(parts)


def _families(adjacency: Adjacency) -> tuple[float, ...]:
    """How far apart the differing records' values may be: 1, and 2 under replace-one."""
    return (1.0, 2.0) if adjacency.relation == "replace_one" else (1.0,)


def product_epsilon_lower(event: Event, adjacency: Adjacency, delta: float) -> float:
    """A certified lower bound of epsilon(delta) of ``event`` (0 when no product event gives
    one)."""
    if not 0.0 < delta < 1.0:
        return 0.0
    best = 0.0
    for apart in _families(adjacency):
        parts = constant_loss_events(event, apart=apart)
        if parts:
            best = max(best, _best_counts(parts, _epsilon_objective(delta, _margin(parts))))
    return best


def product_delta_lower(event: Event, adjacency: Adjacency, epsilon: float) -> float:
    """A certified lower bound of delta(epsilon) of ``event`` (0 when no product event gives
    one)."""
    best = -math.inf
    for apart in _families(adjacency):
        parts = constant_loss_events(event, apart=apart)
        if parts:
            best = max(best, _best_counts(parts, _delta_objective(epsilon, _margin(parts))))
    return math.exp(best) * (1 - _MARGIN) if best > -745.0 else 0.0


def raise_product_lower(
    bound: EpsilonBound | DeltaBound, event: Event, adjacency: Adjacency
) -> EpsilonBound | DeltaBound:
    """``bound`` with its lower end raised to the product-event bound where that is higher and
    the bracket is wider than TIGHT_BRACKET; a bound above the upper end raises (one of the two
    is wrong)."""
    if not worth_raising(bound, event, adjacency):
        return bound
    try:
        if isinstance(bound, EpsilonBound):
            new = product_epsilon_lower(event, adjacency, bound.delta)
        else:
            new = product_delta_lower(event, adjacency, bound.epsilon)
    except (ArithmeticError, ValueError):
        return bound  # parameters beyond floating point (a scale of 1e-309): no lower bound
    label = "product_event (constant-loss events composed)"
    return raised_lower(bound, new, "product-event", label)
