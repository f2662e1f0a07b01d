"""Numeric checks of the random-allocation profile (see proof.md)."""

from __future__ import annotations

import math

import mpmath
import numpy as np
from scipy import integrate, special

from dpledger.accountant.profiles import gaussian_profile, lower_pair_profiles
from dpledger.accountant.random_allocation import allocation_lower_pair, allocation_tables


def test_one_step_is_the_gaussian() -> None:
    tables = allocation_tables(1.5, 1)
    assert np.array_equal(tables.remove, gaussian_profile(1 / 1.5)(tables.epsilons))


def test_two_steps_above_quadrature_and_close() -> None:
    mu, t = 0.8, 2
    tables = allocation_tables(1 / mu, t)

    def inner(x: float) -> float:
        if x <= 0:
            return 1.0 - x
        z = (math.log(x) + mu * mu / 2) / mu
        return float(special.ndtr(mu - z) - x * special.ndtr(-z))

    for i in range(0, 200, 25):
        c = math.exp(float(tables.epsilons[i]))

        def f(z1: float, c: float = c) -> float:
            dens = math.exp(-z1 * z1 / 2) / math.sqrt(2 * math.pi)
            return dens * inner(t * c - math.exp(mu * z1 - mu * mu / 2)) / t

        exact = integrate.quad(f, -12, 12, limit=400, epsabs=1e-15, epsrel=1e-12)[0]
        assert exact <= tables.remove_raw[i] <= exact * 1.002 + 1e-12


def test_monte_carlo() -> None:
    rng = np.random.default_rng(7)
    for t in (3, 8):
        ratio = np.exp(rng.standard_normal((300_000, t)) - 0.5).mean(axis=1)
        tables = allocation_tables(1.0, t)
        for i in (0, 12, 30):
            c = math.exp(float(tables.epsilons[i]))
            for sample, bound in (
                (np.maximum(ratio - c, 0.0), tables.remove_raw[i]),
                (np.maximum(1 - c * ratio, 0.0), tables.add_raw[i]),
            ):
                se = sample.std() / math.sqrt(sample.size)
                assert bound >= sample.mean() - 6 * se


def test_between_lower_curves_and_the_gaussian() -> None:
    for sigma, t in ((0.9, 12), (2.0, 30)):
        tables = allocation_tables(sigma, t)
        forward, backward = lower_pair_profiles(allocation_lower_pair(sigma, t), "max")
        gauss = gaussian_profile(1 / sigma)(tables.epsilons)
        assert np.all(forward(tables.epsilons) <= tables.remove)
        assert np.all(backward(tables.epsilons) <= tables.add)
        assert np.all(tables.remove <= gauss) and np.all(tables.add <= gauss)


def test_lognormal_partial_expectations() -> None:
    """P(L > x) = Phi(-z) and E[L; L > x] = Phi(mu - z), against 40-digit references (the
    second by quadrature of its defining integral): ndtr's error is far below NDTR_REL."""
    mpmath.mp.dps = 40
    mu = 0.9
    for x in (0.5, 3.0, 40.0, 400.0):
        z = (math.log(x) + mu * mu / 2) / mu
        zz = mpmath.mpf(z)
        ref_tail = mpmath.ncdf(-zz)
        ref_partial = mpmath.quad(
            lambda u: mpmath.exp(mu * u - mu * mu / 2) * mpmath.npdf(u), [zz, zz + 5, mpmath.inf]
        )
        assert abs(float(special.ndtr(-z)) - ref_tail) <= 1e-13 * ref_tail
        assert abs(float(special.ndtr(mu - z)) - ref_partial) <= 1e-13 * ref_partial


def test_geometric_grid_above_and_close_to_the_exact_two_step_values() -> None:
    """Both directions of the geometric grid's tables for t = 2 against quadrature of the exact
    values (inner expectation over L_2 in closed form), mu from 0.8 to 2.5."""
    from dpledger.accountant.allocation_geometric import geometric_tables

    for mu in (0.8, 2.5):
        eps = np.linspace(0.0, mu * (mu / 2 + 6.0), 9)
        tables = geometric_tables(1 / mu, 2, eps)
        for i, e in enumerate(eps):
            c = math.exp(float(e))
            remove, add = _two_step_exact(mu, c)
            assert remove <= tables.remove[i] <= remove * 1.02
            assert add <= tables.add[i] <= add * 1.02


def _two_step_exact(mu: float, c: float) -> tuple[float, float]:
    def dens(z1: float) -> float:
        return math.exp(-z1 * z1 / 2) / math.sqrt(2 * math.pi)

    def ell(z1: float) -> float:
        return math.exp(mu * z1 - mu * mu / 2)

    def up(z1: float) -> float:  # E[(L_1 + L_2 - 2c)_+] / 2 given Z_1
        x = 2 * c - ell(z1)
        if x <= 0:
            return dens(z1) * (1.0 - x) / 2
        z = (math.log(x) + mu * mu / 2) / mu
        return dens(z1) * float(special.ndtr(mu - z) - x * special.ndtr(-z)) / 2

    def down(z1: float) -> float:  # E[(1 - c (L_1 + L_2) / 2)_+] given Z_1
        y = 2 / c - ell(z1)
        if y <= 0:
            return 0.0
        z = (math.log(y) + mu * mu / 2) / mu
        inner = special.ndtr(z) - c / 2 * (ell(z1) * special.ndtr(z) + special.ndtr(z - mu))
        return dens(z1) * float(inner)

    kink = (math.log(2 * c) + mu * mu / 2) / mu
    top = (math.log(2 / c) + mu * mu / 2) / mu
    remove = integrate.quad(up, -14, 14, points=[kink], limit=800, epsabs=0, epsrel=1e-11)[0]
    add = integrate.quad(down, -14, top, limit=800, epsabs=0, epsrel=1e-11)[0]
    return remove, add
