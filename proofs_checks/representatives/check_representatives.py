"""Representatives: the upper one's curves lie above every member's, the lower one's below."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from dpledger.accountant.leaves import leaf_profiles
from dpledger.accountant.pld_components import representative_components
from dpledger.accountant.profiles_base import DirectedProfiles
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    ApproxDPEvent,
    Event,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PureDPEvent,
    RandomizedResponseEvent,
    ReportNoisyMaxEvent,
    SampledWithoutReplacementEvent,
)

EPS = np.linspace(-3.0, 3.0, 121)
ADD_REMOVE = Adjacency()
REPLACE = Adjacency(relation="replace_one")


def _family(make: Callable[[float], Event], n: int) -> list[Event]:
    rng = np.random.default_rng(7)
    return [make(float(x)) for x in rng.uniform(0.3, 0.6, n)]


FAMILIES: list[tuple[list[Event], Adjacency]] = [
    (_family(PureDPEvent, 40), ADD_REMOVE),
    (_family(ReportNoisyMaxEvent, 40), ADD_REMOVE),
    (_family(ExponentialMechanismEvent, 40), ADD_REMOVE),
    (_family(lambda e: RandomizedResponseEvent(e, 3), 40), ADD_REMOVE),
    (_family(lambda e: ApproxDPEvent(e, e * 1e-6), 40), ADD_REMOVE),
    (_family(lambda s: LaplaceEvent(3 * s), 40), ADD_REMOVE),
    (_family(lambda q: PoissonSampledEvent(q / 10, GaussianEvent(1.5 * q + 0.5)), 40), ADD_REMOVE),
    (_family(lambda q: PoissonSampledEvent(q / 10, GaussianEvent(1.0)), 40), REPLACE),
    (
        [
            SampledWithoutReplacementEvent(1000 + 7 * i, 50 + i, LaplaceEvent(1.0))
            for i in range(40)
        ],
        REPLACE,
    ),
]


def _curves(d: DirectedProfiles, lower: bool) -> list[np.ndarray]:
    pair = (d.lower_remove, d.lower_add) if lower else (d.remove, d.add)
    return [np.asarray(p(EPS), dtype=float) for p in pair]


@pytest.mark.parametrize(
    ("events", "adjacency"), FAMILIES, ids=[f"{e[0].kind}-{a.relation}" for e, a in FAMILIES]
)
def test_representatives_dominate_and_are_dominated(
    events: list[Event], adjacency: Adjacency
) -> None:
    merged = dict.fromkeys(events, 2)
    upper, lower, step = representative_components(merged, limit=6)
    # (the step stops at 2.5 %: a few more than six cells may remain)
    assert len(upper) == len(lower) < len(events) and step > 0
    assert sum(upper.values()) == sum(lower.values()) == 2 * len(events)
    ups = [_curves(leaf_profiles(e, adjacency), lower=False) for e in upper]
    lows = [_curves(leaf_profiles(e, adjacency), lower=True) for e in lower]
    for event in events:
        own_up = _curves(leaf_profiles(event, adjacency), lower=False)
        own_low = _curves(leaf_profiles(event, adjacency), lower=True)
        # some representative lies above (below) the member in both directions at once
        assert any(
            all(np.all(r >= o - 1e-15) for r, o in zip(rep, own_up, strict=True)) for rep in ups
        )
        assert any(
            all(np.all(r <= o + 1e-15) for r, o in zip(rep, own_low, strict=True)) for rep in lows
        )
