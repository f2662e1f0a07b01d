"""Many distinct approximate-DP leaves: their pure parts round to representatives in one
dimension and their failure masses compose exactly (``pld_components.approx_failures``).

Reference: the composition of binary randomized responses at ``eps_i = k_i H`` is a lattice
walk, convolved exactly on that lattice; delta(eps) = ``1 - prod (1 - delta_i)`` plus
``prod (1 - delta_i)`` times the walk's delta."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from dpledger.accountant.pld_components import approx_failures
from dpledger.accountant.select import account
from dpledger.core.events import ApproxDPEvent, ComposedEvent, PureDPEvent

H = 1e-5


def _walk(ks: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(losses, P-masses) of the composed randomized responses at k_i H."""
    total = sum(ks)
    masses = np.zeros(total + 1)
    masses[0] = 1.0
    top = 0
    for k in ks:
        up = 1.0 / (1.0 + math.exp(-k * H))
        seg = masses[: top + 1].copy()
        masses[: top + 1] *= 1 - up
        masses[k : top + k + 1] += up * seg
        top += k
    return (2 * np.arange(total + 1) - total) * H, masses


def _ledger(seed: int, n: int) -> tuple[ComposedEvent, list[int], float]:
    rng = np.random.default_rng(seed)
    ks = [int(k) for k in rng.choice(np.arange(500, 1500), n, replace=False)]
    deltas = np.exp(rng.uniform(math.log(1e-12), math.log(1e-7), n))
    keep = math.exp(math.fsum(math.log1p(-d) for d in deltas))
    leaves = [ApproxDPEvent(k * H, float(d)) for k, d in zip(ks, deltas, strict=True)]
    return ComposedEvent(leaves), ks, keep


def _exact_delta(losses: np.ndarray, masses: np.ndarray, keep: float, eps: float) -> float:
    above = losses > eps
    return -math.expm1(math.log(keep)) + keep * float(
        np.sum(masses[above] * -np.expm1(eps - losses[above]))
    )


def test_six_hundred_distinct_releases_bracket_the_exact_epsilon_within_one_percent() -> None:
    event, ks, keep = _ledger(7, 600)
    losses, masses = _walk(ks)
    bound = account(event, delta=1e-3).bound
    assert bound.method == "pld"
    # measured 0.52 %: epsilon and delta rounded together in two dimensions gave 15.9 %
    # ([0.563616, 0.652963])
    assert bound.epsilon <= 1.01 * bound.epsilon_lower
    assert _exact_delta(losses, masses, keep, bound.epsilon) <= 1e-3 * (1 + 1e-9)
    assert _exact_delta(losses, masses, keep, bound.epsilon_lower) >= 1e-3 * (1 - 1e-9)
    eps = round(bound.epsilon, 3)
    found = account(event, epsilon=eps).bound
    exact = _exact_delta(losses, masses, keep, eps)
    assert found.delta_lower <= exact * (1 + 1e-9) and found.delta >= exact * (1 - 1e-9)


def test_the_failure_masses_are_rounded_to_each_side() -> None:
    leaves = {ApproxDPEvent(0.1, 1e-6): 3, ApproxDPEvent(0.2, 2e-6): 1, PureDPEvent(0.1): 2}
    out, failure = approx_failures(leaves)
    assert out == {PureDPEvent(0.1): 5, PureDPEvent(0.2): 1}
    assert failure is not None
    with mpmath.workdps(60):
        exact = -mpmath.expm1(3 * mpmath.log1p(-mpmath.mpf(1e-6)) + mpmath.log1p(-mpmath.mpf(2e-6)))
        assert failure[1] <= exact <= failure[0] <= exact * (1 + mpmath.mpf(1e-13))


@pytest.mark.parametrize(
    "leaves",
    [
        {ApproxDPEvent(0.1, 1e-6): 3},  # one distinct leaf: nothing to gain
        {ApproxDPEvent(0.1, 0.0): 1, ApproxDPEvent(0.2, 0.0): 1},  # no failure mass
        {ApproxDPEvent(0.1, 0.5): 60, ApproxDPEvent(0.2, 0.5): 60},  # it rounds to one
        {ApproxDPEvent(0.1, 3e-315): 300, ApproxDPEvent(0.2, 3e-315): 1},  # subnormal
    ],
)
def test_leaves_are_left_as_they_are_where_the_split_cannot_help(
    leaves: dict[ApproxDPEvent, int],
) -> None:
    out, failure = approx_failures(dict(leaves))
    assert failure is None and out == leaves
