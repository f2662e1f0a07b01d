"""Private partition selection and per-user contribution bounds: the rules a
:class:`~dpledger.core.events.PartitionSelectionEvent` executes and the events that bound it.

**Selection.** Each user contributes to at most ``k = max_partitions`` partition keys; a key
whose user count is ``n`` is released with probability ``release_probability(n)``, the same
rule, with fresh randomness, for every key. A key nobody holds is never released. The budget
``(epsilon, delta)`` is the per-user guarantee of the whole selection for a user holding up to
``k`` keys. Each mechanism splits it as Google's differential-privacy library (and PipelineDP,
which calls it) does:

* ``laplace``: ``n + Lap(b) >= T`` with ``b = k / epsilon`` and ``T`` such that
  ``P[1 + Lap(b) >= T] = delta_k``, ``delta_k = 1 - (1 - delta)^(1/k)``;
* ``gaussian``: ``n + N(0, s^2) >= T``; half of ``delta`` goes to the noise, calibrated as the
  analytic Gaussian mechanism of L2 sensitivity ``sqrt(k)`` at ``(epsilon, delta / 2)``
  (Balle and Wang 2018), half to the threshold: ``P[1 + N(0, s^2) >= T] = 1 - (1 -
  delta / 2)^(1/k)`` (Gopi et al. 2020, "Differentially private set union");

every share of ``delta`` is calibrated one part in 1e6 inside the budget, so that the bounds,
rounded up, stay within it;
* ``truncated_geometric``: the optimal rule of Desfontaines, Voss, Gipson and Mandayam
  ("Differentially private partition selection", PoPETs 2022, Thm. 1) at ``(epsilon / k,
  delta_k)`` per key: ``pi(0) = 0``, ``pi(n) = min(e^e pi(n-1) + d, 1 - e^-e (1 - pi(n-1) -
  d), 1)``, computed at ``d`` smaller by ``4e-15 (1 + e^e)``, more than one step's rounding,
  so that the executed floats satisfy both constraints at ``(epsilon / k, delta_k)``.

**What is accounted** (:func:`dominating_event`). Removing a user changes the counts of at most
``k`` keys by one. A key whose count goes from ``n >= 2`` to ``n - 1`` releases a
post-processing of the noisy count: its pair is dominated by the noise's own pair (Laplace or
Gaussian of sensitivity 1). A key whose count goes from 1 to 0 is released with probability
``p = pi(1)`` on one side and never on the other: that Bernoulli pair is dominated by the
``(0, p)`` pair (everything disclosed with probability ``p``, nothing otherwise). Adding an
independent mechanism never lowers a privacy curve, so every configuration of the ``k`` keys
is dominated by ``k`` noise releases composed with ``k`` ``(0, p)`` pairs, i.e. with one
``(0, 1 - (1 - p)^k)`` pair. The truncated geometric rule is ``(epsilon / k, delta_k)``-DP per
key (checked exactly in ``proofs_checks/partition_selection``), so ``k`` copies of the
``(epsilon / k, delta_k)`` pair dominate it. The ``(0, q)`` and ``(e, d)`` pairs are stated as
one- and two-point :class:`~dpledger.core.events.TabulatedProfileEvent` tables: exact curves
that certify upper bounds only, since the selection itself need not attain them (a printed
lower bound is 0). The analysis holds under add/remove of a user; replace-one is refused.

**Contribution bounds** (:func:`contribution_sensitivity`, :func:`partitioned_noise_event`):
with at most ``L0`` keys per user, ``Linf`` rows per user and key and values clipped to ``C``,
one user moves the vector of per-key sums by at most ``sqrt(L0) Linf C`` in L2 and ``L0 Linf
C`` in L1. The per-key accounting states the same release as ``L0`` releases of sensitivity
``Linf C`` (a user is absent from every other key): identical for Gaussian noise, and tighter
for Laplace noise, whose ``L0``-fold composition at ``delta > 0`` costs less than ``L0`` times
its epsilon.
"""

from __future__ import annotations

import functools
import math
from statistics import NormalDist

from dpledger.core.errors import InvalidParameterError

__all__ = [
    "SELECTION_MECHANISMS",
    "check_selection",
    "contribution_sensitivity",
    "key_budget",
    "key_release_bound",
    "per_key_budget",
    "release_probability",
    "selection_parameters",
]

