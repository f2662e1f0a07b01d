"""Black-box (and white-box) empirical privacy auditor.

Protocol (see docs/verification.md):

1. reduce outputs to scalar scores (identity, a given score, the declared exact log-likelihood
   ratio, or a linear discriminant trained on separate samples);
2. on a SEARCH split, choose for every audited delta the half-line event ``{s >= t}`` or
   ``{s <= t}`` and the direction ``(D, D')`` or ``(D', D)`` with the largest Clopper–Pearson
   epsilon lower bound;
3. count that event on a FRESH TEST split and report the one-sided Clopper–Pearson bound,
   Bonferroni-corrected over the deltas audited.

The result can only falsify a claim: "no violation found" is not "verified". Every delta
carries the ceiling (the largest bound ``n_test`` samples could ever certify) and the
resolution (point estimate minus certified bound at the witness).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np
from numpy.typing import NDArray

from dpledger.audit import stats
from dpledger.audit.canonical import canonical_pair
from dpledger.audit.reference import epsilon_for_delta
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import Event
from dpledger.core.lifting import lift_event

Array = NDArray[np.float64]
Sampler = Callable[[Any, int, np.random.Generator], Array]
Score = Callable[[Array], Array]
Claim = float | Mapping[float, float] | Callable[[float], float]

#: direction labels: the first dataset's output probability is the numerator, i.e. the test is
#: Pr[M(first) in S] <= e^eps Pr[M(second) in S] + delta
DIRECTIONS: tuple[str, str] = ("(D, D')", "(D', D)")
TAILS: tuple[str, str] = ("upper", "lower")
VIOLATION = "violation"
NO_VIOLATION = "no violation found"
NO_CLAIM = "no claim"
#: outputs are drawn and scored in chunks of this many samples
CHUNK = 1 << 17
#: samples per side used to train the linear discriminant for vector outputs
TRAIN_SAMPLES = 100_000


def _json_float(x: float | None) -> float | str | None:
    if x is None or math.isfinite(x):
        return x
    return "inf" if x > 0 else "-inf"


@attrs.frozen
class Witness:
    """The event and the counts behind one epsilon lower bound.

    ``tail='upper'`` is ``S = {score >= threshold}``, ``'lower'`` is ``{score <= threshold}``.
    ``hits_first``/``hits_second`` count S among the test outputs of the first/second dataset
    of ``direction``. ``search_epsilon_lower`` is the event's bound on the search split,
    Bonferroni-corrected over all candidate events (it only ranked the events).
    """

    direction: str
    tail: str
    threshold: float
    hits_first: int
    hits_second: int
    n_first: int
    n_second: int
    search_epsilon_lower: float

    def to_dict(self) -> dict[str, Any]:
        out = attrs.asdict(self)
        out["threshold"] = _json_float(self.threshold)
        return out


@attrs.frozen
class DeltaAudit:
    """The audit outcome at one delta."""

    delta: float
    epsilon_lower: float
    epsilon_estimate: float
    claimed_epsilon: float | None
    ceiling: float
    resolution: float
    witness: Witness

    @property
    def verdict(self) -> str:
        if self.claimed_epsilon is None:
            return NO_CLAIM
        return VIOLATION if self.epsilon_lower > self.claimed_epsilon else NO_VIOLATION

    @property
    def no_power(self) -> bool:
        """The test event was hit on neither side: the bound is 0 whatever the true epsilon,
        so this audit could not have found a violation."""
        return self.witness.hits_first == 0 and self.witness.hits_second == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "delta": self.delta,
            "epsilon_lower": self.epsilon_lower,
            "epsilon_estimate": _json_float(self.epsilon_estimate),
            "claimed_epsilon": _json_float(self.claimed_epsilon),
            "verdict": self.verdict,
            "no_power": self.no_power,
            "ceiling": _json_float(self.ceiling),
            "resolution": _json_float(self.resolution),
            "witness": self.witness.to_dict(),
        }


@attrs.frozen
class AuditResult:
    """Epsilon lower bounds at confidence ``1 - alpha`` (jointly over all deltas)."""

    audits: tuple[DeltaAudit, ...]
    alpha: float
    n_search: int
    n_test: int
    score_mode: str
    description: str = ""
    claim_source: str = ""

    @property
    def epsilon_lower(self) -> dict[float, float]:
        return {a.delta: a.epsilon_lower for a in self.audits}

    @property
    def verdict(self) -> str:
        verdicts = {a.verdict for a in self.audits}
        if VIOLATION in verdicts:
            return VIOLATION
        return NO_CLAIM if verdicts == {NO_CLAIM} else NO_VIOLATION

    @property
    def no_power(self) -> bool:
        """Some audited delta had no power (:attr:`DeltaAudit.no_power`)."""
        return any(a.no_power for a in self.audits)

    def at(self, delta: float) -> DeltaAudit:
        for a in self.audits:
            if a.delta == delta:
                return a
        raise InvalidParameterError("delta", f"{delta!r} was not audited", "audit that delta")

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "no_power": self.no_power,
            "alpha": self.alpha,
            "confidence": 1.0 - self.alpha,
            "n_search": self.n_search,
            "n_test": self.n_test,
            "score": self.score_mode,
            "description": self.description,
            "claim_source": self.claim_source,
            "note": "an empirical lower bound can falsify a claim, never verify it",
            "audits": [a.to_dict() for a in self.audits],
        }


def _claim_function(
    claimed_epsilon: Claim | None, claimed_delta: Callable[[float], float] | None
) -> Callable[[float], float | None]:
    if claimed_epsilon is not None and claimed_delta is not None:
        raise InvalidParameterError(
            "claimed_delta", "give a claimed epsilon or a claimed profile, not both", "drop one"
        )
    if claimed_delta is not None:
        profile = claimed_delta
        return lambda d: epsilon_for_delta(profile, d)
    if claimed_epsilon is None:
        return lambda d: None
    if isinstance(claimed_epsilon, int | float):
        value = float(claimed_epsilon)
        return lambda d: value
    if isinstance(claimed_epsilon, Mapping):
        table = dict(claimed_epsilon)

        def lookup(d: float) -> float:
            if d not in table:
                raise InvalidParameterError(
                    "claimed_epsilon", f"no claim for delta={d!r}", "give a claim for every delta"
                )
            return float(table[d])

        return lookup
    if callable(claimed_epsilon):
        func = claimed_epsilon
        return lambda d: float(func(d))
    raise InvalidParameterError(
        "claimed_epsilon", f"unsupported claim {claimed_epsilon!r}", "pass a float or callable"
    )


def _check_sizes(n_search: int, n_test: int) -> None:
    for name, n in (("n_search", n_search), ("n_test", n_test)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 10:
            raise InvalidParameterError(name, f"must be an integer >= 10, got {n!r}", "pass 10**5")


def _check_deltas(deltas: Sequence[float]) -> tuple[float, ...]:
    out = tuple(float(d) for d in deltas)
    if not out:
        raise InvalidParameterError("deltas", "is empty", "pass at least one delta, e.g. (1e-3,)")
    for d in out:
        if not (0.0 <= d < 1.0):
            raise InvalidParameterError("deltas", f"{d!r} is outside [0, 1)", "pass e.g. 1e-3")
    if len(set(out)) != len(out):
        raise InvalidParameterError("deltas", "has duplicates", "list each delta once")
    return out


def _as_scores(values: Any, name: str) -> Array:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1:
        raise InvalidParameterError(
            name, f"scores must be 1-D, got shape {arr.shape}", "reduce outputs to one score each"
        )
    if np.isnan(arr).any():
        raise InvalidParameterError(name, "contains NaN", "return finite or infinite scores")
    return arr


def _draw(sampler: Sampler, dataset: Any, n: int, rng: np.random.Generator) -> Array:
    out = np.asarray(sampler(dataset, n, rng), dtype=float)
    if out.shape[:1] != (n,):
        raise InvalidParameterError(
            "sampler", f"returned shape {out.shape} for n={n}", "return n outputs (first axis)"
        )
    return out


def _scores(
    sampler: Sampler, dataset: Any, n: int, rng: np.random.Generator, reduce: Score
) -> Array:
    """Scores of ``n`` fresh outputs, drawn in chunks so vector outputs stay small in memory."""
    parts = []
    for start in range(0, n, CHUNK):
        m = min(CHUNK, n - start)
        parts.append(_as_scores(reduce(_draw(sampler, dataset, m, rng)), "score"))
    return np.concatenate(parts)


def linear_discriminant(x0: Array, x1: Array, ridge: float = 1e-9) -> Score:
    """Fisher's linear discriminant trained on samples of two vector-valued distributions."""
    x0 = x0.reshape(len(x0), -1)
    x1 = x1.reshape(len(x1), -1)
    cov = 0.5 * (np.cov(x0, rowvar=False) + np.cov(x1, rowvar=False))
    cov = np.atleast_2d(cov)
    cov = cov + ridge * (np.trace(cov) / len(cov) + 1.0) * np.eye(len(cov))
    w = np.linalg.solve(cov, x1.mean(axis=0) - x0.mean(axis=0))
    return lambda x: np.asarray(x.reshape(len(x), -1) @ w, dtype=float)


