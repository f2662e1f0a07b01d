"""The lower curves of leaf events are curves their mechanisms attain."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpledger.accountant.leaves import leaf_profiles
from dpledger.core.adjacency import ROW_ADD_REMOVE, ROW_REPLACE_ONE, Adjacency
from dpledger.core.events import (
    Event,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PureDPEvent,
    ReportNoisyMaxEvent,
    SampledWithoutReplacementEvent,
)


@pytest.mark.parametrize("kind", [ExponentialMechanismEvent, ReportNoisyMaxEvent])
@pytest.mark.parametrize("adjacency", [ROW_ADD_REMOVE, ROW_REPLACE_ONE])
def test_exponential_mechanism_lower_curve_is_randomized_response_at_half(
    kind: type[Event], adjacency: Adjacency
) -> None:
    # two candidates scored (s/2, -s/2) and (-s/2, s/2): losses +-eps/2, so delta(0) is
    # tanh(eps/4), the most an eps-bounded-range mechanism reaches (not tanh(eps/2))
    d = leaf_profiles(kind(1.0), adjacency)  # type: ignore[call-arg]
    at = np.array([0.0, 0.25, 0.5])
    if kind is ReportNoisyMaxEvent:
        # Laplace noise (scale 2s/eps) on the same scores: the two draws differ by more than s
        # with probability e^{-1/2} (1 + 1/4) / 2, so delta(0) is 1 - e^{-1/2} (1 + 1/4)
        # (0.2418; the ledger's report-noisy-max measured 0.2412 +- 0.0022)
        assert d.lower_remove(at)[0] == pytest.approx(1 - 1.25 * math.exp(-0.5), rel=1e-9)
        assert d.lower_remove(at)[0] < math.tanh(0.25)
        return
    assert d.lower_remove(at)[0] == pytest.approx(math.tanh(0.25), rel=1e-9)
    half = -math.expm1(0.25 - 0.5) / (1 + math.exp(-0.5))  # RR(1/2) at eps = 1/4
    assert d.lower_add(at)[1] == pytest.approx(half, rel=1e-9)
    assert d.lower_remove(at)[2] == 0.0
    # the upper curve: the exponential mechanism's losses span at most eps, so its largest
    # curve is tanh(eps/4) at 0 (attained: the lower curve meets it there); report-noisy-max
    # may use Laplace noise and keeps randomized response at eps
    top = math.tanh(0.25) if kind is ExponentialMechanismEvent else math.tanh(0.5)
    assert d.remove(at)[0] == pytest.approx(top, rel=1e-9)


def test_sampled_exponential_mechanism_lower_curves_start_from_the_attained_base() -> None:
    em = leaf_profiles(PoissonSampledEvent(0.1, ExponentialMechanismEvent(1.0)), ROW_ADD_REMOVE)
    rr = leaf_profiles(PoissonSampledEvent(0.1, PureDPEvent(0.5)), ROW_ADD_REMOVE)
    at = np.linspace(-0.05, 0.2, 11)
    np.testing.assert_allclose(em.lower_remove(at), rr.lower_remove(at), rtol=1e-9)
    np.testing.assert_allclose(em.lower_add(at), rr.lower_add(at), rtol=1e-9)
    wor = leaf_profiles(
        SampledWithoutReplacementEvent(100, 10, ExponentialMechanismEvent(1.0)), ROW_REPLACE_ONE
    )
    assert float(wor.lower_remove(np.array([0.0]))[0]) == pytest.approx(
        0.1 * math.tanh(0.25), rel=1e-9
    )


@pytest.mark.parametrize("event", [PureDPEvent(1.0), LaplaceEvent(2.0)])
def test_attained_bases_share_the_upper_curve(event: Event) -> None:
    d = leaf_profiles(event, ROW_ADD_REMOVE)
    assert d.lower_remove is d.remove and d.lower_add is d.add


def test_replace_one_sampled_gaussian_charges_the_rounding_of_its_tails() -> None:
    from dpledger.accountant.profiles import REPLACE_ONE_SHARED_A

    wide = leaf_profiles(PoissonSampledEvent(0.5, GaussianEvent(1.0)), ROW_REPLACE_ONE)
    assert wide.lower_remove is wide.remove  # a = 1 >= REPLACE_ONE_SHARED_A: one curve
    # a = 1e-3: the curve is a difference of tails equal to 4 digits; 50-digit truth at
    # eps = 0.0350625 (tests/redteam/test_account_extremes_more.py): 3.6431472331560974e-274
    narrow = leaf_profiles(PoissonSampledEvent(0.5, GaussianEvent(1e3)), ROW_REPLACE_ONE)
    assert REPLACE_ONE_SHARED_A > 1e-3
    at = np.array([0.0350625])
    truth = 3.6431472331560974e-274
    assert float(narrow.remove(at)[0]) >= truth
    assert float(narrow.lower_remove(at)[0]) <= truth
    assert float(narrow.remove(at)[0]) <= truth * (1 + 1e-7)


@pytest.mark.parametrize("a", [0.4, 0.7, 1.0, 3.0])
def test_replace_one_shared_curve_rounding_is_within_the_margin(a: float) -> None:
    # the charged and uncharged curves differ by the rounding bound; from a = 0.4 up it must
    # stay well inside the profile's relative margin, where one curve is used for both bounds
    from dpledger.accountant.profiles import REL_MARGIN, poisson_gaussian_replace_one

    worst = 0.0
    for q in (1e-8, 1e-3, 0.1, 0.5, 0.999999):
        plain = poisson_gaussian_replace_one(a, q)
        charged = poisson_gaussian_replace_one(a, q, 1.0)
        eps = np.concatenate(
            [np.linspace(0.0, min(plain.loss_hi, 200.0), 4001), -np.linspace(0, 5, 201)]
        )
        base, up = plain(eps), charged(eps)
        keep = base > 1e-300
        worst = max(worst, float(np.max((up[keep] - base[keep]) / base[keep])))
    assert 0.0 < worst <= 0.25 * REL_MARGIN


@pytest.mark.parametrize("eps0", [1e-9, 0.3, 1.0, 20.0, 500.0])
def test_bounded_range_curve_is_self_dual_and_meets_its_ends(eps0: float) -> None:
    from dpledger.accountant.profiles import bounded_range_profile

    p = bounded_range_profile(eps0)
    e = np.linspace(-eps0, eps0, 101)
    d = p.delta(e)
    # self-dual: delta(e) = 1 - e^e + e^e delta(-e) (checked for e <= 0, free of cancellation)
    neg = e[e <= 0]
    dual = -np.expm1(neg) + np.exp(neg) * p.delta(-neg)
    np.testing.assert_allclose(p.delta(neg), dual, rtol=1e-9, atol=1e-300)
    assert d[0] == pytest.approx(-math.expm1(-eps0), rel=1e-12) and d[-1] == 0.0
    assert float(p.delta(np.array([0.0]))[0]) == pytest.approx(math.tanh(eps0 / 4), rel=1e-12)
    # non-increasing and convex in x = e^eps (a privacy curve)
    assert np.all(np.diff(d) <= 1e-15)
