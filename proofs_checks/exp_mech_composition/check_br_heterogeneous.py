"""The attained lower bound of exponential mechanisms at distinct epsilons against enumeration
of every composed outcome at 40 digits."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

import mpmath as mp
import numpy as np
import pytest

from dpledger.accountant import br_heterogeneous as bh

DPS = 40


@pytest.fixture(autouse=True)
def _digits() -> Iterator[None]:
    """Every test at DPS digits, without changing mpmath's precision for other modules."""
    with mp.workdps(DPS):
        yield


EPSILONS = [0.05, 0.08, 0.11, 0.2, 0.24, 0.37, 0.5, 0.9]


def _grr(t: mp.mpf, eps: mp.mpf) -> tuple[tuple[mp.mpf, mp.mpf, mp.mpf], ...]:
    """(loss, P mass, Q mass) of GRR(t) at eps, from its definition (E_Q[e^L] = 1)."""
    q_low = (1 - mp.e ** (-t)) / (1 - mp.e ** (-eps))
    return (t, (1 - q_low) * mp.e**t, 1 - q_low), (t - eps, q_low * mp.e ** (t - eps), q_low)


def _exact_delta(epsilons: list[float], c: float, eps: float) -> mp.mpf:
    """delta(eps) of the composed GRR(fl(c e_i)): the hockey-stick sum over every outcome."""
    pairs = [_grr(mp.mpf(c * e), mp.mpf(e)) for e in epsilons]
    ee = mp.e ** mp.mpf(eps)
    total = mp.mpf(0)
    for outcome in itertools.product(*pairs):
        if mp.fsum(o[0] for o in outcome) > eps:
            total += mp.fprod(o[1] for o in outcome) - ee * mp.fprod(o[2] for o in outcome)
    return total


def test_masses_bracket_the_40_digit_masses() -> None:
    for c, eps in itertools.product((0.02, 0.5, 0.98), (1e-8, 0.3, 7.0, 40.0)):
        t, p_low, p_high, q_low, q_high = bh._masses(c, eps)
        (_, ph, qh), (_, pl, ql) = _grr(mp.mpf(t), mp.mpf(eps))
        assert p_low <= pl and p_high <= ph and q_low >= ql and q_high >= qh
        assert p_low >= pl * (1 - 1e-13) and q_low <= ql * (1 + 1e-13)


@pytest.mark.parametrize("eps", [0.0, 0.4, 1.0, 2.0])
def test_every_ratio_and_lattice_gives_a_lower_bound_of_the_enumerated_curve(eps: float) -> None:
    releases = sorted(((e, 1) for e in EPSILONS), reverse=True)
    for c in (0.2, 0.5, 0.8):
        exact = _exact_delta(EPSILONS, c, eps)
        for grid in (2, 8, 32, 512):
            p_cum, q_cum = bh.heterogeneous_cumulative(releases, c, grid)
            assert float(np.max(p_cum - math.exp(eps) * q_cum)) <= exact
        assert bh._delta_at(releases, eps, c, 512) >= float(exact) * (1 - 1e-9) - 1e-15


def test_delta_lower_is_below_the_enumerated_maximum_over_the_ratio() -> None:
    """The reported value is the curve of one admitted pair: below the best enumerated pair over
    a fine grid of ratios (up to the smoothness of the maximum) and near it."""
    releases = [(e, 1) for e in EPSILONS]
    for eps in (0.3, 1.2):
        found = bh.heterogeneous_delta_lower(releases, eps)
        best = max(_exact_delta(EPSILONS, c, eps) for c in np.linspace(0.02, 0.98, 97))
        assert 0.95 * float(best) <= found <= float(best) * (1 + 1e-3)


def test_epsilon_lower_is_attained_by_an_enumerated_pair() -> None:
    releases = sorted(((e, 1) for e in EPSILONS), reverse=True)
    delta = 1e-4
    for c in (0.4, 0.6):
        found = bh._epsilon_at(releases, delta, c, 512)
        assert _exact_delta(EPSILONS, c, found) > delta
        assert _exact_delta(EPSILONS, c, found * 1.001 + 1e-9) < delta
    assert bh.heterogeneous_epsilon_lower(releases, delta) > 0.0


def _exact_delta_counts(releases: list[tuple[float, int]], c: float, eps: float) -> mp.mpf:
    """delta(eps) of the composed GRR(fl(c e)) of each (e, count), summed over the numbers of
    low outcomes per epsilon with binomial weights."""
    parts = []
    for e, n in releases:
        (lh, ph, qh), (ll, pl, ql) = _grr(mp.mpf(c * e), mp.mpf(e))
        parts.append(
            [
                (
                    (n - j) * lh + j * ll,
                    mp.binomial(n, j) * ph ** (n - j) * pl**j,
                    mp.binomial(n, j) * qh ** (n - j) * ql**j,
                )
                for j in range(n + 1)
            ]
        )
    ee = mp.e ** mp.mpf(eps)
    total = mp.mpf(0)
    for outcome in itertools.product(*parts):
        if mp.fsum(o[0] for o in outcome) > eps:
            total += mp.fprod(o[1] for o in outcome) - ee * mp.fprod(o[2] for o in outcome)
    return total


@pytest.mark.parametrize("eps", [0.5, 2.0, 4.0])
def test_repeated_epsilons_enter_as_binomial_kernels_below_the_exact_curve(eps: float) -> None:
    releases = [(0.45, 40), (0.3, 17), (0.2, 3)]
    assert all(n >= bh.BINOMIAL_FROM for _, n in releases[:2])
    for c in (0.3, 0.55):
        exact = _exact_delta_counts(releases, c, eps)
        for grid in (3, 16, 64):
            p_cum, q_cum = bh.heterogeneous_cumulative(releases, c, grid)
            assert float(np.max(p_cum - math.exp(eps) * q_cum)) <= exact
        assert bh._delta_at(releases, eps, c, 64) >= float(exact) * (1 - 1e-9) - 1e-15
