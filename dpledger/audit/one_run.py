"""Epsilon lower bounds from one training run: m canaries, each included with probability 1/2.

The auditor guesses, from one score per canary, which canaries were included: the ``k_plus``
highest scores are guessed *in*, the ``k_minus`` lowest *out*, the rest abstain. From the number
of guesses ``r`` and of correct guesses ``v``:

* :func:`steinke_epsilon` (Steinke, Nasr, Jagielski 2023, "Privacy auditing with one (1)
  training run", their bound for approximate DP): for any (eps, delta)-DP mechanism,
  ``P[v correct] <= P[Binom(r, e^eps / (1 + e^eps)) >= v]
  + 2 m delta max_{1 <= i <= v} P[v - i <= Binom(r, .) < v] / i``;
  the bound is the largest eps this p-value rejects at level ``beta``;
* :func:`fdp_rejects` / :func:`fdp_epsilon` (Mahloujifar, Melis, Chaudhuri 2025, "Auditing
  f-differential privacy in one run", the capped recursion ``audit_rh_with_cap``): whether the
  counts reject the claim "the mechanism is f-DP" for a symmetric trade-off ``f``; over a
  family of claims ordered by strength, the eps of the strongest claim rejected;
* :func:`gdp_epsilon` (Nasr et al. 2023, "Tight auditing of differentially private machine
  learning"): a mu-GDP estimate from Clopper-Pearson bounds on the false positive and false
  negative rates; it **assumes a Gaussian trade-off** and is an estimate, not a bound that
  holds for every mechanism.

None of these certifies anything: a lower bound above the certified upper bound falsifies the
certificate; one below it says nothing more than that the audit did not find a violation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import attrs
import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize, special, stats

from dpledger.core.errors import InvalidParameterError

FloatArray = NDArray[np.float64]
#: a trade-off curve: the smallest type-II error at type-I error ``alpha``
TradeOff = Callable[[float], float]
#: epsilon searched up to this value (the largest bound an audit of m <= 1e7 canaries reaches)
EPS_MAX = 60.0
#: tolerance of the bisections on epsilon (the reported bound is the lower end)
EPS_TOL = 1e-6
#: tolerance of the root of the Gaussian-DP epsilon (the reported value is the lower end)
GDP_XTOL = 1e-10


@attrs.frozen
class Guesses:
    """Guesses from canary scores: ``r`` made, ``v`` correct, of ``m`` canaries."""

    m: int
    r: int
    v: int
    k_plus: int
    k_minus: int


def _check_beta(beta: float) -> float:
    if not (isinstance(beta, int | float) and 0.0 < float(beta) < 1.0):
        raise InvalidParameterError("beta", f"must lie in (0, 1), got {beta!r}", "pass 0.05")
    return float(beta)


def _check_delta(delta: float) -> float:
    if not (isinstance(delta, int | float) and 0.0 <= float(delta) < 1.0):
        raise InvalidParameterError("delta", f"must lie in [0, 1), got {delta!r}", "pass 1e-5")
    return float(delta)


def _check_counts(m: int, r: int, v: int) -> None:
    if not (0 <= v <= r <= m and m >= 1):
        raise InvalidParameterError(
            "guesses", f"need 0 <= v <= r <= m, m >= 1; got m={m}, r={r}, v={v}", "count them"
        )


def guesses(scores: ArrayLike, included: ArrayLike, k_plus: int, k_minus: int = 0) -> Guesses:
    """The top ``k_plus`` scores guessed included, the bottom ``k_minus`` excluded (ties are
    broken by canary order, which is independent of inclusion)."""
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    inc = np.asarray(included, dtype=bool).reshape(-1)
    m = s.size
    if inc.size != m or k_plus < 0 or k_minus < 0 or k_plus + k_minus > m:
        raise InvalidParameterError(
            "k_plus", f"k_plus + k_minus must be at most the {m} canaries", "guess fewer"
        )
    order = np.argsort(s, kind="stable")
    top = order[m - k_plus :] if k_plus else order[:0]
    bottom = order[:k_minus]
    v = int(np.sum(inc[top]) + np.sum(~inc[bottom]))
    return Guesses(m, k_plus + k_minus, v, k_plus, k_minus)


def steinke_p_value(m: int, r: int, v: int, eps: float, delta: float) -> float:
    """Upper bound on ``P[at least v of r guesses correct]`` under (eps, delta)-DP
    (Steinke, Nasr, Jagielski 2023, their bound for approximate DP)."""
    _check_counts(m, r, v)
    if v == 0:
        return 1.0
    p = float(special.expit(eps))
    tail = float(stats.binom.sf(v - 1, r, p))  # P[B >= v]
    if delta == 0:
        return tail
    i = np.arange(1, v + 1)
    between = stats.binom.sf(v - i - 1, r, p) - tail  # P[v - i <= B < v]
    return min(1.0, tail + 2.0 * m * delta * float(np.max(between / i)))


def _largest_rejected(rejects: Callable[[float], bool], lo: float = 0.0) -> float:
    """The largest eps in [lo, EPS_MAX] at which ``rejects`` holds, given that it holds on an
    interval starting at ``lo`` (``lo`` itself when it does not hold there)."""
    if not rejects(lo):
        return lo
    hi = max(1.0, 2.0 * lo)
    while rejects(hi):
        lo, hi = hi, 2.0 * hi
        if hi > EPS_MAX:
            return EPS_MAX if rejects(EPS_MAX) else _bisect(rejects, lo, EPS_MAX)
    return _bisect(rejects, lo, hi)


def _bisect(rejects: Callable[[float], bool], lo: float, hi: float) -> float:
    while hi - lo > EPS_TOL:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if rejects(mid) else (lo, mid)
    return lo


def steinke_epsilon(m: int, r: int, v: int, beta: float = 0.05, delta: float = 0.0) -> float:
    """The largest eps whose (eps, delta) claim the counts reject at level ``beta``
    (0 when none is rejected)."""
    beta, delta = _check_beta(beta), _check_delta(delta)
    _check_counts(m, r, v)
    return _largest_rejected(lambda e: steinke_p_value(m, r, v, e, delta) <= beta)


def fdp_statistic(f: TradeOff, m: int, r: int, v: int, beta: float) -> float:
    """``r_i + h_i - r/m`` after the capped recursion of Mahloujifar, Melis, Chaudhuri 2025
    (one-sided guesses); positive means the claim "f-DP" is rejected at level ``beta``.

    ``f`` must be symmetric (``f`` is its own inverse), as every curve built by
    :func:`tradeoff_from_profile` is: the false-positive mass compatible with a true-positive
    mass ``x`` is then ``f(1 - x)``."""
    _check_counts(m, r, v)
    rr = beta * v / m
    h = beta * (r - v) / m
    for i in range(v - 1, -1, -1):
        h_new = max(h, f(1.0 - rr))
        if h_new == h:
            break
        rr = min(rr + (i / (r - i)) * (h_new - h), 1.0)
        h = h_new
    return rr + h - r / m


def fdp_rejects(f: TradeOff, m: int, r: int, v: int, beta: float = 0.05) -> bool:
    """Whether ``v`` correct of ``r`` one-sided guesses on ``m`` canaries reject "f-DP"."""
    return fdp_statistic(f, m, r, v, _check_beta(beta)) > 0


def fdp_epsilon(
    family: Callable[[float], TradeOff], m: int, r: int, v: int, beta: float = 0.05
) -> float:
    """Over the claims ``family(eps)`` (stronger as eps falls), the largest eps rejected."""
    beta = _check_beta(beta)
    return _largest_rejected(lambda e: fdp_statistic(family(e), m, r, v, beta) > 0)


def tradeoff_from_profile(epsilons: ArrayLike, deltas: ArrayLike) -> TradeOff:
    """The trade-off curve certified by a privacy profile on a grid (``deltas`` upper bounds
    at ``epsilons >= 0``): ``f(a) = max_eps max(0, 1 - d(eps) - e^eps a,
    e^-eps (1 - d(eps) - a))``. The grid only leaves constraints out, so the curve lies below
    the mechanism's true one; it is symmetric."""
    eps = np.asarray(epsilons, dtype=np.float64)
    dlt = np.minimum(np.asarray(deltas, dtype=np.float64), 1.0)
    if eps.shape != dlt.shape or eps.size == 0 or np.any(eps < 0) or np.any(dlt < 0):
        raise InvalidParameterError(
            "profile", "needs deltas >= 0 at epsilons >= 0, one each", "pass the grid"
        )
    one_minus = 1.0 - dlt
    growth, shrink = np.exp(eps), np.exp(-eps)

    def f(alpha: float) -> float:
        a = min(max(float(alpha), 0.0), 1.0)
        best = np.maximum(one_minus - growth * a, shrink * (one_minus - a))
        return max(0.0, float(np.max(best)))

    return f