def _candidates(s0: Array, s1: Array, max_thresholds: int) -> Array:
    pooled = np.unique(np.concatenate([s0, s1]))
    if len(pooled) <= max_thresholds:
        return pooled
    m = len(pooled)
    k = max_thresholds // 3
    geo = np.unique(np.geomspace(1, m // 2, k).astype(int)) - 1
    idx = np.concatenate([geo, m - 1 - geo, np.linspace(0, m - 1, k).astype(int)])
    return np.asarray(pooled[np.unique(idx)], dtype=float)


def _event_counts(sorted_scores: Array, thresholds: Array) -> tuple[Array, Array]:
    """Counts of ``{s >= t}`` and ``{s <= t}`` for every threshold."""
    n = len(sorted_scores)
    upper = n - np.searchsorted(sorted_scores, thresholds, side="left")
    lower = np.searchsorted(sorted_scores, thresholds, side="right")
    return upper.astype(float), lower.astype(float)


def _count(scores: Array, tail: str, threshold: float) -> int:
    if tail == "upper":
        return int(np.count_nonzero(scores >= threshold))
    return int(np.count_nonzero(scores <= threshold))


def _search(
    s0: Array, s1: Array, delta: float, alpha: float, max_thresholds: int
) -> tuple[str, str, float, float]:
    """Best (direction, tail, threshold) on the search split and its search-split bound."""
    thresholds = _candidates(s0, s1, max_thresholds)
    # rank events by a bound that is Bonferroni-corrected over all candidate events, so that a
    # far-tail event whose few search hits happen to look extreme is not preferred
    alpha = alpha / (4 * len(thresholds))
    n0, n1 = len(s0), len(s1)
    up0, lo0 = _event_counts(np.sort(s0), thresholds)
    up1, lo1 = _event_counts(np.sort(s1), thresholds)
    best: tuple[float, float, str, str, float] = (-1.0, -1.0, DIRECTIONS[0], TAILS[0], 0.0)
    for tail, c0, c1 in (("upper", up0, up1), ("lower", lo0, lo1)):
        # (D, D'): numerator D (counts c0); (D', D): numerator D' (counts c1)
        for direction, ka, na, kb, nb in (
            (DIRECTIONS[0], c0, n0, c1, n1),
            (DIRECTIONS[1], c1, n1, c0, n0),
        ):
            lbs = stats.epsilon_lower_bounds(ka, na, kb, nb, delta, alpha)
            # tie-break on the plug-in ratio so that an uninformative search is still sensible
            with np.errstate(divide="ignore", invalid="ignore"):
                est = np.log(np.maximum(ka / na - delta, 1e-300) / np.maximum(kb / nb, 1e-300))
            i = int(np.lexsort((-np.minimum(est, 1e300), -lbs))[0])
            key = (float(lbs[i]), float(min(est[i], 1e300)))
            if key > best[:2]:
                best = (key[0], key[1], direction, tail, float(thresholds[i]))
    return best[2], best[3], best[4], best[0]


def _reducer(
    sampler: Sampler,
    d: Any,
    d_prime: Any,
    n_search: int,
    gen: np.random.Generator,
    score: Score | None,
    log_likelihood_ratio: Score | None,
) -> tuple[Score, str]:
    """How outputs are reduced to scalars, and its name: the declared log-likelihood ratio,
    the given score, the identity for scalar outputs (read off a probe of two), else a linear
    discriminant trained on separate samples."""
    probe = _draw(sampler, d, 2, gen)
    if log_likelihood_ratio is not None:
        return log_likelihood_ratio, "white-box: declared log-likelihood ratio"
    if score is not None:
        return score, "given score"
    if probe.ndim == 1:
        return (lambda x: x), "identity"
    n_train = min(n_search, TRAIN_SAMPLES)
    reduce = linear_discriminant(
        _draw(sampler, d, n_train, gen), _draw(sampler, d_prime, n_train, gen)
    )
    return reduce, "linear discriminant trained on separate samples"


def audit_mechanism(
    sampler: Sampler,
    d: Any,
    d_prime: Any,
    *,
    claimed_epsilon: Claim | None = None,
    claimed_delta: Callable[[float], float] | None = None,
    deltas: Sequence[float] = (1e-3,),
    alpha: float = 0.05,
    n_search: int = 200_000,
    n_test: int = 1_000_000,
    rng: np.random.Generator | int | None = None,
    score: Score | None = None,
    log_likelihood_ratio: Score | None = None,
    max_thresholds: int = 3000,
    description: str = "",
    claim_source: str = "",
) -> AuditResult:
    """Audit ``sampler`` on the neighbouring pair ``(d, d_prime)`` against a privacy claim.

    ``sampler(dataset, n, rng)`` returns ``n`` outputs (scalars, or rows of a 2-D array).
    The claim is ``claimed_epsilon`` (a float, ``{delta: eps}`` or ``eps(delta)``) or a claimed
    profile ``claimed_delta(eps)``. ``log_likelihood_ratio`` (white-box: the declared privacy
    loss) or ``score`` reduces outputs to scalars; vector outputs without either are scored by
    a linear discriminant trained on ``n_search`` further samples per side.
    """
    _check_sizes(n_search, n_test)
    deltas = _check_deltas(deltas)
    alpha = stats._check_alpha(alpha)
    claim = _claim_function(claimed_epsilon, claimed_delta)
    claims = {delta: claim(delta) for delta in deltas}  # fail fast, before sampling
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    a_eff = alpha / len(deltas)

    reduce, mode = _reducer(sampler, d, d_prime, n_search, gen, score, log_likelihood_ratio)
    s0 = _scores(sampler, d, n_search, gen, reduce)
    s1 = _scores(sampler, d_prime, n_search, gen, reduce)
    witnesses = [_search(s0, s1, delta, a_eff, max_thresholds) for delta in deltas]

    t0 = _scores(sampler, d, n_test, gen, reduce)
    t1 = _scores(sampler, d_prime, n_test, gen, reduce)
    audits = []
    for delta, (direction, tail, threshold, search_lb) in zip(deltas, witnesses, strict=True):
        h0, h1 = _count(t0, tail, threshold), _count(t1, tail, threshold)
        ka, kb = (h0, h1) if direction == DIRECTIONS[0] else (h1, h0)
        lb = stats.epsilon_lower_bound(ka, n_test, kb, n_test, delta, a_eff)
        est = stats.epsilon_estimate(ka, n_test, kb, n_test, delta)
        witness = Witness(direction, tail, threshold, ka, kb, n_test, n_test, search_lb)
        audits.append(
            DeltaAudit(
                delta=delta,
                epsilon_lower=lb,
                epsilon_estimate=est,
                claimed_epsilon=claims[delta],
                ceiling=stats.ceiling(n_test, n_test, delta, a_eff),
                resolution=est - lb,
                witness=witness,
            )
        )
    return AuditResult(tuple(audits), alpha, n_search, n_test, mode, description, claim_source)


def accountant_claim(event: Event, adjacency: Adjacency) -> Callable[[float], float]:
    """``delta -> select.account(event, adjacency, delta=delta).bound.epsilon``."""
    from dpledger.accountant import select  # the backends load lazily

    def claim(delta: float) -> float:
        return float(select.account(event, adjacency, delta=delta).bound.epsilon)

    return claim


def audit_event(
    event: Event,
    adjacency: Adjacency | None = None,
    *,
    claimed_epsilon: Claim | None = None,
    deltas: Sequence[float] = (1e-3,),
    alpha: float = 0.05,
    n_search: int = 200_000,
    n_test: int = 1_000_000,
    rng: np.random.Generator | int | None = None,
    white_box: bool = True,
) -> AuditResult:
    """Audit the accountant's certified bound for ``event`` on its canonical worst-case pair.

    Without ``claimed_epsilon`` the claim is the selected accountant's certified upper bound.
    A user-level adjacency is first lifted to a row-level event (:func:`lift_event`), whose
    canonical pair is then audited.
    ``white_box`` scores outputs by the exact log-likelihood ratio (the optimal test);
    otherwise scalar outputs are thresholded directly.
    """
    adjacency = adjacency or Adjacency()
    lifted_from = ""
    if adjacency.unit != "row":
        original = event
        event, rules = lift_event(event, adjacency.max_contributions)
        adjacency = adjacency.row_level
        lifted_from = f" (lifted from {original.describe()} by {', '.join(rules)})"
    pair = canonical_pair(event, adjacency)
    source = "given"
    if claimed_epsilon is None:
        claimed_epsilon = accountant_claim(event, adjacency)
        source = "dpledger.accountant.select.account (certified upper bound)"
    return audit_mechanism(
        pair.sampler,
        pair.d,
        pair.d_prime,
        claimed_epsilon=claimed_epsilon,
        deltas=deltas,
        alpha=alpha,
        n_search=n_search,
        n_test=n_test,
        rng=rng,
        log_likelihood_ratio=pair.log_likelihood_ratio if white_box else None,
        description=(
            f"{event.describe()}{lifted_from} under {adjacency.describe()}: {pair.description}"
        ),
        claim_source=source,
    )
