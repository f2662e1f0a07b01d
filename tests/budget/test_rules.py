"""The filters' halting rules against their theorems, recomputed independently.

Each property test lets hypothesis choose the next mechanism from what the filter has
admitted so far (an adaptive analyst), books until the filter halts, and checks the admitted
sequence against the theorem's condition computed here in closed form (scipy's normal CDF,
mpmath, the Gaussian and Laplace RDP curves of Mironov 2017), never through dpledger's
accountant. The worked examples check the number of steps each rule admits against the count
solved from the theorem's condition.
"""

from __future__ import annotations

import math

import mpmath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from dpledger.budget import rules
from dpledger.core.events import GaussianEvent, LaplaceEvent

EPS, DELTA = 1.0, 1e-6


def gdp_delta(eps: float, mu: float) -> float:
    """The exact delta(eps) of mu-GDP (Dong, Roth & Su 2022, Cor. 2.13), by scipy."""
    return float(norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2))


def laplace_rdp(alpha: float, b: float) -> float:
    """RDP of the Laplace mechanism of scale b (sensitivity 1), Mironov 2017, Prop. 6."""
    a = mpmath.mpf(alpha)
    inner = a / (2 * a - 1) * mpmath.e ** ((a - 1) / b) + (a - 1) / (2 * a - 1) * mpmath.e ** (
        -a / b
    )
    return float(mpmath.log(inner) / (a - 1))


def _run(rule: str, params: dict, data: st.DataObject, draw_event, limit: int = 60):  # type: ignore[no-untyped-def]
    """Book adaptively chosen events until the filter halts: (admitted, refused or None)."""
    state = rules.initial_state(rule, params)
    admitted = []
    for _ in range(limit):
        event = draw_event(data, state)
        cost = rules.charge(rule, params, event, "add_remove")
        decision = rules.decide(rule, (EPS, DELTA), params, state, cost)
        if not decision.fits:
            return admitted, event
        admitted.append(event)
        state = decision.state
    return admitted, None


def _adaptive_gaussian(data: st.DataObject, state: dict) -> GaussianEvent:
    # the analyst spends less noise while little has been spent, more later
    low = 2.0 if state["count"] < 3 else 0.5
    return GaussianEvent(data.draw(st.floats(low, 40.0), label="sigma"))


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_no_adaptive_gaussian_sequence_passes_the_gdp_filter_beyond_its_budget(
    data: st.DataObject,
) -> None:
    params = rules.default_params("gdp", EPS, DELTA)
    admitted, refused = _run("gdp", params, data, _adaptive_gaussian)
    total = math.fsum(1 / e.noise_multiplier**2 for e in admitted)
    # Smith & Thakurta: sum mu_t^2 <= mu^2 makes the whole mu-GDP, and mu-GDP gives delta(EPS)
    assert total <= params["mu"] ** 2
    if admitted:
        assert gdp_delta(EPS, math.sqrt(total)) <= DELTA * (1 + 1e-9)
    if refused is not None:  # halts only when the next step would break the condition
        assert total + 1 / refused.noise_multiplier**2 > params["mu"] ** 2 * (1 - 1e-9)


def _adaptive_mixed(data: st.DataObject, state: dict) -> GaussianEvent | LaplaceEvent:
    scale = data.draw(st.floats(1.0, 30.0), label="scale")
    return GaussianEvent(scale) if data.draw(st.booleans(), label="gauss") else LaplaceEvent(scale)


def _independent_rdp(event: GaussianEvent | LaplaceEvent, alpha: float) -> float:
    if isinstance(event, GaussianEvent):
        return alpha / (2 * event.noise_multiplier**2)
    return laplace_rdp(alpha, event.noise_multiplier)


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_no_adaptive_sequence_passes_the_renyi_filter_beyond_its_budget(
    data: st.DataObject,
) -> None:
    orders = [2.0, 4.0, 8.0, 16.0, 32.0]
    params = {"orders": orders}
    admitted, refused = _run("renyi", params, data, _adaptive_mixed, limit=40)
    k = len(orders)
    sums = {a: math.fsum(_independent_rdp(e, a) for e in admitted) for a in orders}
    # Feldman & Zrnic at some order with B(a) = eps - log(k / delta) / (a - 1) ...
    budget = {a: EPS - math.log(k / DELTA) / (a - 1) for a in orders}
    assert any(sums[a] <= budget[a] * (1 + 1e-9) + 1e-12 for a in orders)
    # ... so the privacy loss exceeds EPS with probability <= sum over orders of delta / k
    tail = sum(math.exp((a - 1) * (sums[a] - EPS)) for a in orders if sums[a] <= budget[a] + 1e-12)
    assert tail <= DELTA * (1 + 1e-6) or not admitted
    if refused is not None:
        assert all(sums[a] + _independent_rdp(refused, a) > budget[a] * (1 - 1e-9) for a in orders)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(1e-4, 0.6), min_size=1, max_size=80))
