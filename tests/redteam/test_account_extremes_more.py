"""The bracket :func:`~dpledger.accountant.select.account` certifies for sampled releases that
``test_account_extremes.py`` leaves out (Poisson-sampled Laplace under add/remove, Poisson-sampled
Gaussian and sampling without replacement under replace-one), at extreme but valid parameters,
against 50-digit references of the true curves (and, for long compositions, a discretised bracket
of them): ``extreme_references.py`` derives the references, ``extreme_checks.py`` states the
promise checked.
"""

from __future__ import annotations

import math

import mpmath as mp
import pytest

from dpledger.core.adjacency import ROW_ADD_REMOVE, ROW_REPLACE_ONE
from dpledger.core.events import (
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PureDPEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
)

from .extreme_checks import bracket_sweep, delta_problems, sweep
from .extreme_references import (
    DIGITS,
    poisson_gauss_delta,
    poisson_laplace_bracket,
    poisson_laplace_delta,
    poisson_pure_delta,
    replace_one_bracket,
    replace_one_delta,
    sampled_cap,
)

# -- 1. Poisson-sampled Laplace under add/remove ------------------------------------------------


@pytest.mark.parametrize(
    ("scale", "q"),
    [
        (0.01, 1e-6),
        (0.01, 0.5),
        (1.0, 1e-3),
    ],
)
def test_poisson_laplace_release(scale: float, q: float) -> None:
    e0 = 1 / scale
    cap = sampled_cap(e0, q)
    sweep(
        PoissonSampledEvent(q, LaplaceEvent(scale)),
        ROW_ADD_REMOVE,
        lambda e: poisson_laplace_delta(e0, q, e),
        [1e-300, 1e-12, 0.3],
        [0.0, 0.5, -0.3, cap, math.nextafter(cap, 0.0), -cap],
    )


@pytest.mark.parametrize(("scale", "q"), [(1e4, 1 - 1e-6)])
def test_poisson_laplace_release_large_scale(scale: float, q: float) -> None:
    """Large scales only at large delta and epsilon: elsewhere the PLD takes up to 30 s a query."""
    e0 = 1 / scale
    sweep(
        PoissonSampledEvent(q, LaplaceEvent(scale)),
        ROW_ADD_REMOVE,
        lambda e: poisson_laplace_delta(e0, q, e),
        [0.3],
        [0.5, 2 * sampled_cap(e0, q)],
    )


@pytest.mark.parametrize(
    ("scale", "q"), [(1.0, 0.3), pytest.param(0.1, 1e-3, marks=pytest.mark.slow)]
)
def test_poisson_laplace_two_releases(scale: float, q: float) -> None:
    e0 = 1 / scale
    sweep(
        SelfComposedEvent(PoissonSampledEvent(q, LaplaceEvent(scale)), 2),
        ROW_ADD_REMOVE,
        lambda e: poisson_laplace_delta(e0, q, e, 2),
        [1e-12, 0.05],
        [0.0, 0.3 * sampled_cap(e0, q), -0.1],
    )


@pytest.mark.parametrize(("scale", "q", "count"), [(1.0, 0.3, 7), (30.0, 0.9, 50)])
def test_poisson_laplace_composition(scale: float, q: float, count: int) -> None:
    e0 = 1 / scale
    top = count * sampled_cap(e0, q)
    bracket_sweep(
        SelfComposedEvent(PoissonSampledEvent(q, LaplaceEvent(scale)), count),
        ROW_ADD_REMOVE,
        poisson_laplace_bracket(e0, q, count),
        [1e-8, 1e-3, 0.3],
        [0.0, 0.5 * top, 0.9 * top, -0.2 * top],
    )


# -- 2. Poisson-sampled Gaussian under replace-one ----------------------------------------------


@pytest.mark.parametrize(
    ("sigma", "q"), [(0.02, 0.5), (1.0, 1e-6), (1.0, 1e-3), (10.0, 1 - 1e-6), (1e3, 0.99)]
)
def test_replace_one_poisson_gaussian_release(sigma: float, q: float) -> None:
    a = 1 / sigma
    sweep(
        PoissonSampledEvent(q, GaussianEvent(sigma)),
        ROW_REPLACE_ONE,
        lambda e: replace_one_delta(a, q, e),
        [1e-300, 1e-30, 1e-5, 0.5],
        [0.0, 0.5, 2.0, -0.3, 50.0],
    )


