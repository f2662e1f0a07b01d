"""Adversarial review of PLD blocks of distinct Laplace leaves
(:mod:`dpledger.accountant.pld_blocks`): certified brackets against a semi-exact reference
(Laplace leaves' privacy losses binned exactly, composed, then a Gaussian's closed-form curve
per atom), against the leaf-by-leaf certified bracket (blocks off) and against dp-accounting.

The reference: a Laplace leaf of scale ``b`` (sensitivity ``s``) has losses in ``[-s/b, s/b]``
with ``P(L <= t) = exp(-(s - t b) / (2 b)) / 2`` below ``s/b`` (exact); binned on a grid of
spacing ``h`` and rounded up (down), the composition's curve ``E[(1 - e^{eps - L})_+]`` is
raised (lowered), since it grows with every loss. A Gaussian leaf's curve is a closed form that
falls with the loss added to it, so ``sum_s p_s delta_G(eps - s)`` over the rounded Laplace
sums brackets the true curve. Rounding down is the rounded-up sum shifted by one bin per leaf.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from scipy.special import log_ndtr

import dpledger.accountant.pld as pld_module
from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.pld_blocks import _blocks, block_components
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    ApproxDPEvent,
    ComposedEvent,
    Event,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    RandomizedResponseEvent,
    SelfComposedEvent,
)

#: relative and absolute slack of the float64 reference (FFT composition, sums)
_REL = 1e-7
_ABS = 1e-13


@contextmanager
def _blocks_off() -> Iterator[None]:
    saved = pld_module.block_components
    pld_module.block_components = lambda merged, adjacency: (merged, [])  # type: ignore[assignment]
    try:
        yield
    finally:
        pld_module.block_components = saved


def _laplace_sum(scales: np.ndarray, sens: float, h: float) -> tuple[int, np.ndarray]:
    """(offset, P-masses) of the sum of the Laplace leaves' losses, each rounded up to the
    grid ``h`` (exact bin masses, FFT composition)."""
    pmfs = []
    offset = 0
    for b in scales.tolist():
        top = sens / b
        hi = math.ceil(top / h)
        lo = math.ceil(-top / h)
        t = np.arange(lo, hi + 1) * h  # bin (t - h, t] -> t
        cdf = np.where(t >= top, 1.0, 0.5 * np.exp(-(sens - np.minimum(t, top) * b) / (2 * b)))
        cdf = np.where(t < -top, 0.0, cdf)
        pmfs.append(np.diff(np.r_[0.0, cdf]))
        offset += lo
    size = sum(p.size - 1 for p in pmfs) + 1
    n = 1 << (size - 1).bit_length()
    acc = np.ones(n // 2 + 1, dtype=complex)
    for p in pmfs:
        acc *= np.fft.rfft(p, n)
    out = np.maximum(np.fft.irfft(acc, n)[:size], 0.0)
    return offset, out


def _gauss_delta(eps: np.ndarray, sigma: float) -> np.ndarray:
    """The Gaussian's curve at ``eps`` (sensitivity one, noise ``sigma``), in logs."""
    a = log_ndtr(-eps * sigma + 1 / (2 * sigma))
    b = eps + log_ndtr(-eps * sigma - 1 / (2 * sigma))
    return np.asarray(np.exp(a) * -np.expm1(np.minimum(b - a, 0.0)), dtype=float)


class _Reference:
    """Lower and upper curves of Laplace leaves (scales) with one Gaussian (noise sigma)."""

    def __init__(self, scales: np.ndarray, sigma: float, relation: str, h: float) -> None:
        sens = 2.0 if relation == "replace_one" else 1.0
        self.offset, self.p = _laplace_sum(scales, sens, h)
        self.shift = scales.size
        self.h, self.sigma = h, sigma / sens
        keep = self.p > 1e-300
        self.idx = np.flatnonzero(keep)
        self.p = self.p[keep]

    def delta(self, eps: float, up: bool) -> float:
        s = (self.offset + self.idx - (0 if up else self.shift)) * self.h
        value = float(np.sum(self.p * _gauss_delta(eps - s, self.sigma)))
        return value * (1 + _REL) + _ABS if up else value * (1 - _REL) - _ABS


