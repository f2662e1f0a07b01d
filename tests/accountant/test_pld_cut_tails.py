"""Many components composed with their far tails cut (accountant/pld_prepared.py
``cut_tails``, chosen per level of delta by ``Compositions.cut``): the cut curves end where
they fall below the budget, the budget follows the delta queried, and the brackets stay sound
against the uncut components and against dp-accounting."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.pld_compositions import MIN_POINTS
from dpledger.accountant.pld_delta import SCREEN_LEAST_POINTS
from dpledger.accountant.pld_prepared import CUT_COMPONENTS, Prepared, cut_tails
from dpledger.core.events import ComposedEvent, Event, GaussianEvent, PoissonSampledEvent

#: dp-accounting's PLD of the leaves of ``_distinct(N)`` at h = 1e-4: the connect-the-dots
#: (pessimistic) epsilon, an estimate from above of the truth, and the optimistic one, an
#: estimate from below, per delta (19 s each)
DP_ACCOUNTING = {
    1e-5: (0.7321470677460018, 0.7309469583998492),
    1e-10: (2.3998544317449677, 2.3986504055586964),
}
#: distinct leaves of the tests (more than CUT_COMPONENTS)
N = 24


def _distinct(n: int = N, base: float = 0.01, step: float = 0.04) -> Event:
    """``n`` distinct Poisson-sampled Gaussians (noise 1, rates base * (1 + i * step))."""
    return ComposedEvent(
        [PoissonSampledEvent(base * (1 + i * step), GaussianEvent(1.0)) for i in range(n)]
    )


def _prepared(n: int) -> Prepared:
    acc = PLDAccountant()
    acc.compose(_distinct(n))
    prep = acc._prepared()
    assert prep is not None
    return prep


def test_cut_curves_end_below_the_budget_and_keep_the_rest():
    prep = _prepared(N)
    cut = cut_tails(prep, 1e-8)
    assert cut is not None and cut.cut == 1e-8
    assert cut.pure_cap == prep.pure_cap and cut.names == prep.names
    total = sum(k for _, k in prep.comps)
    shorter = 0
    for (whole, k), (part, k_cut) in zip(prep.comps, cut.comps, strict=True):
        assert k == k_cut
        for name in ("remove", "add"):
            a, b = getattr(whole, name), getattr(part, name)
            assert b.loss_lo == a.loss_lo and b.loss_hi <= a.loss_hi
            assert b.delta is a.delta and b.exact == a.exact
            if b.loss_hi < a.loss_hi:
                shorter += 1
                # the curve at the end of the cut range is within the budget's share
                assert float(a(np.array([b.loss_hi]))[0]) <= 1e-8 / total
                assert b.accurate_hi <= b.loss_hi
        # the lower pairs are cut like the upper ones (the same curves stay the same objects)
        assert (part.lower_remove is part.remove) == (whole.lower_remove is whole.remove)
    assert shorter >= len(prep.comps)
    assert cut_tails(prep, 1e-8) is cut  # cached
    assert cut_tails(cut, 1e-12) is None  # a cut preparation is not cut again


def test_few_components_are_not_cut():
    prep = _prepared(CUT_COMPONENTS)
    assert len(prep.comps) == CUT_COMPONENTS
    assert cut_tails(prep, 1e-8) is None


def test_the_cut_mass_is_charged_to_the_upper_composition():
    """The composition of the cut components holds at most the budget at +infinity, and at
    least what the curves hold at the ends of their cut ranges."""
    acc = PLDAccountant()
    acc.compose(_distinct())
    prep = acc._prepared()
    assert prep is not None
    cache = acc._cache
    tag, cut = cache.cut(prep, 1e-5)
    assert tag == "|cut=1e-10" and cut.cut == 1e-10
    composed = cache.composed(prep, "remove", 0.0, 1e-5)
    assert composed is not None
    at_ends = sum(
        k * float(whole.remove(np.array([part.remove.loss_hi]))[0]) * 0.99
        for (whole, k), (part, _) in zip(prep.comps, cut.comps, strict=True)
    )
    assert at_ends <= composed.inf_mass <= 1e-10 * 1.001


def test_a_whole_profile_reads_the_uncut_components():
    acc = PLDAccountant()
    acc.compose(_distinct())
    prep = acc._prepared()
    assert prep is not None
    assert acc._cache.profile(prep, [0.2], points=1 << 10)[0] > 0.0
    assert acc._cache.cutting
    assert all("|" not in name for name, *_ in acc._cache.states)


@pytest.mark.parametrize("delta", [1e-5, pytest.param(1e-10, marks=pytest.mark.slow)])
def test_brackets_sound_against_the_uncut_components(delta: float):
    """Every bound with cut tails is consistent with the bracket of the whole components: its
    upper bound above their certified lower bound, its lower bound below their upper bound
    (epsilon and delta queries)."""
    event = _distinct()
    cut_acc, whole_acc = PLDAccountant(), PLDAccountant()
    cut_acc.compose(event)
    whole_acc.compose(event)
    whole_acc._cache.cutting = False
    a, b = cut_acc.get_epsilon(delta), whole_acc.get_epsilon(delta)
    assert a.epsilon >= b.epsilon_lower and a.epsilon_lower <= b.epsilon
    assert a.epsilon <= a.epsilon_lower * 1.01
    # no upper bound moves down by more than the whole components' bracket's width
    assert a.epsilon >= b.epsilon - (b.epsilon - b.epsilon_lower)
    for epsilon in (1.0,):
        x, y = cut_acc.get_delta(epsilon), whole_acc.get_delta(epsilon)
        assert x.delta >= y.delta_lower and x.delta_lower <= y.delta
        assert math.isfinite(x.delta) and x.delta <= 1.01 * y.delta


@pytest.mark.parametrize("delta", sorted(DP_ACCOUNTING))
def test_distinct_leaves_against_dp_accounting(delta: float):
    """Within 1 % and consistent with dp-accounting's two estimates of the same leaves."""
    pessimistic, optimistic = DP_ACCOUNTING[delta]
    acc = PLDAccountant()
    acc.compose(_distinct())
    bound = acc.get_epsilon(delta)
    assert bound.epsilon <= bound.epsilon_lower * 1.01
    assert bound.epsilon >= optimistic
    assert bound.epsilon_lower <= pessimistic


def test_delta_queries_compose_cut_components():
    """A delta query composes the components cut for its level of interest (a Chernoff
    estimate, then the delta found; never below the bracket's lower bound so far): its bracket
    is the whole components' to a small share of delta. The add direction, which cannot decide
    the bracket, is screened on a window of SCREEN_LEAST_POINTS (not MIN_POINTS), keyed apart."""
    event = _distinct(20)
    acc, whole = PLDAccountant(), PLDAccountant()
    acc.compose(event)
    whole.compose(event)
    whole._cache.cutting = False
    x, y = acc.get_delta(1.0), whole.get_delta(1.0)
    names = {name for name, *_ in acc._cache.states}
    assert all("|cut=" in name for name in names)
    screens = [
        made
        for (name, _tilt, _points, _kind), made in acc._cache.states.items()
        if f"|least={SCREEN_LEAST_POINTS}" in name
    ]
    assert screens and all(s is not None and s.upper.size < MIN_POINTS for s in screens)
    assert acc._cache.cut_floor == 0.0 and acc._cache.cutting
    assert x.delta >= y.delta_lower and x.delta_lower <= y.delta
    assert abs(x.delta - y.delta) <= 1e-4 * y.delta
    assert abs(x.delta_lower - y.delta_lower) <= 1e-4 * y.delta
