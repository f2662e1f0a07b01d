"""Adversarial checks of compositions whose mass at +infinity is one, or almost one, or
subnormal: the FFT composition's void result (no finite part) read by every reader (delta and
epsilon, both sides, the split's sum of parts), end to end through the PLD accountant and the
default call, against 60-digit references (the composition of approximate-DP pairs with binary
randomized response, pure DP and Gaussians is a lattice law, or a Gaussian mixture of one)."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest

from dpledger.accountant import pld as pld_module
from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.pld_discrete import DiscretePLD
from dpledger.accountant.pld_fft import compose
from dpledger.accountant.pld_read import delta_at, epsilon_for, wrap_above
from dpledger.accountant.pld_split import compose_split
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    ApproxDPEvent,
    Event,
    GaussianEvent,
    PureDPEvent,
    SelfComposedEvent,
)

__all__: list[str] = []

Leaves = dict[Event, int]
#: the largest delta an approximate-DP release takes (1 - 2^-53)
ALMOST_ONE = 1.0 - 2.0**-53
ADJACENCIES = (Adjacency(), Adjacency(relation="replace_one"))


def exact_delta(leaves: Leaves, eps: float, dps: int = 60) -> mp.mpf:
    """delta(eps) of the composition: ``fail + (1 - fail) delta_rest(eps)`` with the failure
    mass ``fail = -expm1(sum m log1p(-delta))`` (not ``1 - prod (1 - delta)^m``, which loses a
    subnormal delta at 60 digits) and the rest a lattice of randomized-response losses
    convolved with a Gaussian."""
    with mp.workdps(dps):
        log_keep, precision = mp.mpf(0), mp.mpf(0)
        atoms: dict[mp.mpf, mp.mpf] = {mp.mpf(0): mp.mpf(1)}
        for leaf, m in leaves.items():
            if isinstance(leaf, GaussianEvent):
                precision += m / mp.mpf(leaf.noise_multiplier) ** 2
                continue
            assert isinstance(leaf, ApproxDPEvent | PureDPEvent)
            if isinstance(leaf, ApproxDPEvent):
                log_keep += m * mp.log1p(-mp.mpf(leaf.delta))
            e = mp.mpf(leaf.epsilon)
            a = 1 / (1 + mp.exp(-e))
            merged: dict[mp.mpf, mp.mpf] = {}
            for k in range(m + 1):
                loss, p = (2 * k - m) * e, mp.binomial(m, k) * a**k * (1 - a) ** (m - k)
                for l1, p1 in atoms.items():
                    merged[l1 + loss] = merged.get(l1 + loss, mp.mpf(0)) + p1 * p
            atoms = merged
        mu, x = mp.sqrt(precision), mp.mpf(eps)

        def finite(t: mp.mpf) -> mp.mpf:
            if mu == 0:
                return -mp.expm1(t) if t < 0 else mp.mpf(0)
            return mp.ncdf(-t / mu + mu / 2) - mp.exp(t) * mp.ncdf(-t / mu - mu / 2)

        rest = mp.fsum(p * finite(x - loss) for loss, p in atoms.items())
        return +(-mp.expm1(log_keep) + mp.exp(log_keep) * rest)


def _accountant(leaves: Leaves, adjacency: Adjacency) -> PLDAccountant:
    acc = PLDAccountant(adjacency)
    for leaf, m in leaves.items():
        acc.compose(leaf, m)
    return acc


def _delta_bracket(acc: PLDAccountant, leaves: Leaves, eps: float) -> tuple[float, float]:
    """(lower, upper) of delta(eps), each checked against the exact value."""
    bound = acc.get_delta(eps)
    lower, upper = bound.delta_lower, bound.delta
    assert 0.0 <= lower <= upper <= 1.0, (eps, lower, upper)
    with mp.workdps(60):
        exact = exact_delta(leaves, eps)
        slack = mp.mpf(10) ** -50
        assert mp.mpf(lower) <= exact * (1 + slack), (eps, lower, exact)
        assert exact <= mp.mpf(upper) * (1 + slack), (eps, upper, exact)
    return lower, upper


# -- a mass at +infinity of one (the chord raises 1 - 2^-53 to one) ------------------------------


_CERTAIN: list[tuple[Leaves, tuple[Adjacency, ...], bool]] = [
    ({ApproxDPEvent(0.5, ALMOST_ONE): 3}, ADJACENCIES, True),
    ({ApproxDPEvent(0.5, ALMOST_ONE): 2, GaussianEvent(1.0): 3}, ADJACENCIES[:1], True),
    # epsilon 0: no dominated pair of the finite part (a lower delta of 0, loose but sound)
    ({ApproxDPEvent(0.0, ALMOST_ONE): 2, PureDPEvent(1.0): 1}, ADJACENCIES[:1], False),
    ({ApproxDPEvent(500.0, ALMOST_ONE): 1, GaussianEvent(1.0): 1}, ADJACENCIES[:1], True),
]


#: (case, blocks): every case one by one, the blocks' path on the first two (kept short)
_CERTAIN_RUNS = [(c, False) for c in range(len(_CERTAIN))] + [(0, True), (1, True)]


@pytest.mark.parametrize(("case", "blocks"), _CERTAIN_RUNS)
def test_almost_certain_failure_is_bracketed(
    case: int, blocks: bool, monkeypatch: pytest.MonkeyPatch
):
    """Approximate-DP releases at delta 1 - 2^-53, alone, beside Gaussians, at epsilon 0 and
    500, both adjacencies, one by one or as epsilon blocks: PLD answers (it declined before),
    its upper delta is 1 and its lower one certified within 1e-12 of the truth (which is
    1 - 2^-106 or closer to one) at every epsilon, and its upper epsilon is infinite at every
    level, the largest included."""
    leaves, adjacencies, certified = _CERTAIN[case]
    if blocks:
        monkeypatch.setattr(pld_module, "MAX_DISTINCT_COMPONENTS", 1)
    for adjacency in adjacencies:
        acc = _accountant(leaves, adjacency)
        for eps in (0.0, 1.0, 1e10):
            lower, upper = _delta_bracket(acc, leaves, eps)
            assert upper == 1.0 and (lower >= 1.0 - 1e-12 or not certified), (eps, lower)
        gaussian = any(isinstance(leaf, GaussianEvent) for leaf in leaves)
        for delta in (1e-5, ALMOST_ONE) if gaussian else (1e-30, 0.5, ALMOST_ONE):
            bound = acc.get_epsilon(delta)
            assert bound.epsilon == math.inf, delta
            assert 0.0 <= bound.epsilon_lower <= bound.epsilon


@pytest.mark.parametrize("blocks", [False, True], ids=["leaves", "blocks"])
def test_subnormal_failure_mass(blocks: bool, monkeypatch: pytest.MonkeyPatch):
    """200 releases at delta 5e-324 beside pure DP: at epsilons past every finite loss the
    truth is the failure mass, about 9.9e-322; both bounds hold it (a reference built as
    1 - (1 - delta)^m at 60 digits reads zero there, and a lower bound of 9.9e-322 would look
    unsound against it)."""
    if blocks:
        monkeypatch.setattr(pld_module, "MAX_DISTINCT_COMPONENTS", 1)
    leaves: Leaves = {ApproxDPEvent(0.5, 5e-324): 200, PureDPEvent(0.1): 1}
    acc = _accountant(leaves, Adjacency())
    for eps in (1e3, 1e10):
        lower, upper = _delta_bracket(acc, leaves, eps)
        # lower readings below LOWER_FLOOR are 0 (subnormal rounding is not certified there)
        assert lower == 0.0 < upper < 1e-300
    assert exact_delta(leaves, 1e3) > 0


# -- the void composition read by every reader ---------------------------------------------------


H = 0.05


def _plain(dominated: bool) -> DiscretePLD:
    """A law with a light far atom (a tail the split cuts) and 0.1 at +infinity."""
    masses = np.array([0.1, 0.2, 0.3, 0.2, 0.1 - 1e-9, 0.0, 0.0, 0.0, 1e-9])
    return DiscretePLD(-2, masses, 0.1, H, dominated=dominated)


@pytest.mark.parametrize("dominated", [False, True], ids=["chords", "dominated"])
@pytest.mark.parametrize("split", [False, True], ids=["plain", "split"])
def test_void_composition_read_everywhere(dominated: bool, split: bool):
    """A component with mass one at +infinity beside a law whose tail the split cuts: the
    plain composition and the split's sum of parts read delta 1 (upper) at every epsilon, an
    infinite upper epsilon at every level, a lower delta at most 1 and, for dominated pairs,
    within 1e-12 of it (the lower side keeps the certain mass), no wrapped mass and nothing
    that is not a number."""
    certain = DiscretePLD(-1, np.array([0.3, 0.4, 0.3]), 1.0, H, dominated=dominated)
    parts = [(_plain(dominated), 40), (certain, 1)]
    window = (-4.0, 20.0)
    if split:
        out = compose_split(parts, window, lambda _: 0.5, parts, 1e-6, upper=True)
        assert out is not None and out.parts, "the split found no tail to cut"
    else:
        out = compose(parts, window, 0.5)
    assert out.inf_mass == 1.0
    for eps in (0.0, 0.3, 5.0, 1e3):
        assert delta_at(out, eps, upper=True) == 1.0
        low = delta_at(out, eps, upper=False)
        assert 0.0 <= low <= 1.0
        assert low >= 1.0 - 1e-12 or not dominated, (eps, low)
        assert math.isfinite(wrap_above(out, eps))
    for level in (1e-300, 1e-30, 0.5, ALMOST_ONE):
        assert epsilon_for(out, level, upper=True) == math.inf
        low_eps = epsilon_for(out, level, upper=False)
        assert low_eps >= 0.0 and not math.isnan(low_eps)


# -- found by this review ------------------------------------------------------------------------


def test_closed_form_cap_respects_the_failure_mass():
    """delta just below the composed failure mass: the true epsilon is infinite (delta(eps)
    >= P > delta at every epsilon), so no finite upper epsilon is certified."""
    with mp.workdps(50):
        fail = 1 - (1 - mp.mpf(1e-6)) ** 10
        level = float(fail * (1 - mp.mpf(1e-15)))
        assert mp.mpf(level) < fail
    cases = [
        (SelfComposedEvent(ApproxDPEvent(1.0, 1e-6), 10), level),
        (SelfComposedEvent(ApproxDPEvent(0.5, ALMOST_ONE), 3), ALMOST_ONE),
    ]
    for event, delta in cases:
        selection = account(event, Adjacency(), delta=delta)
        for bound in (selection.bound, *selection.candidates):
            assert bound.epsilon == math.inf, (bound.method, bound.epsilon)


def test_lower_bound_of_a_failure_mass_near_one():
    """1100 releases at (0.1, 0.5) and one Gaussian: delta(1) = 1 - 2^-1100 (1 - ...), so the
    certified lower bound should be within 1e-11 of one."""
    leaves: Leaves = {ApproxDPEvent(0.1, 0.5): 1100, GaussianEvent(2.0): 1}
    lower, upper = _delta_bracket(_accountant(leaves, Adjacency()), leaves, 1.0)
    assert upper == 1.0
    assert lower >= 1.0 - 1e-11


@pytest.mark.parametrize("blocks", [False, True], ids=["leaves", "blocks"])
def test_subnormal_failure_mass_lower_bound_is_below_the_truth(
    blocks: bool, monkeypatch: pytest.MonkeyPatch
):
    """The certified lower delta past every finite loss, compared exactly (as fractions) with
    the failure mass 1 - (1 - delta)^m."""
    if blocks:
        monkeypatch.setattr(pld_module, "MAX_DISTINCT_COMPONENTS", 1)
    tiny = 5e-324
    acc = _accountant({ApproxDPEvent(0.5, tiny): 3, PureDPEvent(0.1): 1}, Adjacency())
    bound = acc.get_delta(1e3)
    exact = 1 - (1 - Fraction(tiny)) ** 3
    assert Fraction(bound.delta) >= exact
    assert Fraction(bound.delta_lower) <= exact, bound.delta_lower