#: the partition-selection rules, by name
SELECTION_MECHANISMS: tuple[str, ...] = ("laplace", "gaussian", "truncated_geometric")
#: the delta a rule is calibrated at, relative to its share of the budget (so that the
#: rounded-up bound stays at or below the budget)
_INSIDE = 1 - 1e-6
#: the truncated geometric rule is computed at a per-key delta smaller by this many units of
#: ``1 + e^epsilon``: more than the rounding of one step of its recursion, in both constraints
_ROUNDING = 4e-15
#: relative slack added to every computed release probability that is charged
_UP = 1e-12
_NORMAL = NormalDist()


def per_key_budget(epsilon: float, delta: float, max_partitions: int) -> tuple[float, float]:
    """``(epsilon / k, 1 - (1 - delta)^(1/k))``: the per-key budget whose ``k``-fold
    composition is ``(epsilon, delta)``-DP (Kairouz, Oh and Viswanath 2015, Thm. 3.3 at
    ``i = 0``); ``(epsilon, delta)`` itself for ``k = 1``."""
    if max_partitions == 1:
        return epsilon, delta
    return epsilon / max_partitions, -math.expm1(math.log1p(-delta) / max_partitions)


def key_budget(
    mechanism: str, epsilon: float, delta: float, max_partitions: int
) -> tuple[float, float]:
    """The per-key ``(epsilon, delta)`` a rule's threshold is calibrated at: the threshold's
    share of ``delta`` (all of it, half of it for ``gaussian``) split by :func:`per_key_budget`,
    less one part in 1e6 (so that the bounds, rounded up, stay within the budget)."""
    share = delta / 2 if mechanism == "gaussian" else delta
    return per_key_budget(epsilon, share * _INSIDE, max_partitions)


def _laplace_tail(t: float, b: float) -> float:
    """``P[Lap(b) >= t]``."""
    return 0.5 * math.exp(-t / b) if t >= 0 else 1.0 - 0.5 * math.exp(t / b)


def _laplace_quantile(p: float, b: float) -> float:
    """The ``t`` with ``P[Lap(b) >= t] = p``."""
    return -b * math.log(2 * p) if p <= 0.5 else b * math.log(2 * (1 - p))


def _normal_tail(z: float) -> float:
    """``P[N(0, 1) >= z]``, accurate in the far tail (no cancellation)."""
    return 0.5 * math.erfc(z / math.sqrt(2))


def _upper_quantile(p: float) -> float:
    """The ``z`` with ``P[N(0, 1) >= z] = p``: the inverse normal law, refined by two Newton
    steps on the tail ``erfc(z / sqrt 2) / 2`` (accurate to a few ulps in the far tail)."""
    z = -_NORMAL.inv_cdf(p)
    for _ in range(2):
        z += (_normal_tail(z) - p) / _NORMAL.pdf(z)
    return z


def _gaussian_delta(epsilon: float, mu: float) -> float:
    """The exact Gaussian curve at ``epsilon`` for ``mu = sensitivity / sigma``."""
    a = _normal_tail(epsilon / mu - mu / 2)
    return a - math.exp(epsilon) * _normal_tail(epsilon / mu + mu / 2)


def _analytic_sigma(epsilon: float, delta: float) -> float:
    """The smallest sigma (sensitivity 1) whose Gaussian curve is at most ``delta`` at
    ``epsilon``, by bisection to the last bit (Balle and Wang 2018, Thm. 8), rounded up by
    one part in 1e9; the accountant certifies whatever it comes to."""
    lo, hi = 1e-9, 1e9  # mu = 1 / sigma: the curve grows with mu
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if _gaussian_delta(epsilon, mid) <= delta:
            lo = mid
        else:
            hi = mid
    return (1.0 / lo) * (1 + 1e-9)


def selection_parameters(
    mechanism: str, epsilon: float, delta: float, max_partitions: int
) -> tuple[float, float]:
    """``(noise_scale, threshold)`` of a selection: a key of ``n`` users is released when
    ``n + noise >= threshold`` (Laplace scale ``b``, or Gaussian standard deviation).
    For ``truncated_geometric`` the rule is :func:`release_probability`, and the pair is
    ``(k / epsilon, n_max)``, ``n_max`` the least count released with probability 1."""
    check_selection(mechanism, epsilon, delta, max_partitions)
    k = max_partitions
    _, d = key_budget(mechanism, epsilon, delta, k)
    if mechanism == "laplace":
        b = k / epsilon
        return b, 1.0 + _laplace_quantile(d, b)
    if mechanism == "gaussian":
        sigma = math.sqrt(k) * _analytic_sigma(epsilon, delta / 2 * _INSIDE)
        return sigma, 1.0 + sigma * _upper_quantile(d)
    table = _geometric_table(epsilon, delta, k)
    return k / epsilon, float(len(table) - 1)


