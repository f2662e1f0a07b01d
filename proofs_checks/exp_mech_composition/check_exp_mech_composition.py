"""The exponential mechanism's exact curve and the attained composition of bounded-range pairs
against multi-precision values and enumeration."""

from __future__ import annotations

import itertools
import math

import mpmath as mp
import pytest

from dpledger.accountant import exp_mech_composition as emc
from dpledger.accountant.exp_mech_composition import (
    br_composed_delta_lower,
    br_composed_epsilon_lower,
    br_delta_bracket,
)

mp.mp.dps = 40


def _pair(t: mp.mpf, eps0: mp.mpf) -> list[tuple[mp.mpf, mp.mpf, mp.mpf]]:
    """(loss, P mass, Q mass) of GRR(t), from its definition (E_Q[e^L] = 1)."""
    q_low = (1 - mp.e ** (-t)) / (1 - mp.e ** (-eps0))
    q_high = 1 - q_low
    return [(t, q_high * mp.e**t, q_high), (t - eps0, q_low * mp.e ** (t - eps0), q_low)]


def _binomial_masses(t: mp.mpf, eps0: mp.mpf, k: int) -> list[tuple[mp.mpf, mp.mpf, mp.mpf]]:
    (lh, ph, qh), (_, pl, ql) = _pair(t, eps0)
    return [
        (
            k * lh - j * eps0,
            mp.binomial(k, j) * ph ** (k - j) * pl**j,
            mp.binomial(k, j) * qh ** (k - j) * ql**j,
        )
        for j in range(k + 1)
    ]


def exact_delta(t: float, eps0: float, k: int, eps: float) -> mp.mpf:
    """delta(eps) of k releases of GRR(t): the hockey-stick sum over the composed outcomes."""
    e = mp.mpf(eps)
    return mp.fsum(
        p - mp.e**e * q for loss, p, q in _binomial_masses(mp.mpf(t), mp.mpf(eps0), k) if loss > e
    )


def exact_epsilon(t: float, eps0: float, k: int, delta: float) -> mp.mpf:
    """epsilon(delta) of k releases of GRR(t), by bisection on the exact curve."""
    lo, hi = mp.mpf(-k * eps0), mp.mpf(k * eps0)
    if exact_delta(t, eps0, k, 0.0) <= delta:
        return mp.mpf(0)
    for _ in range(120):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if exact_delta(t, eps0, k, float(mid)) > delta else (lo, mid)
    return hi


def _best_over_t(f, eps0: float) -> mp.mpf:  # type: ignore[no-untyped-def]
    """max over t of f(t): a grid of 120 points, then golden section around the best."""
    ts = [mp.mpf(eps0) * (i + mp.mpf(1) / 2) / 120 for i in range(120)]
    vals = [f(t) for t in ts]
    i = max(range(120), key=lambda n: vals[n])
    lo, hi = mp.mpf(eps0) * max(i - 1, 0) / 120, mp.mpf(eps0) * min(i + 2, 120) / 120
    g = (mp.sqrt(5) - 1) / 2
    for _ in range(60):
        a, b = hi - g * (hi - lo), lo + g * (hi - lo)
        lo, hi = (lo, b) if f(a) >= f(b) else (a, hi)
    return max(vals[i], f((lo + hi) / 2))


def _mp_delta(t: mp.mpf, eps0: float, k: int, eps: float) -> mp.mpf:
    e = mp.mpf(eps)
    return mp.fsum(
        p - mp.e**e * q for loss, p, q in _binomial_masses(t, mp.mpf(eps0), k) if loss > e
    )


def _mp_epsilon(t: mp.mpf, eps0: float, k: int, delta: float) -> mp.mpf:
    """epsilon(delta) of GRR(t)^k in closed form: the curve is max_m P[J < m] - e^eps Q[J < m]
    (J the number of low outcomes), so epsilon is the largest log((P[J<m] - delta) / Q[J<m])."""
    p_cum, q_cum, best = mp.mpf(0), mp.mpf(0), mp.mpf(0)
    for _, p, q in _binomial_masses(t, mp.mpf(eps0), k):
        p_cum, q_cum = p_cum + p, q_cum + q
        if p_cum > delta:
            best = max(best, mp.log((p_cum - delta) / q_cum))
    return best


SLOW = pytest.mark.slow
CASES = [
    (2.0, 5, 1e-3),
    pytest.param(0.1, 10, 1e-6, marks=SLOW),
    pytest.param(1.0, 10, 1e-5, marks=SLOW),
    pytest.param(0.5, 30, 1e-8, marks=SLOW),
    pytest.param(0.05, 40, 1e-10, marks=SLOW),
    pytest.param(3.0, 2, 1e-4, marks=SLOW),
]


@pytest.mark.parametrize(("eps0", "k", "delta"), CASES)
def test_epsilon_lower_is_the_maximum_over_t_at_40_digits(
    eps0: float, k: int, delta: float
) -> None:
    truth = _best_over_t(lambda t: _mp_epsilon(t, eps0, k, delta), eps0)
    got = br_composed_epsilon_lower(delta, eps0, k)
    assert truth * (1 - mp.mpf(1e-7)) <= got <= truth * (1 + mp.mpf(1e-12)), (got, truth)


