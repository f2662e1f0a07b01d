"""The ledger's DP-SGD on scikit-learn's digits, with the digits example's hyper-parameters
(``examples/opacus_digits.py``: batch 64 of 1797 records, 3 epochs, noise multiplier 1, clip
norm 1): one-run white-box audits with 1000 canaries, a planted half-noise bug caught in one
run, and the white-box audit over many runs reaching half the certified epsilon."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from dpledger.accountant import select
from dpledger.audit import canaries
from dpledger.audit.whitebox_runs import audit_whitebox_runs
from dpledger.core.events import GaussianEvent, PoissonSampledEvent, SelfComposedEvent
from dpledger.plugins.primitives import dp_sgd

datasets = pytest.importorskip("sklearn.datasets")

pytestmark = pytest.mark.slow

BATCH, RECORDS, EPOCHS = 64, 1797, 3
STEPS = math.ceil(EPOCHS * RECORDS / BATCH)  # 85
PARAMS = dp_sgd.DPSGDParams(STEPS, BATCH / RECORDS, 1.0, 1.0, float(BATCH))
DELTA = 1e-5
Record = Callable[[str, Any], None]


@pytest.fixture(scope="module")
def digits() -> dict[str, np.ndarray]:
    x, label = datasets.load_digits(return_X_y=True)
    return {"x": x / 16.0, "y": (label >= 5).astype(float)}  # digits 5-9 against 0-4


def _certified() -> float:
    event = SelfComposedEvent(PoissonSampledEvent(BATCH / RECORDS, GaussianEvent(1.0)), STEPS)
    return float(select.account(event, delta=DELTA).bound.epsilon)


def test_one_run_white_box_with_1000_canaries(
    digits: dict[str, np.ndarray], record_property: Record
) -> None:
    result = canaries.audit_one_run(dp_sgd.SPEC, PARAMS, digits, canaries=1000, seed=100)
    row = result.rows[0]
    assert row.certified_upper == pytest.approx(_certified(), rel=1e-9)
    assert result.verdict == canaries.NO_VIOLATION and not row.curve_rejected
    steinke, fdp = row.estimates[:2]
    assert 0 < steinke.epsilon_lower < row.certified_upper
    assert 0 < fdp.epsilon_lower < row.certified_upper
    for e in row.estimates:
        record_property(e.estimator, (e.epsilon_lower, e.epsilon_lower / row.certified_upper))


def test_half_the_noise_is_caught_in_one_run(
    digits: dict[str, np.ndarray], planted_noise: list[float], record_property: Record
) -> None:
    planted_noise.append(0.5)
    result = canaries.audit_one_run(dp_sgd.SPEC, PARAMS, digits, canaries=1000, seed=100)
    row = result.rows[0]
    assert result.verdict == canaries.VIOLATION
    assert row.curve_rejected
    assert row.estimates[1].epsilon_lower > row.certified_upper
    record_property("f-DP eps_lower with half the noise", row.estimates[1].epsilon_lower)


def test_white_box_over_many_runs_reaches_half_the_certified_epsilon(
    digits: dict[str, np.ndarray], record_property: Record
) -> None:
    result = audit_whitebox_runs(
        dp_sgd.SPEC,
        PARAMS,
        digits,
        canaries_per_run=10_000,
        n_search=100_000,
        n_test=300_000,
        deltas=(DELTA,),
        seed=0,
    )
    audit = result.audits[0]
    assert audit.claimed_epsilon == pytest.approx(_certified(), rel=1e-9)
    assert audit.verdict == "no violation found"
    record_property(
        "fraction of the certified epsilon", audit.epsilon_lower / audit.claimed_epsilon
    )
    assert audit.epsilon_lower >= 0.5 * audit.claimed_epsilon
