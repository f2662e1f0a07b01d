"""The certified odometer of each adaptive rule, against its theorem.

The formulas are recomputed here independently (mpmath root finding and quadrature of the
mixture integral, never the closed form the code uses); hypothesis plays an adaptive analyst
whose next step depends on what was booked; the odometer must never decrease, never fall
below the exact epsilon of the booked Gaussians composed (a lower bound for any valid
odometer), equal its formula, and, simulated on an adversary that raises the next step's
privacy loss when the loss so far is high, be crossed on at most delta_o of the paths.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import optimize
from scipy.stats import norm

from dpledger.budget import odometer as odo
from dpledger.budget import rules
from dpledger.budget.report import status_lines
from dpledger.budget.status import status
from dpledger.budget.store import book, check, check_declaration, declare
from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import GaussianEvent, LaplaceEvent

EPS, DELTA = 1.0, 1e-6
TOTAL = (EPS, DELTA)


def _params(rule: str) -> dict[str, Any]:
    return odo.odometer_defaults(rule, TOTAL, rules.default_params(rule, *TOTAL))


def mixture_integral(x: float, v: float, rho: float) -> float:
    """The half-normal mixture of exp(lam x - lam^2 v / 2), by mpmath quadrature."""
    with mpmath.workdps(15):
        dens = 2 * mpmath.sqrt(rho / (2 * mpmath.pi))

        def f(lam: Any) -> Any:
            return mpmath.exp(lam * x - lam**2 * (v + rho) / 2) * dens

        return float(mpmath.quad(f, [0, 1 / mpmath.sqrt(v + rho), mpmath.inf]))


def renyi_exact(orders: list[float], rdp: list[float], delta: float) -> float:
    """L with mean_a exp((a-1)(L - R(a))) = 1/delta, by mpmath's root finder."""
    with mpmath.workdps(30):
        k = len(orders)

        def g(level: Any) -> Any:
            return (
                sum(mpmath.exp((a - 1) * (level - r)) for a, r in zip(orders, rdp, strict=True)) / k
                - 1 / delta
            )

        lo = min(r + math.log(1 / delta) / (a - 1) for a, r in zip(orders, rdp, strict=True))
        hi = min(r + math.log(k / delta) / (a - 1) for a, r in zip(orders, rdp, strict=True))
        return float(
            mpmath.findroot(g, (mpmath.mpf(lo) - 1e-9, mpmath.mpf(hi) + 1e-9), solver="anderson")
        )


def gaussian_exact_epsilon(mu: float, delta: float) -> float:
    """The exact epsilon(delta) of mu-GDP (Dong, Roth & Su 2022), by scipy."""

    def gap(e: float) -> float:
        return float(norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2)) - delta

    return 0.0 if gap(0.0) <= 0 else float(optimize.brentq(gap, 0.0, 100.0, xtol=1e-13))


# --- the formulas ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("v", "rho", "delta"), [(0.05, 0.002, 1e-6), (1.0, 0.03, 1e-3), (4.0, 1.0, 0.05)]
)
def test_mixture_boundary_is_where_the_mixture_reaches_one_over_delta(
    v: float, rho: float, delta: float
) -> None:
    x = odo.mixture_boundary(v, rho, delta)
    assert mixture_integral(x, v, rho) >= 1 / delta * (1 - 1e-12)
    assert mixture_integral(x * (1 - 1e-8), v, rho) < 1 / delta


@pytest.mark.parametrize("sigma", [2.0, 10.0, 60.0])
def test_renyi_odometer_is_the_mixture_root_and_within_the_union_bound(sigma: float) -> None:
    orders = list(rules.DEFAULT_ORDERS)
    rdp = [7 * a / (2 * sigma**2) for a in orders]  # seven Gaussian steps
    got = odo.renyi_odometer(orders, rdp, DELTA)
    exact = renyi_exact(orders, rdp, DELTA)
    assert exact <= got <= exact + 1e-9 * (1 + exact)
    union = min(
        r + math.log(len(orders) / DELTA) / (a - 1) for a, r in zip(orders, rdp, strict=True)
    )
    assert got <= union


