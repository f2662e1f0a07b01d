"""Lower bounds keep the composed mass at +infinity of approximate-DP leaves (blocks of equal
leaves name it, their dominated pairs keep it, the lower reading adds it: accountant/pld_read.py
``infinity_lower``; proofs_checks/pld_tilted_fft, "Reading lower bounds")."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpledger.accountant import pld as pld_module
from dpledger.accountant.select import account
from dpledger.core.events import (
    ApproxDPEvent,
    ComposedEvent,
    Event,
    GaussianEvent,
    RandomizedResponseEvent,
)

from .approx_dp_reference import exact_delta, pld_of

#: dp-accounting at a fine grid (docs/accountants.md)
REFERENCE = (1.92565, 1.92628)


def _distinct_approx() -> Event:
    return ComposedEvent([ApproxDPEvent(0.01 * (1 + i / 1000), 1e-9) for i in range(1000)])


def test_1000_distinct_approximate_dp_within_one_per_cent():
    """The composed mass at +infinity (1e-6) is a tenth of delta: left out, the lower bound
    was 1.90965 for the bracket [1.90965, 1.92887]."""
    bound = account(_distinct_approx(), delta=1e-5).bound
    lower, upper = bound.epsilon_lower, bound.epsilon
    assert upper <= lower * 1.01
    assert lower <= REFERENCE[1] and upper >= REFERENCE[0]
    assert lower >= 1.915


def test_1000_distinct_approximate_dp_delta_bracket_narrower():
    """delta at epsilon 1.93: [8.37e-06, 9.91e-06] (15.5 %) without the mass at +infinity."""
    bound = account(_distinct_approx(), epsilon=1.93).bound
    assert bound.delta_lower <= bound.delta
    assert bound.delta_lower >= 9.0e-6
    assert bound.delta - bound.delta_lower <= 0.08 * bound.delta


# -- exact compositions ------------------------------------------------------------------------


def _check(leaves: dict[Event, int], eps: float, delta: float, dps: int = 60) -> None:
    acc = pld_of(leaves)
    d_bound = acc.get_delta(eps)
    exact = float(exact_delta(leaves, eps, dps))
    assert d_bound.delta_lower <= exact * (1 + 1e-12) <= d_bound.delta * (1 + 2e-12)
    e_bound = acc.get_epsilon(delta)
    assert e_bound.epsilon_lower <= e_bound.epsilon
    assert float(exact_delta(leaves, e_bound.epsilon_lower, dps)) >= delta * (1 - 1e-12)
    if math.isfinite(e_bound.epsilon):
        assert float(exact_delta(leaves, e_bound.epsilon, dps)) <= delta * (1 + 1e-12)


SMALL = {
    ApproxDPEvent(0.2, 1e-4): 4,
    ApproxDPEvent(0.21, 2e-4): 3,
    ApproxDPEvent(0.35, 1e-5): 2,
    RandomizedResponseEvent(0.3): 3,
    GaussianEvent(3.0): 2,
}


@pytest.mark.parametrize("rounded", [False, True])
@pytest.mark.parametrize(
    ("eps", "delta"),
    [
        pytest.param(1.0, 1e-2, marks=pytest.mark.slow),
        (2.5, 8e-4),
        pytest.param(5.0, 6.0e-4, marks=pytest.mark.slow),
    ],
)
def test_small_exact_cases(
    rounded: bool, eps: float, delta: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lower <= exact (60 digits) <= upper, by the leaves' own curves or, with the leaves
    rounded to representatives (``rounded``: the limit of distinct leaves lowered), by blocks."""
    if rounded:
        monkeypatch.setattr(pld_module, "MAX_DISTINCT_COMPONENTS", 2)
    _check(SMALL, eps, delta)


