"""The FFT composition of components one of which keeps no finite mass (its mass at +infinity
is one, or every finite mass is below TINY_MASS): no spectrum, no finite part, the composed
mass at +infinity and the dropped masses; the readings against the exact curve of the stored
pairs (60 digits)."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from dpledger.accountant.pld_discrete import DiscretePLD
from dpledger.accountant.pld_fft import TINY_MASS, compose, infinite_mass, log_keep_of
from dpledger.accountant.pld_read import delta_at, epsilon_for

H = 0.05
#: a finite pair: P-masses at losses -0.1 .. 0.1 and 0.1 at +infinity
PLAIN = DiscretePLD(-2, np.array([0.1, 0.2, 0.3, 0.2, 0.1]), 0.1, H, dominated=True)


def _exact(parts: list[tuple[DiscretePLD, int]], eps: float) -> mp.mpf:
    """The curve of the composition of the stored pairs at ``eps``, exactly (60 digits)."""
    with mp.workdps(60):
        keep = mp.mpf(1)
        atoms: dict[int, mp.mpf] = {0: mp.mpf(1)}
        for pld, count in parts:
            keep *= (1 - mp.mpf(pld.inf_mass)) ** count
            for _ in range(count):
                merged: dict[int, mp.mpf] = {}
                for j, p in enumerate(pld.masses.tolist()):
                    for i, q in atoms.items():
                        key = i + pld.offset + j
                        merged[key] = merged.get(key, mp.mpf(0)) + mp.mpf(p) * q
                atoms = merged
        x = mp.mpf(eps)
        finite = mp.fsum(
            p * -mp.expm1(x - i * mp.mpf(H)) for i, p in atoms.items() if i * mp.mpf(H) > x
        )
        return +(1 - keep + finite)


def test_log_keep_of_a_certain_mass():
    assert log_keep_of(1.0) == -math.inf
    assert log_keep_of(0.25) == math.log1p(-0.25)
    assert infinite_mass(-math.inf, 3) == 1.0


@pytest.mark.parametrize("tilt", [0.0, 2.0])
def test_certain_component(tilt: float):
    """A component with P-mass 1 at +infinity (and finite masses that are not read, as a
    chord raised to one keeps): the composed upper delta is 1 at every epsilon, as the exact
    curve, and the upper epsilon infinite."""
    certain = DiscretePLD(-1, np.array([0.3, 0.4, 0.3]), 1.0, H)
    parts = [(PLAIN, 3), (certain, 2)]
    out = compose(parts, (-1.0, 1.0), tilt)
    assert out.inf_mass == 1.0 and not out.upper.any() and not out.lower.any()
    # the pair of a certain +infinity: P-mass 1 there, no finite mass
    exact_parts = [(PLAIN, 3), (DiscretePLD(-1, np.zeros(3), 1.0, H), 2)]
    for eps in (-1.0, 0.0, 0.7, 50.0):
        assert delta_at(out, eps, upper=True) == 1.0 == _exact(exact_parts, eps)
    assert epsilon_for(out, 1e-9, upper=True) == math.inf
    assert epsilon_for(out, 0.999, upper=True) == math.inf


@pytest.mark.parametrize("order", ["first", "last"])
def test_component_with_every_mass_dropped(order: str):
    """Every finite mass of one component below TINY_MASS: they are charged to upper bounds
    (dropped), the finite part is zero; the upper reading is at least the exact curve of the
    stored pairs, the lower (dominated pairs) at most, both within 1e-12 of it."""
    tiny = DiscretePLD(-1, np.array([TINY_MASS / 2, 0.0, TINY_MASS / 4]), 0.5, H, dominated=True)
    parts = [(tiny, 2), (PLAIN, 3)] if order == "first" else [(PLAIN, 3), (tiny, 2)]
    out = compose(parts, (-1.0, 1.0), 0.0)
    assert out.dominated and out.dropped >= 2 * 0.75 * TINY_MASS
    assert out.tilt == 0.0 and out.upper_tail == 0.0 and out.lower_tail == 0.0
    for eps in (-0.5, 0.0, 0.3, 20.0):
        exact = _exact(parts, eps)
        up, low = delta_at(out, eps, upper=True), delta_at(out, eps, upper=False)
        with mp.workdps(60):
            assert mp.mpf(low) <= exact <= mp.mpf(up), eps
        assert up - low <= 1e-12
    # 1 - 0.5^2 0.9^3 = 0.81775: above it epsilon is certified at 0, below it infinite
    assert epsilon_for(out, 0.82, upper=True) <= 1e-11
    assert epsilon_for(out, 0.8, upper=True) == math.inf
    assert epsilon_for(out, 0.8, upper=False) >= 0.0


def test_chord_without_finite_mass_declines():
    """A chord (not a dominated pair) with no kept finite mass and less than one at +infinity
    is no law: the composition declines (an arithmetic error, which PLD reports as declining)
    rather than read an upper bound off it."""
    lost = DiscretePLD(-1, np.array([TINY_MASS / 2, 0.0]), 0.5, H)
    with pytest.raises(FloatingPointError):
        compose([(PLAIN, 1), (lost, 1)], (-1.0, 1.0), 0.0)