def test_replace_one_pair_is_the_unsampled_pair_at_rate_one() -> None:
    """At q -> 1 the pair N(a) vs N(-a) is the replace-one Gaussian N(2/sigma) vs N(0)."""
    q = 1 - 1e-12
    sweep(
        PoissonSampledEvent(q, GaussianEvent(2.0)),
        ROW_REPLACE_ONE,
        lambda e: replace_one_delta(0.5, q, e),
        [1e-5],
        [0.5],
    )
    with mp.workdps(DIGITS):  # N(1) vs N(0) at eps 0.5 (Balle & Wang 2018, Thm 8)
        unsampled = mp.ncdf(-mp.mpf(0.5) + mp.mpf(0.5)) - mp.exp(0.5) * mp.ncdf(-mp.mpf(1))
    assert replace_one_delta(0.5, q, 0.5) == pytest.approx(unsampled, rel=1e-9)


@pytest.mark.parametrize(("sigma", "q", "count"), [(1.0, 0.3, 2), (0.3, 1e-3, 20), (10.0, 0.9, 5)])
def test_replace_one_poisson_gaussian_composition(sigma: float, q: float, count: int) -> None:
    bracket_sweep(
        SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(sigma)), count),
        ROW_REPLACE_ONE,
        replace_one_bracket(1 / sigma, q, count),
        [1e-8, 1e-3, 0.3],
        [0.0, 0.3, 1.0, -0.3],
    )


@pytest.mark.parametrize(("sigma", "q", "eps"), [(1e3, 0.5, 0.0350625), (1e3, 0.5, 0.0361)])
def test_replace_one_poisson_gaussian_deep_tail(sigma: float, q: float, eps: float) -> None:
    """For small a = 1/sigma the curve is a difference of nearly equal tails: its rounding
    (4e-9 relative at delta ~ 1e-274, beyond the profile's 1e-10 margin) is charged."""
    assert not delta_problems(
        PoissonSampledEvent(q, GaussianEvent(sigma)),
        ROW_REPLACE_ONE,
        eps,
        lambda e: replace_one_delta(1 / sigma, q, e),
    )


# -- 3. sampling without replacement under replace-one ------------------------------------------

SWOR_SIZES = [(10**6, 1), (100, 10), (2, 1), (10**6, 10**6 - 1)]


@pytest.mark.parametrize(("n", "m"), SWOR_SIZES)
@pytest.mark.parametrize("sigma", [0.02, 1.0, 100.0])
def test_without_replacement_gaussian(sigma: float, n: int, m: int) -> None:
    q = m / n
    sweep(
        SampledWithoutReplacementEvent(n, m, GaussianEvent(sigma)),
        ROW_REPLACE_ONE,
        lambda e: poisson_gauss_delta(2 / sigma, q, e),
        [1e-300, 1e-12, 0.3],
        [0.0, 0.5, -0.3, 50.0],
    )


@pytest.mark.parametrize(("n", "m"), SWOR_SIZES[:3])
@pytest.mark.parametrize("scale", [0.1])
def test_without_replacement_laplace(scale: float, n: int, m: int) -> None:
    q, e0 = m / n, 2 / scale
    sweep(
        SampledWithoutReplacementEvent(n, m, LaplaceEvent(scale)),
        ROW_REPLACE_ONE,
        lambda e: poisson_laplace_delta(e0, q, e),
        [1e-300, 1e-12, 0.3],
        [0.0, 0.5 * sampled_cap(e0, q), -0.3],
    )


@pytest.mark.parametrize(("n", "m"), SWOR_SIZES)
@pytest.mark.parametrize("eps", [30.0])
def test_without_replacement_pure(eps: float, n: int, m: int) -> None:
    q = m / n
    cap = sampled_cap(eps, q)
    sweep(
        SampledWithoutReplacementEvent(n, m, PureDPEvent(eps)),
        ROW_REPLACE_ONE,
        lambda e: poisson_pure_delta(eps, q, e),
        [1e-300, 1e-5],
        [0.0, 0.5 * cap, -0.3, math.nextafter(cap, 0.0)],
    )
