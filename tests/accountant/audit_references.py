"""Independent references for the soundness audit of the accountant's newest paths.

Nothing here imports the accountant: every value is computed from the mechanism's definition,
at 60 digits with mpmath where a closed form or a one-dimensional integral exists, and from
dp-accounting otherwise (its pessimistic estimate is an upper bound, its optimistic one a lower
bound, up to its own truncation).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import mpmath as mp
import numpy as np

from dpledger.core.events import (
    Event,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
)

__all__ = [
    "DPS",
    "adaptive_br_policy_delta",
    "adaptive_policy",
    "allocation_two_steps_delta",
    "approx_dp_delta",
    "br_single_delta",
    "brr_composition_delta",
    "dpa_laplace_bracket",
    "dpa_poisson_gaussian_bracket",
    "dpa_randomized_response",
    "dpa_rr_composition_epsilon",
    "dpa_sampled",
    "epsilon_from_delta",
    "gaussian_delta",
    "gaussian_with_rr_delta",
    "grr_composition_delta",
    "laplace_delta",
    "lattice_adaptive_br_delta",
    "long_parts",
    "rr_composition_delta",
    "sampled_gaussian_delta",
    "sampled_gaussian_two_steps_delta",
    "sampled_gaussian_with_rr_delta",
    "zcdp_epsilon",
]

#: working precision of every mpmath reference (decimal digits)
DPS = 60


def _ncdf(x: mp.mpf) -> mp.mpf:
    return mp.ncdf(x)


def gaussian_delta(mu: float | mp.mpf, eps: float | mp.mpf) -> mp.mpf:
    """Exact curve of the Gaussian pair N(mu, 1) vs N(0, 1) (Balle & Wang 2018)."""
    with mp.workdps(DPS):
        mu, eps = mp.mpf(mu), mp.mpf(eps)
        return _ncdf(-eps / mu + mu / 2) - mp.exp(eps) * _ncdf(-eps / mu - mu / 2)


def laplace_delta(eps0: float, eps: float) -> mp.mpf:
    """Exact curve of one Laplace release whose loss spans [-eps0, eps0]."""
    with mp.workdps(DPS):
        eps0m, epsm = mp.mpf(eps0), mp.mpf(eps)
        if epsm >= eps0m:
            return mp.mpf(0)
        if epsm <= -eps0m:
            return 1 - mp.exp(epsm)
        return 1 - mp.exp((epsm - eps0m) / 2)


def _discrete_delta(losses: Sequence[mp.mpf], masses: Sequence[mp.mpf], eps: mp.mpf) -> mp.mpf:
    """E_P[(1 - e^(eps - L))_+] of a finite pair given by its P-masses."""
    total = mp.mpf(0)
    for loss, mass in zip(losses, masses, strict=True):
        if loss > eps:
            total += mass * (1 - mp.exp(eps - loss))
    return total


def rr_composition_delta(eps0: float, k: int, eps: float, dps: int = DPS) -> mp.mpf:
    """Exact curve of ``k`` binary randomized responses at ``eps0`` (a binomial), at ``dps``
    digits (an ``eps0`` of 1e-300 needs more than 300)."""
    with mp.workdps(dps):
        e0 = mp.mpf(eps0)
        p = mp.exp(e0) / (1 + mp.exp(e0))
        losses = [(2 * j - k) * e0 for j in range(k + 1)]
        masses = [mp.binomial(k, j) * p**j * (1 - p) ** (k - j) for j in range(k + 1)]
        return _discrete_delta(losses, masses, mp.mpf(eps))


def approx_dp_delta(eps0: float, delta0: float, k: int, eps: float) -> mp.mpf:
    """Exact curve of ``k`` (eps0, delta0) pairs: failure with delta0, else randomized
    response (Kairouz, Oh & Viswanath 2015)."""
    with mp.workdps(DPS):
        rr = rr_composition_delta(eps0, k, eps) if eps0 > 0 else mp.mpf(0)
        ok = (1 - mp.mpf(delta0)) ** k
        return 1 - ok * (1 - rr)


def grr_masses(eps0: mp.mpf, t: mp.mpf) -> tuple[mp.mpf, mp.mpf]:
    """P-mass of the loss ``t`` and of ``t - eps0`` in the two-point bounded-range pair
    GRR(t): E_P[e^-L] = 1 gives P(L = t) = (e^eps0 - e^t) / (e^eps0 - 1)."""
    p = (mp.exp(eps0) - mp.exp(t)) / mp.expm1(eps0)
    return p, 1 - p


def grr_composition_delta(eps0: float, t: float | mp.mpf, k: int, eps: float) -> mp.mpf:
    """Exact curve of ``k`` copies of GRR(t): attained by ``k`` two-candidate exponential
    mechanisms at ``eps0``, so a lower bound on any composition of ``k`` of them."""
    with mp.workdps(DPS):
        e0, tm = mp.mpf(eps0), mp.mpf(t)
        p, _ = grr_masses(e0, tm)
        losses = [j * tm + (k - j) * (tm - e0) for j in range(k + 1)]
        masses = [mp.binomial(k, j) * p**j * (1 - p) ** (k - j) for j in range(k + 1)]
        return _discrete_delta(losses, masses, mp.mpf(eps))


def brr_composition_delta(eps0: float, k: int, eps: float, points: int = 400) -> mp.mpf:
    """The largest of :func:`grr_composition_delta` over ``points`` positions ``t``."""
    with mp.workdps(DPS):
        return max(
            grr_composition_delta(eps0, mp.mpf(eps0) * i / points, k, eps) for i in range(1, points)
        )


def br_single_delta(eps0: float, eps: float, points: int = 400) -> mp.mpf:
    """One eps0-bounded-range release: the largest GRR(t) curve, by a scan over ``t`` and a
    golden-section refinement (an attained value, so a lower bound of the supremum)."""
    with mp.workdps(DPS):
        e0 = mp.mpf(eps0)

        def f(t: mp.mpf) -> mp.mpf:
            return grr_composition_delta(eps0, t, 1, eps)

        best_i = max(range(1, points), key=lambda i: f(e0 * i / points))
        lo, hi = e0 * (best_i - 1) / points, e0 * (best_i + 1) / points
        g = (mp.sqrt(5) - 1) / 2
        for _ in range(80):
            a, b = hi - g * (hi - lo), lo + g * (hi - lo)
            if f(a) < f(b):
                lo = a
            else:
                hi = b
        return max(f(lo), f(e0 * best_i / points))


def adaptive_br_policy_delta(
    eps0: float, k: int, eps: float, policy: Callable[[int, float], float]
) -> mp.mpf:
    """The curve at ``eps`` of one adaptive strategy of ``k`` eps0-bounded-range releases: the
    ``j``-th release is GRR(policy(j, loss so far)) (any policy is attained, so the value is a
    lower bound on the adaptive optimum), evaluated exactly over all ``2^k`` outcomes."""
    with mp.workdps(DPS):
        e0, target = mp.mpf(eps0), mp.mpf(eps)

        def walk(j: int, loss: mp.mpf, mass: mp.mpf) -> mp.mpf:
            if j == k:
                return mass * (1 - mp.exp(target - loss)) if loss > target else mp.mpf(0)
            t = mp.mpf(policy(j, float(loss)))
            p, r = grr_masses(e0, t)
            return walk(j + 1, loss + t, mass * p) + walk(j + 1, loss + t - e0, mass * r)

        return walk(0, mp.mpf(0), mp.mpf(1))


def lattice_adaptive_br_delta(eps0: float, k: int, eps: float, m: int) -> float:
    """The optimal adaptive composition of ``k`` eps0-bounded-range releases whose positions
    ``t`` are restricted to multiples of ``eps0 / m``: a backward recursion over the loss
    spent so far, which stays on the lattice of step ``eps0 / m``. Every choice is an
    attained strategy, so the value is a lower bound on the adaptive optimum (double
    precision: a relative error near k * 1e-16)."""
    h = eps0 / m
    n = k * m
    losses = np.arange(-n, n + 1) * h
    value = np.where(losses > eps, -np.expm1(eps - losses), 0.0)
    ts = np.arange(1, m)
    p = (math.exp(eps0) - np.exp(ts * h)) / math.expm1(eps0)
    padded = np.zeros(2 * n + 1 + 2 * m)
    for _ in range(k):
        padded[m : m + 2 * n + 1] = value
        best = np.zeros(2 * n + 1)
        for i, pi in zip(ts, p, strict=True):
            up = padded[m + i : m + i + 2 * n + 1]
            down = padded[i : i + 2 * n + 1]
            np.maximum(best, pi * up + (1 - pi) * down, out=best)
        value = best
    return float(value[n])


def zcdp_epsilon(rho: float, delta: float) -> float:
    """Epsilon of rho-zCDP at ``delta`` (Canonne, Kamath & Steinke 2020, Prop. 12, minimised
    over orders), rounded up; an upper bound."""
    with mp.workdps(DPS):
        r, d = mp.mpf(rho), mp.mpf(delta)

        def at(alpha: mp.mpf) -> mp.mpf:
            return alpha * r + (
                mp.log(1 / d) + (alpha - 1) * mp.log(1 - 1 / alpha) - mp.log(alpha)
            ) / (alpha - 1)

        best = min(at(1 + mp.mpf(10) ** (i / 50.0 - 6)) for i in range(0, 600))
        return float(best) * (1 + 1e-12)


def gaussian_with_rr_delta(mu: float, eps0: float, k: int, eps: float) -> mp.mpf:
    """Exact curve of a Gaussian pair (mu) composed with ``k`` binary randomized responses at
    ``eps0``: sum over the binomial of the Gaussian curve shifted by each loss."""
    with mp.workdps(DPS):
        e0 = mp.mpf(eps0)
        p = mp.exp(e0) / (1 + mp.exp(e0))
        total = mp.mpf(0)
        for j in range(k + 1):
            loss = (2 * j - k) * e0
            total += mp.binomial(k, j) * p**j * (1 - p) ** (k - j) * gaussian_delta(mu, eps - loss)
        return total


def sampled_gaussian_delta(q: float, sigma: float, eps: mp.mpf, direction: str) -> mp.mpf:
    """Exact curve of one Poisson-subsampled Gaussian step (add/remove relation): remove is
    P = (1-q) N(0,1) + q N(mu,1) against Q = N(0,1), add the pair swapped. The loss is
    increasing in the output, so each curve is a difference of normal tails."""
    with mp.workdps(DPS):
        qm, mu, e = mp.mpf(q), 1 / mp.mpf(sigma), mp.mpf(eps)
        floor = mp.log1p(-qm)

        def cut(v: mp.mpf) -> mp.mpf:  # the output whose loss is v > floor
            return (mp.log((mp.expm1(v) + qm) / qm) + mu * mu / 2) / mu

        if direction == "remove":
            if e <= floor:
                return -mp.expm1(e)
            x = cut(e)
            return (1 - qm) * _ncdf(-x) + qm * _ncdf(mu - x) - mp.exp(e) * _ncdf(-x)
        if -e <= floor:
            return mp.mpf(0)
        x = cut(-e)
        return _ncdf(x) - mp.exp(e) * ((1 - qm) * _ncdf(x) + qm * _ncdf(x - mu))


def sampled_gaussian_with_rr_delta(
    q: float, sigma: float, eps0: float, k: int, eps: float
) -> mp.mpf:
    """Exact curve of one Poisson-subsampled Gaussian step beside ``k`` binary randomized
    responses at ``eps0``: the worse direction of the binomial mixture of shifted curves."""
    with mp.workdps(DPS):
        e0 = mp.mpf(eps0)
        p = mp.exp(e0) / (1 + mp.exp(e0))
        out = []
        for direction in ("remove", "add"):
            total = mp.mpf(0)
            for j in range(k + 1):
                mass = mp.binomial(k, j) * p**j * (1 - p) ** (k - j)
                total += mass * sampled_gaussian_delta(q, sigma, eps - (2 * j - k) * e0, direction)
            out.append(total)
        return max(out)


def epsilon_from_delta(curve: Callable[[mp.mpf], mp.mpf], delta: float, hi: float) -> mp.mpf:
    """The epsilon at which a nonincreasing curve falls to ``delta`` (bisection to 1e-40)."""
    with mp.workdps(DPS):
        d = mp.mpf(delta)
        lo_e, hi_e = mp.mpf(0), mp.mpf(hi)
        if curve(lo_e) <= d:
            return mp.mpf(0)
        while curve(hi_e) > d:
            hi_e *= 2
        for _ in range(200):
            mid = (lo_e + hi_e) / 2
            if curve(mid) > d:
                lo_e = mid
            else:
                hi_e = mid
            if hi_e - lo_e < mp.mpf(10) ** -40 * max(1, hi_e):
                break
        return (lo_e + hi_e) / 2


def _quad(f: Callable[[mp.mpf], mp.mpf], points: Sequence[mp.mpf]) -> mp.mpf:
    return mp.quad(f, sorted(points), maxdegree=10)


def sampled_gaussian_two_steps_delta(q: float, sigma: float, eps: float) -> mp.mpf:
    """Exact curve (remove direction, add/remove) of two Poisson-subsampled Gaussian steps:
    P = ((1-q) N(0,1) + q N(mu,1))^2 vs Q = N(0,1)^2, by one integral over the first output
    (the second's threshold is explicit: each step's loss is increasing in its output)."""
    with mp.workdps(DPS):
        qm, mu, e = mp.mpf(q), 1 / mp.mpf(sigma), mp.mpf(eps)
        floor = mp.log(1 - qm)

        def loss(x: mp.mpf) -> mp.mpf:
            return mp.log(1 - qm + qm * mp.exp(mu * x - mu * mu / 2))

        def inverse(v: mp.mpf) -> mp.mpf:  # the output whose loss is v > floor
            return (mp.log((mp.exp(v) - 1 + qm) / qm) + mu * mu / 2) / mu

        def tails(x1: mp.mpf) -> tuple[mp.mpf, mp.mpf]:
            need = e - loss(x1)
            if need <= floor:
                return mp.mpf(1), mp.mpf(1)
            u = inverse(need)
            return (1 - qm) * _ncdf(-u) + qm * _ncdf(mu - u), _ncdf(-u)

        def integrand(x1: mp.mpf) -> mp.mpf:
            sp, sq = tails(x1)
            dens_q = mp.npdf(x1)
            dens_p = (1 - qm) * dens_q + qm * mp.npdf(x1 - mu)
            return dens_p * sp - mp.exp(e) * dens_q * sq

        pts = [mp.mpf(-40), mp.mpf(0), mu, mu / 2, inverse(e - floor) if e - floor > floor else 0]
        pts += [mu + 40, mp.mpf(40) + mu]
        return _quad(integrand, [p for p in pts if -40 <= p <= 40 + mu])


def allocation_two_steps_delta(sigma: float, eps: float, direction: str) -> mp.mpf:
    """Exact curve of one epoch of 1-of-2 random allocation of a Gaussian (Chua et al. 2025):
    remove: P = (N(mu e1) + N(mu e2)) / 2 vs Q = N(0, I2); add: the pair swapped. The loss
    L = log((e^(mu x1) + e^(mu x2)) / 2) - mu^2 / 2 is symmetric, and given x1 the event
    L > e (or L < -e) is a half-line in x2."""
    with mp.workdps(DPS):
        mu, e = 1 / mp.mpf(sigma), mp.mpf(eps)

        def cut(x1: mp.mpf, level: mp.mpf) -> mp.mpf | None:
            # x2 with L(x1, x2) = level, or None when every x2 gives a larger loss
            rhs = 2 * mp.exp(level + mu * mu / 2) - mp.exp(mu * x1)
            return None if rhs <= 0 else mp.log(rhs) / mu

        if direction == "remove":

            def integrand(x1: mp.mpf) -> mp.mpf:
                u = cut(x1, e)
                sp, sq = (1, 1) if u is None else (_ncdf(-u), _ncdf(-u))
                # P: x1 ~ N(mu), x2 ~ N(0) by symmetry of L
                return mp.npdf(x1 - mu) * sp - mp.exp(e) * mp.npdf(x1) * sq

        else:

            def integrand(x1: mp.mpf) -> mp.mpf:
                u = cut(x1, -e)  # Q[L < -e] - e^e P[L < -e]
                if u is None:
                    return mp.mpf(0)
                return mp.npdf(x1) * _ncdf(u) - mp.exp(e) * mp.npdf(x1 - mu) * _ncdf(u)

        level = e if direction == "remove" else -e
        edge = (level + mu * mu / 2 + mp.log(2)) / mu  # where the cut leaves the line
        pts = [mp.mpf(-40), mp.mpf(0), mu, edge, mp.mpf(40) + mu]
        return _quad(integrand, [p for p in pts if -40 <= p <= 40 + mu])


def dpa_poisson_gaussian_bracket(
    sigma: float, q: float, steps: int, delta: float, interval: float = 1e-4
) -> tuple[float, float]:
    """(lower, upper) epsilon from dp-accounting for ``steps`` Poisson-subsampled Gaussian
    steps under add/remove: its optimistic estimate (lower) and its pessimistic one (upper)
    at loss spacing ``interval``."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    out = []
    for pessimistic in (False, True):
        pld = pld_lib.from_gaussian_mechanism(
            sigma,
            sampling_prob=q,
            value_discretization_interval=interval,
            pessimistic_estimate=pessimistic,
            use_connect_dots=pessimistic,
        ).self_compose(steps)
        out.append(float(pld.get_epsilon_for_delta(delta)))
    return out[0], out[1]


