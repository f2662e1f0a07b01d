"""Many distinct Laplace leaves composed in blocks on fine grids of their own
(:mod:`dpledger.accountant.pld_blocks`): block masses and curves against exact compositions at
60 digits, the blocks' bracket against the leaf-by-leaf one and against dp-accounting."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpledger.accountant.pld as pld_module
import dpledger.accountant.pld_blocks as blocks_module
from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.pld_blocks import (
    BLOCK_LEAVES,
    EVALUATION_ERROR,
    _Atoms,
    _blocks,
    _Parts,
    _spacing,
    block_components,
    block_profiles,
    compose_masses,
)
from dpledger.accountant.pld_discrete import DiscretePLD
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    ComposedEvent,
    Event,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    RandomizedResponseEvent,
)

mpmath.mp.dps = 60


def _exact_convolution(parts: list[DiscretePLD]) -> tuple[int, list[mpmath.mpf]]:
    """(offset, P-masses) of the composed pairs at 60 digits."""
    out = [mpmath.mpf(1)]
    offset = 0
    for part in parts:
        new = [mpmath.mpf(0)] * (len(out) + part.masses.size - 1)
        for i, x in enumerate(out):
            if x == 0:
                continue
            for j, y in enumerate(part.masses.tolist()):
                new[i + j] += x * mpmath.mpf(y)
        out = new
        offset += part.offset
    return offset, out


def _exact_curve(offset: int, masses: list[mpmath.mpf], h: float, eps: float) -> mpmath.mpf:
    """delta(eps) of atoms at losses ``(offset + j) h`` (exact multiples) at 60 digits."""
    e = mpmath.mpf(eps)
    total = mpmath.mpf(0)
    for j, p in enumerate(masses):
        loss = (offset + j) * mpmath.mpf(h)
        if loss > e:
            total += p * (1 - mpmath.exp(e - loss))
    return total


def _leaves(n: int, seed: int = 0) -> list[LaplaceEvent]:
    rng = np.random.default_rng(seed)
    return [LaplaceEvent(float(b)) for b in rng.uniform(500.0, 1000.0, n)]


def test_compose_masses_bounds_the_exact_convolution() -> None:
    rng = np.random.default_rng(1)
    parts = [DiscretePLD(-3 + i, rng.uniform(0.0, 1.0, 7) / 7, 0.0, 1e-3) for i in range(6)]
    for up in (True, False):
        found = compose_masses(parts, up=up)
        assert found is not None
        offset, masses, _, error = found
        ref_offset, ref = _exact_convolution(parts)
        assert offset == ref_offset
        for got, exact in zip(masses.tolist(), ref, strict=True):
            assert abs(mpmath.mpf(got) - exact) <= error * exact


def _long_double_convolution(parts: list[DiscretePLD]) -> tuple[int, np.ndarray]:
    """(offset, P-masses) of the composed pairs, convolved in turn in long double (a relative
    error of at most the terms times its unit roundoff per step)."""
    out = np.array([1.0], dtype=np.longdouble)
    offset = 0
    for part in parts:
        out = np.convolve(out, part.masses.astype(np.longdouble))
        offset += part.offset
    return offset, out


@pytest.mark.parametrize("up", [True, False])
def test_compose_masses_on_long_parts_is_within_its_bound(up: bool) -> None:
    """Parts long enough for the blocked matrix products, an odd count, and one pair given
    twice as the same object (convolved once per level): the offset, the mass at +infinity
    and every mass within the returned bound of a long-double composition."""
    rng = np.random.default_rng(3)
    long_part = DiscretePLD(-1500, rng.uniform(0.0, 1.0, 3000) / 3000, 1e-9, 1e-4)
    parts = [
        long_part,
        DiscretePLD(-1200, rng.uniform(0.0, 1.0, 2500) / 2500, 2e-9, 1e-4),
        long_part,
        DiscretePLD(-40, rng.uniform(0.0, 1.0, 81) / 81, 0.0, 1e-4),
        DiscretePLD(-1100, np.exp(-rng.uniform(0.0, 300.0, 2200)), 0.0, 1e-4),
    ]
    found = compose_masses(parts, up=up)
    assert found is not None
    offset, masses, inf_mass, error = found
    ref_offset, ref = _long_double_convolution(parts)
    assert offset == ref_offset
    assert masses.size == ref.size
    assert inf_mass >= 4e-9 and inf_mass <= 4e-9 * (1 + 1e-12)
    # the reference's own error: 5 steps of at most 3000 terms in long double
    slack = 5 * 3000 * float(np.finfo(np.longdouble).eps)
    assert error < 1e-11
    gap = np.abs(masses.astype(np.longdouble) - ref)
    assert bool(np.all(gap <= (error + slack) * ref))


def test_compose_masses_of_one_pair_repeated_is_that_of_equal_copies() -> None:
    """Operands that are the same object are convolved once per level: the numbers are those
    of the same tree over equal but distinct copies."""
    rng = np.random.default_rng(4)
    pair = DiscretePLD(-700, rng.uniform(0.0, 1.0, 1401) / 1401, 0.0, 1e-4)
    for k in (1, 2, 5, 9, 32):
        for up in (True, False):
            same = compose_masses([pair] * k, up=up)
            copies = [DiscretePLD(-700, pair.masses.copy(), 0.0, 1e-4) for _ in range(k)]
            distinct = compose_masses(copies, up=up)
            assert same is not None and distinct is not None
            assert same[0] == distinct[0] == -700 * k and same[2:] == distinct[2:]
            assert np.array_equal(same[1], distinct[1])


def test_compose_masses_drops_or_refuses_masses_near_underflow() -> None:
    """A mass below 1e-250: dropped for a lower bound, no composition for an upper bound."""
    tiny = DiscretePLD(0, np.array([0.5, 1e-260, 0.5]), 0.0, 1e-3)
    plain = DiscretePLD(0, np.array([0.5, 0.5]), 0.0, 1e-3)
    assert compose_masses([plain, tiny], up=True) is None
    lower = compose_masses([plain, tiny], up=False)
    assert lower is not None
    assert lower[1].tolist() == [0.25, 0.25, 0.25, 0.25]
    # masses that pass alone but whose product underflows to 0 (exact 1e-400): an upper
    # composition would read 0 there, so none is made; a lower one may lose that mass
    edge = DiscretePLD(0, np.array([1e-200, 1.0]), 0.0, 1e-3)
    assert compose_masses([edge, edge], up=True) is None
    kept = compose_masses([edge, edge], up=False)
    assert kept is not None and kept[1][0] == 0.0 and kept[1][2] == 1.0


def test_atoms_evaluation_is_on_its_side_and_close() -> None:
    rng = np.random.default_rng(2)
    losses = np.sort(rng.uniform(-0.05, 0.05, 3000))
    masses = rng.uniform(0.0, 1.0, losses.size)
    masses /= masses.sum()
    eps = np.linspace(-0.06, 0.06, 41)
    upper = _Atoms(losses, masses, 0.0, up=True)(eps)
    lower = _Atoms(losses, masses, 0.0, up=False)(eps)
    for e, a, b in zip(eps.tolist(), upper.tolist(), lower.tolist(), strict=True):
        exact = mpmath.fsum(
            mpmath.mpf(p) * (1 - mpmath.exp(mpmath.mpf(e) - mpmath.mpf(x)))
            for x, p in zip(losses.tolist(), masses.tolist(), strict=True)
            if x > e
        )
        assert a >= exact >= b
        assert a - b <= 2 * EVALUATION_ERROR * exact + 1e-300


@pytest.mark.parametrize("count", [2, 5])
def test_block_curves_bracket_the_exact_fine_composition(
    count: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The upper curve lies above the 60-digit composition of the leaves' dominating pairs,
    the lower below that of their dominated pairs (on a coarser fine grid, for time)."""
    monkeypatch.setattr(blocks_module, "FINE_POINTS", 16)
    monkeypatch.setattr(blocks_module, "FINE_POINTS_UPPER", 8)
    leaves = _leaves(count, seed=count)
    adjacency = Adjacency()
    parts = _Parts(adjacency)
    found = block_profiles(list(leaves), list(leaves), adjacency, parts)
    assert found is not None
    h = _spacing(list(leaves), parts, 16)
    h_up = _spacing(list(leaves), parts, 8)
    assert h is not None and h_up is not None and h_up > h
    up_offset, up = _exact_convolution([parts.up(leaf, h_up) for leaf in leaves])
    lows = [parts.down(leaf, h) for leaf in leaves]
    assert all(p is not None for p in lows)
    low_offset, low = _exact_convolution([p for p in lows if p is not None])
    top = count * 2e-3
    for eps in np.linspace(0.0, top, 9).tolist():
        a = float(found.remove(np.array([eps]))[0])
        # the lower curve as computed (a profile's values add its REL_MARGIN on top)
        b = float(found.lower_remove.delta(np.array([eps]))[0])
        assert a >= _exact_curve(up_offset, up, h_up, eps)
        assert b <= _exact_curve(low_offset, low, h, eps)
        assert b <= a


