"""Approximate-DP leaves composed leaf by leaf (at most MAX_DISTINCT_COMPONENTS of them) keep
their mass at +infinity in PLD lower bounds: ``approx_dp_profile`` names the exact split
(:class:`~dpledger.accountant.profiles_base.InfinitySplit`; proofs_checks/approx_dp_split).
Each mix is checked against its exact curve at 60 digits (the leaves' lattices enumerated
through the merged Gaussian's curve), and against the curves without the split (the old
lower bound, which dropped the mass): lower bounds rise, upper bounds stay."""

from __future__ import annotations

import math

import mpmath as mp
import pytest

from dpledger.accountant import profiles_noise
from dpledger.accountant.profiles_base import InfinitySplit, Profile
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    ApproxDPEvent,
    ComposedEvent,
    GaussianEvent,
    RandomizedResponseEvent,
)

from .approx_dp_reference import Mix, exact_delta, infinity_mass, pld_of

#: (leaves, epsilon of the delta query)
MIXES: dict[str, tuple[Mix, float]] = {
    "three_equal_and_gaussian": ({ApproxDPEvent(0.5, 1e-6): 3, GaussianEvent(1.0): 1}, 5.626),
    "four_distinct_and_gaussian": (
        {**{ApproxDPEvent(0.1 * (1 + i / 4), 1e-7): 1 for i in range(4)}, GaussianEvent(2.0): 1},
        2.3,
    ),
    "with_randomized_response": (
        {ApproxDPEvent(0.3, 1e-7): 20, RandomizedResponseEvent(0.3): 5, GaussianEvent(3.0): 1},
        6.712,
    ),
    "approximate_dp_alone": ({ApproxDPEvent(1.0, 1e-7): 5}, 3.0),
    "two_deltas_and_randomized_response": (
        {ApproxDPEvent(0.2, 1e-5): 2, ApproxDPEvent(0.4, 1e-6): 1, RandomizedResponseEvent(0.5): 2},
        0.9,
    ),
}


def _unsplit(eps0: float, delta0: float) -> Profile:
    """The curve without its parts named (the lower bound before the split)."""
    p = _ORIGINAL(eps0, delta0)
    return Profile(p.delta, p.loss_lo, p.loss_hi, p.exact, p.name, p.dual)


_ORIGINAL = profiles_noise.approx_dp_profile


#: mixes whose delta query composes dominated pairs (the others' chord bracket is narrow
#: enough already, and the chord's lower bound holds no mass at +infinity)
GAINS = ("three_equal_and_gaussian", "four_distinct_and_gaussian", "with_randomized_response")


@pytest.mark.parametrize("name", MIXES)
def test_delta_bracket_holds_the_exact_value(name: str) -> None:
    leaves, eps = MIXES[name]
    bound = pld_of(leaves).get_delta(eps)
    exact = exact_delta(leaves, eps)
    assert bound.delta_lower <= exact * (1 + mp.mpf(1e-12)) <= bound.delta * (1 + mp.mpf(2e-12))
    if name in GAINS:
        assert bound.delta_lower >= infinity_mass(leaves)


def test_lower_rises_over_the_curves_without_the_split(monkeypatch: pytest.MonkeyPatch) -> None:
    """The brief example: the old lower bound dropped the composed mass (3e-6 of 1e-5)."""
    _compare_with_unsplit("three_equal_and_gaussian", monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("name", [name for name in MIXES if name != "three_equal_and_gaussian"])
def test_lower_rises_over_the_curves_without_the_split_wide(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same for the other mixes (the curves without the split take finer grids)."""
    _compare_with_unsplit(name, monkeypatch)


def _compare_with_unsplit(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    leaves, eps = MIXES[name]
    new = pld_of(leaves).get_delta(eps)
    with monkeypatch.context() as patch:
        patch.setattr(profiles_noise, "approx_dp_profile", _unsplit)
        old = pld_of(leaves).get_delta(eps)
    # the upper bound's curves are the same; the query may stop at a coarser grid once the
    # lower bound meets its target, so the upper may rise by a little, never fall
    assert old.delta <= new.delta <= old.delta * (1 + 1e-5)
    assert new.delta_lower >= old.delta_lower
    if name in GAINS:
        # most of the composed mass at +infinity, which the old lower bound dropped
        assert new.delta_lower >= old.delta_lower + 0.5 * infinity_mass(leaves)


EPSILON_CASES = [(name, 1e-5) for name in MIXES] + [
    ("with_randomized_response", 1e-8),
    ("approximate_dp_alone", 1e-8),
]


@pytest.mark.parametrize(("name", "delta"), EPSILON_CASES)
def test_epsilon_bracket_holds_the_exact_value(name: str, delta: float) -> None:
    leaves, _ = MIXES[name]
    bound = pld_of(leaves).get_epsilon(delta)
    assert bound.epsilon_lower <= bound.epsilon
    if bound.epsilon_lower > 0:
        assert exact_delta(leaves, bound.epsilon_lower) >= delta * (1 - 1e-12)
    if math.isfinite(bound.epsilon):
        assert exact_delta(leaves, bound.epsilon) <= delta * (1 + 1e-12)
    else:  # the composed mass at +infinity exceeds delta: epsilon is infinite
        assert infinity_mass(leaves) > delta


#: epsilon lower bounds at delta before the split (the default call, measured)
OLD_LOWER = {
    ("three_equal_and_gaussian", 1e-5): 5.53726,
    ("three_equal_and_gaussian", 1e-8): 7.0167,
    ("with_randomized_response", 1e-5): 6.64566,
}


@pytest.mark.parametrize(("name", "delta"), list(OLD_LOWER))
def test_default_call_lower_bound_rises(name: str, delta: float) -> None:
    leaves, _ = MIXES[name]
    bound = account(ComposedEvent([k for k, m in leaves.items() for _ in range(m)]), delta=delta)
    assert bound.bound.epsilon_lower > OLD_LOWER[(name, delta)] * 1.005
    assert bound.bound.epsilon_lower <= bound.bound.epsilon


def test_the_split_is_named_in_both_directions_and_relations() -> None:
    """A plain approximate-DP leaf's lower curves name the split under either relation; pure
    DP (delta = 0) none."""
    from dpledger.accountant.leaves import leaf_profiles

    for relation in ("add_remove", "replace_one"):
        adjacency = Adjacency(relation=relation)
        d = leaf_profiles(ApproxDPEvent(0.5, 1e-6), adjacency)
        for p in (d.lower_remove, d.lower_add):
            assert isinstance(p, InfinitySplit) and p.inf_lower == 1e-6
        pure = leaf_profiles(ApproxDPEvent(0.5, 0.0), adjacency)
        assert not isinstance(pure.lower_remove, InfinitySplit)
