"""The composition rules of a budget store: what one booking is charged and whether it fits.

Each rule is a halting rule from a paper, applied before the booked run draws any noise:

* ``pld`` (non-adaptive): the sequence is fixed in advance, so the bookings compose as usual;
  a booking fits when the certified upper end of the PLD bracket of all booked events
  (:func:`dpledger.accountant.select.account` of their composition, the number
  ``dpledger account`` prints) stays within the total. The state keeps the bookings grouped
  into identical events with counts (composition commutes), so a booking recomposes the
  distinct events only, not the whole history.
* ``renyi``: the Rényi filter of Feldman & Zrnic (2021). At a fixed order a, adaptively chosen
  mechanisms of predictable RDP rho_t(a) run while sum rho_t(a) <= B(a), and the whole is
  (a, B(a))-RDP. Over k orders, B(a) = eps - log(k / delta) / (a - 1): at halting some order's
  sum is within its B(a), so the privacy loss exceeds eps with probability at most
  sum_a exp((a - 1)(B(a) - eps)) = delta (Markov's inequality per order, a union bound over
  orders). With one order it is exactly their filter with the standard conversion.
* ``approx``: the approximate-DP filter of Whitehouse, Ramdas, Rogers & Wu (2023), at the rate
  of advanced composition: (eps_t, delta_t)-DP steps run while
  sqrt(2 log(1 / delta_tail) sum eps_t^2) + sum eps_t^2 / 2 <= eps and
  sum delta_t <= delta - delta_tail; the whole is (eps, delta)-DP. A step's eps_t is its
  certified epsilon at the store's ``step_delta``.
* ``gdp``: the Gaussian-DP filter of Smith & Thakurta (2022): mu_t-GDP steps run while
  sum mu_t^2 <= mu^2, and the whole is mu-GDP; mu is the largest whose Gaussian trade-off
  gives delta(eps) <= delta (Dong, Roth & Su 2022). Only Gaussian steps are booked.

Sums are rounded up and budgets down, so floating point never admits a booking the exact
rule would refuse. :func:`spent` is the rule's running statistic stated as an epsilon: for
``pld`` it is the certified bound of the bookings so far; for a filter it is labelled not
certified (the filter certifies its declared total, not the spend of an adaptive prefix). The
certified spend so far of a filter is its odometer (:mod:`dpledger.budget.odometer`), whose
parameters (``odometer_delta``, ``odometer_rho``) a store may declare.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from dpledger.accountant import select
from dpledger.accountant.conversions import gaussian_delta_bracket
from dpledger.accountant.rdp import RDPAccountant, effective_gaussian_mu
from dpledger.budget.chain import canonical_json
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import DPLedgerError, InvalidParameterError
from dpledger.core.events import ComposedEvent, Event, SelfComposedEvent

__all__ = [
    "RULES",
    "SETTABLE",
    "THEOREMS",
    "BudgetRefused",
    "Decision",
    "charge",
    "decide",
    "default_params",
    "initial_state",
    "spent",
]

#: the rules a store may declare
RULES = ("pld", "renyi", "approx", "gdp")
#: the theorem each rule applies, as status, reports and JSON name it
THEOREMS: dict[str, str] = {
    "pld": "non-adaptive composition: PLD bracket of all booked events composed "
    "(dpledger.accountant.select.account); valid only for a sequence fixed in advance",
    "renyi": "Renyi filter (Feldman & Zrnic 2021, NeurIPS: adaptive RDP composition halted "
    "before sum rho_t(a) > B(a)); delta split over the orders by a union bound",
    "approx": "approximate-DP filter at the rate of advanced composition (Whitehouse, Ramdas, "
    "Rogers & Wu 2023, ICML: halt before sqrt(2 log(1/delta_tail) sum eps_t^2) + "
    "sum eps_t^2 / 2 > eps or sum delta_t > delta - delta_tail)",
    "gdp": "Gaussian-DP filter (Smith & Thakurta 2022: halt before sum mu_t^2 > mu^2; "
    "mu-GDP to (eps, delta) by the Gaussian trade-off)",
}
#: the parameters a store may set per rule (the others follow from the total)
SETTABLE: dict[str, tuple[str, ...]] = {
    "pld": (),
    "renyi": ("orders", "odometer_delta"),
    "approx": ("delta_tail", "step_delta", "odometer_delta", "odometer_rho"),
    "gdp": ("odometer_delta", "odometer_rho"),
}
#: orders of the Rényi filter unless the store declares its own
DEFAULT_ORDERS = (1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0, 64.0, 128.0, 256.0)
#: a relative margin by which budgets are lowered and charges raised (floating point)
MARGIN = 1e-12

State = dict[str, Any]
Charge = dict[str, Any]


class BudgetRefused(DPLedgerError):
    """A booking does not fit the declared total (nothing was booked)."""


class Decision:
    """Whether a booking fits, the state after it, and why not."""

    def __init__(self, fits: bool, state: State, reason: str = "") -> None:
        self.fits, self.state, self.reason = fits, state, reason


def _up(x: float) -> float:
    return math.nextafter(x, math.inf) if math.isfinite(x) else x


def _add_up(a: float, b: float) -> float:
    """a + b rounded up (the rounded sum is within half an ulp; one step up covers it)."""
    return _up(a + b)


def default_params(rule: str, epsilon: float, delta: float) -> dict[str, Any]:
    """The parameters a rule takes when the store declares none."""
    if rule == "renyi":
        return {"orders": list(DEFAULT_ORDERS)}
    if rule == "approx":
        return {"delta_tail": delta / 2.0, "step_delta": delta / 2.0 * 1e-5}
    if rule == "gdp":
        return {"mu": gdp_mu(epsilon, delta)}
    return {}


def gdp_mu(epsilon: float, delta: float) -> float:
    """The largest mu (to 1e-12 relative, rounded down) with certified delta(eps) <= delta."""

    def fits(mu: float) -> bool:
        return bool(gaussian_delta_bracket(epsilon, mu)[1] <= delta)

    lo, hi = 0.0, 1.0
    while fits(hi):
        lo, hi = hi, hi * 2.0
        if hi > 1e6:
            break
    for _ in range(200):
        if hi - lo <= 1e-12 * hi:
            break
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def renyi_budgets(orders: Sequence[float], epsilon: float, delta: float) -> list[float]:
    """B(a) = eps - log(k / delta) / (a - 1) per order, rounded down."""
    k = len(orders)
    out = []
    for a in orders:
        t = math.log(k / delta) / (a - 1.0)
        out.append(epsilon - t - 8 * 2.0**-53 * (abs(epsilon) + abs(t) + 1.0))
    return out


def initial_state(rule: str, params: Mapping[str, Any]) -> State:
    """The state of a store with no booking."""
    if rule == "renyi":
        return {"count": 0, "rdp": [0.0] * len(params["orders"])}
    if rule == "approx":
        return {"count": 0, "sum_eps2": 0.0, "sum_delta": 0.0}
    if rule == "gdp":
        return {"count": 0, "sum_mu2": 0.0}
    return {"count": 0, "epsilon": 0.0, "groups": []}


def charge(rule: str, params: Mapping[str, Any], event: Event, relation: str) -> Charge:
    """What ``event`` (stated per privacy unit under ``relation``) costs under ``rule``; for
    ``pld`` nothing is charged alone (the composition of all bookings is accounted)."""
    adjacency = Adjacency(relation=relation)
    if rule == "renyi":
        return {"rdp": _rdp_curve(event, adjacency, params["orders"])}
    if rule == "approx":
        step = float(params["step_delta"])
        eps = select.account(event, adjacency, delta=step).bound.epsilon
        if not math.isfinite(eps):
            raise _unbounded(event, f"epsilon at delta={step:g}")
        return {"eps": _up(eps * (1 + MARGIN)), "delta": step}
    if rule == "gdp":
        mu = effective_gaussian_mu(event, adjacency.sensitivity_factor)
        if isinstance(mu, Event):
            raise InvalidParameterError(
                "event",
                f"a Gaussian-DP store books only Gaussian steps, not {mu.describe()}",
                "book it in a store of rule renyi, approx or pld",
            )
        return {"mu2": _up(mu * mu * (1 + MARGIN))}
    return {}


def _rdp_curve(event: Event, adjacency: Adjacency, orders: Sequence[float]) -> list[float]:
    accountant = RDPAccountant(adjacency, orders=list(orders))
    if not accountant.supports(event):
        raise InvalidParameterError(
            "event",
            f"the RDP accountant cannot bound {event.describe()[:120]}",
            "book it in a store of rule approx or pld",
        )
    accountant.compose(event)
    curve = accountant.rdp()
    if not np.any(np.isfinite(curve)):
        raise _unbounded(event, "RDP at every order")
    return [float(x) for x in curve]


def _unbounded(event: Event, what: str) -> InvalidParameterError:
    return InvalidParameterError(
        "event", f"{event.describe()[:120]} has no finite {what}", "book a private event"
    )


def decide(
    rule: str,
    total: tuple[float, float],
    params: Mapping[str, Any],
    state: State,
    cost: Charge,
    history: Callable[[], list[Event]] | None = None,
    relation: str = "add_remove",
    event: Event | None = None,
) -> Decision:
    """Whether a booking of ``cost`` fits after ``state``. ``pld`` only: ``event`` is the new
    booking, added to the state's groups of identical events; without it (a replay), or for a
    state without groups, ``history`` gives every booked event with the new one last."""
    if rule == "renyi":
        return _decide_renyi(total, params, state, cost)
    if rule == "approx":
        return _decide_approx(total, params, state, cost)
    if rule == "gdp":
        return _decide_gdp(params, state, cost)
    return _decide_pld(total, state, _pld_groups(state, event, history), relation)


def _decide_renyi(
    total: tuple[float, float], params: Mapping[str, Any], state: State, cost: Charge
) -> Decision:
    budgets = renyi_budgets(params["orders"], *total)
    sums = [_add_up(s, r) for s, r in zip(state["rdp"], cost["rdp"], strict=True)]
    fits = any(s <= b for s, b in zip(sums, budgets, strict=True))
    new = {"count": state["count"] + 1, "rdp": sums}
    return Decision(fits, new, "" if fits else "sum rho(a) would exceed B(a) at every order")


def _decide_approx(
    total: tuple[float, float], params: Mapping[str, Any], state: State, cost: Charge
) -> Decision:
    eps, delta = total
    tail = float(params["delta_tail"])
    s2 = _add_up(state["sum_eps2"], _up(cost["eps"] * cost["eps"]))
    sd = _add_up(state["sum_delta"], cost["delta"])
    level = approx_level(s2, tail)
    new = {"count": state["count"] + 1, "sum_eps2": s2, "sum_delta": sd}
    if level > eps:
        return Decision(False, new, f"the advanced-composition level would be {level:.6g} > {eps}")
    if sd > delta - tail:
        return Decision(False, new, f"sum delta_t would be {sd:.3g} > {delta - tail:.3g}")
    return Decision(True, new)


def approx_level(sum_eps2: float, delta_tail: float) -> float:
    """sqrt(2 log(1/delta_tail) S) + S / 2, rounded up."""
    if sum_eps2 == 0.0:
        return 0.0
    value = math.sqrt(2.0 * math.log(1.0 / delta_tail) * sum_eps2) + sum_eps2 / 2.0
    return _up(value * (1 + MARGIN))


def _decide_gdp(params: Mapping[str, Any], state: State, cost: Charge) -> Decision:
    mu = float(params["mu"])
    s = _add_up(state["sum_mu2"], cost["mu2"])
    fits = s <= mu * mu * (1 - MARGIN)
    new = {"count": state["count"] + 1, "sum_mu2": s}
    return Decision(
        fits, new, "" if fits else f"sum mu_t^2 would be {s:.6g} > mu^2 = {mu * mu:.6g}"
    )


Groups = list[list[Any]]


def group_events(events: Sequence[Event], groups: Groups | None = None) -> Groups:
    """``[[event as a dict, count], ...]``: identical events counted, in order of first
    booking (``groups`` extended, not changed)."""
    out: Groups = [[dict(e), int(c)] for e, c in groups or []]
    where = {canonical_json(e): i for i, (e, _) in enumerate(out)}
    for event in events:
        form = event.to_dict()
        key = canonical_json(form)
        if key in where:
            out[where[key]][1] += 1
        else:
            where[key] = len(out)
            out.append([form, 1])
    return out


def _pld_groups(
    state: State, event: Event | None, history: Callable[[], list[Event]] | None
) -> Groups:
    if event is not None and "groups" in state:
        return group_events([event], state["groups"])
    assert history is not None
    return group_events(history())


def _decide_pld(
    total: tuple[float, float], state: State, groups: Groups, relation: str
) -> Decision:
    eps = pld_epsilon(grouped_events(groups), relation, total[1])
    new = {"count": state["count"] + 1, "epsilon": eps, "groups": groups}
    fits = eps <= total[0]
    return Decision(fits, new, "" if fits else f"the composed bound would be {eps:.6g}")


def grouped_events(groups: Groups) -> list[Event]:
    """One event per group: the event itself, or its self-composition by the group's count."""
    from dpledger.core.event_parser import event_from_dict

    out: list[Event] = []
    for form, count in groups:
        event = event_from_dict(form)
        out.append(event if count == 1 else SelfComposedEvent(event, int(count)))
    return out