def test_rounded_lower_bound_keeps_the_mass_at_infinity(monkeypatch: pytest.MonkeyPatch) -> None:
    """Far above every finite loss, delta is the mass at +infinity: the blocks' lower bound
    holds nearly all of it (without it, it was 0)."""
    monkeypatch.setattr(pld_module, "MAX_DISTINCT_COMPONENTS", 2)
    leaves = {k: m for k, m in SMALL.items() if not isinstance(k, GaussianEvent)}
    exact = float(exact_delta(leaves, 7.0))
    assert exact == pytest.approx(1 - (1 - 1e-4) ** 4 * (1 - 2e-4) ** 3 * (1 - 1e-5) ** 2)
    bound = pld_of(leaves).get_delta(7.0)
    assert exact * (1 - 1e-9) <= bound.delta_lower <= exact


_LEAF = st.one_of(
    st.builds(
        ApproxDPEvent,
        st.floats(0.05, 1.0).map(lambda x: round(x, 3)),
        st.sampled_from([1e-9, 1e-6, 1e-4, 1e-3]),
    ),
    st.builds(RandomizedResponseEvent, st.floats(0.05, 1.0).map(lambda x: round(x, 3))),
    st.builds(GaussianEvent, st.floats(1.0, 8.0).map(lambda x: round(x, 2))),
)


_MIXES = {
    "leaves": st.dictionaries(_LEAF, st.integers(1, 3), min_size=2, max_size=3),
    "eps": st.floats(0.0, 4.0),
    "rounded": st.booleans(),
}
_SETTINGS = {
    "deadline": None,
    "suppress_health_check": [HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
}


@settings(max_examples=4, **_SETTINGS)  # type: ignore[arg-type]
@given(**_MIXES)
def test_random_mixes_are_bracketed(
    leaves: dict[Event, int], eps: float, rounded: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Random small mixes of approximate DP, randomized response and Gaussians: the certified
    delta bracket holds the exact delta (30 digits), by blocks or by the leaves' own curves."""
    _random_mix(leaves, eps, rounded, monkeypatch)


@pytest.mark.slow
@settings(max_examples=60, **_SETTINGS)  # type: ignore[arg-type]
@given(**_MIXES)
def test_random_mixes_are_bracketed_wide(
    leaves: dict[Event, int], eps: float, rounded: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same, over more mixes."""
    _random_mix(leaves, eps, rounded, monkeypatch)


def _random_mix(
    leaves: dict[Event, int], eps: float, rounded: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patch:
        if rounded:
            patch.setattr(pld_module, "MAX_DISTINCT_COMPONENTS", 1)
        bound = pld_of(leaves).get_delta(eps)
    exact = float(exact_delta(leaves, eps, 30))
    assert bound.delta_lower <= exact * (1 + 1e-12) + 1e-300
    assert exact <= bound.delta * (1 + 2e-12) + 1e-300


def test_blocks_and_single_leaves_name_their_mass_at_infinity():
    """Approximate-DP blocks, and an approximate-DP leaf left alone in its cell, give lower
    curves that name their mass at +infinity; pure DP and randomized response none."""
    from dpledger.accountant.epsilon_cells import cell_components
    from dpledger.accountant.pld_dominated import InfinitySplit
    from dpledger.core.adjacency import Adjacency

    leaves: dict[Event, int] = {
        ApproxDPEvent(0.2, 1e-6): 7,
        ApproxDPEvent(0.3, 1e-6): 1,
        RandomizedResponseEvent(0.2): 5,
    }
    _, lower = cell_components(leaves, leaves, Adjacency())
    kinds = [isinstance(d.lower_remove, InfinitySplit) for d, _ in lower]
    assert kinds == [True, True, False]
    for d, _ in lower[:2]:
        assert isinstance(d.lower_remove, InfinitySplit)
        split = d.lower_remove
        # the whole curve is the mass at +infinity plus the finite part's, scaled
        for x in (0.0, 0.5, 5.0):
            whole = float(split.delta(np.array([x]))[0])
            part = float(split.finite.delta(np.array([x]))[0])
            assert whole == pytest.approx(split.inf_lower + (1 - split.inf_lower) * part, rel=1e-9)
