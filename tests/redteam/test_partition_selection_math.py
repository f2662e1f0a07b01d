"""Private partition selection re-derived independently: the executed release probabilities
against scipy's Laplace and normal tails and the documented budget split, the certified epsilon
against the exact privacy curve of the selection (every key an independent Bernoulli pair; a
user holding up to ``k`` keys of any counts), and the contribution sensitivity by brute force."""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dpledger.accountant.partition_selection import (
    partition_selection_threshold,
    selection_epsilon,
    selection_release_probability,
)
from dpledger.core.partition_selection import contribution_sensitivity

CASES = [
    ("laplace", 1.0, 1e-3, 1),
    ("laplace", 0.5, 1e-2, 3),
    ("gaussian", 1.0, 1e-3, 2),
    ("gaussian", 0.5, 1e-2, 3),
    ("truncated_geometric", 1.0, 1e-3, 2),
    ("truncated_geometric", 0.5, 1e-2, 3),
]


@functools.cache
def _pi(mechanism: str, eps: float, delta: float, k: int, n: int) -> float:
    return selection_release_probability(mechanism, eps, delta, k, n)


def _exact_delta(pairs: list[tuple[float, float]], epsilon: float) -> float:
    """The exact hockey-stick divergence, both directions, of independent Bernoulli pairs
    (one per key: released with probability ``a`` with the user, ``b`` without)."""
    worst = 0.0
    for flip in (False, True):
        p, q = np.ones(1), np.ones(1)
        for a, b in pairs:
            a, b = (b, a) if flip else (a, b)
            p = np.outer(p, [1 - a, a]).ravel()
            q = np.outer(q, [1 - b, b]).ravel()
        worst = max(worst, float(np.maximum(p - math.exp(epsilon) * q, 0).sum()))
    return worst