def gaussian_tradeoff(mu: float) -> TradeOff:
    """The trade-off curve of mu-GDP: ``Phi(Phi^-1(1 - a) - mu)``."""

    def f(alpha: float) -> float:
        a = min(max(float(alpha), 0.0), 1.0)
        return float(stats.norm.cdf(stats.norm.isf(a) - mu))

    return f


def gdp_delta(mu: float, eps: float) -> float:
    """delta(eps) of mu-GDP (Dong, Roth, Su 2019, Corollary 2.13)."""
    if mu <= 0:
        return 0.0
    a = stats.norm.logcdf(-eps / mu + mu / 2)
    b = eps + stats.norm.logcdf(-eps / mu - mu / 2)
    return 0.0 if b >= a else float(math.exp(a + math.log1p(-math.exp(b - a))))


def gdp_epsilon_of_mu(mu: float, delta: float) -> float:
    """The eps of mu-GDP at ``delta`` (0 when delta(0) <= delta)."""
    if mu <= 0 or gdp_delta(mu, 0.0) <= delta:
        return 0.0
    hi = 1.0
    while gdp_delta(mu, hi) > delta:
        hi *= 2.0
    root = float(optimize.brentq(lambda e: gdp_delta(mu, e) - delta, 0.0, hi, xtol=GDP_XTOL))
    return max(0.0, root - GDP_XTOL)  # the lower end of the root's bracket