def test_nothing_booked_spends_nothing_and_an_unbounded_order_is_skipped() -> None:
    for rule in ("renyi", "gdp", "approx", "pld"):
        params = _params(rule)
        assert odo.odometer(rule, TOTAL, params, rules.initial_state(rule, params))["epsilon"] == 0
    orders = [2.0, 4.0]
    assert odo.renyi_odometer(orders, [0.1, math.inf], DELTA) == odo.renyi_odometer(
        [2.0], [0.1], DELTA / 2
    )
    assert odo.renyi_odometer(orders, [math.inf, math.inf], DELTA) == math.inf


# --- adaptive sequences ------------------------------------------------------------------


SIGMAS = (1.5, 3.0, 12.0, 48.0, 96.0)


@functools.cache
def _charge(rule: str, sigma: float) -> dict[str, Any]:
    return rules.charge(rule, _params(rule), GaussianEvent(sigma), "add_remove")


def _adaptive_run(rule: str, data: st.DataObject, steps: int) -> list[tuple[float, dict[str, Any]]]:
    """Book Gaussian steps chosen from the odometer so far; (sigma, odometer) after each."""
    params = _params(rule)
    state = rules.initial_state(rule, params)
    out = []
    for _ in range(steps):
        so_far = odo.odometer(rule, TOTAL, params, state)["epsilon"]
        # spend fast early, slowly once the odometer is up
        choices = SIGMAS[:3] if so_far < 0.5 else SIGMAS[2:]
        sigma = data.draw(st.sampled_from(choices), label="sigma")
        decision = rules.decide(rule, TOTAL, params, state, _charge(rule, sigma))
        state = decision.state  # the odometer keeps counting past the filter's total
        out.append((sigma, odo.odometer(rule, TOTAL, params, state)))
    return out


@pytest.mark.parametrize("rule", ["renyi", "gdp", "approx"])
@settings(max_examples=6, deadline=None)
@given(data=st.data())
def test_odometer_grows_bounds_the_composition_and_equals_its_formula(
    rule: str, data: st.DataObject
) -> None:
    run = _adaptive_run(rule, data, data.draw(st.integers(1, 8), label="steps"))
    values = [o["epsilon"] for _, o in run]
    assert values == sorted(values)
    assert all(o["certified"] and o["delta"] >= DELTA for _, o in run)
    sigmas = [s for s, _ in run]
    mu = math.sqrt(sum(1 / s**2 for s in sigmas))  # the booked Gaussians composed, exactly
    assert values[-1] >= gaussian_exact_epsilon(mu, run[-1][1]["delta"])
    params = _params(rule)
    if rule == "renyi":
        rdp = [sum(a / (2 * s**2) for s in sigmas) for a in params["orders"]]
        exact = renyi_exact(params["orders"], rdp, params["odometer_delta"])
        assert exact * (1 - 1e-9) <= values[-1] <= exact * (1 + 1e-6) + 1e-9
        return
    if rule == "gdp":
        v = mu * mu
    else:
        eps_t = [_charge("approx", s)["eps"] for s in sigmas]
        v = sum(e * e for e in eps_t)
    x, target = values[-1] - v / 2, 1 / params["odometer_delta"]
    assert mixture_integral(x, v, params["odometer_rho"]) >= target * (1 - 1e-9)
    assert mixture_integral(x * (1 - 1e-6) - 1e-9, v, params["odometer_rho"]) < target


def test_renyi_odometer_stays_within_the_total_while_the_filter_grants() -> None:
    params = _params("renyi")
    state = rules.initial_state("renyi", params)
    for sigma in [3.0, 5.0, 2.5, 9.0, 4.0] * 10:
        decision = rules.decide(
            "renyi",
            TOTAL,
            params,
            state,
            rules.charge("renyi", params, GaussianEvent(sigma), "add_remove"),
        )
        if not decision.fits:
            break
        state = decision.state
        assert odo.odometer("renyi", TOTAL, params, state)["epsilon"] <= EPS
    assert not decision.fits