def dpa_rr_composition_epsilon(
    epsilons: Sequence[float], delta: float, round_up: bool, interval: float = 1e-5
) -> float:
    """Epsilon at ``delta`` of binary randomized responses at ``epsilons`` composed by
    dp-accounting, each epsilon first moved onto its loss grid (down for a lower reference:
    randomized response at a smaller epsilon is a post-processing of the larger one; up for
    an upper one), so that its pair is represented exactly."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    total = None
    for eps in epsilons:
        steps = math.ceil(eps / interval) if round_up else math.floor(eps / interval)
        e = steps * interval
        masses = {steps: 1 / (1 + math.exp(-e)), -steps: 1 / (1 + math.exp(e))}
        one = pld_lib.PrivacyLossDistribution.create_from_rounded_probability(
            masses, 0.0, interval, pessimistic_estimate=round_up
        )
        total = one if total is None else total.compose(one)
    assert total is not None
    return float(total.get_epsilon_for_delta(delta))


def dpa_randomized_response(
    eps0: float, buckets: int, count: int, fail: float, pessimistic: bool, interval: float = 1e-4
) -> object:
    """dp-accounting's composition of ``count`` k-ary randomized responses at ``eps0`` after a
    failure of probability ``fail``, ``eps0`` moved onto the loss grid (down for a lower
    reference: a smaller epsilon is a post-processing; up for an upper one)."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    cells = math.ceil(eps0 / interval) if pessimistic else math.floor(eps0 / interval)
    x = cells * interval
    z = math.exp(x) + buckets - 1
    masses = {cells: (1 - fail) * math.exp(x) / z, -cells: (1 - fail) / z}
    if buckets > 2:
        masses[0] = (1 - fail) * (buckets - 2) / z
    one = pld_lib.PrivacyLossDistribution.create_from_rounded_probability(
        masses, fail, interval, pessimistic_estimate=pessimistic
    )
    return one.self_compose(count)


