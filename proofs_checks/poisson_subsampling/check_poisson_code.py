"""The code objects of Poisson amplification against numerical hockey-stick integrals."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import numpy as np
import pytest
from scipy import integrate

from dpledger.accountant.profiles import (
    Profile,
    gaussian_profile,
    laplace_delta,
    poisson_add,
    poisson_gaussian_replace_one,
    poisson_remove,
)

Density = Callable[[float], float]


def hockey_stick(p: Density, q: Density, eps: float, lo: float = -14, hi: float = 15) -> float:
    """sup_S P(S) - e^eps Q(S) = integral of (p - e^eps q)_+, by piecewise quadrature."""
    f = lambda x: max(0.0, p(x) - math.exp(eps) * q(x))  # noqa: E731
    pts = np.linspace(lo, hi, 59)
    pieces = itertools.pairwise(pts)
    total: float = sum(integrate.quad(f, a, b, epsabs=1e-15, limit=200)[0] for a, b in pieces)
    return total


def gauss(mean: float, s: float) -> Density:
    c = 1.0 / (s * math.sqrt(2 * math.pi))
    return lambda x: c * math.exp(-0.5 * ((x - mean) / s) ** 2)


def mix(q: float, a: Density, b: Density) -> Density:
    return lambda x: (1 - q) * a(x) + q * b(x)


def laplace_profile(eps0: float) -> Profile:
    d = laplace_delta(eps0)
    return Profile(d, -eps0, eps0, True, "laplace", d)


CASES = [(0.1, 1.0, 0.5), (0.5, 1.0, 1.5), (0.3, 0.7, 0.2), (0.05, 2.0, -0.1), (0.9, 0.5, 3.0)]


@pytest.mark.parametrize(("q", "s", "eps"), CASES)
def test_gaussian_remove_and_add_equal_integration(q: float, s: float, eps: float) -> None:
    base, shifted = gauss(0.0, s), gauss(1.0, s)
    remove = poisson_remove(gaussian_profile(1 / s), q)(np.array([eps]))[0]
    add = poisson_add(gaussian_profile(1 / s), q)(np.array([eps]))[0]
    want_remove = hockey_stick(mix(q, base, shifted), base, eps)
    want_add = hockey_stick(base, mix(q, base, shifted), eps)
    assert remove == pytest.approx(want_remove, rel=1e-7, abs=1e-12)
    assert add == pytest.approx(want_add, rel=1e-7, abs=1e-12)
    assert remove >= want_remove - 1e-13 and add >= want_add - 1e-13


@pytest.mark.parametrize(("q", "eps0", "eps"), [(0.2, 2.0, 0.3), (0.5, 1.0, 0.1), (0.7, 3.0, 1.0)])
def test_laplace_remove_and_add_equal_integration(q: float, eps0: float, eps: float) -> None:
    base = lambda x: 0.5 * math.exp(-abs(x))  # noqa: E731  # Lap(0, 1), shift eps0
    shifted = lambda x: 0.5 * math.exp(-abs(x - eps0))  # noqa: E731
    remove = poisson_remove(laplace_profile(eps0), q)(np.array([eps]))[0]
    add = poisson_add(laplace_profile(eps0), q)(np.array([eps]))[0]
    want_remove = hockey_stick(mix(q, base, shifted), base, eps, -40, 45)
    want_add = hockey_stick(base, mix(q, base, shifted), eps, -40, 45)
    assert remove == pytest.approx(want_remove, rel=1e-7, abs=1e-12)
    assert add == pytest.approx(want_add, rel=1e-7, abs=1e-12)


def test_the_two_directions_differ() -> None:
    """V14: q = 0.2, sigma = 0.5: delta_remove(1) = 0.0578 but delta_add(1) = 0."""
    one = np.array([1.0])
    assert poisson_remove(gaussian_profile(2.0), 0.2)(one)[0] == pytest.approx(0.0578, abs=5e-5)
    assert poisson_add(gaussian_profile(2.0), 0.2)(one)[0] < 1e-3


def test_remove_direction_pure_epsilon_is_the_amplified_one() -> None:
    q, eps0 = 0.2, 2.0
    amplified = math.log1p(q * math.expm1(eps0))
    curve = poisson_remove(laplace_profile(eps0), q)
    assert curve(np.array([amplified * (1 + 1e-9)]))[0] == 0.0
    assert curve(np.array([amplified * (1 - 1e-6)]))[0] > 0.0
    assert curve.loss_hi == pytest.approx(amplified)


@pytest.mark.parametrize(("q", "a", "eps"), [(0.1, 1.0, 0.3), (0.5, 2.0, 1.0), (0.3, 0.5, 0.05)])
def test_replace_one_mixture_equals_integration(q: float, a: float, eps: float) -> None:
    p = mix(q, gauss(0.0, 1.0), gauss(a, 1.0))
    r = mix(q, gauss(0.0, 1.0), gauss(-a, 1.0))
    got = poisson_gaussian_replace_one(a, q)(np.array([eps]))[0]
    want = hockey_stick(p, r, eps)
    assert got == pytest.approx(want, rel=1e-7, abs=1e-12)
    assert hockey_stick(r, p, eps) == pytest.approx(want, rel=1e-7, abs=1e-12)  # symmetric


def test_replace_one_is_never_below_add_remove_at_the_same_noise() -> None:
    """Replace-one moves the sampled record's contribution by up to 2C, never less privacy loss."""
    eps = np.linspace(0.0, 3.0, 31)
    rep = poisson_gaussian_replace_one(1.0, 0.2)(eps)
    rem = poisson_remove(gaussian_profile(1.0), 0.2)(eps)
    assert np.all(rep >= rem - 1e-15)


