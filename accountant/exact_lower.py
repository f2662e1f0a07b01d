"""Certified lower bounds by exact conditioning: pure-DP releases composed with one other release.

A composition's curve is at least the curve of any sub-composition (dropping releases is
post-processing), and the composition of two independent pairs has the curve

    delta_12(eps) = E_{L1 ~ P1}[delta_2(eps - L1)]

(condition the hockey-stick ``E_P[(1 - e^{eps - L})_+]`` on the first loss). When the first
pair is discrete this is a finite sum, with no loss grid and no Hoeffding shift. Here the first
pair is ``k`` releases of binary randomized response at ``v`` (the exact worst case of every
``v``-DP release: :class:`PureDPEvent` and binary :class:`RandomizedResponseEvent` at
``eps >= v`` count at ``v``, an :class:`ExponentialMechanismEvent` at ``eps >= 2 v``, with
their losses ``(k - 2j) v`` of binomial P-masses), and the
second one release of any other leaf, read from the curve it attains
(:func:`~dpledger.accountant.leaves.leaf_profiles`, its lower curves, deflated as the PLD
accountant deflates a single release's). Pure releases are symmetric, so both directions of
the other leaf give an attained composition; the larger is kept.

This is the lower bound of mixed ledgers whose PLD lower bound drops the tail of a heavy leaf
(a sampled Gaussian beside small pure-DP steps: the loss grid that resolves the pure steps
cannot reach the sampled leaf's large losses). :func:`raise_lower` applies it to a bracket
wider than ``TIGHT_BRACKET``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import attrs
import numpy as np

from dpledger.accountant.base import DeltaBound, EpsilonBound
from dpledger.accountant.exp_mech_composition import log_binomials
from dpledger.accountant.leaves import leaf_profiles
from dpledger.accountant.pld_discrete import LOWER_DEFLATION
from dpledger.accountant.profiles_base import Profile
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import BackendInconsistencyError, UnsupportedEventError
from dpledger.core.events import (
    ApproxDPEvent,
    Event,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PureDPEvent,
    RandomizedResponseEvent,
    TabulatedProfileEvent,
    TabulatedRDPEvent,
    flatten,
)

__all__ = [
    "MAX_OTHER_LEAVES",
    "MAX_PURE_COUNT",
    "MAX_THRESHOLDS",
    "TIGHT_BRACKET",
    "attained_ledger",
    "pure_plus_one_delta_lower",
    "pure_plus_one_epsilon_lower",
    "raise_lower",
    "raised_lower",
    "worth_raising",
]

U = 2.0**-53
#: at most this many pure releases enter the binomial (a sub-composition beyond it)
MAX_PURE_COUNT = 1000
#: at most this many distinct other leaves are tried (the largest counts first), and this many
#: thresholds of the pure epsilons
MAX_OTHER_LEAVES = 2
MAX_THRESHOLDS = 2
#: a bracket within this ratio is left alone (the search costs a few ms per leaf)
TIGHT_BRACKET = 1.0001
#: bisection steps of epsilon
STEPS = 80

_Curve = Callable[[np.ndarray], np.ndarray]


def _pure_eps(leaf: Event) -> float | None:
    """The epsilon of a binary randomized response the leaf attains: its exact worst case for
    pure DP and binary randomized response; at epsilon / 2 for the exponential mechanism (two
    candidates whose scores move in opposite directions, :func:`attained_base`)."""
    if isinstance(leaf, ExponentialMechanismEvent):
        return float(leaf.epsilon) / 2.0
    if isinstance(leaf, PureDPEvent):
        return float(leaf.epsilon)
    if isinstance(leaf, RandomizedResponseEvent) and leaf.num_buckets == 2:
        return float(leaf.epsilon)
    return None


#: classes whose leaves :func:`_pure_eps` never reads (by their exact type)
_NOT_PURE: frozenset[type[Event]] = frozenset(
    {ApproxDPEvent, GaussianEvent, LaplaceEvent, PoissonSampledEvent}
)


def attained_ledger(event: Event, adjacency: Adjacency) -> bool:
    """Whether every leaf of ``event`` is a release that runs as declared, the premise of every
    lower bound: False where a table claims no exact pair or a Renyi table has no curve (bounds
    only, as the events that stand for a partition selection are; the other leaves beside such
    a table need not run as declared either)."""
    for leaf, _ in flatten(event):
        if isinstance(leaf, TabulatedRDPEvent):
            return False
        if isinstance(leaf, TabulatedProfileEvent):
            try:
                prof = leaf_profiles(leaf, adjacency)
            except (UnsupportedEventError, ArithmeticError, ValueError):
                return False
            if not (prof.lower_remove.exact and prof.lower_add.exact):
                return False
    return True


def _split(event: Event) -> tuple[list[tuple[float, int]], list[Event]]:
    """((eps, count) of the pure leaves, the other leaves by decreasing count)."""
    pure: list[tuple[float, int]] = []
    others: list[tuple[int, Event]] = []
    for leaf, count in flatten(event):
        eps = None if type(leaf) in _NOT_PURE else _pure_eps(leaf)
        if eps is None:
            others.append((count, leaf))
        elif eps > 0.0:
            pure.append((eps, count))
    others.sort(key=lambda p: -p[0])
    return pure, [leaf for _, leaf in others[:MAX_OTHER_LEAVES]]


def _binomial(v: float, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(losses (k - 2j) v, P-masses rounded down) of k releases of randomized response at v."""
    j, log_c, err_c = log_binomials(k)
    log_p = -math.log1p(math.exp(-v))  # log e^v / (1 + e^v)
    log_q = -v + log_p
    log_m = log_c + (k - j) * log_p + j * log_q
    err = err_c + 64 * U * np.abs(log_m)
    err += 8 * U * ((k - j) * (abs(log_p) + v + 2.0) + j * (abs(log_q) + v + 2.0))
    masses = np.exp(log_m - err) * (1 - 4 * U)
    return (k - 2 * j) * v, masses


