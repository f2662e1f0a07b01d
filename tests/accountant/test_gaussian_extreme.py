"""The Gaussian profile evaluated in t = ε/μ − μ/2: exact at any μ, against 80-digit mpmath
(fixed cases: ``proofs_checks/gaussian/check_gaussian_extreme.py``)."""

from __future__ import annotations

import mpmath as mp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.accountant.gaussian_extreme import gaussian_delta_extreme, gaussian_epsilon_extreme
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import GaussianEvent, SelfComposedEvent


def _reference_epsilon(mu: float, delta: float) -> mp.mpf:
    """Balle-Wang's exact epsilon of mu-GDP at delta, by bisection in t at 80 digits."""
    with mp.workdps(80):
        m = mp.mpf(mu)

        def excess(t: mp.mpf) -> mp.mpf:
            second = mp.exp(-t * t / 2 + ((m + t) / mp.sqrt(2)) ** 2) * mp.erfc(
                (m + t) / mp.sqrt(2)
            )
            return mp.ncdf(-t) - second / 2 - delta

        a, b = mp.mpf(max(-40.0, -mu / 2)), mp.mpf(40)
        for _ in range(120):
            mid = (a + b) / 2
            a, b = (mid, b) if excess(mid) > 0 else (a, mid)
        return m * (m / 2 + a)


@settings(max_examples=15, deadline=None)
@given(
    log_mu=st.floats(min_value=-1.0, max_value=15.0),
    log_delta=st.floats(min_value=-300.0, max_value=-1.0),
)
def test_bracket_is_sound_everywhere(log_mu: float, log_delta: float) -> None:
    mu, delta = 10.0**log_mu, 10.0**log_delta
    upper, lower = gaussian_epsilon_extreme(mu, mu, delta)
    exact = _reference_epsilon(mu, delta)
    assert lower <= exact <= upper


@pytest.mark.parametrize("count", [10**13, 10**20, 10**30])
def test_huge_gaussian_compositions_are_bracketed_exactly(count: int) -> None:
    """σ = 1 composed 1e13..1e30 times: μ = √count, both ends within 1e-12 of the exact value
    (the lower bound was 0 and the upper came from RDP before)."""
    bound = account(SelfComposedEvent(GaussianEvent(1.0), count), Adjacency(), delta=1e-5).bound
    exact = _reference_epsilon(count**0.5, 1e-5)
    assert bound.method == "closed_form"
    assert bound.epsilon_lower <= exact <= bound.epsilon
    assert (bound.epsilon - bound.epsilon_lower) / exact < 1e-12


def _tail(x: float) -> mp.mpf:
    """Mills' bound Phi(-x) <= phi(x) / x for x > 0, at 80 digits (mpmath's erfc fails beyond
    ~1e154)."""
    with mp.workdps(80):
        z = mp.mpf(x)
        return mp.exp(-z * z / 2) / (z * mp.sqrt(2 * mp.pi))


@pytest.mark.parametrize("sigma", [1e-300, 1e-200, 1e-155])
@pytest.mark.parametrize("epsilon", [-1.0, 0.0, 1.0, 100.0])
def test_delta_of_a_vanishing_noise_is_one(sigma: float, epsilon: float) -> None:
    """mu = 1/sigma beyond 1e154: t = eps/mu - mu/2 is far below -40 and the slack, which grows
    with t^2, was infinite, its product with a zero term NaN, and the upper delta read 0. The
    truth Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu) lies within Mills' bounds of 1."""
    mu = 1.0 / sigma
    bound = account(GaussianEvent(sigma), Adjacency(), epsilon=epsilon).bound
    with mp.workdps(80):
        below = 1 - _tail(mu / 2 - epsilon / mu) - mp.exp(epsilon) * _tail(mu / 2 + epsilon / mu)
    assert bound.delta == 1.0
    assert 1 - 1e-8 < bound.delta_lower <= below


@pytest.mark.parametrize(("mu", "epsilon"), [(1e100, 1e303), (1e10, 1e30), (1e3, 1e7)])
def test_delta_far_in_the_tail_is_positive(mu: float, epsilon: float) -> None:
    """t far above 40: the delta is positive but below Mills' bound on Phi(-t), itself below
    the smallest double; the upper bound is that smallest double, not 0."""
    upper, lower = gaussian_delta_extreme(mu, mu, epsilon)
    assert _tail(epsilon / mu - mu / 2) < 5e-324
    assert lower == 0.0 and upper == 5e-324


def test_a_nan_term_reads_as_no_information() -> None:
    """At mu = 1 and t = -39.5, e^{-t^2/2} underflows while erfcx overflows: their product is
    NaN, read as 1 (upper) and 0 (lower), not as a number (the truth is about 1)."""
    upper, lower = gaussian_delta_extreme(1.0, 1.0, -39.0)
    assert (upper, lower) == (1.0, 0.0)