def adaptive_policy(eps0: float, count: int, eps: float) -> Callable[[int, float], float]:
    """A strategy for the adaptive composition: each release's position ``t`` chosen from the
    loss spent so far by a dynamic programme on a loss grid. Only the choice is approximate;
    the strategy's value is computed exactly (:func:`adaptive_br_policy_delta`)."""
    grid = np.linspace(-count * eps0 - 1e-9, count * eps0 + 1e-9, 2001)
    ts = eps0 * np.arange(1, 200) / 200
    p = (math.exp(eps0) - np.exp(ts)) / math.expm1(eps0)
    value = np.where(grid > eps, -np.expm1(eps - grid), 0.0)
    choices = []
    for _ in range(count):
        up = np.interp(grid[:, None] + ts[None, :], grid, value)
        down = np.interp(grid[:, None] + ts[None, :] - eps0, grid, value)
        both = p * up + (1 - p) * down
        choices.append(ts[both.argmax(axis=1)])
        value = both.max(axis=1)
    choices.reverse()
    step = grid[1] - grid[0]

    def policy(j: int, loss: float) -> float:
        i = min(len(grid) - 1, max(0, round((loss - grid[0]) / step)))
        return float(choices[j][i])

    return policy


def dpa_laplace_bracket(epsilons: list[float], delta: float) -> tuple[float, float]:
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    out = []
    for pessimistic in (False, True):
        total = None
        for e in epsilons:
            one = pld_lib.from_laplace_mechanism(
                1 / e, value_discretization_interval=1e-5, pessimistic_estimate=pessimistic
            )
            total = one if total is None else total.compose(one)
        assert total is not None
        out.append(float(total.get_epsilon_for_delta(delta)))
    return out[0], out[1]