def test_no_sequence_passes_the_approximate_dp_filter_beyond_its_budget(
    epsilons: list[float],
) -> None:
    params = rules.default_params("approx", EPS, DELTA)
    tail, step = params["delta_tail"], params["step_delta"]
    state = rules.initial_state("approx", params)
    admitted: list[float] = []
    for eps_t in epsilons:
        decision = rules.decide(
            "approx", (EPS, DELTA), params, state, {"eps": eps_t, "delta": step}
        )
        if not decision.fits:
            break
        admitted.append(eps_t)
        state = decision.state
    mpmath.mp.dps = 40
    s2 = mpmath.fsum(mpmath.mpf(e) ** 2 for e in admitted)
    level = mpmath.sqrt(2 * mpmath.log(1 / mpmath.mpf(tail)) * s2) + s2 / 2
    # Whitehouse, Ramdas, Rogers & Wu: the admitted sequence meets the filter's condition
    assert level <= EPS
    assert len(admitted) * step <= DELTA - tail
    if len(admitted) < len(epsilons):
        s2n = s2 + mpmath.mpf(epsilons[len(admitted)]) ** 2
        nxt = mpmath.sqrt(2 * mpmath.log(1 / mpmath.mpf(tail)) * s2n) + s2n / 2
        assert nxt > EPS * (1 - 1e-9)


def _count(rule: str, params: dict, event) -> int:  # type: ignore[no-untyped-def]
    state = rules.initial_state(rule, params)
    cost = rules.charge(rule, params, event, "add_remove")
    while True:
        decision = rules.decide(rule, (EPS, DELTA), params, state, cost)
        if not decision.fits:
            return int(state["count"])
        state = decision.state


def test_gdp_filter_admits_the_steps_its_theorem_allows() -> None:
    """mu = 1 / sigma per step: n steps while n / sigma^2 <= mu^2, mu solved here by scipy."""
    lo, hi = 0.0, 5.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if gdp_delta(EPS, mid) <= DELTA else (lo, mid)
    params = rules.default_params("gdp", EPS, DELTA)
    assert params["mu"] == pytest.approx(lo, rel=1e-9)
    assert params["mu"] <= lo * (1 + 1e-12)
    sigma = 7.0
    assert _count("gdp", params, GaussianEvent(sigma)) == math.floor(lo**2 * sigma**2)


def test_renyi_filter_admits_the_steps_its_theorem_allows() -> None:
    """Gaussian steps: rho(a) = a / (2 sigma^2); n steps fit at order a while n rho(a) <= B(a)."""
    orders = [2.0, 4.0, 8.0, 16.0, 32.0, 64.0]
    sigma = 30.0
    expected = max(
        math.floor((EPS - math.log(len(orders) / DELTA) / (a - 1)) / (a / (2 * sigma**2)))
        for a in orders
    )
    assert _count("renyi", {"orders": orders}, GaussianEvent(sigma)) == expected


def test_approximate_dp_filter_admits_the_steps_its_theorem_allows() -> None:
    """n steps of eps0: x = sqrt(n) eps0 solves x^2 / 2 + sqrt(2 L) x <= eps, L = log(1/delta')."""
    params = rules.default_params("approx", EPS, DELTA)
    big_l = math.log(1 / params["delta_tail"])
    x = -math.sqrt(2 * big_l) + math.sqrt(2 * big_l + 2 * EPS)
    eps0 = 0.01
    state = rules.initial_state("approx", params)
    n = 0
    while rules.decide(
        "approx", (EPS, DELTA), params, state, {"eps": eps0, "delta": params["step_delta"]}
    ).fits:
        state = rules.decide(
            "approx", (EPS, DELTA), params, state, {"eps": eps0, "delta": params["step_delta"]}
        ).state
        n += 1
    assert n == math.floor((x / eps0) ** 2)


def test_approximate_dp_charge_of_a_pure_event_is_its_epsilon() -> None:
    params = rules.default_params("approx", EPS, DELTA)
    cost = rules.charge("approx", params, LaplaceEvent(10.0), "add_remove")
    # Laplace of eps0 at delta: eps = eps0 + 2 log(1 - delta) (its profile is 1 - e^((e - eps0)/2))
    exact = 0.1 + 2 * math.log1p(-params["step_delta"])
    assert exact <= cost["eps"] <= exact * (1 + 1e-9)


def test_non_adaptive_rule_admits_what_the_composed_gaussian_allows() -> None:
    """k Gaussians of noise sigma compose to one of mu = sqrt(k) / sigma: the PLD rule admits
    the largest k whose exact delta_mu(EPS) (scipy) is within DELTA, give or take the
    bracket's width at the boundary."""
    sigma = 7.0
    count = _count_pld(GaussianEvent(sigma))
    assert count == 2
    assert gdp_delta(EPS, math.sqrt(count) / sigma) <= DELTA * (1 + 1e-9)
    assert gdp_delta(EPS, math.sqrt(count + 1) / sigma) > DELTA * (1 - 1e-6)


def _count_pld(event: GaussianEvent) -> int:
    state = rules.initial_state("pld", {})
    history: list[GaussianEvent] = []
    while True:
        decision = rules.decide(
            "pld", (EPS, DELTA), {}, state, {}, lambda: [*history, event], "add_remove"
        )
        if not decision.fits:
            return len(history)
        history.append(event)
        state = decision.state
