"""Many distinct epsilon-type leaves: the PLD bracket, with equal leaves composed exactly in
blocks (:mod:`dpledger.accountant.epsilon_cells`), against exact compositions on a lattice."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq

import dpledger.accountant.epsilon_cells as cells
from dpledger.accountant.epsilon_cells import BLOCK, cell_components, cell_profiles
from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    ApproxDPEvent,
    ComposedEvent,
    Event,
    GaussianEvent,
    LaplaceEvent,
    PureDPEvent,
    RandomizedResponseEvent,
)

UNIT = 3e-5
#: 300 distinct epsilons on the lattice UNIT * Z (0.009 .. 0.018): more than the 256 distinct
#: leaves composed unrounded
KS = np.arange(300, 600)


def _lattice_epsilon(ks: np.ndarray, delta: float, delta0: float = 0.0) -> float:
    """Epsilon at ``delta`` of binary randomized responses at ``k * UNIT`` (with an atom of
    mass ``delta0`` at +infinity each: approximate DP), composed exactly on the lattice: the
    P-law of the loss by the recursion of non-negative terms (relative error ~ 2 n units)."""
    top = int(np.sum(ks))
    pmf = np.zeros(2 * top + 1)
    pmf[top] = 1.0
    for k in ks:
        a = 1.0 / (1.0 + math.exp(-k * UNIT))
        new = np.zeros_like(pmf)
        new[k:] += a * pmf[:-k]
        new[:-k] += (1.0 - a) * pmf[k:]
        pmf = new
    losses = (np.arange(pmf.size) - top) * UNIT
    keep = (1.0 - delta0) ** ks.size

    def curve(eps: float) -> float:
        above = losses > eps
        body = float(np.sum(pmf[above] * -np.expm1(eps - losses[above])))
        return 1.0 - keep + keep * body - delta

    return float(brentq(curve, 0.0, float(losses[-1]), xtol=1e-13, rtol=1e-13))


def _bracket(leaves: list[Event], delta: float = 1e-5) -> tuple[float, float]:
    bound = PLDAccountant().compose(ComposedEvent(leaves)).get_epsilon(delta)
    return bound.epsilon_lower, bound.epsilon


def _assert_tight(lower: float, upper: float, truth: float) -> None:
    assert lower <= truth * (1 + 1e-9) and upper >= truth * (1 - 1e-9)
    assert upper - lower <= 0.01 * upper


def test_distinct_randomized_responses_within_one_percent() -> None:
    truth = _lattice_epsilon(KS, 1e-5)
    lower, upper = _bracket([RandomizedResponseEvent(float(k * UNIT)) for k in KS])
    _assert_tight(lower, upper, truth)


def test_distinct_approximate_dp_sound() -> None:
    """The lower bound does not read the +infinity mass (the backend's lower reading drops
    it), so only soundness and the upper bound's distance are held here."""
    truth = _lattice_epsilon(KS, 1e-5, 1e-9)
    lower, upper = _bracket([ApproxDPEvent(float(k * UNIT), 1e-9) for k in KS])
    assert lower <= truth * (1 + 1e-9) <= upper * (1 + 2e-9)
    assert upper <= truth * 1.005


def test_blocks_only_for_epsilon_type_leaves() -> None:
    events: dict[Event, int] = {
        RandomizedResponseEvent(0.01): 2 * BLOCK + 5,
        ApproxDPEvent(0.02, 1e-8): 3,
        LaplaceEvent(2.0): 4,
        GaussianEvent(1.0): 1,
        PureDPEvent(0.3): 1,
        PureDPEvent(4.0): 7,  # blocks of 2 (MAX_BLOCK_LOSS / 4)
        PureDPEvent(30.0): 5,  # beyond MAX_BLOCK_LOSS: its own curve, 5 times
    }
    upper, lower = cell_components(events, events, Adjacency())
    assert upper is lower
    counts = sorted(k for _, k in upper)
    # RR: 2 blocks of BLOCK and one of 5; ADP: one block; pure DP at 4: 3 blocks of 2, one of 1
    assert counts == [1, 1, 1, 1, 1, 2, 3, 4, 5]
    assert cell_profiles(LaplaceEvent(2.0), 3) is None
    assert cell_profiles(PureDPEvent(0.0), 3) is None
    assert cell_profiles(PureDPEvent(400.0), 3) is None


def test_a_block_brackets_its_composition_closely() -> None:
    """A block's upper and lower curves are the exact composition's to about 1e-9 (no tail is
    cut at 50 leaves of 3-ary randomized response)."""
    eps = np.linspace(0.0, 0.5, 11)
    d = cell_profiles(RandomizedResponseEvent(0.02, 3), 50)
    assert d is not None
    assert np.all(d.remove.delta(eps) >= d.lower_remove.delta(eps))
    gap = d.remove.delta(eps) - d.lower_remove.delta(eps)
    assert np.all(gap <= 1e-9 * d.remove.delta(eps) + 1e-300)


def test_a_cut_block_keeps_its_top_loss(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tails cut inside the support: the upper curve still reaches the top loss ``m eps``
    (the pure cap reads it) and is 0 there; the lower curve's atoms stay inside the support."""
    monkeypatch.setattr(cells, "CELL_TAIL", 1e-3)
    d = cell_profiles(RandomizedResponseEvent(0.05), 60)
    assert d is not None
    assert d.remove.loss_hi >= 60 * 0.05 and d.remove.delta(np.array([d.remove.loss_hi]))[0] == 0
    assert d.lower_remove.loss_lo >= -3.0 and d.lower_remove.loss_hi <= 3.0
    assert d.lower_remove.loss_hi < 2.0  # the merged top tail sits near the cut


@pytest.mark.slow
def test_ten_thousand_distinct_randomized_responses() -> None:
    """Issue reproduction: stated reference [0.53668, 0.54424]; the exact composition on the
    lattice 1e-5 Z brackets it in [0.53859, 0.54235] (epsilons rounded down, up)."""
    leaves = [RandomizedResponseEvent(1e-3 * (1 + i * 1e-4)) for i in range(10_000)]
    bound = account(ComposedEvent(leaves), Adjacency(), delta=1e-5).bound
    assert bound.epsilon >= 0.53859 and bound.epsilon_lower <= 0.54235
    assert bound.epsilon - bound.epsilon_lower <= 0.01 * bound.epsilon


@pytest.mark.slow
def test_thousand_distinct_approximate_dp() -> None:
    """Issue reproduction: reference [1.92565, 1.92628]."""
    leaves = [ApproxDPEvent(0.01 * (1 + i / 1000), 1e-9) for i in range(1000)]
    bound = account(ComposedEvent(leaves), Adjacency(), delta=1e-5).bound
    assert bound.epsilon >= 1.92565 and bound.epsilon_lower <= 1.92628
    assert bound.epsilon - bound.epsilon_lower <= 0.01 * bound.epsilon
