"""The chord re-check of :func:`~dpledger.accountant.pld_discrete.discretise`: summed without
cancellation, so that its round-off is relative to the chord's value, not to the P-mass above
the grid point (which charged ~1e-16 per step to +infinity: 1e-9 after 1e7 steps)."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from dpledger.accountant.leaves import leaf_profiles
from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.pld_discrete import (
    _blocked_suffix,
    _chord_deficit,
    _discounted_suffix,
    _stored_curve,
    discretise,
)
from dpledger.accountant.rdp import RDPAccountant
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import GaussianEvent, PoissonSampledEvent, SelfComposedEvent


def test_fine_grid_of_a_tiny_rate_step_charges_no_round_off() -> None:
    profile = leaf_profiles(PoissonSampledEvent(1e-6, GaussianEvent(1.0)), Adjacency()).remove
    top = float(profile(np.array([profile.loss_hi]))[0])
    pld = discretise(profile, 7.8e-8)
    assert pld.masses.size > 400_000
    assert pld.inf_mass <= top * (1 + 1e-6) + 1e-40  # was 1.4e-16


def test_fine_grid_of_a_tiny_rate_add_step_charges_no_round_off() -> None:
    # the add direction's losses end at -log(1 - q) ~ 1e-6: its chord's last steps are read
    # where e^eps is near one; taken as differences of rounded exponentials they erred by about
    # 2u/h relative, beyond CHORD_RAISE, and the re-check charged 9.5e-19 a step to +infinity
    # (9.5e-12 after 1e7 steps: an infinite upper bound at delta = 1e-15)
    profile = leaf_profiles(PoissonSampledEvent(1e-6, GaussianEvent(1.0)), Adjacency()).add
    top = float(profile(np.array([profile.loss_hi]))[0])
    pld = discretise(profile, 5e-8)
    assert pld.masses.size > 700_000
    assert pld.inf_mass <= top * (1 + 1e-6) + 1e-40


def test_discounted_suffix_matches_40_digits_within_its_count() -> None:
    rng = np.random.default_rng(0)
    u = float(np.finfo(np.longdouble).eps)
    with mpmath.workdps(40):
        for n, h in [(50, 0.3), (777, 1e-3), (800, 700.0)]:
            p = rng.random(n) * np.exp(-rng.random(n) * 30)
            tail, terms = _blocked_suffix(p.astype(np.longdouble))
            got, count = _discounted_suffix(tail, h)
            for i in range(0, n, max(1, n // 23)):
                exact = mpmath.fsum(
                    mpmath.mpf(float(p[j])) * (1 - mpmath.exp(-(j - i) * mpmath.mpf(h)))
                    for j in range(i + 1, n)
                )
                value = mpmath.mpf(np.format_float_scientific(got[i], precision=25))
                # the tail's own rounding and the suffix's count
                assert abs(value - exact) <= (count + terms + 4) * u * exact


def test_a_real_deficit_is_still_found() -> None:
    """A curve above the chord at one grid point: the deficit is that excess."""
    h = 0.5
    eps = np.arange(0, 6) * h
    p = np.array([0.0, 0.2, 0.1, 0.05, 0.0, 0.0])
    chord = np.array(
        [sum(p[j] * (1 - np.exp(eps[i] - eps[j])) for j in range(i + 1, 6)) for i in range(6)]
    )
    checked = chord.copy()
    checked[1] += 1e-6
    found = _chord_deficit(eps, checked, _stored_curve(p, h), 0.0)
    assert 1e-6 * (1 - 1e-9) <= found <= 1e-6 * (1 + 1e-9)
    assert _chord_deficit(eps, chord, _stored_curve(p, h), 0.0) <= 1e-16


@pytest.mark.slow
@pytest.mark.parametrize(
    ("q", "steps", "width"),
    [(1e-6, 10**6, 0.01), (1e-6, 10**7, 0.01)],
)
def test_tiny_rate_long_runs_are_finite_at_small_delta(q: float, steps: int, width: float) -> None:
    """sigma = 1 at delta = 1e-15: the upper bound was infinite (the re-check's round-off,
    ~1e-16 a step, summed to ~1e-10 .. 1e-9 at +infinity; then the add direction's chord
    steps, see above). Measured: [0.0089548, 0.0089812] in ~3 s and [0.0288874, 0.0289203]
    in ~1.5 s."""
    event = SelfComposedEvent(PoissonSampledEvent(q, GaussianEvent(1.0)), steps)
    bound = PLDAccountant().compose(event).get_epsilon(1e-15)
    assert math.isfinite(bound.epsilon)
    assert bound.epsilon <= bound.epsilon_lower * (1 + width)
    rdp = RDPAccountant().compose(event).get_epsilon(1e-15)
    assert bound.epsilon_lower <= rdp.epsilon
