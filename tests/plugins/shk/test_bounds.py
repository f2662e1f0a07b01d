"""Closed forms of Theorems 1–4 and grid divergences."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.integrate import quad

from dpledger.core.errors import InvalidParameterError
from dpledger.plugins.shk import bounds
from dpledger.plugins.shk.torus import TorusGrid, von_mises_density


def test_epsilon_formulas() -> None:
    assert bounds.epsilon_a1(0.0, 0.1, 11.0) == pytest.approx(0.2 + 22.0, rel=1e-15)
    assert bounds.epsilon_a1(7.0, 0.1, 11.0) == pytest.approx(0.2 + 22.0 * math.exp(-7), rel=1e-14)
    assert bounds.epsilon_a1_prime(7.0, 0.2, 11.0) >= 0.2 + 22.0 * math.exp(-7)
    assert bounds.epsilon_a1_prime(50.0, 0.2, 11.0) == pytest.approx(0.2, rel=1e-12)


def test_theorem2_closed_form_matches_quadrature() -> None:
    c, dg, s, b, lam = 0.4, 0.45, 0.9, 3.0, 0.2
    kappa = 2 * (1 - c) * math.exp(-b) * lam
    for t in (0.5, 2.0, 10.0):

        def integrand(u: float, t: float = t) -> float:
            forcing = (
                dg**2 / (4 * c) + b * (s / 2 + 2) * math.exp(-u) + b**2 / 16 * math.exp(-2 * u)
            )
            return math.exp(-kappa * (t - u)) * forcing

        ref = quad(integrand, 0.0, t, epsabs=0, epsrel=1e-12)[0]
        got = bounds.kl_bound_theorem2(t, c, dg, s, b, lam)
        assert got >= ref
        assert got == pytest.approx(ref, rel=1e-10)
    # κ = 1 and κ = 2 are removable singularities of the closed form
    lam1 = 1.0 / (2 * (1 - c) * math.exp(-b))
    ref = quad(lambda u: math.exp(-(2.0 - u)) * (b * (s / 2 + 2) * math.exp(-u)), 0, 2.0)[0]
    assert bounds.kl_bound_theorem2(2.0, c, 0.0, s, b, lam1) >= ref


def test_plateau_minimised_at_half() -> None:
    cs = np.linspace(0.02, 0.98, 200)
    vals = [bounds.kl_plateau(c, 0.45, 11.9, math.exp(-2)) for c in cs]
    assert abs(cs[int(np.argmin(vals))] - 0.5) < 0.005


def test_grid_divergences_order_and_bounds() -> None:
    g = TorusGrid(128)
    p, q = von_mises_density(g, 2.0, 0.0), von_mises_density(g, 2.0, 0.3)
    sup = bounds.sup_log_ratio(p, q)
    kl = bounds.kl_divergence(p, q, g.dx)
    d = [bounds.renyi_divergence(p, q, a, g.dx) for a in (1.001, 2, 3, 5, 10)]
    assert d[0] == pytest.approx(kl, rel=1e-2)
    assert all(x <= y + 1e-15 for x, y in itertools.pairwise(d))
    assert d[-1] <= sup
    for eps in (0.05, 0.15, 0.5):
        assert bounds.hockey_stick(p, q, eps, g.dx) <= bounds.hockey_stick_from_kl(kl, eps)
    assert bounds.hockey_stick(p, q, sup, g.dx) == 0.0


def test_bounds_validation() -> None:
    with pytest.raises(InvalidParameterError, match=r"^t:"):
        bounds.epsilon_a1(-1.0, 0.1, 1.0)
    with pytest.raises(InvalidParameterError, match=r"^c:"):
        bounds.kl_bound_theorem2(1.0, 1.0, 0.1, 0.1, 1.0, 1.0)
    with pytest.raises(InvalidParameterError, match=r"^alpha:"):
        bounds.renyi_divergence(np.ones(4), np.ones(4), 1.0, 0.1)
    with pytest.raises(InvalidParameterError, match=r"^lambda_gibbs:"):
        bounds.kl_plateau(0.5, 0.1, 1.0, 0.0)
