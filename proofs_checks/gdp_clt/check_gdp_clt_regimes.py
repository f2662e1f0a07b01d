"""Where Lemma 3.1's central-limit formula under-states epsilon (and how the gap closes)."""

from __future__ import annotations

import functools
import math

import pytest
from scipy import optimize
from scipy.stats import norm

from dpledger.accountant import select
from dpledger.accountant.base import EpsilonBound
from dpledger.core.events import GaussianEvent, PoissonSampledEvent, SelfComposedEvent
from dpledger.plugins.trajectories.declare import gdp_epsilon, paper_gdp_mu

DELTA = 1e-4


def clt_epsilon(rho: float, tau: float, k: int, delta: float = DELTA) -> float:
    """mu = rho sqrt(K (e^{1/tau^2} - 1)), then the exact GDP profile inverted at delta."""
    mu = rho * math.sqrt(k * math.expm1(1.0 / tau**2))
    f = lambda e: norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2) - delta  # noqa: E731
    return float(optimize.brentq(f, 0.0, 100.0, xtol=1e-12))


@functools.cache
def certified(rho: float, tau: float, k: int) -> tuple[float, float]:
    ev = SelfComposedEvent(PoissonSampledEvent(rho, GaussianEvent(tau)), k)
    b = select.account(ev, delta=DELTA, backends=["pld"]).bound
    assert isinstance(b, EpsilonBound)
    return b.epsilon_lower, b.epsilon


def test_the_plugin_states_the_paper_formula() -> None:
    """The trajectories plugin's GDP functions compute exactly the lemma's formula."""
    rho, k, tau = 5 / 674, 20, 1.0
    assert paper_gdp_mu(rho, k, tau) == pytest.approx(rho * math.sqrt(k * math.expm1(1)), rel=1e-12)
    assert gdp_epsilon(paper_gdp_mu(rho, k, tau), DELTA) == pytest.approx(
        clt_epsilon(rho, tau, k), rel=1e-6
    )


# (rho, tau, K, largest ratio clt / certified lower bound)
REGIMES = [
    (5 / 674, 1.0, 20, 0.56),  # Table 2 sampling rate, K = 20: under-stated by 45 %
    (20 / 674, 0.7, 20, 0.45),  # Fig. 1 sampling rate, implied tau: under-stated by 55 %
    (5 / 674, 2.0, 20, 0.86),  # more noise: closer, still below
    (5 / 674, 1.0, 100, 0.73),  # more steps: closer, still below
]


@pytest.mark.parametrize(("rho", "tau", "k", "max_ratio"), REGIMES)
def test_clt_is_below_the_certified_lower_bound(
    rho: float, tau: float, k: int, max_ratio: float
) -> None:
    lower, upper = certified(rho, tau, k)
    clt = clt_epsilon(rho, tau, k)
    assert lower <= upper <= lower * 1.01 + 1e-3  # the accountant's bracket is tight here
    assert clt < lower  # the formula is below a certified LOWER bound: an under-statement
    assert clt / lower <= max_ratio


def test_the_gap_closes_as_k_and_tau_grow() -> None:
    """The CLT is asymptotic in K: the ratio rises towards 1 with K and with the noise."""
    ratios_k = [clt_epsilon(5 / 674, 1.0, k) / certified(5 / 674, 1.0, k)[0] for k in (20, 100)]
    ratios_tau = [clt_epsilon(5 / 674, t, 20) / certified(5 / 674, t, 20)[0] for t in (0.7, 2.0)]
    assert ratios_k[0] < ratios_k[1] < 1.0
    assert ratios_tau[0] < ratios_tau[1] < 1.0