@pytest.mark.parametrize(("eps0", "k", "delta"), CASES)
def test_every_t_gives_a_certified_lower_bound(eps0: float, k: int, delta: float) -> None:
    for i in range(7):
        t = eps0 * (i + 0.37) / 7
        p_cum, log_q = emc._cumulative(t, eps0, k)
        masses = _binomial_masses(mp.mpf(t), mp.mpf(eps0), k)
        for m in (1, k // 2 + 1, k + 1):
            assert p_cum[m - 1] <= mp.fsum(p for _, p, _ in masses[:m])
            assert log_q[m - 1] >= mp.log(mp.fsum(q for _, _, q in masses[:m]))
        got = emc._grr_epsilon(t, eps0, k, delta)
        assert got <= _mp_epsilon(mp.mpf(t), eps0, k, delta)
        for eps in (0.0, 0.3 * eps0 * k, 0.8 * eps0 * k):
            assert emc._grr_delta(t, eps0, k, eps) <= _mp_delta(mp.mpf(t), eps0, k, eps)


@pytest.mark.parametrize(
    ("eps0", "k", "eps"),
    [
        (3.0, 2, 1.0),
        pytest.param(0.1, 10, 0.3, marks=SLOW),
        pytest.param(1.0, 10, 4.0, marks=SLOW),
        pytest.param(0.5, 30, 2.0, marks=SLOW),
    ],
)
def test_delta_lower_is_the_maximum_over_t_at_40_digits(eps0: float, k: int, eps: float) -> None:
    truth = _best_over_t(lambda t: _mp_delta(t, eps0, k, eps), eps0)
    got = br_composed_delta_lower(eps, eps0, k)
    assert truth * (1 - mp.mpf(1e-7)) <= got <= truth * (1 + mp.mpf(1e-12)), (got, truth)


@pytest.mark.parametrize(("eps0", "k"), [(1.0, 3), (0.4, 4)])
def test_binomial_form_equals_enumeration_of_the_composed_outcomes(eps0: float, k: int) -> None:
    t = mp.mpf(eps0) * 3 / 7
    for eps in (-0.2, 0.0, 0.5, 1.1):
        total = mp.mpf(0)
        for combo in itertools.product(_pair(t, mp.mpf(eps0)), repeat=k):
            loss = mp.fsum(c[0] for c in combo)
            if loss > eps:
                total += mp.fprod(c[1] for c in combo) - mp.e ** mp.mpf(eps) * mp.fprod(
                    c[2] for c in combo
                )
        assert abs(total - _mp_delta(t, eps0, k, eps)) < mp.mpf(10) ** -30


@pytest.mark.parametrize(
    ("eps0", "eps"),
    [(1.0, 0.5), pytest.param(2.0, 1.0, marks=SLOW), pytest.param(0.5, 0.1, marks=SLOW)],
)
def test_one_common_t_is_the_best_pair_of_two_releases(eps0: float, eps: float) -> None:
    """Two releases at distinct t1, t2 (a 40 x 40 grid) reach no more than one common t."""
    common = _best_over_t(lambda t: _mp_delta(t, eps0, 2, eps), eps0)
    grid = [mp.mpf(eps0) * (i + mp.mpf(1) / 2) / 40 for i in range(40)]
    for t1, t2 in itertools.combinations(grid, 2):
        total = mp.mpf(0)
        for a, b in itertools.product(_pair(t1, mp.mpf(eps0)), _pair(t2, mp.mpf(eps0))):
            if a[0] + b[0] > eps:
                total += a[1] * b[1] - mp.e ** mp.mpf(eps) * a[2] * b[2]
        assert total <= common * (1 + mp.mpf(1e-20))


def _single_exact(eps: float, eps0: float) -> mp.mpf:
    e, e0 = mp.mpf(eps), mp.mpf(eps0)
    if e >= e0:
        return mp.mpf(0)
    if e <= -e0:
        return 1 - mp.e**e
    return (mp.e ** (e0 / 2) - mp.e ** (e / 2)) ** 2 / (mp.e**e0 - 1)


@pytest.mark.parametrize("eps0", [1e-6, 1e-3, 0.1, 1.0, 5.0, 50.0, 800.0])
def test_single_release_bracket_contains_the_exact_curve(eps0: float) -> None:
    for frac in (-1.5, -1.0, -0.99, -0.5, 0.0, 1e-9, 0.3, 0.9, 0.999999, 1.0, 2.0):
        eps = frac * eps0
        lo, hi = br_delta_bracket(eps, eps0)
        truth = _single_exact(eps, eps0)
        assert lo <= truth <= hi
        # the charged error grows with the magnitudes of eps, eps0 and the curve's logarithm
        size = abs(eps) + eps0 + (abs(mp.log(truth)) if truth > 0 else 0) + 10
        assert hi - lo <= truth * mp.mpf(4e-15) * size + mp.mpf(1e-300)


@pytest.mark.parametrize("eps0", [1e-6, 1e-3, 0.1, 1.0, 5.0, 50.0, 800.0])
def test_single_release_epsilon_is_the_exact_inverse_rounded_down(eps0: float) -> None:
    for delta in (1e-12, 1e-6, 1e-3, 0.05, 0.2):
        got = br_composed_epsilon_lower(delta, eps0, 1)
        # the exact inverse of the closed form, at 40 digits
        e0 = mp.mpf(eps0)
        root = mp.sqrt(mp.mpf(delta) * (1 - mp.e ** (-e0)))
        truth = max(mp.mpf(0), e0 + 2 * mp.log(1 - root))
        assert got <= truth
        assert got >= truth * (1 - mp.mpf(1e-12)) - mp.mpf(1e-300)
        if got > 0.0:
            assert _single_exact(got, eps0) >= delta  # the curve still exceeds delta there


def test_sub_compositions_are_used_beyond_the_cap() -> None:
    big = br_composed_epsilon_lower(1e-6, 1e-3, 10 * emc.MAX_BR_COUNT)
    capped = br_composed_epsilon_lower(1e-6, 1e-3, emc.MAX_BR_COUNT)
    assert big == capped > 0.0
    assert math.isfinite(big)
