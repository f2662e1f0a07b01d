"""The lattice bracket of the optimal adaptive composition of exponential-mechanism releases
against multi-precision optima, exactly enumerated adaptive strategies (their order chosen
adaptively too, at several epsilons) and the symmetry identity."""

from __future__ import annotations

import itertools
import math
import random

import mpmath as mp
import numpy as np
import pytest

from dpledger.accountant import br_adaptive
from dpledger.accountant.br_adaptive import (
    adaptive_br_curves,
    adaptive_br_delta,
    adaptive_br_epsilon,
    spread_br_delta,
)
from dpledger.accountant.conversions import TINY, U
from dpledger.accountant.exp_mech_composition import br_composed_epsilon_lower

mp.mp.dps = 30


def _one(x: mp.mpf, eps0: mp.mpf) -> mp.mpf:
    """The exact curve of one eps0-bounded-range release (the supremum over the class)."""
    if x >= eps0:
        return mp.mpf(0)
    if x <= -eps0:
        return 1 - mp.e**x
    return (mp.e ** (eps0 / 2) - mp.e ** (x / 2)) ** 2 / (mp.e**eps0 - 1)


def _p_high(t: mp.mpf, eps0: mp.mpf) -> mp.mpf:
    return (1 - mp.e ** (t - eps0)) / (1 - mp.e ** (-eps0))


def _two(x: float, eps0: float) -> mp.mpf:
    """sup over t of the two-release programme: a grid of t, then golden section."""
    e, xm = mp.mpf(eps0), mp.mpf(x)

    def value(t: mp.mpf) -> mp.mpf:
        p = _p_high(t, e)
        return p * _one(xm - t, e) + (1 - p) * _one(xm - t + e, e)

    grid = [e * i / 400 for i in range(401)]
    vals = [value(t) for t in grid]
    i = max(range(401), key=lambda n: vals[n])
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, 400)]
    g = (mp.sqrt(5) - 1) / 2
    for _ in range(80):
        a, b = hi - g * (hi - lo), lo + g * (hi - lo)
        lo, hi = (lo, b) if value(a) >= value(b) else (a, hi)
    return max(vals[i], value((lo + hi) / 2))


@pytest.mark.parametrize("eps0", [0.3, 1.0, 4.0])
def test_one_release_lattice_bracket_contains_the_exact_curve(eps0: float) -> None:
    low, up, _ = adaptive_br_curves(eps0, 1, 2 * eps0, 16)
    for i in range(low.size):
        exact = _one(mp.mpf(i) * mp.mpf(eps0) / 16, mp.mpf(eps0))
        assert low[i] <= exact <= up[i], (i, low[i], exact, up[i])


@pytest.mark.parametrize(("eps0", "x"), [(0.5, 0.15), (0.5, 0.65), (2.0, 1.8), (2.0, 2.6)])
def test_two_releases_bracket_the_30_digit_optimum(eps0: float, x: float) -> None:
    lo, hi = adaptive_br_delta(x, eps0, 2)  # type: ignore[misc]
    truth = _two(x, eps0)
    assert lo <= truth * (1 + mp.mpf(1e-20)) and truth <= hi, (lo, truth, hi)
    assert hi - lo <= 0.02 * truth


def _strategy_delta(eps0: float, k: int, x: float, rule: dict[tuple[int, ...], float]) -> mp.mpf:
    """delta(x) of an adaptive GRR strategy (t chosen per history), enumerated exactly."""
    e, total = mp.mpf(eps0), mp.mpf(0)
    for outs in itertools.product((0, 1), repeat=k):
        p, loss = mp.mpf(1), mp.mpf(0)
        for step in range(k):
            t = mp.mpf(rule[outs[:step]])
            ph = _p_high(t, e)
            p *= ph if outs[step] == 0 else 1 - ph
            loss += t if outs[step] == 0 else t - e
        if loss > x:
            total += p * (1 - mp.e ** (mp.mpf(x) - loss))
    return total


