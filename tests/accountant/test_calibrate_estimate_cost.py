"""What the calibration's estimate and the PLD preparation skip: a direction that cannot raise
the plain upper bound is not composed, and the lower pairs' coarse guides are discretised only
when read; neither changes a value."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpledger.accountant import calibrate_estimate
from dpledger.accountant.calibrate_estimate import COARSE_POINTS
from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.pld_compositions import Compositions
from dpledger.accountant.pld_discrete import discretise
from dpledger.accountant.pld_tilt import chernoff_epsilon
from dpledger.core.events import Event, GaussianEvent, PoissonSampledEvent, SelfComposedEvent


def _dpsgd(sigma: float, q: float = 0.01, steps: int = 1000) -> Event:
    return SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(sigma)), steps)


@pytest.mark.parametrize(
    ("sigma", "delta", "coarse"),
    [(0.8, 1e-5, True), (0.8, 1e-5, False), (3.0, 1e-5, True), (1.2, 1e-10, True)],
)
def test_the_plain_upper_bound_is_the_largest_direction(
    sigma: float, delta: float, coarse: bool
) -> None:
    event = _dpsgd(sigma)
    acc = PLDAccountant(None)
    acc.compose(event)
    prep = acc._prepared()
    assert prep is not None and len(prep.names) == 2
    found = calibrate_estimate._plain_upper(event, None, delta, coarse)
    # every direction composed (the larger Chernoff estimate first, on the first pass's grid
    # unless coarse), as without the skip
    order = sorted(prep.names, key=lambda n: -chernoff_epsilon(prep.coarse[n], delta))
    first = acc._start_points(min(acc.target_points, 1 << 14), delta)
    every = [
        calibrate_estimate._direction_upper(
            Compositions(COARSE_POINTS),
            prep,
            name,
            delta,
            COARSE_POINTS if coarse or i > 0 else first,
        )
        for i, name in enumerate(order)
    ]
    assert found == min(max(every), prep.pure_cap)


def test_lower_guides_are_made_when_read_and_equal_the_eager_ones() -> None:
    acc = PLDAccountant(None)
    acc.compose(_dpsgd(0.9))
    prep = acc._prepared()
    assert prep is not None and prep.coarse_lower is not None
    guides = prep.coarse_lower
    assert bool(guides) and len(guides) == 0  # truthy, nothing made yet
    assert guides.get("other") is None and guides.get("other", []) == []
    for name in prep.names:
        made = guides.get(name)
        assert made is not None and name in guides and guides[name] is made
        for (d, k), (pld, count) in zip(prep.lower_comps, made, strict=True):
            eager = discretise(getattr(d, "lower_" + name), prep.h0)
            assert count == k and pld.h == eager.h
            assert np.array_equal(pld.masses, eager.masses)
            assert math.isclose(float(pld.losses[0]), float(eager.losses[0]))
    with pytest.raises(KeyError):
        guides["other"]