def gdp_mu(
    fp: ArrayLike, fn: ArrayLike, n_neg: int, n_pos: int, beta: float, delta: float = 0.0
) -> float:
    """The largest mu the rates support: at each threshold (false positives ``fp`` of
    ``n_neg`` excluded canaries, false negatives ``fn`` of ``n_pos`` included ones) the upper
    Clopper-Pearson bounds at ``beta / (2 * thresholds)`` give
    ``Phi^-1(1 - FPR) - Phi^-1(FNR)`` (thresholds where a rate bound reaches ``1 - delta`` are
    left out; only the test "a high score means included" is read, so upper bounds on both
    rates are the conservative side)."""
    fp_a, fn_a = np.asarray(fp, dtype=float), np.asarray(fn, dtype=float)
    level = _check_beta(beta) / (2 * fp_a.size)
    fpr = _cp_upper(fp_a, n_neg, level)
    fnr = _cp_upper(fn_a, n_pos, level)
    keep = np.maximum(fpr, fnr) < 1.0 - delta
    if not np.any(keep):
        return 0.0
    return max(0.0, float(np.max(stats.norm.isf(fpr[keep]) - stats.norm.ppf(fnr[keep]))))


def _cp_upper(k: FloatArray, n: int, level: float) -> FloatArray:
    safe = np.minimum(k, n - 1)
    out = np.where(k < n, stats.beta.ppf(1.0 - level, safe + 1, n - safe), 1.0)
    return np.asarray(out, dtype=np.float64)


def gdp_epsilon(
    scores: ArrayLike, included: ArrayLike, beta: float = 0.05, delta: float = 1e-5
) -> float:
    """Nasr et al. 2023's estimate from canary scores: the eps at ``delta`` of the mu-GDP that
    the error rates at every threshold support (assumes a Gaussian trade-off)."""
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    inc = np.asarray(included, dtype=bool).reshape(-1)
    s_in, s_out = np.sort(s[inc]), np.sort(s[~inc])
    if s_in.size == 0 or s_out.size == 0:
        return 0.0
    thresholds = np.concatenate([np.unique(s), [np.inf]])
    fn = np.searchsorted(s_in, thresholds, side="left")  # included, scored below
    fp = s_out.size - np.searchsorted(s_out, thresholds, side="left")  # excluded, above
    mu = gdp_mu(fp, fn, s_out.size, s_in.size, beta, delta)
    return gdp_epsilon_of_mu(mu, delta)


def score_rows(scores: ArrayLike) -> FloatArray:
    """Scores as rows, one per score function (a 1-D array is one row)."""
    arr = np.asarray(scores, dtype=np.float64)
    return arr.reshape(1, -1) if arr.ndim == 1 else arr


def best_guesses(
    scores: ArrayLike,
    included: ArrayLike,
    counts: Sequence[int],
    bound: Callable[[Guesses], float],
) -> tuple[float, Guesses]:
    """The largest ``bound`` over one-sided guesses of the top ``k`` of each row of scores,
    for each ``k`` in ``counts`` (the caller divides its level by the rows times
    ``len(counts)``: Bonferroni)."""
    best: tuple[float, Guesses] | None = None
    for row in score_rows(scores):
        for k in counts:
            g = guesses(row, included, int(k))
            value = bound(g)
            if best is None or value > best[0]:
                best = (value, g)
    if best is None:
        raise InvalidParameterError("counts", "is empty", "pass guess counts such as (10, 100)")
    return best


def guess_counts(m: int) -> tuple[int, ...]:
    """The numbers of guesses tried on ``m`` canaries, fixed before any score is seen: 1/100,
    1/50, 1/20, 1/10, 1/4 and 1/2 of them (at least one guess)."""
    counts = {m // d for d in (100, 50, 20, 10, 4, 2) if m // d >= 1}
    return tuple(sorted(counts or {1}))
