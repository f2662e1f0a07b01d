"""The PLD accountant's hit-count bounds: many steps of a Poisson-subsampled Gaussian whose
hits are heavy (tiny sigma, tiny q), at delta down to 1e-30, against the semi-analytic
hit-count reference (:mod:`hit_count_reference`), and sound against exact single-step profiles
and the loss grid wherever the route applies."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.pld_hits import HitCount, hit_count
from dpledger.accountant.profiles import gaussian_profile, poisson_remove
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
)

from .hit_count_reference import reference_delta, reference_epsilon

HEAVY = SelfComposedEvent(PoissonSampledEvent(1e-6, GaussianEvent(0.02)), 10**4)

#: (delta, reference lower, reference upper) of eps(delta) for HEAVY, from
#: hit_count_reference.reference_epsilon (recomputed by the slow test below); before the
#: hit-count route the accountant gave [2515.9, 2675.9] at 1e-5, [4982.27, 5014.19] at 1e-10
#: and [8262.9, inf] at 1e-30 (dp-accounting: 2532.2 at 1e-5)
HEAVY_REFERENCE = [
    (1e-5, 2531.208415457513, 2531.208415457513),
    (1e-10, 5014.183647581376, 5014.183647581376),
    (1e-30, 13637.075753649697, 13637.075753649697),
]
#: relative tolerance of the stored reference values (the bisection's)
REF_TOL = 1e-8


def _accountant(event: object, adjacency: Adjacency | None = None) -> PLDAccountant:
    acc = PLDAccountant(adjacency or Adjacency())
    acc.compose(event)  # type: ignore[arg-type]
    return acc


@pytest.mark.parametrize(("delta", "ref_lo", "ref_hi"), HEAVY_REFERENCE)
def test_heavy_hits_bracket_the_reference_within_one_percent(
    delta: float, ref_lo: float, ref_hi: float
) -> None:
    start = time.perf_counter()
    bound = _accountant(HEAVY).get_epsilon(delta)
    assert time.perf_counter() - start < 5.0  # about 0.02 s idle
    assert bound.epsilon >= ref_lo * (1 - REF_TOL)
    assert bound.epsilon_lower <= ref_hi * (1 + REF_TOL)
    assert bound.epsilon <= 1.01 * ref_lo and bound.epsilon_lower >= 0.99 * ref_hi
    assert bound.details.get("hit_count") == 1.0


def test_heavy_hits_delta_bracket_contains_the_reference() -> None:
    for eps in (2531.208415457513, 13637.075753649697):
        ref_lo, ref_hi = reference_delta(1e-6, 0.02, 10**4, eps)
        bound = _accountant(HEAVY).get_delta(eps)
        assert bound.delta >= ref_lo * (1 - 1e-9) and bound.delta_lower <= ref_hi * (1 + 1e-9)
        assert bound.delta <= 1.01 * bound.delta_lower


def test_heavy_hits_new_bounds_inside_the_old_brackets() -> None:
    """No lower bound moved above what the grid certified as upper, every upper moved down by
    less than the old bracket's width."""
    old = {
        1e-5: (2515.8849878426954, 2675.920563371454),
        1e-10: (4982.271837950662, 5014.187780280322),
    }
    for delta, (lo, hi) in old.items():
        bound = _accountant(HEAVY).get_epsilon(delta)
        assert lo <= bound.epsilon_lower <= bound.epsilon <= hi


@pytest.mark.slow
def test_heavy_hits_reference_values_recomputed() -> None:
    for delta, ref_lo, ref_hi in HEAVY_REFERENCE:
        lo, hi = reference_epsilon(1e-6, 0.02, 10**4, delta, 30000.0)
        assert lo == pytest.approx(ref_lo, rel=REF_TOL) and hi == pytest.approx(ref_hi, rel=REF_TOL)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("q", "sigma", "steps", "delta"), [(1e-5, 0.05, 10**5, 1e-20), (1e-3, 0.03, 300, 1e-12)]
)
def test_other_heavy_settings_bracket_the_reference(
    q: float, sigma: float, steps: int, delta: float
) -> None:
    bound = _accountant(
        SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(sigma)), steps)
    ).get_epsilon(delta)
    lo, hi = reference_epsilon(q, sigma, steps, delta, 4.0 * bound.epsilon + 10.0)
    assert bound.epsilon >= lo * (1 - REF_TOL) and bound.epsilon_lower <= hi * (1 + REF_TOL)
    assert bound.epsilon <= 1.01 * lo


