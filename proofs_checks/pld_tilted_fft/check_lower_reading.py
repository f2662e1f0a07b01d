"""Numeric checks of the lower reading of a composition of dominated pairs
(dpledger.accountant.pld_read._lower_extra and excess_mass, "Reading lower bounds" in proof.md).

A steep tilt on a window below the support's top makes the lower brackets sum far above one
(wrapped mass, untilted by e^{tilt W}); the lower reading charges none of it, and still stays
below the exact delta of the composition (direct convolution in 60-digit arithmetic) at every
threshold, while the chord reading keeps its charge.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from dpledger.accountant import pld_read as R
from dpledger.accountant.pld_engine import (
    ComposedPLD,
    DiscretePLD,
    compose,
    delta_at,
    epsilon_for,
)

__all__: list[str] = []

COUNT = 12
H = 0.25
WINDOW = (-3.0, 80.0)


def _law(dominated: bool) -> DiscretePLD:
    """A probability law with most mass near 0 and a thin tail of large losses."""
    masses = np.zeros(40)
    masses[:3] = [0.5, 0.3, 0.2 - 2e-6]
    masses[-1] = 2e-6
    return DiscretePLD(-1, masses, 0.0, H, dominated)


def _exact_delta(pld: DiscretePLD, eps: float) -> float:
    """delta(eps) of COUNT copies of ``pld`` by 60-digit convolution."""
    with mp.workdps(60):
        step = [mp.mpf(float(v)) for v in pld.masses]
        poly = [mp.mpf(1)]
        for _ in range(COUNT):
            out = [mp.mpf(0)] * (len(poly) + len(step) - 1)
            for i, a in enumerate(poly):
                if a:
                    for j, b in enumerate(step):
                        out[i + j] += a * b
            poly = out
        total = mp.mpf(0)
        for idx, value in enumerate(poly):
            loss = (COUNT * pld.offset + idx) * mp.mpf(H)
            if loss > eps:
                total += value * (1 - mp.exp(mp.mpf(eps) - loss))
        return float(total)


@pytest.fixture(scope="module")
def composed() -> tuple[DiscretePLD, ComposedPLD]:
    law = _law(dominated=True)
    # the window stops below the top loss COUNT * 38 h = 114: sums of tail steps wrap around
    # onto losses below 30, untilted by up to e^{1.5 * 85}
    return law, compose([(law, COUNT)], WINDOW, tilt=1.5)


def test_the_brackets_sum_far_above_one(composed: tuple[DiscretePLD, ComposedPLD]) -> None:
    _, comp = composed
    assert float(comp.lower.sum()) > 5.0
    assert R.excess_mass(comp) == 0.0


@pytest.mark.parametrize("eps", [0.5, 9.0, 20.0, 30.0, 35.0, 45.0, 60.0])
def test_dominated_reading_is_below_the_exact_delta(
    composed: tuple[DiscretePLD, ComposedPLD], eps: float
) -> None:
    law, comp = composed
    exact = _exact_delta(law, eps)
    read = delta_at(comp, eps, upper=False)
    assert read <= exact * (1 + 1e-9)
    if eps >= 30.0:  # above the wrapped mass: read as it is, with nothing charged for it
        assert read >= exact * (1 - 1e-3)


def test_dominated_epsilon_is_below_the_exact_root(
    composed: tuple[DiscretePLD, ComposedPLD],
) -> None:
    law, comp = composed
    delta = 1e-20
    lower = epsilon_for(comp, delta, upper=False)
    assert _exact_delta(law, lower) >= delta
    assert lower > 30.0


def test_chord_reading_keeps_its_charge() -> None:
    law = _law(dominated=False)
    comp = compose([(law, COUNT)], WINDOW, tilt=1.5)
    excess = R.excess_mass(comp)
    assert excess == pytest.approx(float(comp.lower.sum()) - 1.0)
    # the charge swamps every reading: the lower bound is 0
    assert math.isfinite(excess)
    assert delta_at(comp, 35.0, upper=False) == 0.0


def test_untilted_wrap_is_at_most_the_mass_above_the_window() -> None:
    """Untilted, the wrapped mass landing anywhere is at most the mass at or above the window's
    top (``upper_tail``): the lower reading stays below the exact delta, and is close to it."""
    law = _law(dominated=True)
    comp = compose([(law, COUNT)], (-3.6, 30.0), tilt=0.0)
    for eps in (0.5, 2.0, 9.0, 20.0):
        exact = _exact_delta(law, eps)
        wrapped = R.wrap_above(comp, eps)
        assert wrapped <= comp.upper_tail
        read = delta_at(comp, eps, upper=False)
        assert read <= exact * (1 + 1e-9)
        # short of exact by the mass above the window and the round-off on the masses read
        slack = comp.upper_tail + comp.lower_tail + comp.upper.size * comp.tilted_error
        assert read >= exact - slack