def test_a_mixed_sequence_stays_above_the_certified_lower_bound_of_its_composition() -> None:
    from dpledger.accountant import select
    from dpledger.core.adjacency import Adjacency
    from dpledger.core.events import ComposedEvent

    events = [GaussianEvent(6.0), LaplaceEvent(20.0), GaussianEvent(9.0), LaplaceEvent(40.0)]
    params = _params("renyi")
    state = rules.initial_state("renyi", params)
    for e in events:
        state = rules.decide(
            "renyi", TOTAL, params, state, rules.charge("renyi", params, e, "add_remove")
        ).state
    got = odo.odometer("renyi", TOTAL, params, state)
    bound = select.account(
        ComposedEvent(tuple(events)), Adjacency(relation="add_remove"), delta=got["delta"]
    ).bound
    assert bound.epsilon_lower <= got["epsilon"]


# --- an adversary, simulated -------------------------------------------------------------


@pytest.mark.parametrize("rule", ["gdp", "renyi"])
def test_an_adaptive_adversary_crosses_the_gaussian_odometers_rarely(rule: str) -> None:
    """Gaussian steps whose mu_t doubles once the loss so far exceeds its mean: the paths whose
    loss ever crosses the odometer (delta_o = 0.05) are at most 5% (a binomial margin); the
    simulation has the power to see an odometer 25% too low (crossed on more than 5%)."""
    delta_o, paths, steps = 0.05, 20000, 40
    total = (3.0, delta_o)
    params = odo.odometer_defaults(
        rule, total, {**rules.default_params(rule, *total), "odometer_delta": delta_o}
    )
    rng = np.random.default_rng(7)
    loss, var = np.zeros(paths), np.zeros(paths)
    crossed, low = np.zeros(paths, dtype=bool), np.zeros(paths, dtype=bool)
    cache: dict[float, float] = {}
    for _ in range(steps):
        mu = np.where(loss > var / 2, 0.3, 0.15)
        loss += mu**2 / 2 + mu * rng.standard_normal(paths)
        var += mu**2
        for v in np.unique(var):
            if v not in cache:
                if rule == "gdp":
                    state = {"count": 1, "sum_mu2": float(v)}
                else:
                    state = {"count": 1, "rdp": [a * float(v) / 2 for a in params["orders"]]}
                cache[v] = odo.odometer(rule, total, params, state)["epsilon"]
        bound = np.vectorize(cache.__getitem__)(var)
        crossed |= loss > bound
        low |= loss > 0.75 * bound
    assert crossed.mean() <= delta_o + 3 * math.sqrt(delta_o / paths)
    assert low.mean() > delta_o


def test_an_adaptive_adversary_crosses_the_approx_odometer_rarely() -> None:
    """Randomized-response steps (loss +-eps_t, mean eps_t tanh(eps_t / 2) under the first
    neighbour), eps_t raised when the loss so far is high."""
    delta_o, paths, steps = 0.05, 20000, 40
    params = {"odometer_delta": delta_o, "odometer_rho": 0.2, "delta_tail": 0.01}
    rng = np.random.default_rng(11)
    loss, var = np.zeros(paths), np.zeros(paths)
    crossed = np.zeros(paths, dtype=bool)
    cache: dict[float, float] = {}
    for _ in range(steps):
        eps = np.where(loss > var / 4, 0.4, 0.2)
        up = rng.random(paths) < np.exp(eps) / (1 + np.exp(eps))
        loss += np.where(up, eps, -eps)
        var += eps**2
        for v in np.unique(var):
            if v not in cache:
                state = {"count": 1, "sum_eps2": float(v)}
                cache[v] = odo.odometer("approx", (3.0, 0.02), params, state)["epsilon"]
        bound = np.vectorize(cache.__getitem__)(var)
        crossed |= loss > bound
    assert crossed.mean() <= delta_o + 3 * math.sqrt(delta_o / paths)


# --- the store ---------------------------------------------------------------------------


