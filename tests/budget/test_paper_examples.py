"""The filters' halting rules on worked numbers printed in papers, where one was found.

Searched for a worked number (a count of Gaussian steps a stated budget admits, a tabulated
or plotted value): Feldman & Zrnic 2021, Whitehouse, Ramdas, Rogers & Wu 2023, Smith &
Thakurta 2022 and Lécuyer 2021. The parts of those papers consulted (abstracts and
introductions; their full texts were not available to read here) state no such number, so
for them the theorem-derived counts of ``test_rules.py`` stay (each rule's count solved from
its theorem's condition, independently of dpledger). The one printed number reproduced here
is from the Gaussian-DP line of work the ``gdp`` rule converts with: Bu, Dong, Long & Su
("Deep learning with Gaussian differential privacy", Harvard Data Science Review 2020,
Figure 4's caption) state that mu = 0.35 gives (1.34, 1e-5)-DP and mu = 1.78 gives
(8.68, 1e-5)-DP (Dong, Roth & Su's conversion).
"""

from __future__ import annotations

import math

import pytest
from scipy import optimize
from scipy.stats import norm

from dpledger.budget import rules
from dpledger.core.events import GaussianEvent


def _gdp_delta(eps: float, mu: float) -> float:
    return float(norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2))


def _count(total: tuple[float, float], sigma: float) -> int:
    params = rules.default_params("gdp", *total)
    state = rules.initial_state("gdp", params)
    cost = rules.charge("gdp", params, GaussianEvent(sigma), "add_remove")
    while (decision := rules.decide("gdp", total, params, state, cost)).fits:
        state = decision.state
    return int(state["count"])


@pytest.mark.parametrize(("eps", "mu_printed"), [(1.34, 0.35), (8.68, 1.78)])
def test_gdp_total_of_the_papers_worked_example_has_its_mu(eps: float, mu_printed: float) -> None:
    """Bu, Dong, Long & Su 2020, Figure 4: (1.34, 1e-5) and (8.68, 1e-5) are the totals of
    mu = 0.35 and mu = 1.78 (two decimals, as printed); back, the printed epsilon lies within
    the epsilons of the mu values that round to the printed one (8.68: mu = 1.78 itself
    gives 8.67, the paper's mu was not exactly 1.78)."""
    mu = rules.default_params("gdp", eps, 1e-5)["mu"]
    assert round(mu, 2) == mu_printed
    low = rules.gdp_epsilon(mu_printed - 0.005, 1e-5)
    high = rules.gdp_epsilon(mu_printed + 0.005, 1e-5)
    assert low <= eps <= high


@pytest.mark.parametrize("sigma", [4.0, 10.0, 25.0])
def test_gdp_filter_admits_what_the_nonadaptive_composition_allows(sigma: float) -> None:
    """Smith & Thakurta 2022 (abstract): the GDP filter has 'the same parameters as for
    nonadaptive composition'. k Gaussian steps of noise sigma compose nonadaptively to
    mu = sqrt(k) / sigma (Dong, Roth & Su 2022); the filter of total (1.34, 1e-5) admits the
    largest k whose exact delta(1.34) is within 1e-5 (scipy), no fewer."""
    total = (1.34, 1e-5)
    exact_mu = optimize.brentq(lambda m: _gdp_delta(1.34, m) - 1e-5, 0.01, 5.0, xtol=1e-15)
    k = _count(total, sigma)
    assert k == math.floor(exact_mu**2 * sigma**2)
    assert _gdp_delta(1.34, math.sqrt(k) / sigma) <= 1e-5 * (1 + 1e-9)
    assert _gdp_delta(1.34, math.sqrt(k + 1) / sigma) > 1e-5
