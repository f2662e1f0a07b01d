"""One-run estimators: closed forms, published properties and the certified trade-off curve."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dpledger.audit import one_run
from dpledger.core.errors import InvalidParameterError


@pytest.mark.parametrize(("r", "beta"), [(10, 0.05), (50, 0.05), (200, 0.01)])
def test_steinke_all_correct_is_the_binomial_closed_form(r: int, beta: float) -> None:
    # delta = 0, r guesses all right: P[Binom(r, p) >= r] = p^r = beta, eps = logit(beta^(1/r))
    p = beta ** (1.0 / r)
    expected = math.log(p / (1.0 - p))
    assert one_run.steinke_epsilon(1000, r, r, beta, 0.0) == pytest.approx(expected, abs=2e-6)


def test_steinke_p_value_with_delta_adds_the_theorem_term() -> None:
    m, r, v, eps, delta = 1000, 100, 80, 1.0, 1e-4
    p = 1.0 / (1.0 + math.exp(-eps))
    tail = stats.binom.sf(v - 1, r, p)
    term = max(
        (stats.binom.cdf(v - 1, r, p) - stats.binom.cdf(v - i - 1, r, p)) / i
        for i in range(1, v + 1)
    )
    assert one_run.steinke_p_value(m, r, v, eps, delta) == pytest.approx(
        tail + 2 * m * delta * term, rel=1e-9
    )


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 200), st.floats(0.0, 1.0), st.sampled_from([0.0, 1e-6, 1e-3]))
def test_steinke_bound_falls_with_fewer_correct_guesses(r: int, frac: float, delta: float) -> None:
    v = int(frac * r)
    high = one_run.steinke_epsilon(1000, r, v, 0.05, delta)
    low = one_run.steinke_epsilon(1000, r, max(v - 1, 0), 0.05, delta)
    assert 0.0 <= low <= high


def test_chance_guesses_give_no_bound() -> None:
    assert one_run.steinke_epsilon(1000, 100, 50, 0.05, 1e-5) == 0.0
    assert one_run.fdp_epsilon(_gaussian_family(1e-5), 1000, 100, 50, 0.05) == 0.0


def _gaussian_family(delta: float):  # type: ignore[no-untyped-def]
    """eps -> the trade-off of the mu-GDP mechanism whose eps at delta is eps."""

    def family(eps: float) -> one_run.TradeOff:
        lo, hi = 1e-6, 50.0
        for _ in range(80):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if one_run.gdp_epsilon_of_mu(mid, delta) < eps else (lo, mid)
        return one_run.gaussian_tradeoff(lo)

    return family


def test_one_point_profile_gives_the_eps_delta_curve() -> None:
    eps, delta = 1.0, 1e-3
    f = one_run.tradeoff_from_profile([eps], [delta])
    for a in (0.0, 0.01, 0.2, 0.5, 0.9, 1.0):
        expected = max(0.0, 1 - delta - math.e * a, math.exp(-1) * (1 - delta - a))
        assert f(a) == pytest.approx(expected, abs=1e-15)


def test_gaussian_profile_curve_is_below_the_gaussian_curve_and_close() -> None:
    mu = 1.0
    grid = np.linspace(0.0, 8.0, 400)
    deltas = [one_run.gdp_delta(mu, e) for e in grid]
    f = one_run.tradeoff_from_profile(grid, deltas)
    g = one_run.gaussian_tradeoff(mu)
    for a in np.linspace(0.001, 0.999, 50):
        assert f(a) <= g(a) + 1e-12
        assert f(a) >= g(a) - 5e-3


def test_a_curve_rejected_is_rejected_by_every_stronger_claim() -> None:
    m, r, v = 1000, 100, 90
    weak = one_run.gaussian_tradeoff(3.0)
    strong = one_run.gaussian_tradeoff(0.3)
    assert one_run.fdp_rejects(strong, m, r, v)
    assert not one_run.fdp_rejects(weak, m, r, v)


def test_gdp_delta_closed_form() -> None:
    mu, eps = 1.0, 1.0
    expected = stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(
        -eps / mu - mu / 2
    )
    assert one_run.gdp_delta(mu, eps) == pytest.approx(expected, rel=1e-12)
    assert one_run.gdp_delta(mu, one_run.gdp_epsilon_of_mu(mu, 1e-5)) == pytest.approx(1e-5)


def test_guesses_count_the_right_ones() -> None:
    scores = np.array([5.0, 4.0, 3.0, 2.0, 1.0, 0.0])
    included = np.array([True, False, True, False, False, True])
    g = one_run.guesses(scores, included, 2, 2)
    assert (g.r, g.v) == (4, 1 + 1)  # top two: 5 in, 4 out; bottom two: 1 out, 0 in


def test_bad_inputs_name_the_fix() -> None:
    with pytest.raises(InvalidParameterError, match="beta"):
        one_run.steinke_epsilon(10, 5, 5, 1.5)
    with pytest.raises(InvalidParameterError, match="k_plus"):
        one_run.guesses(np.zeros(4), np.zeros(4, bool), 5)
