"""A white-box audit of a ledger method over many runs, in the threat model of Nasr et al. 2023.

The adversary inserts a gradient canary (:class:`~dpledger.audit.whitebox.CanaryLedger`: its
contribution to each noisy sum is the step's sensitivity in a coordinate of its own, and it
goes through the ledger's Poisson samples like any record) and sees every noisy sum. Its score
is the log-likelihood ratio of the canary's coordinates under the declaration (the optimal
test against the declared mechanism). Runs with the canary and runs without it are audited by
:func:`~dpledger.audit.auditor.audit_mechanism` (the most revealing threshold chosen on one
split, one-sided Clopper-Pearson bounds on a fresh one) against the certified epsilon.

Each run carries ``canaries_per_run`` canaries, all in or all out, each scored on its own
coordinate: one run gives that many samples. They are independent samples of the one-canary
mechanism as long as the ledger's noise is independent across coordinates and its Poisson
draws across records, which this audit assumes and does not test.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpledger.audit.auditor import AuditResult, accountant_claim, audit_mechanism
from dpledger.audit.whitebox import CanaryLedger, canary_scores
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import Event
from dpledger.core.specs import MethodSpec
from dpledger.runtime import session
from dpledger.runtime.runner import prepare_run

FloatArray = NDArray[np.float64]
CLAIM_SOURCE = "dpledger.accountant.select.account of the method's declaration"


def run_sampler(
    declared: session.Declared, data: Any, canaries_per_run: int
) -> Callable[[Any, int, np.random.Generator], FloatArray]:
    """``sample(included, n, rng)``: the scores of ``n`` canaries, all included or all left
    out, from as few verified runs of the method as hold them."""

    def sample(included: Any, n: int, rng: np.random.Generator) -> FloatArray:
        chunks: list[FloatArray] = []
        left = int(n)
        while left > 0:
            k = min(canaries_per_run, left)
            seed = int(rng.integers(0, 2**62))
            run_data, ledger, run_rng = prepare_run(
                declared.declaration, declared.adjacency, data, seed=seed
            )
            canaries = CanaryLedger(ledger, np.full(k, bool(included)))
            declared.spec.run(declared.params, run_data, canaries, run_rng)
            ledger.verify()
            chunks.append(canary_scores(canaries.steps, k, "llr")[0])
            left -= k
        return np.concatenate(chunks)

    return sample


def audit_whitebox_runs(
    spec: MethodSpec,
    params: Any,
    data: Any,
    *,
    adjacency: Adjacency | None = None,
    canaries_per_run: int = 4000,
    n_search: int = 20_000,
    n_test: int = 100_000,
    deltas: Sequence[float] = (1e-5,),
    alpha: float = 0.05,
    seed: int | None = None,
    lower: Callable[[Event, Adjacency], Event] | None = None,
) -> AuditResult:
    """The white-box audit of ``spec`` run with ``params`` on ``data`` (see the module)."""
    declared = session.declare(spec, params, adjacency or Adjacency(), lower or _as_declared)
    claim = accountant_claim(declared.per_unit, declared.unit_adjacency)
    return audit_mechanism(
        run_sampler(declared, data, canaries_per_run),
        False,
        True,
        claimed_epsilon=claim,
        deltas=deltas,
        alpha=alpha,
        n_search=n_search,
        n_test=n_test,
        rng=seed,
        description=f"{spec.name}: white-box gradient canary, every noisy sum seen",
        claim_source=CLAIM_SOURCE,
    )


def _as_declared(event: Event, adjacency: Adjacency) -> Event:
    return event