@functools.lru_cache(maxsize=64)
def _geometric_table(epsilon: float, delta: float, k: int) -> tuple[float, ...]:
    """``pi(0), ..., pi(n_max)`` of the truncated geometric rule (the last one is 1)."""
    e, d = key_budget("truncated_geometric", epsilon, delta, k)
    slack = _ROUNDING * (1 + math.exp(e))
    if d < 2 * slack:
        raise InvalidParameterError(
            "delta",
            f"{delta:g} leaves {d:g} per key, below what double precision executes exactly",
            f"raise delta above {2 * slack * k:.1e}",
        )
    grow, shrink, d = math.exp(e), math.exp(-e), d - slack
    table = [0.0]
    while table[-1] < 1.0:
        prev = table[-1]
        table.append(min(grow * prev + d, 1.0 - shrink * (1.0 - prev - d), 1.0))
        if len(table) > 10_000_000:
            raise InvalidParameterError(
                "epsilon", f"{epsilon:g} needs over 1e7 counts to release surely", "raise it"
            )
    return tuple(table)


def release_probability(
    mechanism: str, epsilon: float, delta: float, max_partitions: int, count: int
) -> float:
    """The probability that a key held by ``count`` users is released (0 for no user)."""
    if count <= 0:
        return 0.0
    if mechanism == "truncated_geometric":
        check_selection(mechanism, epsilon, delta, max_partitions)
        table = _geometric_table(epsilon, delta, max_partitions)
        return table[min(count, len(table) - 1)]
    scale, threshold = selection_parameters(mechanism, epsilon, delta, max_partitions)
    if mechanism == "laplace":
        return _laplace_tail(threshold - count, scale)
    return _normal_tail((threshold - count) / scale)


def key_release_bound(mechanism: str, epsilon: float, delta: float, max_partitions: int) -> float:
    """An upper bound of ``pi(1)``, the release probability of a key held by one user, as the
    executed rule computes it (rounded up)."""
    p = release_probability(mechanism, epsilon, delta, max_partitions, 1)
    return min(1.0, math.nextafter(p * (1 + _UP), math.inf))


def check_selection(mechanism: str, epsilon: float, delta: float, max_partitions: int) -> None:
    """Refuse a selection's parameters with one line naming the field."""
    if mechanism not in SELECTION_MECHANISMS:
        raise InvalidParameterError(
            "mechanism", f"unknown selection {mechanism!r}", f"use one of {SELECTION_MECHANISMS}"
        )
    if not (isinstance(epsilon, float) and 0 < epsilon < math.inf):
        raise InvalidParameterError("epsilon", f"must be > 0, got {epsilon!r}", "pass epsilon > 0")
    if not (isinstance(delta, float) and 0 < delta < 1):
        raise InvalidParameterError(
            "delta",
            f"must lie in (0, 1), got {delta!r}",
            "pass delta > 0: keys held by one user are released with probability about delta",
        )
    if isinstance(max_partitions, bool) or not isinstance(max_partitions, int):
        raise InvalidParameterError(
            "max_partitions", f"must be an integer, got {max_partitions!r}", "pass k >= 1"
        )
    if max_partitions < 1:
        raise InvalidParameterError(
            "max_partitions", f"must be >= 1, got {max_partitions}", "pass k >= 1"
        )


def contribution_sensitivity(max_partitions: int, max_rows: int, clip: float, norm: str) -> float:
    """How far one user moves the vector of per-key sums: ``sqrt(L0) Linf C`` for ``norm =
    "l2"`` (Gaussian noise), ``L0 Linf C`` for ``"l1"`` (Laplace noise); rounded up."""
    for name, value in (("max_partitions", max_partitions), ("max_rows", max_rows)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidParameterError(name, f"must be an integer >= 1, got {value!r}", "pass 1")
    if isinstance(clip, bool) or not isinstance(clip, int | float) or not 0 < clip < math.inf:
        raise InvalidParameterError("clip", f"must be > 0 and finite, got {clip!r}", "pass C > 0")
    per_key = float(max_rows) * float(clip)
    if norm == "l2":
        total = math.sqrt(max_partitions) * per_key
    elif norm == "l1":
        total = float(max_partitions) * per_key
    else:
        raise InvalidParameterError("norm", f"unknown norm {norm!r}", "use 'l2' or 'l1'")
    return math.nextafter(total * (1 + 4 * 2.0**-53), math.inf)
