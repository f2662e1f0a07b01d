"""The power of an audit: a computed bound on the probability that it misses a violation.

:func:`shift_false_negative_bound` bounds the probability that
:func:`~dpledger.audit.auditor.audit_mechanism`, run on scalar outputs ``N(0, 1)`` under
``D`` and ``N(mu, 1)`` under ``D'`` (any location and scale reduce to this; the sign of ``mu``
does not matter) and scored by the identity, does **not** report ``epsilon_lower > claim``.

The argument follows the auditor step by step. Candidate thresholds are all pooled search
outputs (so ``2 n_search <= max_thresholds`` is required); the outputs are continuous, so the
``2 n_search`` candidates are distinct and the search ranks every (direction, tail, threshold)
by its Clopper–Pearson bound at level ``alpha / (8 n_search)``. The real line is cut into
cells ``[u_j, u_{j+1}]``; for a threshold inside a cell, both counts are sandwiched by the
counts at the cell's ends (counts of ``{s >= t}`` fall as ``t`` grows), so every quantity
below is a probability about two independent binomial counts, computed exactly (binomial
masses below 1e-30 are dropped and charged to the bound).

* *test*: a threshold of the revealing direction (numerator ``D'``) in cell ``j`` yields a test
  bound above the claim except with probability at most ``F_j`` (numerator count
  ``Bin(n_test, Q(u_{j+1} - mu))``, denominator ``Bin(n_test, Q(u_j))``); in the other
  direction (numerator ``D``) the test is taken to fail.
* *search*: for a level ``L``, let ``A`` be the event that some candidate of a fixed interval
  ``[t1, t2]`` ranks at least ``L`` (implied by a candidate inside and by the interval's end
  counts). On ``A`` the chosen threshold ranks at least ``L``, so

      P(miss) <= P(not A) + sum over cells and directions of P(the cell ranks >= L) * F_j,

  where a cell ranks at least ``L`` only if its sandwiching counts do. The mirrored
  (lower-tail) events have the same laws and double the sum.

The bound is minimised over ``L`` and over a few intervals; it is loose (a union over cells),
never optimistic.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import special
from scipy import stats as sps

from dpledger.audit.stats import cp_lower, cp_upper
from dpledger.core.errors import InvalidParameterError

FloatArray = NDArray[np.float64]


#: binomial masses below this are dropped; each drop is charged to the bound
_CUT = 1e-30


class _Counts:
    """Clopper–Pearson bounds of every count ``0..n`` at one level."""

    def __init__(self, n: int, alpha: float) -> None:
        k = np.arange(n + 1, dtype=float)
        self.n = n
        self.lower = cp_lower(k, float(n), alpha / 2.0)  # as stats.epsilon_lower_bounds
        self.upper = cp_upper(k, float(n), alpha / 2.0)
        self._pmf: dict[float, tuple[NDArray[np.int64], FloatArray]] = {}

    def pmf(self, p: float) -> tuple[NDArray[np.int64], FloatArray]:
        """The counts whose ``Bin(n, p)`` mass is at least ``_CUT``, and their masses."""
        if p not in self._pmf:
            ks = np.arange(self.n + 1)
            with np.errstate(all="ignore"):
                mass = np.exp(sps.binom.logpmf(ks, self.n, min(max(p, 0.0), 1.0)))
            live = mass >= _CUT
            self._pmf[p] = (ks[live], mass[live])
        return self._pmf[p]

    def prob_at_least(
        self, p_num: float, p_den: float, delta: float, level: Any, strict: bool, upper: bool = True
    ) -> FloatArray:
        """P(bound >= level) (``>`` if strict), for each of the ``level`` values, for independent
        counts ``Bin(n, p_num)`` (numerator) and ``Bin(n, p_den)`` (denominator): an upper bound
        (the dropped masses added) or, with ``upper=False``, a lower bound (left out).

        The bound is ``ln((lower(k_num) - delta) / upper(k_den))``, floored at 0; levels > 0.
        """
        levels = np.atleast_1d(np.asarray(level, dtype=np.float64))
        ks, mass = self.pmf(float(p_den))
        # lower(k_num) must exceed this, for each (level, k_den)
        need = delta + np.exp(levels)[:, None] * self.upper[ks][None, :]
        k_min = np.searchsorted(self.lower, need, side="right" if strict else "left")
        p = min(max(p_num, 0.0), 1.0)
        with np.errstate(all="ignore"):
            tail = np.where(k_min <= 0, 1.0, special.bdtrc(k_min - 1, self.n, p))
        total = np.asarray(tail @ mass, dtype=np.float64)
        if upper:
            return np.minimum(1.0, total + (self.n + 1) * _CUT)
        return np.maximum(0.0, np.minimum(1.0, total))


def _upper_tail(x: float) -> float:
    """P(N(0, 1) > x)."""
    return float(special.ndtr(-x))


def _checked_shift(mu: float, n_search: int, max_thresholds: int, claim: float) -> float:
    """``|mu|``, once the shift, the search size and the claim are checked."""
    mu = abs(float(mu))
    if not (mu > 0 and math.isfinite(mu)):
        raise InvalidParameterError("mu", f"must be finite and non-zero, got {mu!r}", "pass 2.0")
    if 2 * n_search > max_thresholds:
        raise InvalidParameterError(
            "n_search",
            f"2 * {n_search} pooled outputs exceed {max_thresholds} thresholds",
            "keep every pooled output a candidate (n_search <= max_thresholds / 2)",
        )
    if claim <= 0:
        raise InvalidParameterError("claim", "must be > 0", "pass the claimed epsilon")
    return mu


def _candidate_intervals(
    cells: list[tuple[float, float]], mu: float, n_search: int, rank: _Counts, delta: float
) -> list[tuple[float, float, float, float]]:
    """(score, t1, t2, P(empty)) of the eight intervals of up to 64 cells whose expected end
    counts rank highest among those that hold a pooled output except with probability below
    1e-12."""
    q = _upper_tail
    intervals = []
    for width in (1, 2, 4, 8, 16, 32, 64):
        for j in range(len(cells) - width + 1):
            t1, t2 = cells[j][0], cells[j + width - 1][1]
            empty = (1.0 - (q(t1) - q(t2))) ** n_search * (
                1.0 - (q(t1 - mu) - q(t2 - mu))
            ) ** n_search
            if empty > 1e-12:
                continue
            k_num = int(n_search * q(t2 - mu))
            k_den = min(n_search, math.ceil(n_search * q(t1)))
            score = math.log(max(rank.lower[k_num] - delta, 1e-300) / rank.upper[k_den])
            intervals.append((score, t1, t2, empty))
    return sorted(intervals, reverse=True)[:8]


def shift_false_negative_bound(
    mu: float,
    n_search: int,
    n_test: int,
    delta: float,
    alpha: float,
    claim: float,
    *,
    step: float = 0.05,
    max_thresholds: int = 3000,
) -> float:
    """Upper bound on P(no violation reported) for the Gaussian shift ``mu`` (module doc).

    ``alpha`` is the level the auditor uses per delta (its ``alpha / len(deltas)``).
    """
    mu = _checked_shift(mu, n_search, max_thresholds, claim)
    q = _upper_tail
    test = _Counts(n_test, alpha)
    # continuous outputs: the 2 n_search pooled outputs are distinct, so the search ranks at
    # exactly alpha / (4 * 2 n_search)
    rank = _Counts(n_search, alpha / (8 * n_search))
    span = 2.0 + math.sqrt(2.0 * math.log(max(n_search, n_test) / _CUT**0.5))
    if mu > 2 * span:  # two clusters and an empty gap (one cell) between them
        u = np.concatenate([np.arange(-span, span, step), np.arange(mu - span, mu + span, step)])
    else:
        u = np.arange(-span, mu + span + step, step)
    cells = list(itertools.pairwise(u))
    # test failure per cell of the revealing direction (numerator D', i.e. Q(t - mu))
    fail = [
        1.0 - float(test.prob_at_least(q(b - mu), q(a), delta, claim, strict=True, upper=False)[0])
        for a, b in cells
    ]
    lo, hi = float(u[0]), float(u[-1])
    # candidate intervals for step (a): the few whose expected end counts rank highest among
    # those that hold a candidate (a pooled output) except with probability below 1e-12
    intervals = _candidate_intervals(cells, mu, n_search, rank, delta)
    top = math.log((rank.lower[-1] - delta) / rank.upper[0])  # the largest rank there is
    levels = np.concatenate([np.linspace(0.1, top, 24), top - np.geomspace(1e-9, 0.5, 16)])
    levels = np.unique(levels[levels > 0])
    # P(chosen in a cell) <= P(no candidate of the fixed interval ranks >= level)
    #                       + P(some candidate of the cell ranks >= level)
    ranked = np.zeros_like(levels)
    for (a, b), f in zip(cells, fail, strict=True):
        if f > 0:
            ranked += f * rank.prob_at_least(q(a - mu), q(b), delta, levels, strict=False)
        ranked += rank.prob_at_least(q(a), q(b - mu), delta, levels, strict=False)
    ranked += rank.prob_at_least(1.0, q(lo), delta, levels, strict=False)
    ranked += rank.prob_at_least(q(hi - mu), 0.0, delta, levels, strict=False)
    ranked += rank.prob_at_least(1.0, q(lo - mu), delta, levels, strict=False)
    ranked += rank.prob_at_least(q(hi), 0.0, delta, levels, strict=False)
    ranked *= 2.0  # the mirrored (lower-tail) events have the same laws
    miss = np.ones_like(levels)
    for _, t1, t2, empty in intervals:
        low = 1.0 - rank.prob_at_least(q(t2 - mu), q(t1), delta, levels, strict=False, upper=False)
        miss = np.minimum(miss, empty + low)
    return float(min(1.0, np.min(miss + ranked)))