def pld_epsilon(events: Sequence[Event], relation: str, delta: float) -> float:
    """The certified upper bound of all ``events`` composed (``dpledger account``'s number);
    a store composes its bookings grouped (:func:`grouped_events`), so one booking costs a
    composition of its distinct events, however many bookings repeat them."""
    if not events:
        return 0.0
    composed = events[0] if len(events) == 1 else ComposedEvent(tuple(events))
    return float(select.account(composed, Adjacency(relation=relation), delta=delta).bound.epsilon)


def spent(
    rule: str, total: tuple[float, float], params: Mapping[str, Any], state: State
) -> dict[str, Any]:
    """The odometer: the rule's running statistic, as an epsilon at the total's delta, with
    whether that number is certified."""
    delta = total[1]
    if rule == "pld":
        return {"epsilon": state["epsilon"], "certified": True}
    if rule == "renyi":
        k = len(params["orders"])
        values = [
            _up(s + math.log(k / delta) / (a - 1.0))
            for a, s in zip(params["orders"], state["rdp"], strict=True)
        ]
        statistic: float = min(values)
    elif rule == "approx":
        statistic = approx_level(state["sum_eps2"], float(params["delta_tail"]))
    else:
        statistic = gdp_epsilon(math.sqrt(state["sum_mu2"]), delta)
    return {"epsilon": statistic, "certified": False}


def gdp_epsilon(mu: float, delta: float) -> float:
    if mu == 0.0:
        return 0.0
    lo, hi = 0.0, 1.0
    while gaussian_delta_bracket(hi, mu)[1] > delta:
        hi *= 2.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if gaussian_delta_bracket(mid, mu)[1] <= delta else (mid, hi)
    return hi
