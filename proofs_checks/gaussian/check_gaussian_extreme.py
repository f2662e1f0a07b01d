"""Check: the t-form of the Gaussian profile brackets Balle-Wang's value at 80 digits."""

from __future__ import annotations

import mpmath as mp

from dpledger.accountant.gaussian_extreme import gaussian_delta_extreme, gaussian_epsilon_extreme

CASES = ((0.1, 1e-5), (1.0, 1e-10), (1e4, 1e-5), (1e8, 1e-12), (1e12, 1e-100), (1e15, 1e-300))


def reference_epsilon(mu: float, delta: float) -> mp.mpf:
    """Balle-Wang's epsilon of mu-GDP at delta, by bisection in t at 80 digits."""
    with mp.workdps(80):
        m = mp.mpf(mu)
        a, b = mp.mpf(max(-40.0, -mu / 2)), mp.mpf(40)
        for _ in range(120):
            t = (a + b) / 2
            x = (m + t) / mp.sqrt(2)
            value = mp.ncdf(-t) - mp.exp(-t * t / 2 + x * x) * mp.erfc(x) / 2
            a, b = (t, b) if value > delta else (a, t)
        return m * (m / 2 + a)


def test_epsilon_bracket_contains_the_80_digit_value() -> None:
    for mu, delta in CASES:
        upper, lower = gaussian_epsilon_extreme(mu, mu, delta)
        exact = reference_epsilon(mu, delta)
        assert lower <= exact <= upper, (mu, delta, lower, float(exact), upper)
        assert (upper - lower) / exact < 1e-9, (mu, delta)
        high, low = gaussian_delta_extreme(mu, mu, float(exact))
        assert low <= delta <= high, (mu, delta, low, high)