def _random_rule(eps0: float, k: int, rng: random.Random) -> dict[tuple[int, ...], float]:
    return {
        h: rng.uniform(0.0, eps0) for n in range(k) for h in itertools.product((0, 1), repeat=n)
    }


@pytest.mark.parametrize(("eps0", "k"), [(1.0, 3), (0.4, 4)])
def test_random_adaptive_strategies_stay_under_the_upper_bound(eps0: float, k: int) -> None:
    rng = random.Random(7)
    xs = [0.0, 0.3 * eps0 * k, 0.6 * eps0 * k]
    brackets = [adaptive_br_delta(x, eps0, k) for x in xs]
    for _ in range(40):
        rule = _random_rule(eps0, k, rng)
        for x, found in zip(xs, brackets, strict=True):
            assert found is not None
            assert _strategy_delta(eps0, k, x, rule) <= found[1]


def test_swapping_the_datasets_gives_the_symmetry_identity() -> None:
    """F(-y) = 1 - e^-y + e^-y F_swapped(y) on an enumerated adaptive composition."""
    eps0, k = 0.7, 3
    rule = _random_rule(eps0, k, random.Random(3))
    e = mp.mpf(eps0)
    outcomes = []
    for outs in itertools.product((0, 1), repeat=k):
        p, q = mp.mpf(1), mp.mpf(1)
        for step in range(k):
            t = mp.mpf(rule[outs[:step]])
            ph = _p_high(t, e)
            qh = ph * mp.e ** (-t)
            p *= ph if outs[step] == 0 else 1 - ph
            q *= qh if outs[step] == 0 else 1 - qh
        outcomes.append((p, q))
    for y in (0.2, 0.9, 1.7):
        yy = mp.mpf(y)
        direct = mp.fsum(max(p - mp.e ** (-yy) * q, 0) for p, q in outcomes)
        swapped = mp.fsum(max(q - mp.e**yy * p, 0) for p, q in outcomes)
        assert abs(direct - (1 - mp.e ** (-yy) + mp.e ** (-yy) * swapped)) < mp.mpf(1e-25)


@pytest.mark.parametrize(
    ("eps0", "k", "delta"), [(0.1, 100, 1e-5), (1.0, 10, 1e-5), (2.0, 5, 1e-3)]
)
def test_upper_is_above_the_non_adaptive_optimum(eps0: float, k: int, delta: float) -> None:
    found = adaptive_br_epsilon(delta, eps0, k)
    assert found is not None
    assert br_composed_epsilon_lower(delta, eps0, k) <= found[1]
    assert found[0] <= found[1] <= found[0] * 1.01


def test_the_order_of_distinct_epsilons_changes_the_optimum() -> None:
    """Why releases at several epsilons are not sent to the programme: 0.1 then 0.5 (in time)
    and 0.5 then 0.1 give different curves on the same lattice."""
    small_first = _fixed_order([0.5] * 4 + [0.1] * 4)  # applied last-release first
    large_first = _fixed_order([0.1] * 4 + [0.5] * 4)
    assert abs(small_first - large_first) > 1e-4 * max(small_first, large_first)


def _fixed_order(backwards: list[float]) -> float:
    """The lower programme with a fixed order of epsilons, on the lattice h = 0.05, at x = 1."""
    h = 0.05
    values = np.zeros(200)
    x = np.arange(200) * h
    for eps0 in backwards:
        n = round(eps0 / h)
        y = x[n + 1 : 0 : -1]
        mirrored = -np.expm1(-y) + np.exp(-y) * values[n + 1 : 0 : -1]
        ext = np.concatenate([mirrored, values, np.zeros(n + 1)])
        best = np.zeros(200)
        for j in range(n + 1):
            p = -np.expm1(-(n - j) * h) / -np.expm1(-n * h)
            i = np.arange(200) + n + 1
            best = np.maximum(best, p * ext[i - j] + (1 - p) * ext[i - j + n])
        values = best
    return float(values[20])


