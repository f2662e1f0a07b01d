from __future__ import annotations

import math

import numpy as np
import pytest

from dpledger.accountant.select import account
from dpledger.plugins.path.data import hmm_dataset
from dpledger.plugins.path.direct import DirectParams, cliques, declare, run_direct
from dpledger.plugins.path.flatten import FlatSpec
from dpledger.runtime.ledger import PrivacyLedger


def test_clique_counts_match_paper() -> None:
    tables, _ = hmm_dataset(3, seed=0)
    spec = FlatSpec(tables.schema, length=10)
    markov = cliques(spec, "markov", 80, 0)
    # d = 6 modelled columns, L = 10: 60 one-way + 54 adjacent-time two-way
    assert len(markov) == 60 + 54
    across = cliques(spec, "across", 80, 0)
    assert len(across) == 60 + 54 + 80 and across[:114] == markov
    assert all(a.split("@")[1] == b.split("@")[1] for a, b in across[114:])


@pytest.mark.parametrize(("eps", "delta"), [(2.0, 1e-6), (10.0, 1e-8)])
def test_declaration_certified_at_target(eps: float, delta: float) -> None:
    ev = declare(DirectParams(epsilon=eps, delta=delta), None)
    bound = account(ev, delta=delta).bound
    assert bound.epsilon <= eps * (1 + 1e-6)
    assert bound.epsilon > 0.99 * eps  # calibrated, not wastefully noisy


@pytest.mark.slow
def test_run_matches_declaration_and_estimates() -> None:
    tables, _ = hmm_dataset(200, seed=0)
    prm = DirectParams(epsilon=50.0, delta=1e-5, length=6, bins=6, iters=300)
    led = PrivacyLedger(declare(prm, None), rng=0)
    syn, info = run_direct(tables, prm, led)
    led.verify()
    assert led.matches_exactly()
    assert info["n_cliques"] == 36 + 30
    assert "kept_users" not in info  # an exact count of the data is never an output
    kept = sum(int(t >= 6) for t in tables.lengths.tolist())  # truncate mode keeps length >= 6
    assert abs(len(syn) - kept) < 0.1 * kept  # the model's noisy total tracks the true count
    assert math.isfinite(float(np.mean(syn.lengths)))
