"""The white-box audit over many runs (gradient canaries through the ledger, every noisy sum
seen), at smoke size: below the certified bound, informative, and catching a planted bug."""

from __future__ import annotations

import numpy as np

from dpledger.audit import whitebox_runs
from dpledger.plugins.primitives import gaussian

PARAMS = gaussian.GaussianParams(1.0, 1.0)


def _audit() -> whitebox_runs.AuditResult:
    return whitebox_runs.audit_whitebox_runs(
        gaussian.SPEC,
        PARAMS,
        np.zeros(100),
        canaries_per_run=5000,
        n_search=5000,
        n_test=20_000,
        deltas=(1e-3,),
        seed=0,
    )


def test_below_the_certified_bound_and_informative() -> None:
    audit = _audit().audits[0]
    assert audit.verdict == "no violation found"
    # the Gaussian mechanism's certified 3.14 at delta 1e-3; 20 000 samples reach over half
    assert 0.5 * audit.claimed_epsilon < audit.epsilon_lower <= audit.claimed_epsilon


def test_a_quarter_of_the_noise_is_a_violation(planted_noise: list[float]) -> None:
    planted_noise.append(0.25)
    audit = _audit().audits[0]
    assert audit.verdict == "violation"
    assert audit.epsilon_lower > audit.claimed_epsilon
