"""Blocks of distinct Laplace leaves on fine grids: the upper curve above 60-digit references
of the block's composition, the lower curve below them; the curve evaluation on its side."""

from __future__ import annotations

import itertools

import mpmath
import numpy as np
import pytest

import dpledger.accountant.pld_blocks as blocks
from dpledger.accountant.pld_blocks import EVALUATION_ERROR, _Atoms, _Parts, block_profiles
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import Event, LaplaceEvent

mpmath.mp.dps = 60


def _binned_pair(scale: float, bins: int) -> list[tuple[mpmath.mpf, mpmath.mpf]]:
    """(P-mass, loss) of the Laplace pair (P = Lap(0, b), Q = Lap(1, b)) post-processed by
    cutting the output at ``bins`` evenly spaced points of [0, 1]: a pair the leaf dominates,
    whose losses are exact log-ratios."""
    b = mpmath.mpf(scale)

    def cdf(x: mpmath.mpf, mu: mpmath.mpf) -> mpmath.mpf:
        z = (x - mu) / b
        return mpmath.exp(z) / 2 if z < 0 else 1 - mpmath.exp(-z) / 2

    cuts = [mpmath.mpf(i) / bins for i in range(bins + 1)]
    out = [(cdf(cuts[0], 0), cdf(cuts[0], 1))]  # x <= 0
    for lo, hi in itertools.pairwise(cuts):
        out.append((cdf(hi, 0) - cdf(lo, 0), cdf(hi, 1) - cdf(lo, 1)))
    out.append((1 - cdf(cuts[-1], 0), 1 - cdf(cuts[-1], 1)))  # x > 1
    return [(p, mpmath.log(p / q)) for p, q in out]


def _composed_curve(pairs: list[list[tuple[mpmath.mpf, mpmath.mpf]]], eps: float) -> mpmath.mpf:
    atoms = [(mpmath.mpf(1), mpmath.mpf(0))]
    for pair in pairs:
        atoms = [(p * r, loss + s) for p, loss in atoms for r, s in pair]
    e = mpmath.mpf(eps)
    return mpmath.fsum(p * (1 - mpmath.exp(e - loss)) for p, loss in atoms if loss > e)


def _rr_curve(epsilons: list[float], eps: float) -> mpmath.mpf:
    """The composition of binary randomized responses at the leaves' epsilons (pure DP: it
    dominates each Laplace leaf)."""
    pairs = []
    for x in epsilons:
        e = mpmath.mpf(x)
        pairs.append([(mpmath.exp(e) / (1 + mpmath.exp(e)), e), (1 / (1 + mpmath.exp(e)), -e)])
    return _composed_curve(pairs, eps)


