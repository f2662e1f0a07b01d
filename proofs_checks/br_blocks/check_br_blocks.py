"""Numeric checks of the exponential-mechanism blocks (proofs_checks/br_blocks)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpledger.accountant import br_blocks
from dpledger.accountant.br_adaptive import adaptive_br_epsilon
from dpledger.accountant.exp_mech_composition import br_composed_epsilon_lower
from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.profiles_tabulated import tabulated_delta
from dpledger.core.events import ComposedEvent, ExponentialMechanismEvent, SelfComposedEvent


def _shift(values: np.ndarray, steps: int) -> np.ndarray:
    """A curve on a lattice read at ``x - steps h`` (its end values held beyond the ends)."""
    out = np.roll(values, steps)
    if steps > 0:
        out[:steps] = values[0]
    elif steps < 0:
        out[steps:] = values[-1]
    return out


@pytest.mark.parametrize(
    ("eps0", "count", "delta"),
    [(0.3, 12, 1e-5), (0.05, 80, 1e-6), (1.2, 9, 1e-3), (0.02, 400, 1e-9)],
)
def test_blocked_upper_is_above_the_direct_programme_and_the_attained_optimum(
    eps0: float, count: int, delta: float
) -> None:
    acc = PLDAccountant()
    acc.compose(SelfComposedEvent(ExponentialMechanismEvent(eps0), count))
    upper = acc.get_epsilon(delta).epsilon
    direct = adaptive_br_epsilon(delta, eps0, count)
    assert direct is not None
    assert upper >= direct[0]
    assert upper >= br_composed_epsilon_lower(delta, eps0, count)


def test_a_thinned_table_lies_above_the_full_one(monkeypatch: pytest.MonkeyPatch) -> None:
    full = br_blocks.block_table(0.05, 25)
    br_blocks.block_table.cache_clear()
    monkeypatch.setattr(br_blocks, "MAX_PROFILE_POINTS", 200)
    thin = br_blocks.block_table(0.05, 25)
    br_blocks.block_table.cache_clear()
    assert len(thin.epsilons) <= 200 < len(full.epsilons)
    assert thin.epsilons[-1] == full.epsilons[-1]
    eps = np.linspace(0.0, full.epsilons[-1] * 1.1, 5001)
    a = tabulated_delta(np.asarray(thin.epsilons), np.asarray(thin.deltas))(eps)
    b = tabulated_delta(np.asarray(full.epsilons), np.asarray(full.deltas))(eps)
    assert np.all(a >= b * (1 - 1e-12))


def test_another_release_first_never_lowers_the_value() -> None:
    """On a lattice, with V the one-release curve F_1: a bounded-range step then a fixed
    two-point step (E_o sup_t E_t) is at least the reverse order (sup_t E_t E_o)."""
    eps0, n = 0.5, 40
    h = eps0 / n
    x = np.arange(-400, 401) * h
    v = np.where(
        x >= eps0,
        0.0,
        np.where(
            x <= -eps0, 1 - np.exp(x), (np.exp(eps0 / 2) - np.exp(x / 2)) ** 2 / np.expm1(eps0)
        ),
    )

    def br_step(values: np.ndarray) -> np.ndarray:
        best = np.zeros_like(values)
        for j in range(n + 1):
            t = j * h
            p = -np.expm1(t - eps0) / -np.expm1(-eps0)
            best = np.maximum(best, p * _shift(values, j) + (1 - p) * _shift(values, j - n))
        return best

    def other_step(values: np.ndarray) -> np.ndarray:  # losses +-3h, P-masses 0.6 / 0.4
        return 0.6 * _shift(values, 3) + 0.4 * _shift(values, -3)

    first_other = other_step(br_step(v))  # the other release happens first (outer)
    first_br = br_step(other_step(v))
    inner = slice(100, -100)
    assert np.all(first_other[inner] >= first_br[inner] - 1e-15)
    assert np.max(first_other[inner] - first_br[inner]) > 1e-6  # the exchange matters


def interleaved_lower(leaves: dict[int, int], unit: float, n: int, eps: np.ndarray) -> np.ndarray:
    """A certified lower bound of the adaptive optimum's curve at ``eps`` for the releases of
    several leaves (``{epsilon in units: releases}``) in any adaptively chosen order: the
    analyst picks, from the loss so far, which leaf answers next and its threshold ``t`` on a
    lattice of step ``unit / n`` (a strategy restricted to the lattice attains at most the
    supremum, so its curve is below the optimum's)."""
    h = unit / n
    steps = {a: a * n for a in leaves}
    span = sum(k * steps[a] for a, k in leaves.items())
    x = np.arange(-2 * span, 2 * span + 1) * h
    start = -np.expm1(np.minimum(x, 0.0))  # (1 - e^x)_+: no release

    def release(values: np.ndarray, a: int) -> np.ndarray:
        e0, s, best = a * unit, steps[a], np.zeros_like(values)
        for j in range(s + 1):
            p = -math.expm1(j * h - e0) / -math.expm1(-e0)
            best = np.maximum(best, p * _shift(values, j) + (1 - p) * _shift(values, j - s))
        return best

    kinds = sorted(leaves)
    memo: dict[tuple[int, ...], np.ndarray] = {}

    def value(left: tuple[int, ...]) -> np.ndarray:
        if left not in memo:
            if not any(left):
                memo[left] = start
            else:
                options = [
                    release(value((*left[:i], c - 1, *left[i + 1 :])), kinds[i])
                    for i, c in enumerate(left)
                    if c
                ]
                memo[left] = np.maximum.reduce(options)
        return memo[left]

    curve = value(tuple(leaves[a] for a in kinds))
    inside = np.abs(x) <= span * h  # beyond, the array's ends reach in
    return np.asarray(np.interp(eps, x[inside], curve[inside]))


def test_every_blocked_leaf_stays_above_the_interleaved_optimum() -> None:
    """Two and three exponential-mechanism leaves, all blocked: the PLD upper curve is above
    a lower bound of the adaptive optimum over every interleaving of their releases."""
    for leaves in ({3: 5, 5: 4}, {2: 3, 4: 3, 7: 2}):
        event = ComposedEvent(
            [SelfComposedEvent(ExponentialMechanismEvent(a / 10), k) for a, k in leaves.items()]
        )
        blocked = br_blocks.range_blocks(
            {ExponentialMechanismEvent(a / 10): k for a, k in leaves.items()}, "add_remove"
        )
        assert all(type(e) is not ExponentialMechanismEvent for e in blocked)
        eps = np.linspace(0.0, 2.5, 11)
        lower = interleaved_lower(leaves, 0.1, 24, eps)
        acc = PLDAccountant()
        acc.compose(event)
        for e, low in zip(eps, lower, strict=True):
            assert acc.get_delta(float(e)).delta >= low * (1 - 1e-9)
