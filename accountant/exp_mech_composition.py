"""Exact curves and attained lower bounds of exponential-mechanism (bounded-range) releases.

An ``eps0``-bounded-range pair has its privacy loss in an interval ``[t - eps0, t]``. The
worst such pairs are the two-point *generalised randomized response* pairs ``GRR(t)``,
``0 <= t <= eps0``, with losses ``t`` and ``t - eps0`` only (Dong, Durfee & Rogers 2020,
Lemma 4.1); each is the output law of a two-candidate exponential mechanism whose two scores
move by the sensitivity in opposite directions, so its curve is *attained*.

* One release: the supremum over ``t`` is the closed form of
  :func:`~dpledger.accountant.profiles_noise.bounded_range_profile`; it is attained at every
  ``eps`` and it is the exact worst case, so :func:`br_delta_bracket` gives it rounded both
  ways (upper and lower bound).
* ``k`` releases at ``eps0``: the ``k``-fold composition of ``GRR(t)`` for one ``t`` is a
  concrete composed pair, so its ``epsilon(delta)`` (or ``delta(epsilon)``) is a certified
  lower bound for every ``t``; the maximum over ``t`` is the optimal *non-adaptive*
  composition of ``k`` ``eps0``-bounded-range mechanisms (Dong, Durfee & Rogers 2020, Thm 3.2,
  homogeneous case). Adaptively chosen mechanisms can spend more (their Section 6), so the
  value is a lower bound only; the upper bounds stay those of the composed dominating curve
  (PLD) and of the Rényi curve.
  Fewer releases, or releases at a smaller ``eps0``, have smaller curves, so heterogeneous
  ledgers use sub-compositions (every release with ``eps_i >= v`` counted at ``v``).

Every mass is rounded towards the smaller lower bound (``P`` masses down, ``Q`` masses up).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import numpy as np
from scipy import special

from dpledger.accountant.br_heterogeneous import (
    heterogeneous_delta_lower,
    heterogeneous_epsilon_lower,
)
from dpledger.accountant.golden_section import golden_section

__all__ = [
    "MAX_BR_COUNT",
    "br_composed_delta_lower",
    "br_composed_epsilon_lower",
    "br_delta_bracket",
    "br_ledger_delta_lower",
    "br_ledger_epsilon_lower",
    "log_binomials",
]

U = 2.0**-53
#: subnormal floor of one ``exp`` that underflowed (charged to every Q mass)
TINY = 5e-324
#: below this epsilon a single release's curve is bounded by eps0 (its logarithms would lose
#: their relative accuracy) and its lower bound is 0
TINY_EPS0 = 1e-200
#: the composed lower bound uses at most this many releases (a sub-composition: O(count))
MAX_BR_COUNT = 2_000
#: coarse grid of ``t / eps0`` before the golden-section refinement, and its steps
T_GRID = 96
GOLDEN_STEPS = 40
#: the number of thresholds m (of the composed loss) whose own maximum over t is refined
REFINED = 6
#: at most this many thresholds of distinct epsilons (heterogeneous ledgers)
MAX_THRESHOLDS = 4


def br_delta_bracket(eps: float, eps0: float) -> tuple[float, float]:
    """(lower, upper) of the exact curve of one ``eps0``-bounded-range release at ``eps``:
    ``(e^{eps0/2} - e^{eps/2})^2 / (e^{eps0} - 1)`` on ``(-eps0, eps0)``, evaluated in logs as
    ``exp((eps - eps0) - log(1 - e^{-eps0}) + 2 log(e^{(eps0 - eps)/2} - 1))``."""
    if eps0 <= 0.0 or eps >= eps0:
        return 0.0, 0.0
    if eps <= -eps0:
        exact = -math.expm1(eps)
        return exact * (1 - 4 * U), min(1.0, exact * (1 + 4 * U))
    if eps0 < TINY_EPS0:  # the curve is below 1 - e^{-eps0} <= eps0 on (-eps0, eps0)
        return 0.0, min(1.0, eps0 * (1 + 4 * U))
    log_mid = (eps - eps0) - math.log(-math.expm1(-eps0)) + 2.0 * _log_expm1((eps0 - eps) / 2)
    err = 8 * U * (abs(eps) + abs(eps0) + abs(log_mid) + 4.0)
    if log_mid + err >= 0.0:
        return math.exp(min(log_mid - err, 0.0)) * (1 - 2 * U), 1.0
    # an upper value that underflowed is charged as the smallest subnormal
    return math.exp(log_mid - err) * (1 - 2 * U), max(math.exp(log_mid + err) * (1 + 2 * U), TINY)


def _log_expm1(x: float) -> float:
    """log(e^x - 1) for x > 0, without overflow."""
    return x + math.log(-math.expm1(-x)) if x > 1.0 else math.log(math.expm1(x))


@functools.lru_cache(maxsize=8)
def log_binomials(k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(j, log C(k, j), a bound on its absolute error) for j = 0..k."""
    j = np.arange(k + 1, dtype=np.float64)
    lg_k = float(special.gammaln(k + 1.0))
    lg_j, lg_r = special.gammaln(j + 1.0), special.gammaln(k - j + 1.0)
    log_c = lg_k - lg_j - lg_r
    err_c = 64 * U * (abs(lg_k) + np.abs(lg_j) + np.abs(lg_r) + 4.0)
    for a in (j, log_c, err_c):
        a.flags.writeable = False
    return j, log_c, err_c


