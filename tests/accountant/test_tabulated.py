"""A mechanism known only by its privacy profile composes as a privacy-loss distribution."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpledger.accountant.closed_form import ClosedFormAccountant
from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.profiles import gaussian_delta
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import UnsupportedEventError
from dpledger.core.events import (
    GaussianEvent,
    SelfComposedEvent,
    TabulatedProfileEvent,
    coarsen_tabulated,
)
from dpledger.runtime.lowering import PROFILE_EPSILONS


def _gaussian_table(sigma: float) -> TabulatedProfileEvent:
    """The exact Gaussian profile (Balle & Wang 2018) tabulated as a profile-only plugin's."""
    eps = np.asarray(PROFILE_EPSILONS)
    deltas = np.minimum(1.0, gaussian_delta(1.0 / sigma)(eps) * (1 + 1e-9))
    cut = int(np.argmax(deltas == 0.0)) + 1 if (deltas == 0.0).any() else eps.size
    return TabulatedProfileEvent(tuple(eps[:cut]), tuple(deltas[:cut]), name="gauss")


@pytest.mark.parametrize(("sigma", "steps"), [(5.0, 100), (2.0, 10), (20.0, 1000)])
def test_composed_table_is_a_tight_upper_bound(sigma: float, steps: int) -> None:
    """k compositions of the tabulated Gaussian profile against the exact composition, a
    Gaussian of multiplier sigma / sqrt(k): never below, and within 2%."""
    delta = 1e-5
    exact = (
        ClosedFormAccountant().compose(GaussianEvent(sigma / math.sqrt(steps))).get_epsilon(delta)
    )
    table = PLDAccountant().compose(SelfComposedEvent(_gaussian_table(sigma), steps))
    got = table.get_epsilon(delta)
    assert exact.epsilon_lower * (1 - 1e-9) <= got.epsilon <= exact.epsilon * 1.02
    assert got.epsilon_lower == 0.0  # an upper-bound table certifies no lower bound


def test_composition_beats_the_coarsening_by_far() -> None:
    # the profile read as one (eps, delta) point composes like approximate DP: far looser
    event = SelfComposedEvent(_gaussian_table(5.0), 100)
    curve = account(event, delta=1e-5).bound.epsilon
    coarse = account(coarsen_tabulated(event), delta=1e-5).bound.epsilon
    assert curve < coarse / 3


def test_a_table_holds_only_under_its_relation() -> None:
    with pytest.raises(UnsupportedEventError, match="tabulated under add_remove"):
        PLDAccountant(Adjacency(relation="replace_one")).compose(_gaussian_table(5.0))
