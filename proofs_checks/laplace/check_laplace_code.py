"""The code objects of the Laplace profile against the piecewise closed form."""

from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest

from dpledger.accountant.conversions import laplace_delta_bracket
from dpledger.accountant.profiles import laplace_delta

mp.mp.dps = 40
EPS0 = (0.1, 1.0, 2.0, 7.5)


def exact(eps: float, eps0: float) -> mp.mpf:
    e, e0 = mp.mpf(eps), mp.mpf(eps0)
    if e >= e0:
        return mp.mpf(0)
    if e > -e0:
        return 1 - mp.e ** ((e - e0) / 2)
    return 1 - mp.e**e


def by_integration(eps: float, eps0: float) -> mp.mpf:
    """sup_S P(S) - e^eps Q(S) for Lap(eps0, 1) vs Lap(0, 1), without the formula."""

    def p(x: mp.mpf) -> mp.mpf:
        return mp.e ** (-abs(x - eps0)) / 2

    def q(x: mp.mpf) -> mp.mpf:
        return mp.e ** (-abs(x)) / 2

    def f(x: mp.mpf) -> mp.mpf:
        return max(mp.mpf(0), p(x) - mp.e**eps * q(x))

    cuts = sorted({0.0, (eps + eps0) / 2, eps0})
    return mp.quad(f, [-mp.inf, *cuts, mp.inf])


@pytest.mark.parametrize(("eps", "eps0"), [(0.5, 1.0), (0.0, 1.0), (-2.0, 1.0), (1.0, 2.0)])
def test_closed_form_equals_integration(eps: float, eps0: float) -> None:
    assert exact(eps, eps0) == pytest.approx(by_integration(eps, eps0), abs=1e-25)


@pytest.mark.parametrize("eps0", EPS0)
def test_profile_matches_every_branch(eps0: float) -> None:
    eps = np.array([-2 * eps0, -eps0, -eps0 / 3, 0.0, eps0 / 2, eps0, 2 * eps0])
    got = laplace_delta(eps0)(eps)
    for e, g in zip(eps.tolist(), got.tolist(), strict=True):
        assert g == pytest.approx(float(exact(e, eps0)), rel=1e-13, abs=1e-300)


@pytest.mark.parametrize("eps0", EPS0)
@pytest.mark.parametrize("frac", [-3.0, -1.0, -0.999999, -0.4, 0.0, 0.7, 0.99999999, 1.0, 1.5])
def test_bracket_contains_the_exact_value(eps0: float, frac: float) -> None:
    eps = frac * eps0
    lo, hi = laplace_delta_bracket(eps, eps0)
    truth = exact(eps, eps0)
    assert lo <= truth <= hi
    if truth > 0:
        assert hi <= truth * (1 + 1e-9) + 1e-13  # inputs perturbed by ~8u(|eps| + eps0)


def test_golden_values_of_the_bracket() -> None:
    assert laplace_delta_bracket(0.5, 1.0)[1] == pytest.approx(0.2211992169, abs=1e-10)
    assert laplace_delta_bracket(0.0, 1.0)[1] == pytest.approx(0.39346934, abs=1e-8)
    assert laplace_delta_bracket(-2.0, 1.0)[1] == pytest.approx(0.86466472, abs=1e-8)
