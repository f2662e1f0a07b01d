"""Epochs bounded without amplification (proof.md of this folder): the exact curve of a small
random allocation of Laplace steps, by quadrature, lies below its replacement's."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.typing import NDArray

from dpledger.accountant.base import DeltaBound
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import LaplaceEvent, RandomAllocationEvent

Array = NDArray[np.float64]


def _laplace_density(x: Array, centre: float) -> Array:
    return np.asarray(0.5 * np.exp(-np.abs(x - centre)), dtype=float)


def allocation_delta(epsilon: float, direction: str, points: int = 3001) -> float:
    """delta(epsilon) of 1-of-2 allocation of Laplace(scale 1) releases (remove: P = the
    record's step shifted by 1, either step with probability 1/2; Q = no shift), by the
    trapezoid rule on [-20, 21]^2 (the mass outside is below 1e-8)."""
    x = np.linspace(-20.0, 21.0, points)
    w = np.full(points, x[1] - x[0])
    w[0] = w[-1] = w[0] / 2
    f0, f1 = _laplace_density(x, 0.0), _laplace_density(x, 1.0)
    p = 0.5 * (np.outer(f1, f0) + np.outer(f0, f1))
    q = np.outer(f0, f0)
    if direction == "add":
        p, q = q, p
    hinge = np.maximum(p - math.exp(epsilon) * q, 0.0)
    return float(w @ hinge @ w)


def laplace_delta(epsilon: float) -> float:
    """delta(epsilon) of one Laplace(scale 1) release of sensitivity 1 (both directions)."""
    return 0.0 if epsilon >= 1.0 else -math.expm1((epsilon - 1.0) / 2.0)


@pytest.mark.parametrize("epsilon", [0.0, 0.2, 0.5, 0.8])
@pytest.mark.parametrize("direction", ["remove", "add"])
def test_the_exact_curve_lies_below_one_release(epsilon: float, direction: str) -> None:
    exact = allocation_delta(epsilon, direction)
    finer = allocation_delta(epsilon, direction, points=6001)
    assert abs(exact - finer) < 1e-4  # the quadrature has converged
    assert 0.0 < exact < laplace_delta(epsilon) - 1e-3  # below, strictly: amplification


def test_the_default_call_brackets_the_exact_curve() -> None:
    epoch = RandomAllocationEvent(2, LaplaceEvent(1.0))
    for epsilon in (0.2, 0.5):
        bound = account(epoch, Adjacency(), epsilon=epsilon).bound
        assert isinstance(bound, DeltaBound)
        assert bound.delta == pytest.approx(laplace_delta(epsilon), rel=1e-6)
        exact = max(allocation_delta(epsilon, d) for d in ("remove", "add"))
        assert bound.delta_lower <= exact <= bound.delta


def test_the_fallback_reports_one_release() -> None:
    # under replace-one the PLD backend has no analysis of the allocation: the default call
    # replaces it by its release (sensitivity factor 2: eps0 = 2 / scale)
    epoch = RandomAllocationEvent(2, LaplaceEvent(2.0))
    for epsilon in (0.2, 0.5):
        bound = account(epoch, Adjacency(relation="replace_one"), epsilon=epsilon).bound
        assert isinstance(bound, DeltaBound) and "no amplification" in bound.method
        assert bound.delta == pytest.approx(laplace_delta(epsilon), rel=1e-6)
        # the lower end is the product event's: values 1 against -1, both outputs at most -1
        # (mass 2^-2 e^(-1/2) for -1, e^-1 times that for 1), proofs_checks/product_event_lower
        m = 0.25 * math.exp(-0.5)
        assert bound.delta_lower == pytest.approx(m * -math.expm1(epsilon - 1.0), rel=1e-9)
