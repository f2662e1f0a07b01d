"""Delta queries of many components (accountant/pld_delta.py, pld_compositions.py): composed
with their tails cut for the level of interest (again for the delta found when the cut mass
could matter, never below the bracket's lower bound so far), a direction screened on a coarse
window; the brackets stay consistent with the epsilon brackets of the same ledger and with the
whole components' brackets (tests/accountant/test_pld_cut_tails.py)."""

from __future__ import annotations

import re

import pytest

from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.pld_compositions import CUT_SHARE
from dpledger.accountant.pld_delta import RECUT_SHARE
from dpledger.accountant.pld_epsilon import upper_only
from dpledger.accountant.pld_prepared import CUT_COMPONENTS
from dpledger.core.events import ComposedEvent, Event, GaussianEvent, PoissonSampledEvent


def _distinct(n: int = CUT_COMPONENTS + 1, base: float = 0.01, step: float = 0.04) -> Event:
    """``n`` distinct Poisson-sampled Gaussians (noise 1, rates base * (1 + i * step))."""
    return ComposedEvent(
        [PoissonSampledEvent(base * (1 + i * step), GaussianEvent(1.0)) for i in range(n)]
    )


def _budgets(acc: PLDAccountant) -> list[float]:
    """The budgets the compositions made were cut or widened for."""
    return [
        float(found)
        for name, *_ in acc._cache.states
        for found in re.findall(r"(?:cut|reach)=([0-9.e+-]+)", name)
    ]


@pytest.mark.parametrize("delta0", [1e-5, pytest.param(1e-10, marks=pytest.mark.slow)])
def test_delta_brackets_consistent_with_the_epsilon_bracket(delta0: float):
    """The epsilon bracket [lo, up] at delta0 certifies delta(up) <= delta0 <= delta(lo): the
    delta bracket's lower bound at ``up`` is at most delta0, its upper bound at ``lo`` at
    least delta0 (the same accountant: epsilon and delta queries share its compositions)."""
    acc = PLDAccountant()
    acc.compose(_distinct())
    bound = acc.get_epsilon(delta0)
    lo, up = bound.epsilon_lower, bound.epsilon
    assert up <= lo * 1.01
    at_up, at_lo = acc.get_delta(up), acc.get_delta(lo)
    assert at_up.delta_lower <= delta0 <= at_lo.delta
    assert at_up.delta_lower <= at_up.delta and at_lo.delta_lower <= at_lo.delta
    # tight: the upper at ``up`` and the lower at ``lo`` are within a few percent of delta0
    assert at_up.delta >= 0.9 * delta0 and at_lo.delta_lower <= 1.5 * delta0
    assert any("|cut=" in name for name, *_ in acc._cache.states)


def test_cuts_never_below_the_bracket_lower_bound_and_recut_where_it_matters():
    """The add direction's Chernoff level at epsilon 1 is far below the remove direction's
    lower bound: its compositions are cut for that lower bound (budgets at least CUT_SHARE of
    it, rounded down to a power of 100), not widened for a level near 1e-300. The remove
    direction, cut first for its Chernoff level, far above the delta found, is cut again: the
    upper composition the bracket reads holds at most RECUT_SHARE of delta at +infinity."""
    acc = PLDAccountant()
    acc.compose(_distinct())
    bound = acc.get_delta(1.0)
    budgets = _budgets(acc)
    assert budgets and min(budgets) >= 1e-2 * CUT_SHARE * bound.delta_lower
    assert acc._cache.cut_floor == 0.0
    uppers = [
        made
        for (name, _tilt, _points, kind), made in acc._cache.states.items()
        if kind == "upper" and made is not None and name.startswith("remove|cut=")
    ]
    assert len(uppers) == 2
    assert min(made.inf_mass for made in uppers) <= RECUT_SHARE * bound.delta
    assert max(made.inf_mass for made in uppers) > RECUT_SHARE * bound.delta


def test_upper_only_delta_queries_recut_and_cut_no_lower_than_the_upper_so_far():
    """Within ``upper_only`` the remove direction is cut again for the delta found (its upper
    bound is the full query's), and the add direction for no level below it."""
    acc = PLDAccountant()
    acc.compose(_distinct())
    with upper_only():
        bound = acc.get_delta(1.0)
    assert min(_budgets(acc)) >= 1e-2 * CUT_SHARE * bound.delta
    # the full query (its lower-bound compositions added) reads the same upper bound
    full = acc.get_delta(1.0)
    assert bound.delta == full.delta and full.delta_lower >= full.delta / 1.01