def dpa_sampled(sigma: float, q: float, steps: int) -> Callable[[bool], object]:
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    def make(pessimistic: bool) -> object:
        return pld_lib.from_gaussian_mechanism(
            sigma,
            sampling_prob=q,
            value_discretization_interval=1e-4,
            pessimistic_estimate=pessimistic,
            use_connect_dots=pessimistic,
        ).self_compose(steps)

    return make


def long_parts(case: str) -> list[tuple[Event, Callable[[bool], object]]]:
    """The events of a long or mixed composition, each with its dp-accounting maker."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    if case == "long":
        return [
            (
                SelfComposedEvent(PoissonSampledEvent(1e-3, GaussianEvent(1.0)), 10**4),
                dpa_sampled(1.0, 1e-3, 10**4),
            )
        ]
    elif case == "mixed":
        return [
            (SelfComposedEvent(GaussianEvent(5.0), 10), dpa_sampled(5.0, 1.0, 10)),
            (
                SelfComposedEvent(PoissonSampledEvent(0.05, GaussianEvent(1.2)), 300),
                dpa_sampled(1.2, 0.05, 300),
            ),
        ]
    elif case == "laplace":
        return [
            (
                SelfComposedEvent(LaplaceEvent(4.0), 20),
                lambda pessimistic: pld_lib.from_laplace_mechanism(
                    4.0, value_discretization_interval=1e-4, pessimistic_estimate=pessimistic
                ).self_compose(20),
            ),
            (
                SelfComposedEvent(PoissonSampledEvent(0.02, GaussianEvent(0.9)), 500),
                dpa_sampled(0.9, 0.02, 500),
            ),
        ]
    else:
        return [
            (
                SelfComposedEvent(PoissonSampledEvent(0.5, GaussianEvent(2.0)), 100),
                dpa_sampled(2.0, 0.5, 100),
            )
        ]