def _cumulative(t: float, eps0: float, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(P[J < m] rounded down, log Q[J < m] rounded up) for m = 1..k+1, where J is the number
    of low outcomes (loss ``t - eps0``) among ``k`` releases of ``GRR(t)``.

    Q puts ``q_l = (1 - e^{-t}) / (1 - e^{-eps0})`` on the low outcome, P puts
    ``p_l = q_l e^{t - eps0}``; each log mass has an absolute error below 64 u times the sum
    of the magnitudes it is made of, which is charged."""
    log_norm = math.log(-math.expm1(-eps0))
    a_l, a_h = math.log(-math.expm1(-t)), math.log(-math.expm1(-(eps0 - t)))
    log_ql, log_qh = a_l - log_norm, a_h - t - log_norm
    log_ph, log_pl = log_qh + t, log_ql + t - eps0
    # absolute errors of the four log masses (each a few roundings of the terms it sums)
    e_ql = 8 * U * (abs(a_l) + abs(log_norm) + 2.0)
    e_qh = 8 * U * (abs(a_h) + t + abs(log_norm) + 2.0)
    e_ph, e_pl = e_qh + 8 * U * (t + abs(log_ph)), e_ql + 8 * U * (t + eps0 + abs(log_pl))
    j, log_c, err_c = log_binomials(k)
    log_p = log_c + (k - j) * log_ph + j * log_pl
    log_q = log_c + (k - j) * log_qh + j * log_ql
    err_p = err_c + (k - j) * e_ph + j * e_pl + 8 * U * ((k - j) * abs(log_ph) + j * abs(log_pl))
    err_q = err_c + (k - j) * e_qh + j * e_ql + 8 * U * ((k - j) * abs(log_qh) + j * abs(log_ql))
    err_p += 8 * U * (np.abs(log_p) + 1.0)
    err_q += 8 * U * (np.abs(log_q) + 1.0)
    slack = 4 * U * (k + 4)
    p_cum = np.cumsum(np.exp(log_p - err_p)) * (1 - slack)
    q_cum = (np.cumsum(np.exp(log_q + err_q)) + TINY * (j + 1.0)) * (1 + slack)
    return p_cum, np.log(q_cum) * (1 - 4 * U) + 4 * U  # log rounded up (q_cum <= 1 + slack)


def _grr_epsilons(t: float, eps0: float, k: int, delta: float) -> np.ndarray:
    """Certified lower bounds of epsilon(delta) of ``k`` releases of ``GRR(t)``, one per m:
    ``log((P[J < m] - delta) / Q[J < m])`` rounded down (-inf where ``P[J < m] <= delta``);
    the exact epsilon(delta) is their maximum."""
    p_cum, log_q = _cumulative(t, eps0, k)
    out = np.full(k + 1, -math.inf)
    ok = p_cum > delta
    a = np.log((p_cum[ok] - delta) * (1 - 2 * U))
    out[ok] = a - log_q[ok] - 8 * U * (np.abs(a) + np.abs(log_q[ok]) + 1.0)
    return out


def _grr_deltas(t: float, eps0: float, k: int, eps: float) -> np.ndarray:
    """Certified lower bounds of delta(eps) of ``k`` releases of ``GRR(t)``, one per m:
    ``P[J < m] - e^eps Q[J < m]`` rounded down; the exact delta(eps) is their maximum."""
    p_cum, log_q = _cumulative(t, eps0, k)
    x = eps + log_q
    with np.errstate(over="ignore"):
        e_q = np.exp(x + 8 * U * (np.abs(x) + 1.0)) * (1 + 2 * U)
    d = p_cum - e_q
    return np.where(d > 0, d * (1 - 2 * U), d)


def _grr_epsilon(t: float, eps0: float, k: int, delta: float) -> float:
    """A certified lower bound of epsilon(delta) of ``k`` releases of ``GRR(t)``."""
    return float(_grr_epsilons(t, eps0, k, delta).max())


def _grr_delta(t: float, eps0: float, k: int, eps: float) -> float:
    """A certified lower bound of delta(eps) of ``k`` releases of ``GRR(t)``."""
    return max(0.0, float(_grr_deltas(t, eps0, k, eps).max()))


def _golden(f: Callable[[float], float], lo: float, hi: float) -> float:
    """The best value of ``f`` a golden-section search on ``[lo, hi]`` finds."""
    (fa, _), (fb, _) = golden_section(f, lo, hi, GOLDEN_STEPS)
    return max(fa, fb)


def _entry(f: Callable[[float], np.ndarray], m: int, t: float) -> float:
    return float(f(t)[m])


def _maximise(f: Callable[[float], np.ndarray], eps0: float) -> float:
    """The largest value of ``f(t)[m]`` found over ``t`` in ``(0, eps0)`` and m: a grid of t,
    then, for the REFINED best m, a golden-section search of ``f(t)[m]`` around its best grid
    point (each ``f(t)[m]`` is smooth in t; their maximum has kinks). Every value is itself a
    certified bound, so the search needs no accuracy guarantee."""
    ts = eps0 * (np.arange(T_GRID) + 0.5) / T_GRID
    table = np.array([f(float(t)) for t in ts])  # (t, m)
    per_m = table.max(axis=0)
    best = float(per_m.max())
    for m in np.argsort(per_m)[::-1][:REFINED]:
        if not np.isfinite(per_m[m]):
            break
        i = int(np.argmax(table[:, m]))
        lo, hi = eps0 * max(i - 1, 0) / T_GRID, eps0 * min(i + 2, T_GRID) / T_GRID
        best = max(best, _golden(functools.partial(_entry, f, int(m)), lo, hi))
    return best


def br_composed_epsilon_lower(delta: float, eps0: float, count: int) -> float:
    """Certified lower bound of epsilon(delta) of ``count`` ``eps0``-bounded-range releases:
    the optimal non-adaptive composition (over ``GRR(t)``), on at most MAX_BR_COUNT of them."""
    k = min(count, MAX_BR_COUNT)
    if k <= 0 or eps0 < TINY_EPS0 or not 0.0 < delta < 1.0:
        return 0.0
    if k == 1:
        return _single_epsilon_lower(delta, eps0)
    return max(0.0, _maximise(lambda t: _grr_epsilons(t, eps0, k, delta), eps0))


def br_composed_delta_lower(eps: float, eps0: float, count: int) -> float:
    """Certified lower bound of delta(eps) of ``count`` ``eps0``-bounded-range releases."""
    k = min(count, MAX_BR_COUNT)
    if k <= 0 or eps0 < TINY_EPS0:
        return 0.0
    if k == 1:
        return br_delta_bracket(eps, eps0)[0]
    return max(0.0, _maximise(lambda t: _grr_deltas(t, eps0, k, eps), eps0))


def _single_epsilon_lower(delta: float, eps0: float) -> float:
    """The exact curve of one release inverted in closed form, rounded down:
    ``eps = eps0 + 2 log(1 - sqrt(delta (1 - e^{-eps0})))`` (0 if negative)."""
    if eps0 < TINY_EPS0:
        return 0.0
    # sqrt(delta (1 - e^{-eps0})) in logs (the product may underflow), rounded up
    log_root = 0.5 * (math.log(delta) + math.log(-math.expm1(-eps0)))
    root = math.exp(log_root + 8 * U * (abs(log_root) + 1.0)) * (1 + 2 * U)
    if root >= 1.0:
        return 0.0
    log_term = math.log1p(-root)
    eps = eps0 + 2.0 * log_term
    eps -= 8 * U * (eps0 + 2.0 * abs(log_term) + abs(eps))
    return max(0.0, eps)


def _thresholds(releases: Sequence[tuple[float, int]]) -> list[tuple[float, int]]:
    """(v, number of releases at v or above) for at most MAX_THRESHOLDS values v."""
    values = sorted({e for e, _ in releases if e > 0.0})
    if len(values) > MAX_THRESHOLDS:
        step = (len(values) - 1) / (MAX_THRESHOLDS - 1)
        values = sorted({values[round(i * step)] for i in range(MAX_THRESHOLDS)})
    return [(v * (1 - 4 * U), sum(n for e, n in releases if e >= v)) for v in values]


def br_ledger_epsilon_lower(releases: Sequence[tuple[float, int]], delta: float) -> float:
    """Certified lower bound of epsilon(delta) of the ``(eps0, count)`` bounded-range releases:
    the best of the threshold sub-compositions and, at several epsilons, of the composition of
    ``GRR(c eps_i)`` at each release's own epsilon (:mod:`br_heterogeneous`)."""
    best = max(
        (br_composed_epsilon_lower(delta, v, n) for v, n in _thresholds(releases)), default=0.0
    )
    return max(best, heterogeneous_epsilon_lower(releases, delta))


def br_ledger_delta_lower(releases: Sequence[tuple[float, int]], eps: float) -> float:
    """Certified lower bound of delta(eps) of the ``(eps0, count)`` bounded-range releases."""
    best = max((br_composed_delta_lower(eps, v, n) for v, n in _thresholds(releases)), default=0.0)
    return max(best, heterogeneous_delta_lower(releases, eps))