@pytest.mark.parametrize("scales", [(700.0, 910.0), (500.0, 640.0, 990.0)])
def test_block_curves_against_the_composition(
    scales: tuple[float, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(blocks, "FINE_POINTS", 32)
    leaves = [LaplaceEvent(s) for s in scales]
    adjacency = Adjacency()
    d = block_profiles(list(leaves), list(leaves), adjacency, _Parts(adjacency))
    assert d is not None
    bins = 12 if len(scales) == 3 else 40
    binned = [_binned_pair(s, bins) for s in scales]
    top = sum(1.0 / s for s in scales)
    for eps in np.linspace(0.0, top, 7).tolist():
        upper = float(d.remove(np.array([eps]))[0])
        lower = float(d.lower_remove.delta(np.array([eps]))[0])
        # the binned pairs are dominated by the leaves: their composition lies below the truth
        assert upper >= _composed_curve(binned, eps)
        # randomized response dominates each leaf: its composition lies above the truth
        assert lower <= _rr_curve([1.0 / s for s in scales], eps)
        assert lower <= upper


@pytest.mark.parametrize(("lower", "upper"), [(32, 8), (8, 32)])
def test_block_sides_on_grids_of_their_own_against_the_composition(
    lower: int, upper: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Step 8: each side on a fine grid of its own (the upper coarser or finer than the
    lower), against the same 60-digit references as one common grid."""
    monkeypatch.setattr(blocks, "FINE_POINTS_UPPER", upper)
    monkeypatch.setattr(blocks, "FINE_POINTS", lower)
    leaves = [LaplaceEvent(s) for s in (700.0, 910.0)]
    adjacency = Adjacency()
    d = block_profiles(list(leaves), list(leaves), adjacency, _Parts(adjacency))
    assert d is not None
    binned = [_binned_pair(s, 40) for s in (700.0, 910.0)]
    for eps in np.linspace(0.0, 1.0 / 700.0 + 1.0 / 910.0, 7).tolist():
        upper_value = float(d.remove(np.array([eps]))[0])
        lower_value = float(d.lower_remove.delta(np.array([eps]))[0])
        assert upper_value >= _composed_curve(binned, eps)
        assert lower_value <= _rr_curve([1.0 / 700.0, 1.0 / 910.0], eps)
        assert lower_value <= upper_value


def test_curve_evaluation_is_on_its_side() -> None:
    rng = np.random.default_rng(5)
    losses = np.sort(rng.uniform(-0.02, 0.02, 800))
    masses = rng.uniform(0.0, 1.0, losses.size) / losses.size
    eps = np.linspace(-0.03, 0.03, 25)
    up = _Atoms(losses, masses, 0.0, up=True)(eps)
    down = _Atoms(losses, masses, 0.0, up=False)(eps)
    for e, a, b in zip(eps.tolist(), up.tolist(), down.tolist(), strict=True):
        exact = mpmath.fsum(
            mpmath.mpf(p) * (1 - mpmath.exp(mpmath.mpf(e) - mpmath.mpf(x)))
            for x, p in zip(losses.tolist(), masses.tolist(), strict=True)
            if x > e
        )
        assert a >= exact >= b
        assert b >= exact * (1 - EVALUATION_ERROR)


@pytest.mark.parametrize("h", [2e-4, 3e-5])
def test_dominated_pair_of_a_block_stays_below_its_upper_curve(
    h: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The backend's dominated pair of a block's lower curve, on the composed grid, has its
    curve below the block's upper curve (which lies above the block's own)."""
    from dpledger.accountant.pld_dominated import discretise_lower

    monkeypatch.setattr(blocks, "FINE_POINTS", 32)
    rng = np.random.default_rng(7)
    leaves = [LaplaceEvent(float(b)) for b in rng.uniform(500.0, 1000.0, 32)]
    adjacency = Adjacency()
    d = block_profiles(list(leaves), list(leaves), adjacency, _Parts(adjacency))
    assert d is not None
    pair = discretise_lower(d.lower_remove, h)
    assert pair is not None
    losses = pair.losses
    eps = np.linspace(-0.02, 0.06, 81)
    with np.errstate(over="ignore"):
        curve = pair.inf_mass + np.sum(
            pair.masses * np.maximum(-np.expm1(eps[:, None] - losses), 0.0), axis=1
        )
    upper = d.remove(eps)
    assert np.all(curve <= upper * (1 + 1e-12) + 1e-300)


@pytest.mark.parametrize("rounding", blocks.CELL_ROUNDINGS)
def test_cell_blocks_round_each_leaf_to_its_side(rounding: float) -> None:
    """Blocks by cell (step 1, ``_grouped``'s coarser grids): matched position by position,
    each upper leaf has at most the noise of the leaf it stands for and each lower leaf at
    least, every leaf counted once, and every block holds one upper and one lower leaf."""
    rng = np.random.default_rng(17)
    scales = np.exp(rng.uniform(np.log(1500.0), np.log(3200.0), 1500))
    events: dict[Event, int] = {LaplaceEvent(float(b)): 1 + i % 37 for i, b in enumerate(scales)}
    found = blocks._blocks(events, rounding, by_cell=True)

    def noise(leaf: Event) -> float:
        assert isinstance(leaf, LaplaceEvent)
        return float(leaf.noise_multiplier)

    def noises(upper: bool) -> list[float]:
        return sorted(noise(e) for u, d, t in found for e in (u if upper else d) * t)

    own = sorted(noise(e) for e, k in events.items() for _ in range(k))
    ups, downs = noises(True), noises(False)
    assert len(ups) == len(downs) == len(own)
    assert all(u <= o <= d for u, o, d in zip(ups, own, downs, strict=True))
    assert all(len(set(blk[0])) == 1 and len(set(blk[1])) == 1 for blk in found)


@pytest.mark.parametrize("rounding", [*blocks.CELL_ROUNDINGS, 0.5])
def test_cell_blocks_read_off_the_counts_equal_the_walk(rounding: float) -> None:
    """Step 7: the blocks by cell read off each cell's total count are the leaf-by-leaf
    walk's, in its order (counts from 1 to 80, so leaves of full blocks of their own too)."""
    rng = np.random.default_rng(5)
    scales = np.exp(rng.uniform(np.log(1500.0), np.log(3200.0), 900))
    events: dict[Event, int] = {LaplaceEvent(float(b)): 1 + i % 80 for i, b in enumerate(scales)}
    items, costs = blocks._sorted_kind(events)
    costly, cheap = blocks._rounded(costs, rounding)
    walked = blocks._walk(items, costs, costly, cheap, by_cell=True)
    assert blocks._cell_blocks(items, costly, cheap) == walked
    assert blocks._blocks(events, rounding, by_cell=True) == walked


def test_copies_kept_equal_a_composition_from_scratch() -> None:
    """Step 7: k copies of one pair, kept by count (requested in any order, again after
    another count), are the same numbers and error bound as compose_masses of the k copies."""
    adjacency = Adjacency()
    leaf = LaplaceEvent(700.0)
    parts = _Parts(adjacency)
    h = 2.0 ** np.floor(np.log2(1 / 700.0 / 64))
    for up in (True, False):
        pair = parts.up(leaf, h) if up else parts.down(leaf, h)
        assert pair is not None
        for k in (3, 9, 4, 9, 1):
            found = parts.composed([leaf] * k, [pair] * k, up=up)
            fresh = blocks.compose_masses([pair] * k, up=up)
            assert found is not None and fresh is not None
            assert found[0] == fresh[0] and found[2:] == fresh[2:]
            assert np.array_equal(found[1], fresh[1])