def _counts(mechanism: str, eps: float, delta: float, k: int) -> list[int]:
    """Counts from 1 up to where the rule releases almost surely: where the worst key lies."""
    top = next(n for n in range(1, 10_000) if _pi(mechanism, eps, delta, k, n) > 1 - 1e-9)
    return sorted({1, 2, 3, *range(1, top + 2, max(1, top // 8))})


#: a smoke set in the default tier (about a second); every case and ratio in the slow tier
SMOKE = {
    ("truncated_geometric", 0.5, 1e-2, 3, 1.0),
    ("truncated_geometric", 0.5, 1e-2, 3, 3.0),
    ("gaussian", 0.5, 1e-2, 3, 30.0),
    ("laplace", 0.5, 1e-2, 3, 30.0),
}
CURVE_CASES = [
    pytest.param(*case, ratio, marks=() if (*case, ratio) in SMOKE else pytest.mark.slow)
    for case in CASES
    for ratio in (1.0, 3.0, 30.0)
]


@pytest.mark.parametrize(("mechanism", "eps", "delta", "k", "ratio"), CURVE_CASES)
def test_certified_epsilon_covers_the_exact_curve_for_every_user(
    mechanism: str, eps: float, delta: float, k: int, ratio: float
) -> None:
    at = ratio * delta
    certified = selection_epsilon(mechanism, eps, delta, k, at).epsilon
    if ratio == 1.0:  # the declared budget is what is certified (up to the PLD's grid)
        assert certified <= eps * (1 + 1e-4)
    grid = _counts(mechanism, eps, delta, k)
    worst = 0.0
    for held in itertools.combinations_with_replacement(grid, k):  # the user's keys' counts
        pairs = [
            (_pi(mechanism, eps, delta, k, n), _pi(mechanism, eps, delta, k, n - 1)) for n in held
        ]
        worst = max(worst, _exact_delta(pairs, certified))
    assert worst <= at * (1 + 1e-9)
    # fewer keys than k: a sub-product, never worse
    assert _exact_delta([(_pi(mechanism, eps, delta, k, 1), 0.0)], certified) <= worst


@pytest.mark.parametrize(("mechanism", "eps", "delta", "k"), CASES[:4])
def test_thresholds_are_the_documented_budget_split(
    mechanism: str, eps: float, delta: float, k: int
) -> None:
    scale, threshold = partition_selection_threshold(mechanism, eps, delta, k)
    share = delta if mechanism == "laplace" else delta / 2
    per_key = 1 - (1 - share) ** (1 / k)
    if mechanism == "laplace":
        assert scale == pytest.approx(k / eps, rel=1e-15)
        tail = stats.laplace.sf(threshold - 1, scale=scale)
        noise_delta = 0.0  # k Laplace releases of scale k / eps: pure eps-DP
    else:
        tail = stats.norm.sf((threshold - 1) / scale)
        mu = math.sqrt(k) / scale  # k Gaussians of sensitivity 1 compose to one of mu
        noise_delta = stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(
            -eps / mu - mu / 2
        )
        assert noise_delta <= delta / 2
        assert noise_delta == pytest.approx(delta / 2, rel=1e-5)  # calibrated, not loose
    assert tail <= per_key
    assert tail == pytest.approx(per_key, rel=1e-5)
    assert _pi(mechanism, eps, delta, k, 1) == pytest.approx(tail, rel=1e-9)
    assert _pi(mechanism, eps, delta, k, 0) == 0.0
    # the thresholds' share and the noise's share compose within the budget
    assert 1 - (1 - tail) ** k + noise_delta <= delta


@pytest.mark.parametrize(("eps", "delta", "k"), [(1.0, 1e-3, 1), (0.5, 1e-2, 3), (2.0, 1e-6, 4)])
def test_truncated_geometric_meets_both_constraints_per_key(
    eps: float, delta: float, k: int
) -> None:
    e, d = eps / k, 1 - (1 - delta) ** (1 / k)
    previous, n = 0.0, 1
    while previous < 1.0:
        now = _pi("truncated_geometric", eps, delta, k, n)
        assert now <= math.exp(e) * previous + d
        assert 1 - previous <= math.exp(e) * (1 - now) + d
        assert now >= previous
        previous, n = now, n + 1


@settings(max_examples=60, deadline=None)
@given(
    l0=st.integers(1, 6),
    linf=st.integers(1, 4),
    clip=st.floats(1e-3, 1e3),
    seed=st.integers(0, 2**16),
)
def test_contribution_sensitivity_bounds_any_users_rows(
    l0: int, linf: int, clip: float, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    keys = 8
    held = rng.choice(keys, size=l0, replace=False)
    rows = rng.integers(1, linf + 1, size=l0)
    values = [rng.uniform(-clip, clip, size=r) for r in rows]
    move = np.zeros(keys)
    for key, v in zip(held, values, strict=True):
        move[key] = np.clip(v, -clip, clip).sum()
    l2 = contribution_sensitivity(l0, linf, clip, "l2")
    l1 = contribution_sensitivity(l0, linf, clip, "l1")
    assert np.linalg.norm(move) <= l2 and np.abs(move).sum() <= l1
    # the extreme user attains them, up to the rounding charged
    assert l2 == pytest.approx(math.sqrt(l0) * linf * clip, rel=1e-15)
    assert l1 == pytest.approx(l0 * linf * clip, rel=1e-15)
    assert l2 >= math.sqrt(l0) * linf * clip and l1 >= l0 * linf * clip


def _numpy_laplace_tail(threshold: float, scale: float, count: int) -> float:
    """The exact probability that the engine's draw releases a key of ``count`` units:
    ``count + scale * z >= threshold``, ``z`` numpy's Laplace draw ``-log(2 - U - U)`` for a
    uniform ``U >= 1/2`` on the grid ``j / 2^53`` (the branch ``U < 1/2`` gives ``z <= 0``)."""
    grid = 2**53

    def released(j: int) -> bool:
        u = j / grid
        return count + scale * (0.0 - 1.0 * math.log(2.0 - u - u)) >= threshold

    lo, hi = grid // 2, grid - 1
    if not released(hi):
        return 0.0
    while lo < hi:  # the least grid point released (release grows with U)
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if released(mid) else (mid + 1, hi)
    return (grid - lo) / grid


@pytest.mark.parametrize(
    ("eps", "delta", "k"), [(1.0, 1e-10, 1), (0.3, 1e-9, 2), (1.0, 1e-12, 1), (2.0, 1e-8, 4)]
)
def test_the_executed_laplace_draws_release_a_lone_key_within_the_charged_probability(
    eps: float, delta: float, k: int
) -> None:
    from dpledger.core.partition_selection import key_release_bound

    scale, threshold = partition_selection_threshold("laplace", eps, delta, k)
    executed = _numpy_laplace_tail(threshold, scale, 1)
    assert 0 < executed <= key_release_bound("laplace", eps, delta, k)
    assert executed == pytest.approx(1 - (1 - delta) ** (1 / k), rel=1e-4)
