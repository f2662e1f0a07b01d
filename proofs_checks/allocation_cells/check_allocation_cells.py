"""Numeric checks of grouping allocations into cells (see proof.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from dpledger.accountant import allocation_cells as cells_module
from dpledger.accountant.allocation_cells import allocation_cells, shuffled_cells
from dpledger.accountant.leaves import leaf_profiles
from dpledger.accountant.random_allocation import allocation_profiles, allocation_side_profiles
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    Event,
    GaussianEvent,
    LaplaceEvent,
    RandomAllocationEvent,
    ShuffledBatchesEvent,
)

EPS = np.linspace(-2.0, 4.0, 61)
ADD_REMOVE = Adjacency()


def test_representatives_bracket_their_members() -> None:
    shapes = ((20, 1.0), (23, 1.05), (21, 1.02))
    events = [RandomAllocationEvent(t, GaussianEvent(s)) for t, s in shapes]
    members: dict[Event, int] = dict.fromkeys(events, 1)
    upper, lower, _ = allocation_cells(members, 1)
    (up,), (low,) = list(upper), list(lower)
    assert isinstance(up, RandomAllocationEvent) and isinstance(low, RandomAllocationEvent)
    assert (up.num_steps, up.event.noise_multiplier) == (20, 1.0)  # type: ignore[attr-defined]
    assert (low.num_steps, low.event.noise_multiplier) == (23, 1.05)  # type: ignore[attr-defined]
    rep_up = allocation_profiles(up, ADD_REMOVE)
    rep_low = allocation_profiles(low, ADD_REMOVE)
    for member in events:
        own = allocation_profiles(member, ADD_REMOVE)
        for above, below in (
            (rep_up.remove, own.lower_remove),
            (rep_up.add, own.lower_add),
            (own.remove, rep_low.lower_remove),
            (own.add, rep_low.lower_add),
        ):
            assert np.all(np.asarray(above(EPS)) >= np.asarray(below(EPS)) - 1e-15)


def test_the_channel_maps_fewer_steps_and_less_noise_onto_more() -> None:
    """K (append a null step, permute, add noise) applied to draws of the 1-of-2 pair at noise
    0.8 has the law of the 1-of-3 pair at noise 1.0 (the max of the steps' outputs compared)."""
    rng = np.random.default_rng(11)
    n, s_from, s_to = 200_000, 0.8, 1.0
    y = rng.standard_normal((n, 2))
    y[np.arange(n), rng.integers(0, 2, n)] += 1.0 / s_from
    y = np.concatenate([y, rng.standard_normal((n, 1))], axis=1)
    y = rng.permuted(y, axis=1)
    r = s_from / s_to
    mapped = r * y + np.sqrt(1.0 - r * r) * rng.standard_normal((n, 3))
    z = rng.standard_normal((n, 3))
    z[np.arange(n), rng.integers(0, 3, n)] += 1.0 / s_to
    assert stats.ks_2samp(mapped.max(axis=1), z.max(axis=1)).pvalue > 1e-3
    assert stats.ks_2samp(mapped[:, 0], z[:, 0]).pvalue > 1e-3


def test_each_side_keeps_its_curves_and_bounds_the_other_trivially() -> None:
    """The upper side's lower curves lie below the epoch's certified lower curves and the
    lower side's upper curves above them (for 1-of-t above its certified upper curves too)."""
    for event in (
        RandomAllocationEvent(12, GaussianEvent(0.9)),
        RandomAllocationEvent(12, GaussianEvent(0.9), 2),
    ):
        full = allocation_profiles(event, ADD_REMOVE)
        up = allocation_side_profiles(event, ADD_REMOVE, upper=True)
        low = allocation_side_profiles(event, ADD_REMOVE, upper=False)
        for name in ("remove", "add"):
            kept_up = np.asarray(getattr(up, name)(EPS))
            assert np.array_equal(kept_up, np.asarray(getattr(full, name)(EPS)))
            lower_name = f"lower_{name}"
            kept_low = np.asarray(getattr(low, lower_name)(EPS))
            assert np.array_equal(kept_low, np.asarray(getattr(full, lower_name)(EPS)))
            trivial_low = np.asarray(getattr(up, lower_name)(EPS))
            assert np.all(trivial_low <= kept_low)
            trivial_up = np.asarray(getattr(low, name)(EPS))
            assert np.all(trivial_up >= kept_low)
            if event.num_selected == 1:  # (2-of-t: the table is k releases on a grid)
                assert np.all(trivial_up >= kept_up)


def _laplace_plus_z(x: float, small: float, large: float) -> float:
    """Density at ``x`` of Laplace(small) + Z, Z = 0 w.p. (small/large)^2, else Laplace(large),
    by quadrature of the convolution."""
    r = (small / large) ** 2

    def lap(y: float, b: float) -> float:
        return float(np.exp(-abs(y) / b) / (2 * b))

    conv = math.fsum(
        integrate.quad(lambda y: lap(y, small) * lap(x - y, large), lo, hi, limit=200)[0]
        for lo, hi in ((-np.inf, min(0.0, x)), (min(0.0, x), max(0.0, x)), (max(0.0, x), np.inf))
    )
    return float(r * lap(x, small) + (1 - r) * conv)


def test_laplace_noise_plus_the_mixture_is_laplace_of_more_noise() -> None:
    for small, large in ((1.0, 1.3), (0.5, 2.0), (2.0, 2.02)):
        for x in (-3.0, -0.4, 0.0, 0.7, 2.5, 6.0):
            want = np.exp(-abs(x) / large) / (2 * large)
            assert _laplace_plus_z(x, small, large) == pytest.approx(want, rel=1e-7)


def test_the_laplace_channel_maps_fewer_batches_and_less_noise_onto_more() -> None:
    """K with the mixture noise, applied to draws of the 1-of-2 Laplace pair at scale 0.8,
    has the law of the 1-of-3 pair at scale 1.0 (the max and one coordinate compared)."""
    rng = np.random.default_rng(12)
    n, b_from, b_to = 200_000, 0.8, 1.0
    y = rng.laplace(0.0, b_from, (n, 2))
    y[np.arange(n), rng.integers(0, 2, n)] += 1.0
    y = rng.permuted(np.concatenate([y, rng.laplace(0.0, b_from, (n, 1))], axis=1), axis=1)
    z_noise = rng.laplace(0.0, b_to, (n, 3)) * (rng.random((n, 3)) >= (b_from / b_to) ** 2)
    mapped = y + z_noise
    z = rng.laplace(0.0, b_to, (n, 3))
    z[np.arange(n), rng.integers(0, 3, n)] += 1.0
    assert stats.ks_2samp(mapped.max(axis=1), z.max(axis=1)).pvalue > 1e-3
    assert stats.ks_2samp(mapped[:, 0], z[:, 0]).pvalue > 1e-3


def test_laplace_shuffled_cells_bracket_their_members(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cells_module, "LAPLACE_CELLS", 1)
    replace = Adjacency(relation="replace_one")
    members = [ShuffledBatchesEvent(1000, b, LaplaceEvent(s)) for b, s in ((100, 2.0), (125, 2.1))]
    upper, lower, _ = shuffled_cells(dict.fromkeys(members, 1), 1)
    (up,), (low,) = list(upper), list(lower)
    assert up == LaplaceEvent(2.0)
    rep_up, rep_low = leaf_profiles(up, replace), leaf_profiles(low, replace)
    for member in members:
        own = leaf_profiles(member, replace)
        for above, below, slack in (
            (rep_up.remove, own.remove, 1e-15),
            (rep_up.add, own.add, 1e-15),
            (own.remove, rep_low.lower_remove, 1e-15),
            (own.add, rep_low.lower_add, 1e-15),
            # the member's own certified lower curves too (rounding near 1 - e^eps aside)
            (own.lower_remove, rep_low.lower_remove, 1e-12),
            (own.lower_add, rep_low.lower_add, 1e-12),
        ):
            assert np.all(np.asarray(above(EPS)) >= np.asarray(below(EPS)) - slack)
