"""The auditor: soundness on correct mechanisms, tightness, protocol details."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from dpledger.audit import audit_mechanism, stats
from dpledger.audit.auditor import NO_CLAIM, NO_VIOLATION, VIOLATION
from dpledger.audit.reference import gaussian_delta, gaussian_epsilon
from dpledger.core.errors import InvalidParameterError

EPS_GAUSS_1E3 = gaussian_epsilon(1.0, 1e-3)  # 3.1387


def laplace(shift: float, n: int, rng: np.random.Generator) -> np.ndarray:
    return rng.laplace(shift, 1.0, n)


def gaussian(shift: float, n: int, rng: np.random.Generator) -> np.ndarray:
    return rng.normal(shift, 1.0, n)


@pytest.mark.parametrize("seed", range(5))
def test_v30_laplace_eps1_is_tight_and_never_above_one(seed: int) -> None:
    r = audit_mechanism(
        laplace,
        0.0,
        1.0,
        claimed_epsilon=1.0,
        deltas=(0.0,),
        n_search=200_000,
        n_test=2_000_000,
        rng=seed,
    )
    a = r.at(0.0)
    assert 0.94 <= a.epsilon_lower <= 1.0
    assert r.verdict == NO_VIOLATION
    assert a.resolution > 0 and a.epsilon_lower + a.resolution == pytest.approx(a.epsilon_estimate)


@pytest.mark.parametrize("seed", range(3))
def test_v30_gaussian_mu1_delta_1e3(seed: int) -> None:
    """True epsilon 3.139; a reference audit reached 2.92 with 2e5 search / 2-5e6 test samples."""
    r = audit_mechanism(
        gaussian,
        0.0,
        1.0,
        claimed_epsilon=EPS_GAUSS_1E3,
        deltas=(1e-3,),
        n_search=200_000,
        n_test=2_000_000,
        rng=seed,
    )
    assert 2.75 <= r.at(1e-3).epsilon_lower <= EPS_GAUSS_1E3
    assert r.verdict == NO_VIOLATION


def test_false_violation_rate_is_at_most_alpha() -> None:
    """100 small audits of a tight Laplace(eps=1): violations of the true claim are rare."""
    flagged = 0
    for seed in range(100):
        r = audit_mechanism(
            laplace,
            0.0,
            1.0,
            claimed_epsilon=1.0,
            deltas=(0.0,),
            n_search=2000,
            n_test=5000,
            rng=seed,
            max_thresholds=300,
        )
        flagged += r.verdict == VIOLATION
    assert flagged <= 10  # expected <= 5 at alpha = 0.05


def test_identical_distributions_give_near_zero() -> None:
    def same(which: int, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.normal(0.0, 1.0, n)

    r = audit_mechanism(
        same,
        0,
        1,
        claimed_epsilon=0.0,
        deltas=(0.0,),
        n_search=50_000,
        n_test=200_000,
        rng=1,
    )
    assert r.verdict == "no violation found"
    assert r.at(0.0).epsilon_lower < 0.03


def test_both_directions_and_tails_are_searched() -> None:
    """Leakage only in the lower tail of D' vs D: the witness is (D', D), lower tail."""

    def sampler(which: int, n: int, rng: np.random.Generator) -> np.ndarray:
        x = rng.normal(0.0, 1.0, n)
        if which == 1:  # D' moves 30% of its mass far to the left
            x = np.where(rng.random(n) < 0.3, x - 8.0, x)
        return x

    r = audit_mechanism(sampler, 0, 1, deltas=(0.0,), n_search=50_000, n_test=200_000, rng=2)
    w = r.at(0.0).witness
    assert (w.direction, w.tail) == ("(D', D)", "lower")
    assert r.verdict == NO_CLAIM
    assert r.at(0.0).epsilon_lower > 5.0  # 30% of D' vs ~0 of D below -4


def test_bonferroni_over_deltas() -> None:
    r = audit_mechanism(
        gaussian,
        0.0,
        1.0,
        claimed_epsilon={1e-2: 2.3178, 1e-3: 3.1387},
        deltas=(1e-2, 1e-3),
        n_search=20_000,
        n_test=100_000,
        rng=3,
    )
    for a in r.audits:
        assert a.ceiling == pytest.approx(stats.ceiling(100_000, 100_000, a.delta, 0.025))
        w = a.witness
        assert a.epsilon_lower == pytest.approx(
            stats.epsilon_lower_bound(
                w.hits_first, w.n_first, w.hits_second, w.n_second, a.delta, 0.025
            )
        )


def test_vector_outputs_use_a_trained_linear_discriminant() -> None:
    """5-d Gaussian, mean shift of norm 1 along a diagonal: equivalent to mu = 1."""
    v = np.ones(5) / math.sqrt(5)

    def sampler(which: int, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.normal(0.0, 1.0, (n, 5)) + which * v

    r = audit_mechanism(
        sampler,
        0,
        1,
        claimed_delta=lambda e: gaussian_delta(e, 1.0),
        deltas=(1e-2,),
        n_search=100_000,
        n_test=500_000,
        rng=4,
    )
    a = r.at(1e-2)
    assert r.score_mode.startswith("linear discriminant")
    assert a.claimed_epsilon == pytest.approx(gaussian_epsilon(1.0, 1e-2), abs=1e-9)
    assert 2.0 <= a.epsilon_lower <= a.claimed_epsilon


def test_white_box_llr_score() -> None:
    r = audit_mechanism(
        gaussian,
        0.0,
        1.0,
        claimed_epsilon=EPS_GAUSS_1E3,
        deltas=(1e-3,),
        n_search=100_000,
        n_test=500_000,
        rng=5,
        log_likelihood_ratio=lambda x: x - 0.5,
    )
    assert r.score_mode.startswith("white-box")
    assert 2.5 <= r.at(1e-3).epsilon_lower <= EPS_GAUSS_1E3


def test_point_masses_reach_the_ceiling_and_serialise() -> None:
    r = audit_mechanism(
        lambda d, n, rng: np.full(n, float(d)),
        0,
        1,
        claimed_epsilon=1.0,
        deltas=(0.0, 1e-3),
        n_search=1000,
        n_test=10_000,
        rng=0,
    )
    assert r.verdict == VIOLATION
    for a in r.audits:
        assert a.epsilon_lower == pytest.approx(a.ceiling)
        assert math.isinf(a.epsilon_estimate)
    data = json.loads(json.dumps(r.to_dict(), allow_nan=False))
    assert data["verdict"] == VIOLATION and data["audits"][0]["epsilon_estimate"] == "inf"
    assert data["audits"][1]["witness"]["hits_first"] == 10_000


@pytest.mark.parametrize(
    "kwargs",
    [
        {"deltas": ()},
        {"deltas": (1.0,)},
        {"deltas": (1e-3, 1e-3)},
        {"n_test": 5},
        {"alpha": 1.5},
        {"claimed_epsilon": {1e-2: 1.0}},
        {"claimed_epsilon": 1.0, "claimed_delta": lambda e: 0.0},
    ],
)
def test_bad_arguments_raise(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidParameterError):
        audit_mechanism(gaussian, 0.0, 1.0, **{"n_search": 100, "n_test": 100, **kwargs})


def test_sampler_returning_wrong_shape_raises() -> None:
    with pytest.raises(InvalidParameterError, match="sampler"):
        audit_mechanism(lambda d, n, rng: np.zeros(n + 1), 0, 1, n_search=100, n_test=100)
