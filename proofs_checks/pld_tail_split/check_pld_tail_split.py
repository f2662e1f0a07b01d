"""Numeric checks of the split composition: it brackets the same composition made in one piece."""

from __future__ import annotations

import numpy as np
import pytest

from dpledger.accountant.pld_engine import compose, delta_at, discretise, discretise_lower
from dpledger.accountant.pld_split import compose_split
from dpledger.accountant.profiles import gaussian_profile, poisson_remove


@pytest.mark.parametrize("q", [0.01, 0.05])
def test_split_and_whole_compositions_agree_where_both_are_accurate(q: float) -> None:
    """At delta ~ 1e-6 the plain FFT is accurate; the split one must land in the same place, and
    each one's upper reading must be above the other's lower reading."""
    profile = poisson_remove(gaussian_profile(1.0), q)
    h, k, window = 1e-3, 50, (-1.0, 8.0)
    for pld, upper in ((discretise(profile, h), True), (discretise_lower(profile, h), False)):
        assert pld is not None
        whole = compose([(pld, k)], window)
        split = compose_split([(pld, k)], window, lambda _g: 0.0, [(pld, k)], 1e-6, upper=upper)
        assert split is not None
        compared = 0
        for eps in (0.0, 0.05, 0.1, 0.5, 1.0, 2.0):
            a = delta_at(whole, eps, upper=upper)
            b = delta_at(split, eps, upper=upper)
            if a >= 1e-7:  # above the plain FFT's round-off
                assert abs(a - b) <= 1e-3 * a
                compared += 1
            assert delta_at(split, eps, upper=False) <= delta_at(whole, eps, upper=True)
            assert delta_at(whole, eps, upper=False) <= delta_at(split, eps, upper=True)
        assert compared >= 2


def test_remainder_bound_is_the_second_factorial_moment() -> None:
    """Three-point PLD, exact convolution: the terms with two tail steps are all of delta above
    one tail loss, and the charged remainder covers them."""
    tail = 1e-9
    masses = np.array([1 - tail, 0.0, 0.0, 0.0, tail])
    from dpledger.accountant.pld_engine import DiscretePLD

    pld = DiscretePLD(0, masses, 0.0, 1.0, dominated=True)
    split = compose_split([(pld, 6)], (-2.0, 30.0), lambda _g: 0.0, [(pld, 6)], 1e-9, upper=True)
    assert split is not None
    exact = np.array([1.0])
    for _ in range(6):
        exact = np.convolve(exact, masses)
    two_or_more = float(exact[5:].sum())
    assert split.dropped >= two_or_more
    assert split.dropped <= 1.01 * (6 * tail) ** 2 / 2
