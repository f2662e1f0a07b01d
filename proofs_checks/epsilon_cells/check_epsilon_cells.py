"""Blocks of equal epsilon-type leaves: the upper curve above the exact composition (60 digits),
the lower curve below it, both close to it."""

from __future__ import annotations

from typing import TypeAlias

import mpmath
import numpy as np
import pytest

import dpledger.accountant.epsilon_cells as cells
from dpledger.accountant.epsilon_cells import cell_profiles
from dpledger.core.events import (
    ApproxDPEvent,
    PureDPEvent,
    RandomizedResponseEvent,
)

Leaf: TypeAlias = PureDPEvent | RandomizedResponseEvent | ApproxDPEvent


def _exact(event: Leaf, m: int, eps: np.ndarray) -> list[mpmath.mpf]:
    """delta(eps) of ``m`` copies of ``event`` composed, at 60 digits (set here, not for the
    whole process: other checks read mpmath's precision)."""
    with mpmath.workdps(60):
        return _exact_here(event, m, eps)


def _exact_here(event: Leaf, m: int, eps: np.ndarray) -> list[mpmath.mpf]:
    e = mpmath.mpf(event.epsilon)
    k = event.num_buckets if isinstance(event, RandomizedResponseEvent) else 2
    z = mpmath.exp(e) + (k - 1)
    base = [1 / z, mpmath.mpf(k - 2) / z, mpmath.exp(e) / z]  # losses -e, 0, e
    poly = [mpmath.mpf(1)]
    for _ in range(m):
        out = [mpmath.mpf(0)] * (len(poly) + 2)
        for i, x in enumerate(poly):
            for j, y in enumerate(base):
                out[i + j] += x * y
        poly = out
    d = mpmath.mpf(event.delta) if isinstance(event, ApproxDPEvent) else mpmath.mpf(0)
    keep = (1 - d) ** m
    values = []
    for x in eps:
        xe = mpmath.mpf(float(x))
        terms = [p * (1 - mpmath.exp(xe - (i - m) * e)) for i, p in enumerate(poly)]
        s = sum((t for i, t in enumerate(terms) if (i - m) * e > xe), mpmath.mpf(0))
        values.append(1 - keep + keep * s)
    return values


CASES = [
    (RandomizedResponseEvent(0.013), 30),
    (RandomizedResponseEvent(0.4, 3), 25),
    (PureDPEvent(1.7), 12),
    (ApproxDPEvent(0.05, 1e-7), 40),
]


@pytest.mark.parametrize("cut", [False, True])
@pytest.mark.parametrize(("event", "m"), CASES)
def test_block_curves_bracket_the_exact_composition(
    event: Leaf, m: int, cut: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if cut:  # a tail cut inside the support: moved up (upper), merged (lower)
        monkeypatch.setattr(cells, "CELL_TAIL", 1e-6)
    d = cell_profiles(event, m)
    assert d is not None
    top = m * event.epsilon
    eps = np.linspace(-top - 0.01, top + 0.01, 61)
    eps = np.concatenate([eps, np.array([0.0, 0.5 * top, top * (1 - 1e-12)])])
    exact = _exact(event, m, eps)
    upper = d.remove.delta(eps)
    lower = d.lower_remove.delta(eps)
    for i, (x, u, lo) in enumerate(zip(exact, upper, lower, strict=True)):
        assert mpmath.mpf(float(u)) >= x
        assert mpmath.mpf(float(lo)) <= x
        # close to it away from an atom (a loss one ulp up moves a term just below it a lot)
        if not cut and i < eps.size - 1:
            assert float(u) <= float(x) * (1 + 1e-9) + 1e-300
            assert float(lo) >= float(x) * (1 - 1e-9)
    assert d.remove is d.add and d.lower_remove is d.lower_add
