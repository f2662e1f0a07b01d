"""One-run audits of ledger methods: canaries through the ledger's data path, no false alarm,
a planted bug caught in one run, and bad input in one line."""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np
import pytest

from dpledger.audit import canaries as canary_audit
from dpledger.audit.whitebox import CanaryLedger
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError, PluginError
from dpledger.plugins.primitives import (
    bounded_mean,
    dp_sgd,
    gaussian,
    histogram,
    laplace,
    nn_voting,
    selection,
)
from dpledger.runtime import session
from dpledger.runtime.runner import prepare_run

RNG = np.random.default_rng(0)
SGD_DATA = {"x": RNG.normal(size=(400, 4)), "y": (np.arange(400) % 2).astype(float)}
SMOKE = [
    (gaussian.SPEC, gaussian.GaussianParams(1.0, 1.0), np.zeros(400)),
    (laplace.SPEC, laplace.LaplaceParams(1.0, 1.0), np.zeros(400)),
    (histogram.SPEC, histogram.HistogramParams(4, 1.0), np.zeros(400)),
    (histogram.SPEC, histogram.HistogramParams(4, 1.0, mechanism="gaussian"), np.zeros(400)),
    (bounded_mean.SPEC, bounded_mean.BoundedMeanParams(1.0, 1.0, 400), np.zeros((400, 3))),
    (dp_sgd.SPEC, dp_sgd.DPSGDParams(5, 0.2, 1.0, 1.0, 80.0), SGD_DATA),
    (
        nn_voting.SPEC,
        nn_voting.NNVotingParams(k=3, top_n=1, noise_multiplier=1.0),
        {"records": np.zeros((40, 1)), "candidates": np.arange(30.0)[:, None]},
    ),
]


def _declared(spec: Any, params: Any) -> session.Declared:
    return session.declare(spec, params, Adjacency(), lambda e, a: e)


def test_canaries_enter_every_poisson_sample_and_noisy_sum() -> None:
    # rate 1 and (almost) no noise: an included canary adds the clip norm to its coordinate
    # of every noisy sum, an excluded one nothing
    params = dp_sgd.DPSGDParams(3, 1.0, 1e-9, 2.0, 10.0)
    declared = _declared(dp_sgd.SPEC, params)
    data, ledger, run_rng = prepare_run(declared.declaration, Adjacency(), SGD_DATA, seed=1)
    included = np.arange(20) % 3 == 0
    wrapped = CanaryLedger(ledger, included)
    dp_sgd.SPEC.run(params, data, wrapped, run_rng)
    ledger.verify()
    assert len(wrapped.steps) == 3
    for step in wrapped.steps:
        assert step.rate == 1.0 and step.sensitivity == 2.0
        np.testing.assert_allclose(step.values, 2.0 * included, atol=1e-6)


def test_sampled_canaries_follow_the_booked_rate() -> None:
    params = dp_sgd.DPSGDParams(40, 0.25, 1e-9, 1.0, 10.0)
    declared = _declared(dp_sgd.SPEC, params)
    data, ledger, run_rng = prepare_run(declared.declaration, Adjacency(), SGD_DATA, seed=2)
    included = np.ones(300, dtype=bool)
    wrapped = CanaryLedger(ledger, included)
    dp_sgd.SPEC.run(params, data, wrapped, run_rng)
    taken = np.array([s.values for s in wrapped.steps]).round()
    assert set(np.unique(taken)) <= {0.0, 1.0}
    # 12000 Bernoulli(1/4) draws: within 5 standard deviations of 3000
    assert abs(taken.sum() - 3000) < 5 * np.sqrt(12000 * 0.25 * 0.75)


@pytest.mark.parametrize(("spec", "params", "data"), SMOKE, ids=lambda v: getattr(v, "name", ""))
def test_no_false_alarm_smoke(spec: Any, params: Any, data: Any) -> None:
    result = canary_audit.audit_one_run(spec, params, data, canaries=200, seed=3)
    assert result.verdict == canary_audit.NO_VIOLATION
    for row in result.rows:
        assert not row.curve_rejected
        steinke, fdp, _ = row.estimates
        assert steinke.epsilon_lower <= row.certified_upper
        assert fdp.epsilon_lower <= row.certified_upper


