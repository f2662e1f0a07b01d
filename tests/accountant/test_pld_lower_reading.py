"""Lower readings of tilted compositions of dominated pairs (accountant/pld_read.py): the mass
wrapped below the threshold read is not charged (proofs_checks/pld_tilted_fft, "Reading lower
bounds")."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.pld_engine import DiscretePLD, compose, delta_at
from dpledger.accountant.rdp import RDPAccountant
from dpledger.core.events import (
    ComposedEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PureDPEvent,
    SelfComposedEvent,
)

#: sigma = 0.5, q = 1e-4, 10^6 steps (remove direction decides)
EVENT = SelfComposedEvent(PoissonSampledEvent(1e-4, GaussianEvent(0.5)), 10**6)


def _bracket(delta: float) -> tuple[float, float]:
    acc = PLDAccountant()
    acc.compose(EVENT)
    bound = acc.get_epsilon(delta)
    return bound.epsilon_lower, bound.epsilon


def test_steep_tilt_keeps_the_lower_bound_at_1e_20():
    """At delta = 1e-20 the lower brackets of the tilted composition summed to 1.105 (wrapped
    mass, all of it below the threshold read), and charging that excess twice had lowered the
    lower bound from 15.647 to 14.810. Reference: an earlier version's certified bracket
    [15.64665, 15.65878] (both ends proven, so the truth is inside it) and RDP's upper bound."""
    lower, upper = _bracket(1e-20)
    assert upper <= lower * 1.01
    assert lower <= 15.65878 and upper >= 15.64665
    assert lower >= 15.64
    rdp = RDPAccountant()
    rdp.compose(EVENT)
    assert lower <= rdp.get_epsilon(1e-20).epsilon


def test_the_same_run_at_1e_8_against_dp_accounting():
    """dp-accounting's connect-the-dots PLD (pessimistic) at h = 2e-5 gives 6.376758 at
    delta = 1e-8 (16.8 s; an estimate from above of the truth): the lower bound is below it and
    the upper bound within 0.1 % of it."""
    reference = 6.376757941781456
    lower, upper = _bracket(1e-8)
    assert upper <= lower * 1.01
    assert lower <= reference
    assert abs(upper - reference) <= 1e-3 * reference


def test_untilted_wrap_is_bounded_by_the_mass_above_the_window():
    """17 pure 0.001-DP steps and one sampled Gaussian at delta = 1e-7 (untilted): the
    wrap-around bound's thetas, chosen for the window's middle, left it at one near the top,
    and the PLD lower bound was 0.0215 (the default call's bracket came from exact
    conditioning, after a second pass on 2^18 points). Reference: that certified bracket,
    [0.5801482, 0.5802559]."""
    acc = PLDAccountant()
    acc.compose(
        ComposedEvent(
            [
                SelfComposedEvent(PureDPEvent(1e-3), 17),
                PoissonSampledEvent(0.01, GaussianEvent(1.0)),
            ]
        )
    )
    bound = acc.get_epsilon(1e-7)
    assert bound.epsilon <= bound.epsilon_lower * 1.01
    assert bound.epsilon_lower <= 0.5802559 and bound.epsilon >= 0.5801482
    assert max(key[2] for key in acc._states) <= 1 << 14  # one coarse pass


@st.composite
def _law(draw: st.DrawFn) -> DiscretePLD:
    """A probability law on a few losses with a thin far tail (flagged dominated: its reading
    is checked against its own composition)."""
    body = np.array([draw(st.floats(0.05, 1.0)) for _ in range(draw(st.integers(2, 5)))])
    tail = draw(st.floats(1e-12, 1e-3))
    gap = draw(st.integers(3, 30))
    masses = np.concatenate([body / body.sum() * (1.0 - tail), np.zeros(gap), [tail]])
    return DiscretePLD(-1, masses, 0.0, 0.25, dominated=True)


@settings(max_examples=40, deadline=None)
@given(
    law=_law(),
    count=st.integers(2, 10),
    tilt=st.sampled_from([0.0, 0.5, 1.0, 2.0]),
    cut=st.floats(0.2, 1.2),
)
def test_dominated_lower_reading_never_exceeds_the_exact_composition(law, count, tilt, cut):
    """Windows that cut the support (mass wraps around), at several tilts: the lower reading
    stays at or below delta of the exact composition (direct convolution) at every threshold."""
    exact = np.array([1.0])
    for _ in range(count):
        exact = np.convolve(exact, law.masses)
    losses = (count * law.offset + np.arange(exact.size)) * law.h
    top = float(losses[-1]) * cut
    comp = compose([(law, count)], (float(losses[0]) - 0.3, top), tilt)
    for eps in np.linspace(0.0, float(losses[-1]), 9):
        above = losses > eps
        truth = float(np.sum(exact[above] * -np.expm1(eps - losses[above])))
        assert delta_at(comp, float(eps), upper=False) <= truth * (1 + 1e-9) + 1e-300


@pytest.mark.parametrize("delta", [1e-320, 5e-324])
def test_epsilon_at_a_subnormal_delta_is_bracketed(delta: float) -> None:
    """delta / 1000, the probability the lower bound gives up, underflowed to 0 below ~5e-321
    (its Hoeffding shift divided by it): the PLD accountant now brackets these levels, the
    pure cap of ten Laplace releases included (exact epsilon 10 at any delta)."""
    pure = PLDAccountant().compose(SelfComposedEvent(LaplaceEvent(1.0), 10)).get_epsilon(delta)
    assert pure.epsilon_lower <= 10.0 <= pure.epsilon <= 10.0 * (1 + 1e-9)
    sampled = SelfComposedEvent(PoissonSampledEvent(0.01, GaussianEvent(1.0)), 100)
    bound = PLDAccountant().compose(sampled).get_epsilon(delta)
    rdp = RDPAccountant().compose(sampled).get_epsilon(delta)
    assert bound.epsilon_lower <= rdp.epsilon <= bound.epsilon