def test_blocks_round_within_a_cell_and_keep_counts() -> None:
    events: dict[Event, int] = {leaf: 1 for leaf in _leaves(100)}
    events[LaplaceEvent(700.0)] = 3 * BLOCK_LEAVES + 5
    blocks = _blocks(events)
    assert sum(len(u) * t for u, _, t in blocks) == sum(events.values())
    for upper, lower, _ in blocks:
        assert len(upper) == len(lower)
        for a, b in zip(upper, lower, strict=True):
            assert isinstance(a, LaplaceEvent) and isinstance(b, LaplaceEvent)
            # the upper leaf has the smaller noise (costlier), within the rounding step
            assert a.noise_multiplier <= b.noise_multiplier <= a.noise_multiplier * 1.0011


def test_block_components_leave_other_leaves() -> None:
    merged: dict[Event, int] = {leaf: 1 for leaf in _leaves(80)}
    merged[GaussianEvent(1.0)] = 1
    merged[LaplaceEvent(1.0)] = 2  # epsilon 1: its own curves
    rest, comps = block_components(merged, Adjacency())
    assert set(rest) == {GaussianEvent(1.0), LaplaceEvent(1.0)}
    assert sum(t for _, t in comps) == math.ceil(80 / BLOCK_LEAVES)
    few: dict[Event, int] = {leaf: 1 for leaf in _leaves(10)}
    few[GaussianEvent(1.0)] = 1
    assert block_components(few, Adjacency()) == (few, [])
    # without a Gaussian-based leaf the loss grid resolves the leaves: no blocks
    alone: dict[Event, int] = {leaf: 1 for leaf in _leaves(80)}
    assert block_components(alone, Adjacency()) == (alone, [])