@pytest.mark.slow
def test_three_releases_optimum_on_a_grid_of_t_is_under_the_upper_bound() -> None:
    """The best of 120 values of t for the first release, each followed by the 30-digit
    two-release optimum: a lower estimate of the three-release optimum, under the bound."""
    eps0, x = 1.0, 1.4
    found = adaptive_br_delta(x, eps0, 3)
    assert found is not None
    e = mp.mpf(eps0)
    best = mp.mpf(0)
    for i in range(121):
        t = e * i / 120
        p = _p_high(t, e)
        best = max(best, p * _two(float(x - t), eps0) + (1 - p) * _two(float(x - t + e), eps0))
    assert found[0] <= best * (1 + mp.mpf(1e-6)) and best <= found[1], (found, best)


def _two_ordered(x: float, first: float, second: float) -> mp.mpf:
    """sup over t of a release at ``first`` followed by one at ``second`` (the exact
    one-release curve after each outcome): a grid of t, then golden section."""
    a, b, xm = mp.mpf(first), mp.mpf(second), mp.mpf(x)

    def value(t: mp.mpf) -> mp.mpf:
        p = _p_high(t, a)
        return p * _one(xm - t, b) + (1 - p) * _one(xm - t + a, b)

    grid = [a * i / 400 for i in range(401)]
    vals = [value(t) for t in grid]
    i = max(range(401), key=lambda n: vals[n])
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, 400)]
    g = (mp.sqrt(5) - 1) / 2
    for _ in range(80):
        u, v = hi - g * (hi - lo), lo + g * (hi - lo)
        lo, hi = (lo, v) if value(u) >= value(v) else (u, hi)
    return max(vals[i], value((lo + hi) / 2))


@pytest.mark.parametrize(("a", "b", "x"), [(0.5, 0.52, 0.2), (0.5, 0.52, 0.7), (2.0, 2.09, 2.5)])
def test_two_releases_at_two_epsilons_in_either_order_lie_in_the_spread_bracket(
    a: float, b: float, x: float
) -> None:
    """Two releases at distinct epsilons: the adaptive optimum is the larger of the two
    orders' optima (nothing is observed before the first), each exact at 30 digits."""
    found = spread_br_delta(x, a, b, 2)
    assert found is not None
    truth = max(_two_ordered(x, a, b), _two_ordered(x, b, a))
    assert found[0] <= truth * (1 + mp.mpf(1e-20)) and truth <= found[1], (found, truth)


def _ordered_strategy_delta(
    eps: list[float], x: float, rule: dict[tuple[int, ...], tuple[int, float]]
) -> mp.mpf:
    """delta(x) of an adaptive strategy that picks, after each history, which of the
    remaining releases comes next and its GRR position, enumerated exactly."""
    target = mp.mpf(x)

    def walk(history: tuple[int, ...], left: tuple[int, ...], loss: mp.mpf) -> mp.mpf:
        if not left:
            return 1 - mp.e ** (target - loss) if loss > target else mp.mpf(0)
        pick, frac = rule[history]
        e = mp.mpf(eps[left[pick % len(left)]])
        rest = left[: pick % len(left)] + left[pick % len(left) + 1 :]
        t = e * mp.mpf(frac)
        p = _p_high(t, e)
        return p * walk((*history, 0), rest, loss + t) + (1 - p) * walk(
            (*history, 1), rest, loss + t - e
        )

    return walk((), tuple(range(len(eps))), mp.mpf(0))