def test_status_json_and_text_carry_the_certified_odometer(tmp_path: Path) -> None:
    location = str(tmp_path / "b.db")
    from dpledger.budget.store import init

    init(location)
    declare(location, "s", epsilon=1.0, delta=1e-6, rule="gdp")
    declare(location, "t", epsilon=1.0, delta=1e-6, rule="approx", params={"odometer_delta": 1e-7})
    booked = book(location, "s", GaussianEvent(10.0))
    assert (
        booked["odometer"]["certified"]
        and booked["odometer"]["epsilon"] > booked["spent"]["epsilon"]
    )
    report = status(location)
    by_source = {b["source"]: b for b in report["budgets"]}
    assert by_source["s"]["odometer"] == booked["odometer"]
    assert by_source["t"]["params"]["odometer_delta"] == 1e-7
    assert by_source["t"]["odometer"]["delta"] == pytest.approx(1e-7 + 5e-7)
    after = check(location, "s", GaussianEvent(10.0))["odometer_after"]
    assert after["certified"] and after["epsilon"] > booked["odometer"]["epsilon"]
    text = "\n".join(status_lines(report))
    assert "certified spend so far: epsilon <= " in text and "Smith & Thakurta" in text
    assert "filter statistic, not certified" in text


def test_a_store_declared_before_the_odometer_gets_its_defaults() -> None:
    params = rules.default_params("gdp", *TOTAL)  # no odometer parameters
    state = {"count": 1, "sum_mu2": 0.01}
    assert odo.odometer("gdp", TOTAL, params, state) == odo.odometer(
        "gdp", TOTAL, _params("gdp"), state
    )
    assert _params("approx")["odometer_delta"] == _params("approx")["delta_tail"]


@pytest.mark.parametrize(
    "params",
    [
        {"odometer_delta": 0.0},
        {"odometer_delta": 1.5},
        {"odometer_rho": -1.0},
        {"odometer_delta": "x"},
    ],
)
def test_a_bad_odometer_parameter_is_one_line(params: dict[str, Any]) -> None:
    with pytest.raises(InvalidParameterError):
        check_declaration("s", "row", 1.0, 1e-6, "gdp", "add_remove", params)
    with pytest.raises(InvalidParameterError, match="not a parameter"):
        check_declaration("s", "row", 1.0, 1e-6, "pld", "add_remove", {"odometer_delta": 1e-7})


def test_the_spend_series_has_the_odometer_beside_the_statistic(tmp_path: Path) -> None:
    from dpledger.budget.report import spend_series
    from dpledger.budget.store import init

    location = str(tmp_path / "b.db")
    init(location)
    declare(location, "s", epsilon=1.0, delta=1e-6, rule="gdp")
    answers = [book(location, "s", GaussianEvent(sigma)) for sigma in (20.0, 10.0, 30.0)]
    statistic = [v for _, v in spend_series(location)["s/row"]]
    certified = [v for _, v in spend_series(location, certified=True)["s/row"]]
    assert certified == [a["odometer"]["epsilon"] for a in answers]
    assert statistic == [a["spent"]["epsilon"] for a in answers]
    assert certified == sorted(certified) and all(
        c > s for c, s in zip(certified, statistic, strict=True)
    )


@pytest.mark.parametrize("mu", [0.001, 0.1, 0.5])
def test_gdp_odometer_is_above_the_loss_quantile_and_near_it_where_tuned(mu: float) -> None:
    """Any bound on the loss at delta is at least the quantile V/2 + z sqrt(V) of the loss
    N(V/2, V) of one Gaussian step; tuned at V = mu^2 the mixture is within 25% of it."""
    total = (rules.gdp_epsilon(mu, DELTA), DELTA)
    params = odo.odometer_defaults("gdp", total, rules.default_params("gdp", *total))
    got = odo.odometer("gdp", total, params, {"count": 1, "sum_mu2": mu * mu})["epsilon"]
    quantile = mu * mu / 2 + float(norm.isf(DELTA)) * mu
    assert quantile <= got <= 1.25 * quantile
