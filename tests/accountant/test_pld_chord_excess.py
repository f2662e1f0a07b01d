"""Lower bounds read from chords: each chord's relative excess over the true curve is measured on
its stored masses (:func:`pld_discrete._chord_excess`), not assumed to be LOWER_DEFLATION.

Where a curve is linear in ``e^eps`` (pure DP, randomized response), rounded slope differences
clamped at zero raise the stored curve by up to ~1e-16 R / h^2 over a stretch of width R; on
fine grids that is far beyond LOWER_DEFLATION, and a lower bound read from such chords exceeded
the exact delta (references: products of two-point pairs summed in 60-digit arithmetic)."""

from __future__ import annotations

import itertools

import mpmath
import numpy as np
import pytest

from dpledger.accountant.leaves import leaf_profiles
from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.pld_discrete import LOWER_DEFLATION, discretise
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    ComposedEvent,
    GaussianEvent,
    PoissonSampledEvent,
    PureDPEvent,
    RandomizedResponseEvent,
    SelfComposedEvent,
    TabulatedProfileEvent,
)

mpmath.mp.dps = 60


def _rr(eps0: float) -> tuple[list[mpmath.mpf], list[mpmath.mpf]]:
    a = mpmath.mpf(eps0)
    high, low = mpmath.e**a / (1 + mpmath.e**a), 1 / (1 + mpmath.e**a)
    return [high, low], [low, high]


def _sampled_remove(
    pair: tuple[list[mpmath.mpf], list[mpmath.mpf]], q: float
) -> tuple[list[mpmath.mpf], list[mpmath.mpf]]:
    rate = mpmath.mpf(q)
    p, r = pair
    return [(1 - rate) * b + rate * a for a, b in zip(p, r, strict=True)], list(r)


def _delta(pairs: list[tuple[list[mpmath.mpf], list[mpmath.mpf]]], eps: float) -> mpmath.mpf:
    """Exact delta(eps) of a product of finite pairs."""
    x = mpmath.e ** mpmath.mpf(eps)
    total = mpmath.mpf(0)
    for atoms in itertools.product(*[list(zip(p, r, strict=True)) for p, r in pairs]):
        p_mass = mpmath.fprod(a for a, _ in atoms)
        q_mass = mpmath.fprod(b for _, b in atoms)
        total += max(mpmath.mpf(0), p_mass - x * q_mass)
    return total


@pytest.mark.parametrize(("q", "eps0", "count"), [(0.01, 40.0, 2), (0.01, 30.0, 3)])
def test_a_fine_grid_read_again_at_a_flat_threshold_stays_below_the_exact_delta(
    q: float, eps0: float, count: int
) -> None:
    # a steep threshold first refines the grid; the flat one is then read off the fine chords
    # (before: lower 0.019900000066 against exact 0.0199 for q = 0.01, 40-DP, two steps)
    acc = PLDAccountant()
    acc.compose(SelfComposedEvent(PoissonSampledEvent(q, PureDPEvent(eps0)), count))
    remove = [_sampled_remove(_rr(eps0), q)] * count
    for eps in (35.0, 70.0, 0.5, 2.0):
        bound = acc.get_delta(eps)
        exact = _delta(remove, eps)  # the add direction's delta is below it here
        assert bound.delta_lower <= exact
        assert bound.delta >= exact


def test_the_default_call_with_a_tabulated_step_stays_below_the_exact_delta() -> None:
    # a table of randomized response at 0.5 whose claimed tight pair is randomized response at
    # 0.25: the mechanism may be that pair, so the lower bound must hold for it (before:
    # lower 0.0199000001212 against 0.0198999999999999968, +6.1e-9)
    grid = [-1.0 + 0.05 * i for i in range(41)]
    rr = _rr(0.5)
    curve = [float(_delta([rr], x)) * (1 + 1e-6) for x in grid]
    low = mpmath.e ** mpmath.mpf(0.25)
    tab = TabulatedProfileEvent(
        epsilons=tuple(grid),
        deltas=tuple(min(1.0, v) for v in curve),
        tight_losses=(0.25, -0.25),
        tight_masses=(float(low / (1 + low)), float(1 / (1 + low))),
        tight_claim="binary randomized response",
    )
    step = PoissonSampledEvent(0.01, PureDPEvent(40.0))
    event = ComposedEvent([SelfComposedEvent(step, 2), tab])
    bound = account(event, epsilon=0.3).bound
    pairs = [_sampled_remove(_rr(40.0), 0.01)] * 2 + [_rr(0.25)]
    assert bound.delta_lower <= _delta(pairs, 0.3)


def _stored(masses: np.ndarray, losses: np.ndarray, x: float) -> mpmath.mpf:
    """The stored curve at ``x``, summed in extended precision (relative error ~1e-14 here,
    far inside the margins tested)."""
    above = losses > x
    terms = masses[above].astype(np.longdouble) * -np.expm1(
        np.longdouble(x) - losses[above].astype(np.longdouble)
    )
    return mpmath.mpf(str(np.sum(terms)))


@pytest.mark.parametrize(
    ("eps0", "h", "least"), [(10.0, 1e-4, 1e-8), (1.0, 1e-4, 0.0), (3.0, 1e-3, 0.0)]
)
def test_the_measured_excess_bounds_the_stored_curve(eps0: float, h: float, least: float) -> None:
    pld = discretise(leaf_profiles(RandomizedResponseEvent(eps0), Adjacency()).remove, h)
    # a linear stretch of width 20 at h = 1e-4 measures far beyond the old assumed excess
    assert pld.excess >= max(least, LOWER_DEFLATION)
    masses, losses = pld.masses, pld.losses
    assert mpmath.fsum(mpmath.mpf(float(m)) for m in masses) <= 1 + mpmath.mpf(pld.excess)
    pair = [_rr(eps0)]
    rng = np.random.default_rng(1)
    for i in rng.integers(0, masses.size, 40):
        x = float(losses[i])
        assert _stored(masses, losses, x) <= (1 + mpmath.mpf(pld.excess)) * _delta(pair, x)


def test_smooth_chords_keep_the_assumed_deflation() -> None:
    for event in (GaussianEvent(1.0), PoissonSampledEvent(0.3, GaussianEvent(0.5))):
        pld = discretise(leaf_profiles(event, Adjacency()).remove, 1e-3)
        assert LOWER_DEFLATION <= pld.excess <= 1.5 * LOWER_DEFLATION
        assert pld.slack == 0.0
