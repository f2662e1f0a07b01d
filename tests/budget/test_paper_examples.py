"""The filters' halting rules on worked numbers printed in papers, where one was found.

Searched for a worked number (a count of Gaussian steps a stated budget admits, a table of
admitted counts, a closed-form example, the value of a filter's bound for stated parameters,
a numeric comparison in the text) in the five papers behind the budget rules. What could be
read of each (the stored copies reachable from here hold each page's first ~2,000
characters; no stored repository holds the papers' full text, and none of Feldman & Zrnic's,
Whitehouse et al.'s or Lecuyer's experiment code was found):

* Feldman & Zrnic, "Individual privacy accounting via a Renyi filter" (arXiv 2008.11193,
  NeurIPS 2021; arxiv-vanity, OpenReview and NeurIPS pages): the abstract and the first two
  paragraphs of Section 1. Sections 2-5 (the filter's theorem, the individual filter, the
  noisy gradient descent experiments) and the appendices were not readable.
* Whitehouse, Ramdas, Rogers & Wu, "Fully-adaptive composition in differential privacy"
  (arXiv 2203.05481, ICML 2023; PMLR page, an ICML text copy): the abstract only (the copy
  stops at the heading of Section 1). The filter theorems of Section 3, the odometers and
  the comparison figures were not readable.
* Smith & Thakurta, "Fully adaptive composition for Gaussian differential privacy" (arXiv
  2210.17520; ar5iv): the abstract, the definition of mu-GDP and the opening statement that
  the filter "sums the squares of privacy budgets and compares them to a threshold", with
  parameters as for nonadaptive composition (tested below, no number), and the start of the
  interaction model; the theorem's proof was not readable.
* Lecuyer, "Practical privacy filters and odometers with Renyi differential privacy" (arXiv
  2103.01379; ar5iv): the abstract and the first paragraph of Section 1.
* Koskela, Tobaben & Honkela, "Individual privacy accounting with Gaussian differential
  privacy" (arXiv 2209.15596, ICLR 2023; ar5iv, an ICLR text copy, the SPIQA TeX copy): the
  abstract and the first two paragraphs of Section 1; and their experiment code
  (DPBayes/individual-accounting-gdp: README, fig1_fig3_experiments/plot_fig1a.py,
  mimic_experiments/compute_eps/eps.py), which sets parameters (sigma = 2.0, clipping 5.0,
  q = 300/60000, delta = 1e-5) but prints no number in the code.

None of those parts states a worked number that a filter's halting rule or bound
determines; whether the unread sections do is open (the issue's must-show "worked examples
from the papers" is not met for these papers). The theorem-derived counts of
``test_rules.py`` stay (each rule's count solved from its theorem's condition, independently
of dpledger). The one printed number reproduced here is from the Gaussian-DP line of work the
``gdp`` rule converts with: Bu, Dong, Long & Su ("Deep learning with Gaussian differential
privacy", Harvard Data Science Review 2020, Figure 4's caption, read in full) state that
mu = 0.35 gives (1.34, 1e-5)-DP and mu = 1.78 gives (8.68, 1e-5)-DP (Dong, Roth & Su's
conversion).
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
