"""The computed miss probability of an audit on a Gaussian shift."""

from __future__ import annotations

import numpy as np
import pytest

from dpledger.audit import stats
from dpledger.audit.power import _Counts, shift_false_negative_bound
from dpledger.core.errors import InvalidParameterError


@pytest.mark.parametrize(
    ("p_num", "p_den", "level"), [(0.3, 0.05, 1.0), (0.1, 0.002, 2.5), (0.5, 0.5, 0.1)]
)
def test_binomial_probability_matches_sampling(p_num: float, p_den: float, level: float) -> None:
    n, alpha, delta = 400, 0.01, 1e-3
    counts = _Counts(n, alpha)
    rng = np.random.default_rng(0)
    k_num = rng.binomial(n, p_num, size=50_000)
    k_den = rng.binomial(n, p_den, size=50_000)
    bounds = stats.epsilon_lower_bounds(k_num, n, k_den, n, delta, alpha)
    freq = float(np.mean(bounds >= level))
    hi = float(counts.prob_at_least(p_num, p_den, delta, level, strict=False)[0])
    lo = float(counts.prob_at_least(p_num, p_den, delta, level, strict=False, upper=False)[0])
    assert lo <= hi <= lo + 1e-25
    sd = np.sqrt(max(freq * (1 - freq), 1e-6) / 50_000)
    assert abs(freq - hi) < 5 * sd + 1e-4, (freq, hi)


def test_bound_is_small_for_a_clear_violation_and_trivial_above_the_ceiling() -> None:
    small = shift_false_negative_bound(50.0, 750, 2250, 1e-3, 0.05, 3.14)
    assert 0 < small < 1e-6
    ceiling = stats.ceiling(2250, 2250, 1e-3, 0.05)
    assert shift_false_negative_bound(50.0, 750, 2250, 1e-3, 0.05, ceiling + 0.1) == 1.0


def test_bound_grows_with_the_claim() -> None:
    values = [shift_false_negative_bound(3.0, 500, 1000, 0.1, 0.05, c) for c in (1.5, 2.6)]
    assert values[0] <= values[1]
    assert values[0] < 0.01


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"mu": 0.0}, "mu"), ({"n_search": 2000}, "n_search"), ({"claim": 0.0}, "claim")],
)
def test_bad_input(kwargs: dict[str, float], field: str) -> None:
    args = {
        "mu": 2.0,
        "n_search": 500,
        "n_test": 1000,
        "delta": 0.1,
        "alpha": 0.05,
        "claim": 1.0,
        **kwargs,
    }
    with pytest.raises(InvalidParameterError) as err:
        shift_false_negative_bound(**args)  # type: ignore[arg-type]
    assert err.value.field == field
