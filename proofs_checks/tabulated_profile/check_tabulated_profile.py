"""Numeric checks of tabulated profiles: never below the exact curve, tight when composed."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpledger.accountant.closed_form import ClosedFormAccountant
from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.profiles import gaussian_delta, laplace_delta, tabulated_profiles
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import GaussianEvent, SelfComposedEvent, TabulatedProfileEvent
from dpledger.runtime.lowering import PROFILE_EPSILONS

EXACT = {
    "gaussian(mu=0.5)": gaussian_delta(0.5),
    "gaussian(mu=3)": gaussian_delta(3.0),
    "laplace(eps0=1)": laplace_delta(1.0),
}


def _table(curve) -> TabulatedProfileEvent:  # type: ignore[no-untyped-def]
    eps = np.asarray(PROFILE_EPSILONS)
    deltas = np.minimum(1.0, curve(eps) * (1 + 1e-12))
    return TabulatedProfileEvent(tuple(eps), tuple(deltas))


@pytest.mark.parametrize("name", sorted(EXACT))
def test_the_curve_is_never_below_the_exact_one(name: str) -> None:
    exact = EXACT[name]
    profile = tabulated_profiles(_table(exact), Adjacency()).remove
    eps = np.concatenate([-np.geomspace(1e-4, 30, 400), [0.0], np.geomspace(1e-4, 250, 800)])
    got = profile(eps)
    want = np.minimum(1.0, exact(eps))
    assert np.all(got >= want * (1 - 1e-12) - 1e-15)


def test_composed_gaussian_table_is_tight() -> None:
    sigma, k, delta = 5.0, 100, 1e-5
    exact = ClosedFormAccountant().compose(GaussianEvent(sigma / math.sqrt(k))).get_epsilon(delta)
    table = _table(gaussian_delta(1.0 / sigma))
    got = PLDAccountant().compose(SelfComposedEvent(table, k)).get_epsilon(delta)
    assert exact.epsilon_lower <= got.epsilon <= exact.epsilon * 1.01