def _lower_curve(profile: Profile) -> _Curve:
    """Certified lower values of the curve a leaf attains: the PLD single-release deflation,
    and 0 beyond the range where the curve is read accurately."""

    def curve(eps: np.ndarray) -> np.ndarray:
        vals = profile(eps) / (1 + LOWER_DEFLATION) * (1 - 1e-15)
        return np.where(eps <= profile.accurate_hi, vals, 0.0)

    return curve


def _other_curves(leaf: Event, adjacency: Adjacency) -> list[_Curve]:
    try:
        prof = leaf_profiles(leaf, adjacency)
    except (UnsupportedEventError, ArithmeticError, ValueError):
        return []  # no attained curve (or none at these extreme parameters)
    if not (prof.lower_remove.exact and prof.lower_add.exact):
        return []  # a lower curve that is not one attained pair's cannot be conditioned on
    return [_lower_curve(prof.lower_remove), _lower_curve(prof.lower_add)]


def _pure_parts(pure: list[tuple[float, int]]) -> list[tuple[float, int]]:
    """(v, number of pure releases at v or above, capped) for the smallest and the largest v
    (the other leaf alone when there are none)."""
    values = sorted({e for e, _ in pure})
    if len(values) > MAX_THRESHOLDS:
        values = [values[0], values[-1]]
    parts = [
        (v * (1 - 4 * U), min(MAX_PURE_COUNT, sum(n for e, n in pure if e >= v))) for v in values
    ]
    return parts or [(0.0, 0)]


def _composed(losses: np.ndarray, masses: np.ndarray, curve: _Curve) -> Callable[[float], float]:
    """The certified lower curve of the binomial part composed with one curve."""
    slack = 1 - 4 * U * (len(masses) + 4)

    def delta(eps: float) -> float:
        shifted = eps - losses  # one rounding each: the curve is monotone, so shift up
        shifted = shifted + 4 * U * (np.abs(eps) + np.abs(losses))
        return float(np.sum(masses * curve(shifted))) * slack

    return delta


