"""The runtime privacy ledger: noise scales, dominance matching, violations named by step."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpledger.core.errors import InvalidParameterError, LedgerViolationError
from dpledger.core.events import (
    ComposedEvent,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
)
from dpledger.runtime.coverage import canonical_multiset, multiset_covered
from dpledger.runtime.ledger import PrivacyLedger, make_rng


def test_gaussian_and_laplace_noise_scales() -> None:
    ledger = PrivacyLedger(ComposedEvent([GaussianEvent(1.5), LaplaceEvent(2.0)]), rng=0)
    g = ledger.gaussian(np.zeros(40_000), 2.0, 1.5, step="g")
    lap = ledger.laplace(np.zeros(40_000), 0.5, 2.0, step="l")
    # std 3.0; Laplace scale 1.0 = mean absolute deviation. SE of each estimate is < 0.6 %.
    assert abs(g.std() / 3.0 - 1) < 0.03
    assert abs(np.abs(lap).mean() / 1.0 - 1) < 0.03
    ledger.verify()
    assert ledger.matches_exactly()


def test_clip_rows_l2_bounds_every_row() -> None:
    ledger = PrivacyLedger(GaussianEvent(1.0), rng=0)
    x = np.array([[3.0, 4.0], [0.3, 0.4], [1e300, 1e300]])
    clipped = ledger.clip_rows_l2(x, 1.0)
    norms = np.linalg.norm(clipped, axis=1)
    assert np.all(norms <= 1.0)
    np.testing.assert_allclose(clipped[0], [0.6, 0.8], rtol=1e-12)
    np.testing.assert_array_equal(clipped[1], x[1])
    assert ledger.clip_rows_l2(np.zeros((0, 3)), 1.0).shape == (0, 3)


def test_order_of_steps_does_not_matter_for_matching() -> None:
    declared = ComposedEvent([GaussianEvent(2.0), GaussianEvent(1.0)])
    ledger = PrivacyLedger(declared, rng=0)
    ledger.gaussian(0.0, 1.0, 1.0, step="weak")  # greedy would take the 2.0 slot
    ledger.gaussian(0.0, 1.0, 2.0, step="strong")
    ledger.verify()


def test_more_noise_than_declared_is_fine_but_not_exact() -> None:
    ledger = PrivacyLedger(GaussianEvent(1.0), rng=0)
    ledger.gaussian(0.0, 1.0, 3.0, step="g")
    ledger.verify()
    assert not ledger.matches_exactly()


@pytest.mark.parametrize(
    ("run", "message"),
    [
        (lambda L: L.gaussian(0.0, 1.0, 0.9, step="s1"), "step 's1'"),
        (lambda L: L.laplace(0.0, 1.0, 5.0, step="s2"), "no laplace step is declared"),
        (
            lambda L: [L.gaussian(0.0, 1.0, 1.0, step=f"t{i}") for i in range(2)],
            "step 't1'.*more steps than declared: 2 executed",
        ),
    ],
)
def test_violations_name_the_step(run, message) -> None:  # type: ignore[no-untyped-def]
    ledger = PrivacyLedger(GaussianEvent(1.0), rng=0)
    with pytest.raises(LedgerViolationError, match=message):
        run(ledger)


def test_dp_sgd_shape_and_empty_batches_are_kept() -> None:
    q, steps, n = 0.01, 60, 50  # P(empty batch) = 0.99**50 = 0.605
    declared = SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(1.0)), steps)
    ledger = PrivacyLedger(declared, rng=3)
    sizes = []
    for t in range(steps):
        with ledger.poisson_sample(n, q, step=f"b{t}") as batch:
            sizes.append(len(batch))
            rows = ledger.clip_rows_l2(np.ones((len(batch), 2)), 1.0, step=f"c{t}")
            ledger.gaussian(rows.sum(axis=0), 1.0, 1.0, step=f"n{t}")
    assert sizes.count(0) > 20  # empty batches happened and were not re-drawn
    ledger.verify()
    assert ledger.matches_exactly()
    with (
        pytest.raises(LedgerViolationError, match=r"step 'extra'.*more steps than declared"),
        ledger.poisson_sample(n, q, step="b"),
    ):
        ledger.gaussian(np.zeros(2), 1.0, 1.0, step="extra")


def test_poisson_sample_inclusion_rate() -> None:
    ledger = PrivacyLedger(PoissonSampledEvent(0.2, GaussianEvent(1.0)), rng=11)
    sample = ledger.poisson_sample(100_000, 0.2, step="s")
    # binomial(1e5, 0.2): sd 126.5; 6 sd band
    assert abs(len(sample) - 20_000) < 760


def test_unsampled_noise_is_not_covered_by_a_sampled_declaration() -> None:
    ledger = PrivacyLedger(PoissonSampledEvent(0.1, GaussianEvent(1.0)), rng=0)
    with pytest.raises(LedgerViolationError, match="no gaussian step is declared"):
        ledger.gaussian(0.0, 1.0, 1.0, step="outside")


def test_sampled_step_is_covered_by_an_unsampled_declaration() -> None:
    ledger = PrivacyLedger(GaussianEvent(1.0), rng=0)
    with ledger.poisson_sample(10, 0.5, step="s"):
        ledger.gaussian(0.0, 1.0, 1.0, step="g")
    ledger.verify()


def test_without_replacement_sample_size_checked() -> None:
    declared = SampledWithoutReplacementEvent(100, 10, GaussianEvent(1.0))
    ledger = PrivacyLedger(declared, rng=0)
    sample = ledger.sample_without_replacement(100, 20, step="wor")
    assert len(sample) == 20 and len(set(sample.indices.tolist())) == 20
    with pytest.raises(LedgerViolationError, match="larger than declared"), sample:
        ledger.gaussian(0.0, 1.0, 1.0, step="g")


def test_exponential_mechanism_frequencies() -> None:
    scores = np.array([0.0, 1.0, 2.0])
    eps, n = 2.0, 6_000
    ledger = PrivacyLedger(SelfComposedEvent(ExponentialMechanismEvent(eps), n), rng=5)
    picks = np.bincount(
        [ledger.exponential_mechanism(scores, 1.0, eps, step="em") for _ in range(n)], minlength=3
    )
    expected = np.exp(eps * scores / 2) / np.exp(eps * scores / 2).sum()
    sd = np.sqrt(n * expected * (1 - expected))
    assert np.all(np.abs(picks - n * expected) < 6 * sd)


def test_noisy_top_k_books_k_exponential_mechanisms() -> None:
    ledger = PrivacyLedger(SelfComposedEvent(ExponentialMechanismEvent(1.0), 3), rng=0)
    top = ledger.noisy_top_k(np.array([100.0, 0.0, 99.0, 98.0, -5.0]), 1.0, 1.0, 3, step="top")
    assert sorted(top.tolist()) == [0, 2, 3]  # gaps of ~100 sensitivities are never overturned
    assert canonical_multiset(ledger.executed_event()) == ((ExponentialMechanismEvent(1.0), 3),)
    with pytest.raises(LedgerViolationError):
        ledger.report_noisy_max(np.zeros(3), 1.0, 1.0, step="rnm")


def test_open_sample_fails_verification() -> None:
    ledger = PrivacyLedger(PoissonSampledEvent(0.5, GaussianEvent(1.0)), rng=0)
    sample = ledger.poisson_sample(10, 0.5, step="open")
    sample.__enter__()
    with pytest.raises(LedgerViolationError, match=r"'open'.*still open"):
        ledger.verify()


def test_seeded_and_secure_generators() -> None:
    a = make_rng(42).normal(size=3)
    np.testing.assert_array_equal(a, make_rng(42).normal(size=3))
    s1, s2 = make_rng(secure=True), make_rng(secure=True)
    assert not np.array_equal(s1.normal(size=3), s2.normal(size=3))
    with pytest.raises(InvalidParameterError, match="seed"):
        make_rng(1, secure=True)
    with pytest.raises(InvalidParameterError, match="sensitivity"):
        PrivacyLedger(GaussianEvent(1.0), rng=0).gaussian(0.0, -1.0, 1.0, step="g")
    with pytest.raises(InvalidParameterError, match="values"):
        PrivacyLedger(GaussianEvent(1.0), rng=0).gaussian([math.nan], 1.0, 1.0, step="g")


def test_multiset_covered_counts() -> None:
    declared = canonical_multiset(SelfComposedEvent(GaussianEvent(1.0), 5))
    assert multiset_covered(canonical_multiset(SelfComposedEvent(GaussianEvent(1.5), 5)), declared)
    assert not multiset_covered(
        canonical_multiset(SelfComposedEvent(GaussianEvent(1.5), 6)), declared
    )