def _bracket(leaves: list[Event], blocks: bool, delta: float = 1e-5) -> tuple[float, float]:
    saved = pld_module.block_components
    if not blocks:
        pld_module.block_components = lambda merged, adjacency: (merged, [])  # type: ignore[assignment]
    try:
        bound = PLDAccountant().compose(ComposedEvent(leaves)).get_epsilon(delta)
    finally:
        pld_module.block_components = saved
    return bound.epsilon_lower, bound.epsilon


def _mixed(laplace: int, sampled: int, rr: int, seed: int) -> list[Event]:
    rng = np.random.default_rng(seed)
    leaves: list[Event] = list(_leaves(laplace, seed))
    leaves += [
        PoissonSampledEvent(float(q), GaussianEvent(float(s)))
        for q, s in zip(
            rng.uniform(1e-4, 3e-4, sampled), rng.uniform(0.9, 1.1, sampled), strict=True
        )
    ]
    leaves += [RandomizedResponseEvent(float(e)) for e in rng.uniform(1e-4, 2e-4, rr)]
    return leaves


def test_blocks_narrow_the_bracket_of_many_distinct_laplace_leaves() -> None:
    """300 distinct Laplace leaves beside DP-SGD steps (beyond the 256 leaves composed
    unrounded): the blocks' bracket meets the leaf-by-leaf one, and is narrower."""
    leaves = _mixed(300, 20, 0, seed=3)
    low, up = _bracket(leaves, blocks=True)
    old_low, old_up = _bracket(leaves, blocks=False)
    assert low <= old_up and up >= old_low
    assert up - low < old_up - old_low


@pytest.mark.slow
def test_blocks_against_dp_accounting() -> None:
    """300 distinct Laplace leaves beside 20 DP-SGD steps against dp-accounting at a fine
    grid: its optimistic estimate (a lower reference) below the blocks' upper bound, its
    pessimistic one (an upper reference) above their lower bound."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    leaves = _mixed(300, 20, 0, seed=3)
    low, up = _bracket(leaves, blocks=True)
    refs = []
    for pessimistic in (False, True):
        total = None
        for leaf in leaves:
            if isinstance(leaf, LaplaceEvent):
                one = pld_lib.from_laplace_mechanism(
                    leaf.noise_multiplier,
                    value_discretization_interval=1e-5,
                    pessimistic_estimate=pessimistic,
                )
            else:
                assert isinstance(leaf, PoissonSampledEvent)
                assert isinstance(leaf.event, GaussianEvent)
                one = pld_lib.from_gaussian_mechanism(
                    leaf.event.noise_multiplier,
                    sampling_prob=leaf.sampling_probability,
                    value_discretization_interval=1e-5,
                    pessimistic_estimate=pessimistic,
                    use_connect_dots=pessimistic,
                )
            total = one if total is None else total.compose(one)
        assert total is not None
        refs.append(float(total.get_epsilon_for_delta(1e-5)))
    assert refs[0] <= up and low <= refs[1]


@pytest.mark.slow
@settings(max_examples=6, deadline=None)
@given(
    laplace=st.integers(64, 400),
    sampled=st.integers(1, 200),
    rr=st.integers(0, 200),
    seed=st.integers(0, 2**16),
)
def test_blocks_meet_the_leaf_by_leaf_bracket(
    laplace: int, sampled: int, rr: int, seed: int
) -> None:
    """Random heterogeneous compositions: the blocks' upper bound never below the
    leaf-by-leaf certified lower bound, their lower never above its upper."""
    leaves = _mixed(laplace, sampled, rr, seed)
    if len(set(leaves)) <= 256:
        leaves += _mixed(300, 0, 0, seed + 1)
    low, up = _bracket(leaves, blocks=True)
    old_low, old_up = _bracket(leaves, blocks=False)
    assert up >= old_low and low <= old_up