def _curves(event: Event, adjacency: Adjacency) -> list[Callable[[float], float]]:
    pure, others = _split(event)
    out: list[Callable[[float], float]] = []
    if not pure:
        return out  # one other leaf alone is its own lower bound, which the backends give
    for leaf in others:
        curves = _other_curves(leaf, adjacency)
        for v, k in _pure_parts(pure):
            losses, masses = _binomial(v, k) if k else (np.zeros(1), np.ones(1))
            out.extend(_composed(losses, masses, c) for c in curves)
    return out


def pure_plus_one_delta_lower(event: Event, adjacency: Adjacency, epsilon: float) -> float:
    """A certified lower bound of delta(epsilon) of ``event`` (0 if it has no other leaf)."""
    return max((max(0.0, f(epsilon)) for f in _curves(event, adjacency)), default=0.0)


def pure_plus_one_epsilon_lower(
    event: Event, adjacency: Adjacency, delta: float, upper: float
) -> float:
    """A certified lower bound of epsilon(delta): the largest point (found by bisection below
    ``upper``) where one of the composed lower curves still exceeds ``delta``."""
    best = 0.0
    for f in _curves(event, adjacency):
        if not f(best) > delta:
            continue
        lo, hi = best, upper if math.isfinite(upper) else 1e6
        if f(hi) > delta:
            best = hi
            continue
        for _ in range(STEPS):
            mid = 0.5 * (lo + hi)
            if mid <= lo or mid >= hi:
                break
            lo, hi = (mid, hi) if f(mid) > delta else (lo, mid)
        best = lo
    return best


def _ends(bound: EpsilonBound | DeltaBound) -> tuple[float, float]:
    if isinstance(bound, EpsilonBound):
        return bound.epsilon, bound.epsilon_lower
    return bound.delta, bound.delta_lower


def raise_lower(
    bound: EpsilonBound | DeltaBound, event: Event, adjacency: Adjacency
) -> EpsilonBound | DeltaBound:
    """``bound`` with its lower end raised to the pure-plus-one lower bound where that is
    higher and the bracket is wider than TIGHT_BRACKET (unchanged otherwise)."""
    if not worth_raising(bound, event, adjacency):
        return bound
    hi, _ = _ends(bound)
    try:
        with np.errstate(all="ignore"):
            if isinstance(bound, EpsilonBound):
                # searched beyond the upper bound, so that an inconsistent pair is seen
                new = pure_plus_one_epsilon_lower(event, adjacency, bound.delta, 2.0 * hi + 1.0)
            else:
                new = pure_plus_one_delta_lower(event, adjacency, bound.epsilon)
    except (ArithmeticError, ValueError):
        return bound  # a curve that cannot be evaluated (extreme parameters) gives no lower bound
    label = "pure_plus_one (exact conditioning on pure releases)"
    return raised_lower(bound, new, "pure-plus-one", label)


def worth_raising(bound: EpsilonBound | DeltaBound, event: Event, adjacency: Adjacency) -> bool:
    """Whether a lower-bound raiser should look at ``bound``: its bracket is wider than
    TIGHT_BRACKET, its lower end finite, and every leaf runs as declared."""
    hi, lo = _ends(bound)
    if not (hi > TIGHT_BRACKET * lo and hi > 0.0) or math.isinf(lo):
        return False
    return attained_ledger(event, adjacency)


def raised_lower(
    bound: EpsilonBound | DeltaBound, new: float, name: str, label: str
) -> EpsilonBound | DeltaBound:
    """``bound`` with its lower end raised to ``new`` where that is higher (``label``, which
    names the method, goes into its details); a ``new`` above the upper end raises
    :class:`BackendInconsistencyError` naming the ``name`` bound (one of the two is wrong)."""
    hi, lo = _ends(bound)
    if not new > lo:  # also NaN
        return bound
    if new > hi * (1 + 1e-9) + (1e-9 if isinstance(bound, EpsilonBound) else 1e-300):
        raise BackendInconsistencyError(
            f"the {name} lower bound {new:.6g} exceeds {bound.method}'s upper "
            f"bound {hi:.6g}; one of them is wrong, so no bound is reported"
        )
    details = {**bound.details, "lower": label}
    if isinstance(bound, EpsilonBound):
        return attrs.evolve(bound, epsilon_lower=min(new, hi), details=details)
    return attrs.evolve(bound, delta_lower=min(new, hi), details=details)