def test_random_orders_and_positions_stay_under_the_spread_upper_bound() -> None:
    """Four releases at four epsilons: strategies that choose the next release and its position
    from the outcomes so far stay under the upper bound at the largest epsilon."""
    rng = random.Random(5)
    eps = [0.6, 0.61, 0.615, 0.625]
    xs = [0.0, 0.8, 1.6]
    brackets = [spread_br_delta(x, min(eps), max(eps), len(eps)) for x in xs]
    for _ in range(30):
        rule = {
            h: (rng.randrange(24), rng.random())
            for n in range(len(eps))
            for h in itertools.product((0, 1), repeat=n)
        }
        for x, found in zip(xs, brackets, strict=True):
            assert found is not None
            assert _ordered_strategy_delta(eps, x, rule) <= found[1]


def _matrix_step_upper(
    up: np.ndarray, eps0: float, n: int, p: np.ndarray, r: np.ndarray
) -> np.ndarray:
    """The pseudocode's _step_upper as one N x T matrix of candidates (gathered windows)."""
    alpha = 1.0 / -math.expm1(-eps0) * (1 + 8 * U)
    kappa = math.tanh(eps0 / n / 4.0) * (1 + 16 * U)
    neg = br_adaptive._mirror(up, eps0, n, up=True)
    ext = np.concatenate([neg, up, np.full(n + 1, float(up[-1]))])

    def at(shift: np.ndarray) -> np.ndarray:  # row j: the values at i + shift[j], i = 0..T
        return np.stack([ext[n + 1 + s : n + 1 + s + up.size] for s in shift])

    js = np.arange(n + 1)
    a0, b0 = at(-js), at(n - js)
    g = p[:, None] * a0 + r[:, None] * b0
    rise = np.maximum(at(-js[:-1] - 1) - a0[:-1], 0.0)
    fall = np.maximum(b0[:-1] - at(n - js[:-1] - 1), 0.0)
    cell = np.maximum(g[:-1], g[1:]) + kappa * (alpha * rise + (alpha - 1.0) * fall)
    result: np.ndarray = np.minimum(cell.max(axis=0) * (1 + 16 * U) + 8 * TINY, 1.0)
    return result


def _matrix_step_lower(
    low: np.ndarray, eps0: float, n: int, p: np.ndarray, r: np.ndarray
) -> np.ndarray:
    neg = br_adaptive._mirror(low, eps0, n, up=False)
    ext = np.concatenate([neg, low, np.zeros(n + 1)])
    rows = [
        p[j] * ext[n + 1 - j : n + 1 - j + low.size]
        + r[j] * ext[2 * n + 1 - j : 2 * n + 1 - j + low.size]
        for j in range(n + 1)
    ]
    best = np.max(np.stack(rows), axis=0)
    result: np.ndarray = np.maximum(best * (1 - 4 * U) - 4 * TINY, 0.0)
    return result


@pytest.mark.parametrize(("eps0", "n", "steps"), [(0.05, 8, 12), (0.7, 23, 6), (3.0, 64, 4)])
def test_whole_array_passes_equal_the_candidate_matrix_bit_for_bit(
    eps0: float, n: int, steps: int
) -> None:
    """Each release's passes give exactly the pseudocode's maxima over the candidate matrix."""
    p_lo, p_hi, r_lo, r_hi = br_adaptive._masses(eps0, n)
    coef = (
        1.0 / -math.expm1(-eps0) * (1 + 8 * U),
        math.tanh(eps0 / n / 4.0) * (1 + 16 * U),
    )
    size = 6 * n + 5
    low, up = np.zeros(size), np.zeros(size)
    for _ in range(steps):
        new_low = br_adaptive._step_lower(low, eps0, n, p_lo, r_lo)
        new_up = br_adaptive._step_upper(up, eps0, n, p_hi, r_hi, coef)
        assert np.array_equal(new_low, _matrix_step_lower(low, eps0, n, p_lo, r_lo))
        assert np.array_equal(new_up, _matrix_step_upper(up, eps0, n, p_hi, r_hi))
        low, up = new_low, new_up
    assert up.max() > 0.0 and low.max() > 0.0