def replace_one_mpmath(a: float, q: float, eps: float) -> float:
    """The replace-one curve in 60-digit arithmetic: the boundary by bisection on the loss
    (increasing in x), then P(X > x) - e^eps Q(X > x)."""
    import mpmath as mp

    with mp.workdps(60):
        am, qm, em = mp.mpf(a), mp.mpf(q), mp.mpf(eps)

        def loss(x: mp.mpf) -> mp.mpf:
            top = (1 - qm) * mp.npdf(x) + qm * mp.npdf(x - am)
            return mp.log(top / ((1 - qm) * mp.npdf(x) + qm * mp.npdf(x + am)))

        lo, hi = mp.mpf(-400), mp.mpf(400)
        for _ in range(220):
            mid = (lo + hi) / 2
            lo, hi = (lo, mid) if loss(mid) > em else (mid, hi)
        x = (lo + hi) / 2

        def tail(z: mp.mpf) -> mp.mpf:
            return mp.ncdf(-z)

        p = (1 - qm) * tail(x) + qm * tail(x - am)
        r = (1 - qm) * tail(x) + qm * tail(x + am)
        return float(p - mp.e**em * r)


#: (a, q, eps): the noise so small (a = 1/s >= 25) that phi(x - a)/phi(x) under- or overflows
#: a double, and losses where e^eps itself does (the curve used to return 0 or NaN there)
LARGE_LOSS_POINTS = [
    (a, q, eps)
    for a, q in ((25.0, 0.5), (50.0, 0.1), (20.0, 0.01))
    for eps in (-5.0, -0.1, 0.0, 0.1, 10.0, 300.0, 355.0, 699.9, 800.0, 1500.0)
]


@pytest.mark.parametrize(("a", "q", "eps"), LARGE_LOSS_POINTS)
def test_replace_one_at_large_noise_ratio_and_loss_equals_mpmath(
    a: float, q: float, eps: float
) -> None:
    want = replace_one_mpmath(a, q, eps)
    got = float(poisson_gaussian_replace_one(a, q)(np.array([eps]))[0])
    assert want * (1 - 1e-12) <= got <= want * (1 + 1e-9) + 1e-300


@pytest.mark.parametrize("eps", [650.0, 800.0, 1200.0, 1400.0])
def test_remove_curve_beyond_double_range_equals_mpmath(eps: float) -> None:
    """q delta_G(log(1 + (e^eps - 1)/q)) with e^eps beyond a double: the Gaussian curve of
    mu = 50 read at the shifted loss, against 60-digit arithmetic."""
    import mpmath as mp

    mu, q = 50.0, 0.1
    with mp.workdps(60):
        inner = mp.log(1 + (mp.e ** mp.mpf(eps) - 1) / q)
        m = mp.mpf(mu)
        gauss_curve = mp.ncdf(-inner / m + m / 2) - mp.e**inner * mp.ncdf(-inner / m - m / 2)
        want = float(q * gauss_curve)
    got = float(poisson_remove(gaussian_profile(mu), q)(np.array([eps]))[0])
    assert want * (1 - 1e-12) <= got <= want * (1 + 1e-9)
    assert poisson_remove(gaussian_profile(mu), q).accurate_hi == math.inf
