"""Numeric checks of Poisson amplification, both directions."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import integrate, stats

from dpledger.accountant import select
from dpledger.accountant.base import EpsilonBound
from dpledger.audit import reference
from dpledger.core.events import (
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
)


def hockey_stick(p, q, eps: float) -> float:  # type: ignore[no-untyped-def]
    f = lambda x: max(0.0, p(x) - math.exp(eps) * q(x))  # noqa: E731
    pts = np.linspace(-12, 13, 51)
    total: float = sum(integrate.quad(f, a, b, epsabs=1e-14)[0] for a, b in itertools.pairwise(pts))
    return total


def mixture(q: float, s: float):  # type: ignore[no-untyped-def]
    return lambda x: (1 - q) * stats.norm.pdf(x, 0, s) + q * stats.norm.pdf(x, 1, s)


def test_pure_amplification_golden_value() -> None:
    per_step = math.log1p(0.2 * math.expm1(2.0))
    assert 3 * per_step == pytest.approx(2.4696450, abs=1e-7)
    ev = SelfComposedEvent(PoissonSampledEvent(0.2, LaplaceEvent(0.5)), 3)  # eps0 = 1/0.5 = 2
    bound = select.account(ev, delta=1e-12).bound
    assert 2.3 < bound.epsilon <= 3 * per_step + 1e-9  # never worse than the pure bound


@pytest.mark.parametrize(("q", "s", "eps"), [(0.1, 1.0, 0.5), (0.5, 1.0, 1.5), (0.3, 0.7, 0.2)])
def test_subsampled_gaussian_closed_forms_equal_integration(q: float, s: float, eps: float) -> None:
    base = lambda x: stats.norm.pdf(x, 0, s)  # noqa: E731
    remove = hockey_stick(mixture(q, s), base, eps)
    add = hockey_stick(base, mixture(q, s), eps)
    assert reference.subsampled_gaussian_delta(eps, q, s, "remove") == pytest.approx(
        remove, abs=1e-10
    )
    assert reference.subsampled_gaussian_delta(eps, q, s, "add") == pytest.approx(add, abs=1e-10)
    assert remove > add  # the directions differ: one-direction accounting is unsafe


def test_pure_directions_of_subsampled_laplace() -> None:
    """Sup of the density ratio on a fine grid equals each direction's closed form."""
    q, b = 0.5, 0.5  # eps0 = 2
    x = np.linspace(-20, 20, 400_001)
    base = stats.laplace.pdf(x, 0, b)
    mix = (1 - q) * base + q * stats.laplace.pdf(x, 1, b)
    assert np.log(mix / base).max() == pytest.approx(
        reference.subsampled_pure_epsilon(2, q, "remove"), abs=1e-9
    )
    assert np.log(base / mix).max() == pytest.approx(
        reference.subsampled_pure_epsilon(2, q, "add"), abs=1e-9
    )
    assert reference.subsampled_pure_epsilon(2, q, "remove") == pytest.approx(1.4337808, abs=1e-7)
    assert reference.subsampled_pure_epsilon(2, q, "add") == pytest.approx(0.5662192, abs=1e-7)


@pytest.mark.parametrize(
    ("q", "s", "delta"), [(0.01, 1.0, 1e-5), (0.2, 0.8, 1e-3), (0.5, 1.0, 1e-3)]
)
def test_accountant_is_never_below_the_worse_direction(q: float, s: float, delta: float) -> None:
    exact = reference.subsampled_gaussian_epsilon(q, s, delta)
    bound = select.account(PoissonSampledEvent(q, GaussianEvent(s)), delta=delta).bound
    assert isinstance(bound, EpsilonBound)
    assert bound.epsilon >= exact - 1e-9
    assert bound.epsilon <= exact + 1e-3
    assert bound.epsilon_lower <= exact + 1e-9


@pytest.mark.parametrize(
    "inner",
    [
        LaplaceEvent(0.01),
        GaussianEvent(0.05),
    ],
    ids=["laplace", "gaussian"],
)
def test_zero_sampling_rate_gives_zero(inner: object) -> None:
    assert select.account(PoissonSampledEvent(0.0, inner), delta=1e-6).bound.epsilon == 0.0  # type: ignore[arg-type]
