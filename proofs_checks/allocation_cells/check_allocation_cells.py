"""Numeric checks of grouping allocations into cells (see proof.md)."""

from __future__ import annotations

import numpy as np
from scipy import stats

from dpledger.accountant.allocation_cells import allocation_cells
from dpledger.accountant.random_allocation import allocation_profiles, allocation_side_profiles
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import Event, GaussianEvent, RandomAllocationEvent

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