def test_one_step_brackets_the_exact_profile() -> None:
    """One step: the remove direction's exact curve lies in the hit-count delta bracket, for
    random q, sigma and epsilon (light hits included, where the bracket is wide)."""
    rng = np.random.default_rng(7)
    for _ in range(60):
        q = float(10 ** rng.uniform(-6, -0.5))
        sigma = float(10 ** rng.uniform(-1.7, 0.3))
        hits = HitCount(q, 1.0 / sigma, 1)
        exact = poisson_remove(gaussian_profile(1.0 / sigma), q)
        for eps in rng.uniform(0.0, 1.5 / sigma**2, size=4):
            found = hits.remove_delta(float(eps), 1e-12)
            assert found is not None
            upper, lower = found
            true = float(exact(np.array([eps]))[0])
            assert lower <= true * (1 + 1e-9) + 1e-300
            assert upper >= true * (1 - 1e-9)


@pytest.mark.parametrize(
    ("q", "sigma", "steps", "delta"),
    [(0.01, 0.3, 50, 1e-6), (1e-3, 0.1, 400, 1e-10), (0.02, 1.0, 100, 1e-8)],
)
def test_hit_count_bracket_overlaps_the_grid_bracket(
    q: float, sigma: float, steps: int, delta: float
) -> None:
    """Where hits are light the route is loose, never unsound: its bracket meets the loss
    grid's, and the accountant's answer is inside both."""
    event = SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(sigma)), steps)
    acc = _accountant(event)
    hits = hit_count(acc.ledger, acc.adjacency)
    assert hits is not None
    found = hits.epsilon(delta)
    assert found is not None
    grid = acc._grid_epsilon(delta)
    assert found[1] <= grid.epsilon and grid.epsilon_lower <= found[0]
    bound = acc.get_epsilon(delta)
    assert bound.epsilon <= min(found[0], grid.epsilon)
    assert bound.epsilon_lower >= max(found[1], grid.epsilon_lower) - 1e-12


def test_route_applies_to_one_sampled_gaussian_under_add_remove_only() -> None:
    leaf = PoissonSampledEvent(1e-6, GaussianEvent(0.02))
    assert hit_count([(leaf, 3)], Adjacency()) is not None
    assert hit_count([(leaf, 3)], Adjacency(relation="replace_one")) is None
    assert hit_count([(leaf, 3), (GaussianEvent(1.0), 1)], Adjacency()) is None
    assert hit_count([(PoissonSampledEvent(1e-6, LaplaceEvent(1.0)), 3)], Adjacency()) is None
    assert hit_count([(PoissonSampledEvent(1.0, GaussianEvent(1.0)), 3)], Adjacency()) is None


def test_add_direction_cap_bounds_the_upper() -> None:
    """The add direction's epsilon is at most -T log(1 - q): the upper never goes below it."""
    hits = HitCount(0.5, 50.0, 4)
    found = hits.epsilon(0.9)
    assert found is not None
    assert found[0] >= -4 * math.log1p(-0.5)


def test_route_skipped_where_hits_are_light() -> None:
    """DP-SGD noise (sigma = 1): a hit's loss is mostly below zero, the route is not run."""
    leaf = PoissonSampledEvent(1e-4, GaussianEvent(1.0))
    found = hit_count([(leaf, 10**5)], Adjacency())
    assert found is not None and not found.useful
    assert PLDAccountant()._hit_count() is None
    acc = _accountant(SelfComposedEvent(leaf, 10**5))
    assert acc._hit_count() is None


@pytest.mark.slow
def test_heavy_hits_against_dp_accounting() -> None:
    """dp-accounting's pessimistic PLD (2532.2 at 1e-5, 5015.7 at 1e-10): the bracket is at or
    below it and within 1 % of it."""
    dp_accounting = pytest.importorskip("dp_accounting")
    from dp_accounting.pld import pld_privacy_accountant

    for delta in (1e-5, 1e-10):
        theirs = pld_privacy_accountant.PLDAccountant(
            dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE, value_discretization_interval=0.1
        )
        theirs.compose(
            dp_accounting.SelfComposedDpEvent(
                dp_accounting.PoissonSampledDpEvent(1e-6, dp_accounting.GaussianDpEvent(0.02)),
                10**4,
            )
        )
        reference = float(theirs.get_epsilon(delta))
        bound = _accountant(HEAVY).get_epsilon(delta)
        assert bound.epsilon_lower <= reference
        assert bound.epsilon >= 0.99 * reference


def test_a_vanishing_noise_reads_no_information_not_nan() -> None:
    """mu beyond ~1e154 squares t to infinity: the special functions' slack is capped, so the
    per-hit profile reads 1 (upper) and 0 (lower), never NaN."""
    hits = HitCount(0.5, 1e160, 1)
    k, m = np.array([1.0]), np.array([math.log(0.5)])
    for eps in (1.0, 1e150, -1e170):
        upper = hits._gauss(eps, k, m, upper=True)
        lower = hits._gauss(eps, k, m, upper=False)
        assert not np.isnan(upper).any() and not np.isnan(lower).any()
        assert np.all((lower >= 0.0) & (lower <= upper) & (upper <= 1.0))
    found = hits.remove_delta(1.0, 1e-10)
    assert found is not None and not math.isnan(found[1]) and found[1] <= found[0]
