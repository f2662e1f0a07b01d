"""Numeric checks of the cells of many tabulated profiles (proofs_checks/tabulated_cells)."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest

from dpledger.accountant import pld, tabulated_cells
from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.tabulated_cells import lower_profiles, upper_table
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import ComposedEvent, TabulatedProfileEvent

mp.mp.dps = 40


def exact_chord(epsilons: tuple[float, ...], deltas: tuple[float, ...], eps: float) -> Fraction:
    """A table's chord interpolation in ``x = e^eps`` (the code's own exponentials), exactly."""
    xs = [Fraction(float(v)) for v in np.exp(np.asarray(epsilons))]
    ds = [Fraction(float(v)) for v in np.maximum.accumulate(np.asarray(deltas)[::-1])[::-1]]
    x = Fraction(float(np.exp(eps)))
    if x < xs[0]:
        return 1 - (1 - ds[0]) * x / xs[0]
    for i in range(len(xs) - 1):
        if xs[i] <= x < xs[i + 1]:
            return ds[i] + (ds[i + 1] - ds[i]) * (x - xs[i]) / (xs[i + 1] - xs[i])
    return ds[-1]


def _pair_curve(
    losses: tuple[float, ...], masses: tuple[float, ...], inf: float, eps: float
) -> mp.mpf:
    e = mp.mpf(eps)
    terms = [
        mp.mpf(p) * (1 - mp.e ** (e - mp.mpf(v)))
        for v, p in zip(losses, masses, strict=True)
        if v > eps
    ]
    return mp.mpf(inf) + mp.fsum(terms)


def _claimed(
    losses: tuple[float, ...], masses: tuple[float, ...], inf: float
) -> TabulatedProfileEvent:
    grid = sorted({0.0, *(abs(v) for v in losses), max(abs(v) for v in losses) + 1.0})
    deltas = tuple(
        min(1.0, float(_pair_curve(losses, masses, inf, e)) * (1 + 1e-12) + 1e-300) for e in grid
    )
    return TabulatedProfileEvent(
        tuple(grid),
        deltas,
        tight_losses=losses,
        tight_masses=masses,
        tight_inf_mass=inf,
        tight_claim="a check pair",
    )


def _random_pair(rng: np.random.Generator) -> tuple[tuple[float, ...], tuple[float, ...], float]:
    n = int(rng.integers(1, 6))
    losses = [float(v) for v in rng.uniform(-4.0, 4.0, n)]
    raw = rng.uniform(0.01, 1.0, n)
    inf = float(rng.choice([0.0, rng.uniform(0.0, 0.05)]))
    ps = [float(v) for v in raw / raw.sum() * (1 - inf)]
    q = math.fsum(p * math.exp(-v) for p, v in zip(ps, losses, strict=True))
    if q > 1.0:
        losses = [v + math.log(q) + 1e-9 for v in losses]
    return tuple(losses), tuple(ps), inf


def test_upper_tables_lie_above_every_member_exactly() -> None:
    rng = np.random.default_rng(2024)
    for _ in range(60):
        cell = []
        for _ in range(int(rng.integers(2, 6))):
            grid = np.sort(
                rng.choice(np.linspace(-1.0, 9.0, 1001), int(rng.integers(2, 15)), replace=False)
            )
            # the floor 1 - e^eps as the validator computes it (numpy's expm1 may differ by an ulp)
            floor = np.array([-math.expm1(min(e, 0.0)) for e in grid.tolist()])
            deltas = np.maximum(np.sort(rng.uniform(0.0, 1.0, grid.size))[::-1], floor)
            add = (
                None
                if rng.random() < 0.5
                else tuple(np.maximum(np.sort(rng.uniform(0, 1, grid.size))[::-1], floor).tolist())
            )
            cell.append(TabulatedProfileEvent(tuple(grid.tolist()), tuple(deltas.tolist()), add))
        up = upper_table(cell)
        up_add = up.deltas if up.deltas_add is None else up.deltas_add
        for eps in rng.uniform(0.0, 10.0, 60):
            for event in cell:
                add = event.deltas if event.deltas_add is None else event.deltas_add
                assert exact_chord(up.epsilons, up.deltas, eps) >= exact_chord(
                    event.epsilons, event.deltas, eps
                )
                assert exact_chord(up.epsilons, up_add, eps) >= exact_chord(
                    event.epsilons, add, eps
                )


def test_lower_curve_lies_below_every_claimed_curve_at_40_digits() -> None:
    rng = np.random.default_rng(7)
    for _ in range(60):
        cell = [_claimed(*_random_pair(rng)) for _ in range(int(rng.integers(2, 6)))]
        low = lower_profiles(cell, upper_table(cell), Adjacency())
        assert low is not None
        points = np.concatenate([rng.uniform(-8.0, 8.0, 80), [0.0]])
        values = low.lower_remove.delta(points)
        assert low.lower_add is low.lower_remove
        for event in cell:
            assert event.tight_losses is not None and event.tight_masses is not None
            for eps, value in zip(points, values, strict=True):
                exact = _pair_curve(
                    event.tight_losses, event.tight_masses, event.tight_inf_mass, eps
                )
                assert value <= exact, (eps, value, exact)


def test_a_member_corner_below_the_others_chord_stays_below() -> None:
    """Two pairs whose curves cross: the least of them is not convex, and the minorant's
    chords pass under the crossing; at the crossing the lower curve is below both."""
    p = math.e / (1 + math.e)  # randomized response at 1 (Q's masses sum to 1)
    a = _claimed((1.0, -1.0), (p, 1 - p), 0.0)
    b = _claimed((2.5, -0.2), (0.2, 0.8), 0.0)
    low = lower_profiles([a, b], upper_table([a, b]), Adjacency())
    assert low is not None
    for eps in np.linspace(-3.0, 3.0, 601):
        value = float(low.lower_remove.delta(np.array([eps]))[0])
        for event in (a, b):
            assert event.tight_losses is not None and event.tight_masses is not None
            assert value <= _pair_curve(event.tight_losses, event.tight_masses, 0.0, eps)


def test_grouped_composition_brackets_the_leaf_by_leaf_one(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    tables = [_claimed(*_random_pair(rng)) for _ in range(24)]
    exact = PLDAccountant()
    exact.compose(ComposedEvent(tables))
    want = exact.get_epsilon(1e-3)
    monkeypatch.setattr(pld, "MAX_DISTINCT_COMPONENTS", 4)
    monkeypatch.setattr(tabulated_cells, "TABULATED_LIMIT", 4)
    monkeypatch.setattr(tabulated_cells, "TABULATED_CELLS", 5)
    grouped = PLDAccountant()
    grouped.compose(ComposedEvent(tables))
    got = grouped.get_epsilon(1e-3)
    assert got.epsilon >= want.epsilon_lower
    assert got.epsilon_lower <= want.epsilon


def _exact_least(cell: list[TabulatedProfileEvent], eps: float) -> mp.mpf:
    values = []
    for event in cell:
        assert event.tight_losses is not None and event.tight_masses is not None
        values.append(
            _pair_curve(event.tight_losses, event.tight_masses, event.tight_inf_mass, eps)
        )
    return min(values)


def test_masses_summing_below_one_keep_the_curve_below() -> None:
    """A claimed pair whose masses sum to 1 - 9e-10 (the validator allows 1e-9): its curve at
    epsilons below every loss is its total mass, below 1 (found by a review: the minorant
    through (0, 1) lay above it there)."""
    a = _claimed((0.2, 1.0), (0.5, 0.5 - 0.9e-9), 0.0)
    b = _claimed((0.5,), (1.0,), 0.0)
    low = lower_profiles([a, b], upper_table([a, b]), Adjacency())
    assert low is not None
    for eps in (-40.0, -5.0, -1.0, 0.0, 0.19):
        value = float(low.lower_remove.delta(np.array([eps]))[0])
        assert value <= _exact_least([a, b], eps), eps


def test_losses_a_hair_apart_keep_the_chord_below() -> None:
    """Two losses 1e-12 apart: just below the upper one the chord, read at rounded
    exponentials, rose above the true curve by about u times the mass (found by a review)."""
    top = 1.6331005491607187
    a = _claimed((top - 1e-12, top), (0.5, 0.5), 0.0)
    b = _claimed((top - 1e-12, top + 1.0), (0.5, 0.5), 0.0)
    low = lower_profiles([a, b], upper_table([a, b]), Adjacency())
    assert low is not None
    eps = top
    for _ in range(40):  # the floats just below the upper loss
        eps = math.nextafter(eps, -math.inf)
        value = float(low.lower_remove.delta(np.array([eps]))[0])
        assert value <= _exact_least([a, b], eps), eps
