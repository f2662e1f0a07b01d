"""One-run audit of a ledger method: m canaries, each included with probability 1/2, one run.

:func:`audit_one_run` draws which canaries are included, runs the method once under its
runtime ledger, scores every canary and bounds epsilon from below at each delta with the
estimators of :mod:`dpledger.audit.one_run`, beside the certified bracket of the method's
declaration:

* ``white-box``: the canaries are gradient canaries in the ledger's data path
  (:class:`~dpledger.audit.whitebox.CanaryLedger`), scored on every noisy step the ledger
  booked;
* ``black-box``: the canaries are records of the method's own data (inputs ``x`` with a 0/1
  label ``y``), scored by the margin of the released linear model ``weights`` on them
  (:mod:`dpledger.audit.blackbox`).

Steinke et al.'s bound holds for every (eps, delta)-DP mechanism; the f-DP test of Mahloujifar
et al. rejects, or not, the certified trade-off curve itself (its epsilon is that of the
strongest rejected curve of the certified curve stretched in epsilon, so it assumes that
shape); the Gaussian-DP estimate of Nasr et al. assumes a Gaussian trade-off. None is certified.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np

from dpledger.audit import one_run
from dpledger.audit.blackbox import blackbox_scores
from dpledger.audit.method_audit import _check_alpha_and_seed
from dpledger.audit.whitebox import CanaryLedger, canary_scores
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import DPLedgerError, InvalidParameterError
from dpledger.core.events import Event, canonical
from dpledger.core.specs import MethodSpec
from dpledger.runtime import session
from dpledger.runtime.runner import prepare_run

MODES = ("white-box", "black-box")
#: the fewest canaries a one-run audit takes
MIN_CANARIES = 10
#: points of the privacy profile the certified trade-off curve is built from
PROFILE_POINTS = 24
#: the PLD grid the certified profile is read on (coarser than a bracket's: a looser bound)
PROFILE_PLD_POINTS = 1 << 12
STEINKE = "Steinke, Nasr, Jagielski 2023 (any (eps, delta)-DP mechanism)"
FDP = "Mahloujifar, Melis, Chaudhuri 2025 (f-DP, certified curve's shape)"
GDP = "Nasr et al. 2023 Gaussian DP (assumes a Gaussian trade-off)"
VIOLATION, NO_VIOLATION = "violation", "no violation found"


@attrs.frozen
class Estimate:
    """One estimator's epsilon lower bound at one delta, and the guesses it rests on."""

    estimator: str
    epsilon_lower: float
    guesses: int | None = None
    correct: int | None = None


@attrs.frozen
class DeltaRow:
    """The certified bracket at ``delta`` and the estimators' lower bounds beside it."""

    delta: float
    certified_lower: float
    certified_upper: float
    method: str
    estimates: tuple[Estimate, ...]
    curve_rejected: bool

    @property
    def violated(self) -> bool:
        steinke = self.estimates[0].epsilon_lower
        return self.curve_rejected or steinke > self.certified_upper


@attrs.frozen
class OneRunResult:
    """A one-run audit: the canaries, the run's scores and a row per delta."""

    method: str
    mode: str
    score: str
    canaries: int
    included: int
    seed: int | None
    alpha: float
    rows: tuple[DeltaRow, ...]

    @property
    def verdict(self) -> str:
        return VIOLATION if any(r.violated for r in self.rows) else NO_VIOLATION

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "mode": self.mode,
            "score": self.score,
            "canaries": self.canaries,
            "included": self.included,
            "seed": self.seed,
            "confidence": 1.0 - self.alpha,
            "verdict": self.verdict,
            "certified": False,
            "note": "empirical lower bounds: they can falsify a certificate, never verify it",
            "deltas": [attrs.asdict(r) for r in self.rows],
        }


def check_canaries(m: Any, data: Any) -> int:
    """``m`` as an integer in [MIN_CANARIES, records of the data]: more canaries than records
    would make the run mostly canaries, unlike the one audited."""
    if isinstance(m, bool) or not isinstance(m, int | np.integer) or m < MIN_CANARIES:
        raise InvalidParameterError(
            "--canaries", f"must be an integer >= {MIN_CANARIES}, got {m!r}", "pass 1000"
        )
    n = records_of(data)
    if n is not None and m > n:
        raise InvalidParameterError(
            "--canaries",
            f"{m} canaries do not fit a dataset of {n} records (at most one canary a record)",
            f"pass --canaries {n} or fewer, or audit on more data",
        )
    return int(m)


def records_of(data: Any) -> int | None:
    """The number of records of array or ``{x, y}`` data (None for other data)."""
    if isinstance(data, np.ndarray) and data.ndim >= 1:
        return int(data.shape[0])
    if isinstance(data, dict) and "x" in data:
        return int(np.asarray(data["x"]).shape[0])
    return None


def _scores(
    declared: session.Declared, data: Any, included: Any, mode: str, score: str, seed: int
) -> Any:
    """One run of the method with its canaries; one score per canary."""
    spec, params = declared.spec, declared.params
    if mode == "black-box":
        return blackbox_scores(declared, data, included, seed)
    data, ledger, run_rng = prepare_run(declared.declaration, declared.adjacency, data, seed=seed)
    canary_ledger = CanaryLedger(ledger, included)
    try:
        spec.run(params, data, canary_ledger, run_rng)
    except (DPLedgerError, MemoryError, RecursionError):
        raise
    except Exception as exc:  # the method's own failure: one line naming it and its plugin
        raise session.method_failed(spec, exc) from exc
    ledger.verify()
    return canary_scores(canary_ledger.steps, canary_ledger.m, score)


