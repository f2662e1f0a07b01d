"""Numeric checks of cut components: the cut connect-the-dots pair stays above the uncut curve
and the cut dominated pair below it, on and off the grid, below and beyond the cut."""

from __future__ import annotations

import numpy as np
import pytest

from dpledger.accountant.pld_engine import discretise, discretise_lower
from dpledger.accountant.pld_prepared import _cut_profile
from dpledger.accountant.profiles import gaussian_profile, poisson_remove
from dpledger.accountant.profiles_base import discrete_delta


@pytest.mark.parametrize(("q", "level"), [(1e-3, 1e-12), (1e-2, 1e-9), (0.1, 1e-15)])
def test_cut_pairs_bracket_the_uncut_curve(q: float, level: float) -> None:
    profile = poisson_remove(gaussian_profile(1.0), q)
    cut = _cut_profile(profile, level)
    assert cut.loss_hi < profile.loss_hi and cut.delta is profile.delta
    assert float(profile(np.array([cut.loss_hi]))[0]) <= level
    h = cut.loss_hi / 500
    eps = np.concatenate(
        [np.linspace(-0.5, 0.0, 41), np.linspace(0.0, 2.0 * cut.loss_hi, 397) + h / 3]
    )
    truth = profile(eps) / (1 + 1e-9)
    upper = discretise(cut, h)
    assert 0.0 < upper.inf_mass <= level * (1 + 1e-6)
    up_curve = discrete_delta(upper.losses, upper.masses, upper.inf_mass)(eps)
    assert np.all(up_curve >= truth * (1 - 1e-9))
    lower = discretise_lower(cut, h)
    assert lower is not None and lower.losses[-1] <= cut.loss_hi + 2 * h
    low_curve = discrete_delta(lower.losses, lower.masses, 0.0)(eps)
    assert np.all(low_curve <= profile(eps) * (1 + 1e-9) + 1e-15)
    assert np.all(low_curve[eps > lower.losses[-1]] == 0.0)


def test_a_level_below_the_whole_curve_cuts_nothing() -> None:
    profile = poisson_remove(gaussian_profile(1.0), 0.5)
    assert _cut_profile(profile, 1e-300) is profile