def _scales(n: int, lo: float, hi: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.exp(rng.uniform(math.log(lo), math.log(hi), n))


def _check_against_reference(
    scales: np.ndarray, sigma: float, relation: str, deltas: list[float], h: float
) -> None:
    ref = _Reference(scales, sigma, relation, h)
    leaves: list[Event] = [LaplaceEvent(float(b)) for b in scales]
    leaves.append(GaussianEvent(sigma))
    acc = PLDAccountant(Adjacency(relation=relation)).compose(ComposedEvent(leaves))
    made: list[int] = []

    def spy(merged: dict[Event, int], adjacency: Adjacency) -> object:
        rest, comps = block_components(merged, adjacency)
        made.append(len(comps))
        return rest, comps

    saved = pld_module.block_components
    pld_module.block_components = spy  # type: ignore[assignment]
    try:
        _queries(acc, ref, deltas)
    finally:
        pld_module.block_components = saved
    # the composition went through blocks (else nothing was reviewed)
    assert made and made[0] > 0


def _queries(acc: PLDAccountant, ref: _Reference, deltas: list[float]) -> None:
    for delta in deltas:
        bound = acc.get_epsilon(delta)
        # the certified upper: the true delta there is at most delta
        assert ref.delta(bound.epsilon, up=False) <= delta, (delta, bound)
        # the certified lower: the true delta there is at least delta (0 is the floor)
        if bound.epsilon_lower > 0:
            assert ref.delta(bound.epsilon_lower, up=True) >= delta, (delta, bound)
    for eps in (0.0, 1.0)[: 1 + (len(deltas) > 1)]:
        d = acc.get_delta(eps)
        assert d.delta >= ref.delta(eps, up=False) and d.delta_lower <= ref.delta(eps, up=True)


def test_rounding_direction_per_leaf() -> None:
    """Per block position, the upper leaf has at most the noise of the leaf it stands for
    and the lower leaf at least; every leaf is counted once in each."""
    scales = _scales(2000, 20, 1e4, 7)
    events: dict[Event, int] = {LaplaceEvent(float(b)): 1 + i % 3 for i, b in enumerate(scales)}
    blocks = _blocks(events)
    ups = sorted(e.noise_multiplier for u, _, t in blocks for e in u * t)  # type: ignore[attr-defined]
    downs = sorted(e.noise_multiplier for _, d, t in blocks for e in d * t)  # type: ignore[attr-defined]
    own = sorted(e.noise_multiplier for e, k in events.items() for _ in range(k))  # type: ignore[attr-defined]
    assert len(ups) == len(downs) == len(own)
    # sorted and matched position by position (the blocks keep the leaves' order)
    assert all(u <= o <= d for u, o, d in zip(ups, own, downs, strict=True))


def test_blocks_against_the_semi_exact_reference() -> None:
    """260 distinct Laplace leaves (scales 1000..5000) beside a Gaussian, add/remove."""
    _check_against_reference(_scales(260, 1000, 5000, 3), 1.0, "add_remove", [1e-6], 4e-6)


@pytest.mark.slow
@pytest.mark.parametrize("relation", ["add_remove", "replace_one"])
@pytest.mark.parametrize(
    ("n", "lo", "hi", "sigma", "h"),
    [(280, 1000, 5000, 1.0, 2e-6), (300, 200, 1e4, 3.0, 2e-6), (280, 100, 300, 10.0, 2e-5)],
)
def test_blocks_against_the_semi_exact_reference_wide(
    relation: str, n: int, lo: float, hi: float, sigma: float, h: float
) -> None:
    _check_against_reference(
        _scales(n, lo, hi, n), sigma, relation, [1e-1, 1e-3, 1e-5, 1e-8, 1e-10], h
    )


def _mixed(seed: int, n: int, lo: float, hi: float, extra: str) -> list[Event]:
    rng = np.random.default_rng(seed)
    leaves: list[Event] = [LaplaceEvent(float(b)) for b in _scales(n, lo, hi, seed)]
    if "g" in extra:
        leaves.append(GaussianEvent(float(rng.uniform(0.5, 50))))
    if "s" in extra:
        leaves += [
            PoissonSampledEvent(float(q), GaussianEvent(1.0)) for q in rng.uniform(1e-3, 1e-2, 30)
        ]
    if "r" in extra:
        leaves += [RandomizedResponseEvent(float(e)) for e in rng.uniform(1e-3, 1e-2, 20)]
    if "a" in extra:
        leaves += [ApproxDPEvent(float(e), 1e-9) for e in rng.uniform(1e-3, 1e-2, 20)]
    if "l" in extra:
        leaves += [LaplaceEvent(float(b)) for b in rng.uniform(1e-3, 10, 10)]
    if "m" in extra:
        leaves += [SelfComposedEvent(LaplaceEvent(float(b)), 200) for b in rng.uniform(30, 60, 10)]
    return leaves


def _meets(leaves: list[Event], relation: str, deltas: list[float]) -> None:
    adjacency = Adjacency(relation=relation)
    new = PLDAccountant(adjacency).compose(ComposedEvent(leaves))
    old = PLDAccountant(adjacency).compose(ComposedEvent(leaves))
    for delta in deltas:
        a = new.get_epsilon(delta)
        with _blocks_off():
            b = old.get_epsilon(delta)
        assert a.epsilon >= b.epsilon_lower and a.epsilon_lower <= b.epsilon, (delta, a, b)
    eps = b.epsilon if math.isfinite(b.epsilon) else b.epsilon_lower
    for e in (0.0, 0.3 * eps, eps):
        a2 = new.get_delta(e)
        with _blocks_off():
            b2 = old.get_delta(e)
        assert a2.delta >= b2.delta_lower and a2.delta_lower <= b2.delta, (e, a2, b2)


@pytest.mark.slow
@pytest.mark.parametrize("relation", ["add_remove", "replace_one"])
@pytest.mark.parametrize(
    ("seed", "n", "lo", "hi", "extra"),
    [
        (1, 300, 20, 1e4, "g"),
        (2, 500, 20, 100, "s"),
        (3, 400, 1000, 1e4, "gr"),
        (4, 300, 20, 30, "sa"),
        (5, 1000, 20, 1e4, "gl"),
        (6, 300, 25, 26, "gm"),
        (7, 3000, 20, 1e4, "s"),
    ],
)
def test_blocks_meet_the_leaf_by_leaf_bracket_wide(
    relation: str, seed: int, n: int, lo: float, hi: float, extra: str
) -> None:
    """Mixed compositions (Gaussians, sampled Gaussians, RR, approximate DP, large-epsilon
    Laplace, Laplace of large counts), both adjacencies, delta 1e-1..1e-30 and delta queries:
    the blocks' bracket meets the leaf-by-leaf one."""
    _meets(_mixed(seed, n, lo, hi, extra), relation, [1e-1, 1e-3, 1e-5, 1e-10, 1e-20, 1e-30])


def test_no_block_spans_epsilons_far_apart() -> None:
    """300 Laplace leaves of noise ~20 and 100 of noise ~1e4 beside a sampled Gaussian: the
    leftover small-epsilon leaves share a block with 28 leaves of epsilon 0.05, whose grid then
    has about 0.05 / h = 1e5 points per leaf (checked without composing)."""
    leaves = [LaplaceEvent(20.0 * (1 + i * 1e-4)) for i in range(300)]
    leaves += [LaplaceEvent(1e4 * (1 - i * 1e-6)) for i in range(100)]
    for upper, lower, _ in _blocks({leaf: 1 for leaf in leaves}):
        eps = [1 / leaf.noise_multiplier for leaf in (*upper, *lower)]  # type: ignore[attr-defined]
        h = 2.0 ** math.floor(math.log2(min(eps) / 128))
        assert sum(2 / leaf.noise_multiplier for leaf in upper) / h < 1e6  # type: ignore[attr-defined]
