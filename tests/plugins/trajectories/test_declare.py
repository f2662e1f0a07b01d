from __future__ import annotations

import math

import pytest
from scipy.stats import norm

from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import (
    ComposedEvent,
    GaussianEvent,
    NoOpEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
)
from dpledger.plugins.trajectories.declare import (
    Phase,
    TrajectoryParams,
    WarmStart,
    analytic_gaussian_multiplier,
    declare,
    declare_marginals,
    gdp_delta,
    gdp_epsilon,
    paper_gdp_mu,
    subsample_times,
)


def _delta(s: float, eps: float) -> float:
    return float(norm.cdf(0.5 / s - eps * s) - math.exp(eps) * norm.cdf(-0.5 / s - eps * s))


def test_analytic_gaussian_is_tight_and_safe() -> None:
    # Balle & Wang (2018): eps = 1, delta = 1e-5 needs sigma ~ 3.73 (classical: 4.84)
    s = analytic_gaussian_multiplier(1.0, 1e-5)
    assert s == pytest.approx(3.7306, abs=5e-4)
    for eps, delta in [(1.0, 1e-5), (0.5, 5e-4), (4.0, 1e-8)]:
        s = analytic_gaussian_multiplier(eps, delta)
        assert _delta(s, eps) <= delta
        assert _delta(s * (1 - 1e-6), eps) > delta


def test_paper_gdp_numbers() -> None:
    assert paper_gdp_mu(0.5, 4, 1.0) == pytest.approx(math.sqrt(math.e - 1.0))
    # seed-note figure: (1, 5e-4)-DP corresponds to mu = 0.361
    assert gdp_epsilon(0.361, 5e-4) == pytest.approx(1.0, abs=0.01)
    assert gdp_delta(0.361, gdp_epsilon(0.361, 5e-4)) <= 5e-4


def test_event_level_structure() -> None:
    p = TrajectoryParams(
        K=20, tau=0.7, rho=20 / 674, warm_start=WarmStart("mean", epsilon=1.0, delta=5e-4)
    )
    dec = declare_marginals(p, Adjacency(), 674, 10)
    s = analytic_gaussian_multiplier(1.0, 5e-4)
    step = PoissonSampledEvent(20 / 674, GaussianEvent(0.7))
    expected = ComposedEvent([GaussianEvent(s), SelfComposedEvent(step, 20)])
    assert dec.parallel and len(dec.per_marginal) == 10
    assert all(e == expected for e in dec.per_marginal)
    assert dec.event == expected == declare(p, Adjacency(), 674, 10)
    assert dec.account_adjacency == Adjacency()


def test_replace_one_doubles_calibrated_multiplier() -> None:
    ws = WarmStart("mean", epsilon=1.0, delta=5e-4)
    p = TrajectoryParams(warm_start=ws)
    ev = declare(p, Adjacency(relation="replace_one"), 100, 3)
    assert isinstance(ev, ComposedEvent)
    g = ev.events[0]
    assert isinstance(g, GaussianEvent)
    assert g.noise_multiplier == pytest.approx(2 * analytic_gaussian_multiplier(1.0, 5e-4))


def test_mixture_splits_into_two_gaussians_of_same_total() -> None:
    p = TrajectoryParams(warm_start=WarmStart("mixture", noise_multiplier=3.0))
    ev = declare(p, Adjacency(), 100, 3)
    assert isinstance(ev, ComposedEvent)
    a, b = ev.events[0], ev.events[1]
    assert isinstance(a, GaussianEvent) and isinstance(b, GaussianEvent)
    total = (a.noise_multiplier**-2 + b.noise_multiplier**-2) ** -0.5
    assert total == pytest.approx(3.0)


def test_annealing_phases_and_user_level() -> None:
    sched = (Phase(10, 0.005, 2.5), Phase(5, 0.003, 1.5), Phase(5, 0.001, 1.0))
    p = TrajectoryParams(rho=0.01, schedule=sched)
    per = declare_marginals(p, Adjacency(), 3000, 10).event
    assert isinstance(per, ComposedEvent)
    assert [e.count for e in per.events] == [10, 5, 5]  # type: ignore[attr-defined]
    user = Adjacency(unit="user", unit_key="id", contribution="time_points", max_contributions=10)
    dec = declare_marginals(p, user, 3000, 10)
    assert not dec.parallel
    assert dec.event == SelfComposedEvent(per, 10)
    assert dec.account_adjacency == Adjacency()


def test_time_subset_leaves_other_marginals_untouched() -> None:
    sub = subsample_times(10, 3, seed=1)
    assert sub[0] == 0 and sub[-1] == 9 and len(sub) == 5
    p = TrajectoryParams(time_subset=sub)
    dec = declare_marginals(p, Adjacency(), 100, 10)
    used = [i for i, e in enumerate(dec.per_marginal) if not isinstance(e, NoOpEvent)]
    assert tuple(used) == sub


def test_bad_declarations() -> None:
    with pytest.raises(InvalidParameterError) as err:
        declare(
            TrajectoryParams(), Adjacency(unit="user", unit_key="id", max_contributions=3), 100, 5
        )
    assert err.value.field == "adjacency.contribution"
    with pytest.raises(InvalidParameterError) as err:
        declare(TrajectoryParams(), Adjacency(), [10, 10], 3)
    assert err.value.field == "n_per_time"
    with pytest.raises(InvalidParameterError) as err:
        WarmStart("mean", epsilon=1.0, delta=1e-3, noise_multiplier=2.0)
    assert err.value.field == "warm_start"
    with pytest.raises(InvalidParameterError) as err:
        TrajectoryParams(rho=1.5)
    assert err.value.field == "rho"


def test_declared_event_certified_bound_if_available() -> None:
    """The calibrated warm start alone must certify (1, 5e-4) when an accountant is present."""
    select = pytest.importorskip("dpledger.accountant.select")
    s = analytic_gaussian_multiplier(1.0, 5e-4)
    try:
        sel = select.account(GaussianEvent(s), Adjacency(), delta=5e-4)
    except Exception as exc:  # no backend installed yet
        pytest.skip(f"no accountant backend: {exc}")
    assert sel.bound.epsilon == pytest.approx(1.0, abs=0.02)
