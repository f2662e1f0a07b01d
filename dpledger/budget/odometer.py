"""The certified odometer of a budget store: the privacy spent so far, valid at every time.

A filter certifies its declared total; an odometer (Rogers, Roth, Ullman & Vadhan 2016)
bounds the privacy loss of the bookings made so far, at every time simultaneously: with
probability at least 1 - delta_o over the runs' noise, for every n at once, the privacy loss
of the first n bookings is at most ``U_n``. A time chosen by the analyst from earlier
answers is one of those times, so ``U_n`` read at any moment is a bound on what was spent.

Every odometer here is Ville's inequality (a nonnegative supermartingale started at 1
exceeds 1 / delta_o with probability at most delta_o) applied to a mixture of the
exponential supermartingales of the privacy loss L_n that the rule's filter already rests on:

* ``renyi``: at each order a, exp((a - 1)(L_n - R_n(a))) is a supermartingale, R_n(a) the
  booked RDP sum (each run's conditional Rényi moment is at most its predictable charge; the
  argument of Feldman & Zrnic 2021's filter). Their mean over the store's k orders is one;
  ``U_n`` is the L where it reaches 1 / delta_o. It is at most the filter's statistic
  min_a R_n(a) + log(k / delta_o) / (a - 1) (the union bound over orders).
* ``gdp``: mu_t-GDP steps have RDP a mu_t^2 / 2 at every order a > 1, so with
  V_n = sum mu_t^2 and X_n = L_n - V_n / 2, exp(lam X_n - lam^2 V_n / 2) is a supermartingale
  for every lam >= 0; mixed over a half-normal lam of precision rho (Howard, Ramdas,
  McAuliffe & Sekhon 2021, one-sided normal mixture): ``U_n = V_n / 2 + x(V_n)``.
* ``approx``: the mixture-boundary odometer of Whitehouse, Ramdas, Rogers & Wu (2023): each
  (eps_t, delta_t) step is eps_t-bounded outside an event of probability delta_t, its loss has
  conditional mean at most eps_t^2 / 2 and is sub-Gaussian of variance eps_t^2 (Hoeffding);
  the same mixture with V_n = sum eps_t^2 gives ``U_n = V_n / 2 + x(V_n)`` at delta
  delta_o + sum delta_t; the sum over every booking the filter can ever grant is at most
  delta - delta_tail, so the delta stated is delta_o + delta - delta_tail.

x(V) solves 2 sqrt(rho / (V + rho)) exp(x^2 / (2 (V + rho))) Phi(x / sqrt(V + rho)) = 1/delta_o.

What it costs: delta_o is declared with the store (``odometer_delta``; by default the total's
delta, and delta_tail for ``approx`` so that delta_o + delta - delta_tail is the total's
delta). The odometer is a second statement about the same bookings: it takes nothing from
the total and changes no halting decision; the filter's (eps, delta) and the odometer hold
together with probability at least 1 - delta - delta_o (a union bound). Its epsilon is larger
than the filter's statistic at the same delta (the price of holding at every time at once).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from scipy.special import log_ndtr

__all__ = [
    "ODOMETER_THEOREMS",
    "approx_budget_variance",
    "mixture_boundary",
    "odometer",
    "odometer_defaults",
    "renyi_odometer",
]

#: the theorem each rule's odometer applies, as status, reports and JSON name it
ODOMETER_THEOREMS: dict[str, str] = {
    "pld": "non-adaptive composition: the certified PLD bound of the bookings so far "
    "(valid only for a sequence fixed in advance)",
    "renyi": "Renyi odometer: Ville's inequality on the mean over the store's orders of the "
    "RDP supermartingales exp((a-1)(L_n - sum rho_t(a))) of Feldman & Zrnic 2021's filter; "
    "valid at every time at once",
    "gdp": "Gaussian-DP odometer: Ville's inequality on the one-sided normal mixture "
    "(Howard et al. 2021) of exp(lam (L_n - V_n/2) - lam^2 V_n/2), V_n = sum mu_t^2 "
    "(Smith & Thakurta 2022's setting); valid at every time at once",
    "approx": "approximate-DP mixture odometer (Whitehouse, Ramdas, Rogers & Wu 2023, ICML: "
    "sub-Gaussian privacy-loss martingale, one-sided normal mixture boundary, plus sum "
    "delta_t); valid at every time at once",
}
#: relative and absolute slack by which a solved boundary is raised (floating point)
_SLACK = 1e-10


def _up(x: float) -> float:
    return math.nextafter(x, math.inf) if math.isfinite(x) else x


def approx_budget_variance(epsilon: float, delta_tail: float) -> float:
    """The sum of eps_t^2 at which the ``approx`` filter halts:
    sqrt(2 log(1/delta_tail) S) + S / 2 = epsilon."""
    big_l = 2.0 * math.log(1.0 / delta_tail)
    s = math.sqrt(big_l + 2.0 * epsilon) - math.sqrt(big_l)
    return s * s


def _rho_for(variance: float, delta_o: float) -> float:
    """A mixture precision tuned to be tight near ``variance`` (Howard et al. 2021's rule of
    thumb for the normal mixture)."""
    log_term = 2.0 * math.log(1.0 / delta_o)
    return variance / (log_term + math.log1p(log_term))


def odometer_defaults(
    rule: str, total: tuple[float, float], params: Mapping[str, Any]
) -> dict[str, Any]:
    """``params`` with the odometer's parameters a store did not declare filled in (a store
    declared before the odometer existed gets the defaults here, from its total)."""
    out = dict(params)
    if rule == "pld":
        return out
    epsilon, delta = total
    if "odometer_delta" not in out:
        out["odometer_delta"] = float(params["delta_tail"]) if rule == "approx" else delta
    if rule in ("gdp", "approx") and "odometer_rho" not in out:
        if rule == "gdp":
            variance = float(params["mu"]) ** 2
        else:
            variance = approx_budget_variance(epsilon, float(params["delta_tail"]))
        out["odometer_rho"] = _rho_for(variance, float(out["odometer_delta"]))
    return out


def renyi_odometer(orders: Sequence[float], rdp: Sequence[float], delta_o: float) -> float:
    """The L where the mean over the orders of exp((a - 1)(L - R(a))) reaches 1 / delta_o,
    rounded up; 0 when nothing was booked."""
    pairs = [(float(a) - 1.0, float(r)) for a, r in zip(orders, rdp, strict=True)]
    if all(r == 0.0 for _, r in pairs):
        return 0.0
    pairs = [(c, r) for c, r in pairs if math.isfinite(r)]
    if not pairs:
        return math.inf
    shift = math.log(len(orders) / delta_o)

    def reached(level: float) -> bool:  # sum_a exp((a-1)(L - R(a))) >= k / delta_o
        return sum(math.exp(min(c * (level - r) - shift, 700.0)) for c, r in pairs) >= 1.0

    union = min(r + shift / c for c, r in pairs)  # the filter's statistic: reached there
    return _threshold(reached, union)


def mixture_boundary(variance: float, rho: float, delta_o: float) -> float:
    """x solving 2 sqrt(rho / c) exp(x^2 / (2c)) Phi(x / sqrt(c)) = 1 / delta_o, c = V + rho,
    rounded up (the one-sided normal mixture's boundary for a centred sum of variance V)."""
    c = variance + rho
    log_target = math.log(1.0 / delta_o)
    base = math.log(2.0) + 0.5 * math.log(rho / c)

    def reached(x: float) -> bool:
        z = x / math.sqrt(c)
        return base + 0.5 * z * z + float(log_ndtr(z)) >= log_target

    # the two-sided boundary: there Phi >= 1/2 makes the mixture at least 1 / delta_o
    return _threshold(reached, math.sqrt(2.0 * c * (log_target + 0.5 * math.log(c / rho))))


def _threshold(reached: Callable[[float], bool], guess: float) -> float:
    """The smallest float x >= 0 where the increasing test ``reached`` holds (it fails at 0),
    by bisection down to adjacent floats (so the result does not depend on ``guess``, and a
    test that holds less often gives a larger x), raised by a slack that covers the test's
    floating-point error and rounded up."""
    lo, hi = 0.0, guess * (1 + 1e-9) + 1e-300
    for _ in range(2100):
        if reached(hi):
            break
        lo, hi = hi, hi * 2.0 + 1e-300
    else:
        return math.inf
    for _ in range(2100):
        mid = lo + 0.5 * (hi - lo)
        if not lo < mid < hi:
            break
        lo, hi = (lo, mid) if reached(mid) else (mid, hi)
    return _up(hi + _SLACK * (1.0 + hi))


def odometer(
    rule: str, total: tuple[float, float], params: Mapping[str, Any], state: Mapping[str, Any]
) -> dict[str, Any]:
    """The certified spend so far: ``epsilon`` at ``delta``, valid at every time at once, with
    the theorem it applies."""
    full = odometer_defaults(rule, total, params)
    out: dict[str, Any] = {"certified": True, "theorem": ODOMETER_THEOREMS[rule]}
    if rule == "pld":
        return {**out, "epsilon": float(state["epsilon"]), "delta": total[1]}
    delta_o = float(full["odometer_delta"])
    if rule == "renyi":
        eps = renyi_odometer(full["orders"], state["rdp"], delta_o)
        return {**out, "epsilon": eps, "delta": delta_o}
    variance = float(state["sum_mu2"] if rule == "gdp" else state["sum_eps2"])
    rho = float(full["odometer_rho"])
    eps = 0.0 if state["count"] == 0 else _gaussian_like(variance, rho, delta_o)
    if rule == "approx":  # the steps' deltas, all that the filter can ever grant
        delta_o = _up(delta_o + (total[1] - float(full["delta_tail"])))
    return {**out, "epsilon": eps, "delta": delta_o}


def _gaussian_like(variance: float, rho: float, delta_o: float) -> float:
    """V / 2 + x(V), rounded up."""
    return _up(_up(variance / 2.0) + mixture_boundary(variance, rho, delta_o))
