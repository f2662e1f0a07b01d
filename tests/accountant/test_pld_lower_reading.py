"""Lower readings of tilted compositions of dominated pairs (accountant/pld_read.py): the mass
wrapped below the threshold read is not charged (proofs_checks/pld_tilted_fft, "Reading lower
bounds")."""

from __future__ import annotations

from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.rdp import RDPAccountant
from dpledger.core.events import (
    ComposedEvent,
    GaussianEvent,
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
