"""Canonical worst-case pairs of core events and audit_event against the accountant."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from dpledger.audit import audit_event, canonical_pair
from dpledger.audit.auditor import NO_VIOLATION, VIOLATION
from dpledger.audit.reference import (
    gaussian_epsilon,
    laplace_delta,
    subsampled_gaussian_delta,
    subsampled_gaussian_epsilon,
)
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import UnsupportedEventError
from dpledger.core.events import (
    ComposedEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    RandomizedResponseEvent,
    SelfComposedEvent,
)

REPLACE = Adjacency(relation="replace_one")
X = np.linspace(-6, 7, 27)


def test_llrs_match_scipy_densities() -> None:
    g = canonical_pair(GaussianEvent(0.7), REPLACE)
    expected = sps.norm.logpdf(X, 2.0, 0.7) - sps.norm.logpdf(X, 0.0, 0.7)
    np.testing.assert_allclose(g.log_likelihood_ratio(X), expected, atol=1e-9)
    lap = canonical_pair(LaplaceEvent(0.5))
    expected = sps.laplace.logpdf(X, 1.0, 0.5) - sps.laplace.logpdf(X, 0.0, 0.5)
    np.testing.assert_allclose(lap.log_likelihood_ratio(X), expected, atol=1e-9)
    q = 0.3
    mix = canonical_pair(PoissonSampledEvent(q, GaussianEvent(1.5)))
    with_x = (1 - q) * sps.norm.pdf(X, 0, 1.5) + q * sps.norm.pdf(X, 1, 1.5)
    np.testing.assert_allclose(
        mix.log_likelihood_ratio(X), np.log(with_x) - sps.norm.logpdf(X, 0, 1.5), atol=1e-9
    )


def test_samplers_have_the_declared_distributions() -> None:
    rng = np.random.default_rng(0)
    q = 0.3
    pair = canonical_pair(PoissonSampledEvent(q, GaussianEvent(1.0)))
    x = pair.sampler(pair.d_prime, 200_000, rng)
    cdf = lambda t: (1 - q) * sps.norm.cdf(t) + q * sps.norm.cdf(t - 1)  # noqa: E731
    assert sps.kstest(x, cdf).statistic < 0.0076  # kstwo(2e5).isf(1e-6)
    rr = canonical_pair(RandomizedResponseEvent(1.0, 4))
    y = rr.sampler(rr.d, 200_000, rng)
    p = math.e / (math.e + 3)
    np.testing.assert_allclose(
        np.bincount(y.astype(int), minlength=4) / 2e5,
        [p, (1 - p) / 3, (1 - p) / 3, (1 - p) / 3],
        atol=0.004,
    )


def test_unsupported_events_raise() -> None:
    with pytest.raises(UnsupportedEventError):
        canonical_pair(ComposedEvent([GaussianEvent(1.0), LaplaceEvent(1.0)]))
    with pytest.raises(UnsupportedEventError):
        canonical_pair(PoissonSampledEvent(0.1, RandomizedResponseEvent(1.0)))


def test_replace_one_doubles_the_sensitivity() -> None:
    """Replace-one Gaussian(2) is mu = 1; a claim made for add/remove is caught."""
    add_remove_claim = gaussian_epsilon(0.5, 1e-3)
    r = audit_event(
        GaussianEvent(2.0),
        REPLACE,
        claimed_epsilon=add_remove_claim,
        deltas=(1e-3,),
        n_search=200_000,
        n_test=1_000_000,
        rng=0,
    )
    a = r.at(1e-3)
    assert r.verdict == VIOLATION
    assert add_remove_claim < a.epsilon_lower <= gaussian_epsilon(1.0, 1e-3)


def test_self_composition_is_audited_with_the_summed_llr() -> None:
    ev = SelfComposedEvent(GaussianEvent(math.sqrt(3.0)), 3)  # mu = 1 in total
    r = audit_event(
        ev,
        claimed_epsilon=gaussian_epsilon(1.0, 1e-2),
        deltas=(1e-2,),
        n_search=100_000,
        n_test=500_000,
        rng=1,
    )
    assert r.verdict == NO_VIOLATION
    assert 2.1 <= r.at(1e-2).epsilon_lower <= gaussian_epsilon(1.0, 1e-2)


def test_randomized_response_and_laplace_are_tight() -> None:
    r = audit_event(
        RandomizedResponseEvent(1.0),
        claimed_epsilon=1.0,
        deltas=(0.0,),
        n_search=50_000,
        n_test=500_000,
        rng=2,
    )
    assert 0.97 <= r.at(0.0).epsilon_lower <= 1.0
    r = audit_event(
        LaplaceEvent(1.0),
        claimed_epsilon=1.0,
        deltas=(0.0,),
        n_search=50_000,
        n_test=500_000,
        rng=3,
        white_box=False,
    )
    assert 0.95 <= r.at(0.0).epsilon_lower <= 1.0
    assert laplace_delta(1.0, 1.0) == 0.0


def test_subsampled_gaussian_remove_direction_dominates() -> None:
    q = 0.5
    ev = PoissonSampledEvent(q, GaussianEvent(1.0))
    r = audit_event(
        ev,
        claimed_epsilon=subsampled_gaussian_epsilon(q, 1.0, 1e-3),
        deltas=(1e-3,),
        n_search=200_000,
        n_test=1_000_000,
        rng=4,
    )
    a = r.at(1e-3)
    assert a.witness.direction == "(D', D)"  # Pr[M(with x)] <= e^eps Pr[M(without x)] + delta
    assert a.epsilon_lower > 1.8
    assert subsampled_gaussian_delta(1.0, q, 1.0, "remove") > subsampled_gaussian_delta(
        1.0, q, 1.0, "add"
    )


def test_audit_event_claims_come_from_the_accountant() -> None:
    from dpledger.accountant import select

    ev = PoissonSampledEvent(0.5, GaussianEvent(1.0))
    try:
        expected = select.account(ev, Adjacency(), delta=1e-3).bound.epsilon
    except UnsupportedEventError as exc:
        pytest.skip(f"no accountant backend for the event yet: {exc}")
    assert expected >= subsampled_gaussian_epsilon(0.5, 1.0, 1e-3) - 1e-9
    r = audit_event(ev, deltas=(1e-3,), n_search=100_000, n_test=500_000, rng=5)
    assert r.claim_source.startswith("dpledger.accountant.select")
    assert r.at(1e-3).claimed_epsilon == pytest.approx(expected)
    assert r.verdict == NO_VIOLATION


def test_user_level_adjacency_is_lifted_before_auditing() -> None:
    user = Adjacency(relation="add_remove", unit="user", max_contributions=2, unit_key="uid")
    r = audit_event(
        GaussianEvent(2.0),
        user,
        claimed_epsilon=gaussian_epsilon(1.0, 1e-2),
        deltas=(1e-2,),
        n_search=100_000,
        n_test=500_000,
        rng=6,
    )
    assert "lifted from gaussian(noise_multiplier=2.0)" in r.description
    assert 2.1 <= r.at(1e-2).epsilon_lower <= gaussian_epsilon(1.0, 1e-2)
    with pytest.raises(UnsupportedEventError, match="lift"):
        canonical_pair(GaussianEvent(1.0), user)
