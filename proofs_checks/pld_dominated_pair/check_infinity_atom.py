"""Checks of the dominated pair of a curve with a P-only mass beside a sub-pair
(``InfinityAtom``; proof.md, "Pairs with a P-only mass beside a sub-pair"): the
Poisson-sampled approximate-DP remove curve against its exact four-outcome pair at 40 digits."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from dpledger.accountant.leaves import leaf_profiles
from dpledger.accountant.pld_dominated import discretise_lower
from dpledger.accountant.profiles_sampled import InfinityAtom
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import ApproxDPEvent, PoissonSampledEvent

__all__: list[str] = []

#: (q, eps0, delta0, h): the reproduction, a mass far below h, and one of 50 h (lifted atom)
CASES = [
    (0.01, 0.5, 1e-6, 1e-4),
    (0.2, 1.5, 1e-12, 1e-3),
    (0.5, 1.0, 0.1, 1e-3),
]


def _exact_remove(q: float, eps0: float, delta0: float, eps: float) -> mp.mpf:
    """The remove pair ``(1 - q) Q0 + q P0`` vs ``Q0`` of the tight pair, at ``eps``."""
    with mp.workdps(40):
        d, qq, x = mp.mpf(delta0), mp.mpf(q), mp.e ** mp.mpf(eps)
        a = mp.e ** mp.mpf(eps0) / (1 + mp.e ** mp.mpf(eps0))
        p0 = [d, (1 - d) * a, (1 - d) * (1 - a), mp.mpf(0)]
        q0 = [mp.mpf(0), (1 - d) * (1 - a), (1 - d) * a, d]
        return mp.fsum(
            max(mp.mpf(0), (1 - qq) * y + qq * z - x * y) for z, y in zip(p0, q0, strict=True)
        )


@pytest.mark.parametrize(("q", "eps0", "delta0", "h"), CASES)
def test_atom_pair_keeps_the_mass_and_stays_below(
    q: float, eps0: float, delta0: float, h: float
) -> None:
    """The mass at +infinity is kept (at most q delta0, within 1e-12 of it); P- and Q-totals
    are at most one; the pair's curve is below the exact curve at its points, between them
    and beyond its top loss (read in doubles with a relative charge of 1e-13)."""
    curve = leaf_profiles(PoissonSampledEvent(q, ApproxDPEvent(eps0, delta0)), Adjacency())
    atom = curve.lower_remove
    assert isinstance(atom, InfinityAtom)
    assert atom.mass[0] <= q * delta0 <= atom.mass[1]
    pair = discretise_lower(atom, h)
    assert pair is not None
    m = mp.mpf(q) * mp.mpf(delta0)
    assert m * (1 - 1e-12) <= pair.inf_mass <= m
    masses, losses = pair.masses, pair.losses
    with mp.workdps(40):
        assert mp.fsum(mp.mpf(v) for v in masses) + pair.inf_mass <= 1
        terms = zip(masses, losses, strict=True)
        assert mp.fsum(mp.mpf(v) * mp.e ** -mp.mpf(t) for v, t in terms) <= 1
    points = np.concatenate([losses[::5], losses[::9] + h / 2, [losses[-1] + h, 10.0]])
    for eps in points:
        # the pair's curve in doubles (each term within a few u), charged upward by 1e-13
        value = pair.inf_mass + math.fsum(
            (masses * np.maximum(0.0, -np.expm1(eps - losses))).tolist()
        )
        assert value * (1 - 1e-13) <= _exact_remove(q, eps0, delta0, float(eps))
