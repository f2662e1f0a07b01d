"""Numeric checks of the partition-selection rules and of the events that dominate them."""

from __future__ import annotations

import itertools
import math

import mpmath as mp
import pytest

from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import PartitionSelectionEvent
from dpledger.core.partition_selection import (
    key_budget,
    release_probability,
    selection_parameters,
)

mp.mp.dps = 50


def _table(eps: float, delta: float, k: int) -> list[float]:
    _, n_max = selection_parameters("truncated_geometric", eps, delta, k)
    return [
        release_probability("truncated_geometric", eps, delta, k, n) for n in range(int(n_max) + 1)
    ]


def _closed_form(e: float, d: float, count: int) -> list[mp.mpf]:
    """Desfontaines et al. (PoPETs 2022), Thm. 1: the geometric phase up to n*, then the
    complementary phase toward its fixed point 1 + d / (e^e - 1), capped at 1."""
    grow, dd = mp.e ** mp.mpf(e), mp.mpf(d)
    n_star = 1 + int(mp.floor(mp.log((grow + 2 * dd - 1) / ((grow + 1) * dd)) / mp.mpf(e)))
    out = [mp.mpf(0)]
    for n in range(1, count):
        if n <= n_star:
            out.append((grow**n - 1) / (grow - 1) * dd)
        else:
            c = dd / (grow - 1)
            out.append(min(mp.mpf(1), 1 + c - (1 - out[n_star] + c) / grow ** (n - n_star)))
    return out


@pytest.mark.parametrize(("eps", "delta", "k"), [(1.0, 1e-5, 1), (0.5, 1e-6, 4), (2.0, 0.05, 2)])
def test_the_executed_rule_is_optimal_within_its_budget(eps: float, delta: float, k: int) -> None:
    e, d = key_budget("truncated_geometric", eps, delta, k)
    pi = _table(eps, delta, k)
    d_rule = d - 4e-15 * (1 + math.exp(e))
    paper = _closed_form(e, d_rule, len(pi))
    grow = mp.e ** mp.mpf(e)
    spent = mp.mpf(0)
    for n in range(1, len(pi)):
        a, b = mp.mpf(pi[n]), mp.mpf(pi[n - 1])
        assert float(paper[n]) == pytest.approx(pi[n], rel=1e-9, abs=1e-15)
        # the exact divergence at e of this key's pair, summed over its two outcomes
        remove = max(a - grow * b, (1 - a) - grow * (1 - b), mp.mpf(0))
        add = max(b - grow * a, (1 - b) - grow * (1 - a), mp.mpf(0))
        assert remove <= d and add <= d
        spent = max(spent, remove, add)
    assert spent >= mp.mpf(d_rule) * (1 - mp.mpf("1e-9"))  # optimal: its whole delta is used


@pytest.mark.parametrize(("eps", "delta", "k"), [(1.0, 1e-5, 1), (0.7, 1e-7, 3), (2.0, 0.01, 8)])
def test_the_gaussian_noise_meets_half_the_delta(eps: float, delta: float, k: int) -> None:
    s, t = selection_parameters("gaussian", eps, delta, k)
    mu = mp.sqrt(k) / mp.mpf(s)
    e = mp.mpf(eps)
    curve = mp.ncdf(-e / mu + mu / 2) - mp.e**e * mp.ncdf(-e / mu - mu / 2)
    assert curve <= mp.mpf(delta) / 2
    assert curve >= mp.mpf(delta) / 2 * (1 - mp.mpf("2e-6"))
    _, d = key_budget("gaussian", eps, delta, k)
    assert 1 - mp.ncdf((mp.mpf(t) - 1) / mp.mpf(s)) == pytest.approx(d, rel=1e-9)


def _curve(p: list[float], q: list[float], eps: float) -> float:
    out = 0.0
    for outcome in itertools.product((0, 1), repeat=len(p)):
        pp = math.prod(a if o else 1 - a for a, o in zip(p, outcome, strict=True))
        qq = math.prod(b if o else 1 - b for b, o in zip(q, outcome, strict=True))
        out += max(0.0, pp - math.exp(eps) * qq)
    return out


@pytest.mark.parametrize(
    "mechanism",
    [
        "truncated_geometric",
        pytest.param("laplace", marks=pytest.mark.slow),
        pytest.param("gaussian", marks=pytest.mark.slow),
    ],
)
def test_the_canonical_event_dominates_every_configuration(mechanism: str) -> None:
    eps, delta, k = 2.0, 0.05, 2
    pi = [release_probability(mechanism, eps, delta, k, n) for n in range(12)]
    event = PartitionSelectionEvent(mechanism, eps, delta, k)
    for at in (-0.5, 0.25, 1.0, 2.0):
        certified = account(event, Adjacency(), epsilon=at).bound.delta
        for counts in itertools.product(range(1, 12), repeat=k):
            with_user = [pi[n] for n in counts]
            without = [pi[n - 1] for n in counts]
            assert _curve(with_user, without, at) <= certified
            assert _curve(without, with_user, at) <= certified