def test_a_quarter_of_the_noise_is_caught_in_one_run(planted_noise: list[float]) -> None:
    planted_noise.append(0.25)
    params = gaussian.GaussianParams(1.0, 1.0)
    result = canary_audit.audit_one_run(gaussian.SPEC, params, np.zeros(1000), seed=4)
    assert result.verdict == canary_audit.VIOLATION
    row = result.rows[0]
    assert row.curve_rejected
    assert row.estimates[1].epsilon_lower > row.certified_upper


def test_a_method_with_no_noisy_sum_is_refused_in_one_line() -> None:
    params = selection.SelectionParams(epsilon=1.0)
    data = np.arange(50, dtype=float)
    with pytest.raises(InvalidParameterError, match="drop --one-run"):
        canary_audit.audit_one_run(selection.EXPONENTIAL, params, data, canaries=20)


@pytest.mark.parametrize(("m", "fix"), [(5, "pass 1000"), (401, "--canaries 400 or fewer")])
def test_canary_counts_that_do_not_fit(m: int, fix: str) -> None:
    with pytest.raises(InvalidParameterError, match=fix):
        canary_audit.audit_one_run(
            gaussian.SPEC, gaussian.GaussianParams(1.0, 1.0), np.zeros(400), canaries=m
        )


def test_black_box_needs_a_linear_model() -> None:
    with pytest.raises(InvalidParameterError, match="use --mode white-box"):
        canary_audit.audit_one_run(
            gaussian.SPEC,
            gaussian.GaussianParams(1.0, 1.0),
            np.zeros(400),
            canaries=50,
            mode="black-box",
        )


def test_black_box_smoke_on_a_linear_model() -> None:
    result = canary_audit.audit_one_run(
        dp_sgd.SPEC,
        dp_sgd.DPSGDParams(5, 0.2, 1.0, 1.0, 80.0),
        SGD_DATA,
        canaries=100,
        mode="black-box",
        seed=5,
    )
    assert result.verdict == canary_audit.NO_VIOLATION
    assert result.rows[0].estimates[0].epsilon_lower <= result.rows[0].certified_upper


def _summed_run(params: Any, data: Any, ledger: Any, rng: np.random.Generator) -> dict[str, Any]:
    """A method that hands the ledger the batch's summed gradient, not one row per record."""
    with ledger.poisson_sample(len(data), params.sampling_probability, step="s[0]") as batch:
        summed = np.asarray(data, dtype=float)[batch.indices].sum(axis=0)
        noisy = ledger.clipped_sum_gaussian(
            summed, params.clip_norm, params.noise_multiplier, step="n[0]"
        )
    return {"weights": noisy}


def test_a_model_without_per_sample_gradients_is_refused_in_one_line() -> None:
    spec = attrs.evolve(dp_sgd.SPEC, name="summed_sgd", run=_summed_run)
    params = dp_sgd.DPSGDParams(1, 0.5, 1.0, 1.0, 10.0)
    with pytest.raises(InvalidParameterError, match="one row per record") as caught:
        canary_audit.audit_one_run(spec, params, np.ones((50, 3)), canaries=20, seed=0)
    assert "\n" not in str(caught.value)


def _broken_run(params: Any, data: Any, ledger: Any, rng: np.random.Generator) -> dict[str, Any]:
    raise ValueError("the method's own bug")


def test_a_method_that_fails_is_named_in_one_line() -> None:
    spec = attrs.evolve(dp_sgd.SPEC, name="broken_sgd", run=_broken_run)
    params = dp_sgd.DPSGDParams(1, 0.5, 1.0, 1.0, 10.0)
    with pytest.raises(PluginError, match="broken_sgd") as caught:
        canary_audit.audit_one_run(spec, params, SGD_DATA, canaries=20, seed=0)
    assert "\n" not in str(caught.value)