def _profile(event: Event, adjacency: Adjacency, grid: Any) -> Any:
    """Certified delta(eps) on ``grid`` from the first backend that supports the event, in the
    order closed form, PLD (on a coarser grid than the bracket's: still an upper bound), RDP;
    else from the selected accountant at each point."""
    from dpledger.accountant import select
    from dpledger.accountant.base import Accountant
    from dpledger.accountant.closed_form import ClosedFormAccountant
    from dpledger.accountant.pld import PLDAccountant
    from dpledger.accountant.rdp import RDPAccountant

    event = canonical(event)
    backends: tuple[Accountant, ...] = (
        ClosedFormAccountant(adjacency),
        PLDAccountant(adjacency, target_points=PROFILE_PLD_POINTS),
        RDPAccountant(adjacency),
    )
    for accountant in backends:
        if accountant.supports(event):
            return accountant.compose(event).privacy_profile(grid)
    return np.array([select.account(event, adjacency, epsilon=float(e)).bound.delta for e in grid])


def stretched(grid: Any, deltas: Any, s: float) -> one_run.TradeOff:
    """The curve of the profile ``eps -> deltas(eps / s)`` (``s = 1``: the certified one)."""
    return one_run.tradeoff_from_profile(np.asarray(grid) * s, deltas)


def _estimates(
    scores: Any,
    included: Any,
    delta: float,
    level: float,
    family: Callable[[float], one_run.TradeOff],
) -> tuple[Estimate, ...]:
    m = int(np.asarray(included).size)
    rows = one_run.score_rows(scores)
    counts = one_run.guess_counts(m)
    per_test = level / (len(counts) * rows.shape[0])
    s_eps, s_g = one_run.best_guesses(
        rows, included, counts, lambda g: one_run.steinke_epsilon(m, g.r, g.v, per_test, delta)
    )
    # half of the f-DP test's level for its epsilon, half for rejecting the certified curve
    f_eps, f_g = one_run.best_guesses(
        rows, included, counts, lambda g: one_run.fdp_epsilon(family, m, g.r, g.v, per_test / 2)
    )
    gdp = max(one_run.gdp_epsilon(r, included, level / rows.shape[0], delta) for r in rows)
    return (
        Estimate(STEINKE, s_eps, s_g.r, s_g.v),
        Estimate(FDP, f_eps, f_g.r, f_g.v),
        Estimate(GDP, gdp),
    )


def _curve_rejected(scores: Any, included: Any, curve: one_run.TradeOff, level: float) -> bool:
    m = int(np.asarray(included).size)
    rows = one_run.score_rows(scores)
    counts = one_run.guess_counts(m)
    per_test = level / (len(counts) * rows.shape[0])
    return any(
        one_run.fdp_rejects(curve, m, g.r, g.v, per_test)
        for row in rows
        for g in (one_run.guesses(row, included, k) for k in counts)
    )


def delta_row(
    event: Event, adj: Adjacency, scores: Any, included: Any, delta: float, level: float
) -> DeltaRow:
    """The certified bracket of ``event`` at ``delta`` and the estimators beside it, each at
    level ``level`` (Bonferroni over its guesses and scores inside)."""
    from dpledger.accountant import select

    bound = select.account(event, adj, delta=delta).bound
    upper = float(bound.epsilon)
    if not math.isfinite(upper):
        raise InvalidParameterError(
            "params",
            f"no finite certified epsilon at delta {delta:g} to audit",
            "audit a configuration with a finite epsilon",
        )
    top = 3.0 * upper if upper > 0 else 10.0
    grid = np.linspace(0.0, top, PROFILE_POINTS)
    deltas = _profile(event, adj, grid)

    def family(eps: float) -> one_run.TradeOff:
        return stretched(grid, deltas, eps / max(upper, 1e-12))

    estimates = _estimates(scores, included, delta, level, family)
    rejected = _curve_rejected(scores, included, stretched(grid, deltas, 1.0), level / 2)
    lower = float(getattr(bound, "epsilon_lower", 0.0))
    return DeltaRow(delta, lower, upper, bound.method, estimates, rejected)


def audit_one_run(
    spec: MethodSpec,
    params: Any,
    data: Any,
    *,
    adjacency: Adjacency | None = None,
    canaries: int = 1000,
    mode: str = "white-box",
    score: str = "llr",
    deltas: Sequence[float] = (1e-5,),
    alpha: float = 0.05,
    seed: int | None = None,
    lower: Callable[[Event, Adjacency], Event] | None = None,
) -> OneRunResult:
    """One run of ``spec`` with ``canaries`` canaries (each included with probability 1/2),
    audited at each delta. Confidence ``1 - alpha`` holds for each estimator jointly over the
    deltas and the numbers of guesses tried (Bonferroni)."""
    if mode not in MODES:
        raise InvalidParameterError(
            "--mode", f"unknown mode {mode!r}", "use white-box or black-box"
        )
    m = check_canaries(canaries, data)
    _check_alpha_and_seed(alpha, seed)
    declared = session.declare(spec, params, adjacency or Adjacency(), lower or _as_declared)
    gen = np.random.default_rng(seed)
    included = gen.random(m) < 0.5
    scores = _scores(declared, data, included, mode, score, int(gen.integers(0, 2**62)))
    level = float(alpha) / len(deltas)
    event, adj = declared.per_unit, declared.unit_adjacency
    rows = tuple(delta_row(event, adj, scores, included, float(d), level) for d in deltas)
    return OneRunResult(spec.name, mode, score, m, int(included.sum()), seed, float(alpha), rows)


def _as_declared(event: Event, adjacency: Adjacency) -> Event:
    return event
