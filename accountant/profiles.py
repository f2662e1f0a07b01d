"""Privacy profiles of leaf mechanisms, in both neighbouring directions.

A profile is the hockey-stick curve ``delta(eps) = sup_S P(S) - e^eps Q(S)`` of the pair
``(P, Q) = (M(D), M(D'))``. Each :class:`Profile` returns *upper bounds* (exact closed forms
evaluated stably, inflated by a relative margin for floating-point error) and the finite range
of privacy-loss values outside which the remaining mass is negligible.

Noise is in units of the per-unit add/remove contribution bound ``C``; the adjacency supplies the
factor 2 of replace-one (see :func:`leaf_profiles`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import attrs
import numpy as np
from numpy.typing import NDArray
from scipy import special

from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import UnsupportedEventError
from dpledger.core.events import (
    ApproxDPEvent,
    Event,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    PureDPEvent,
    RandomizedResponseEvent,
    ReportNoisyMaxEvent,
    SampledWithoutReplacementEvent,
    TabulatedProfileEvent,
)

Array = NDArray[np.float64]
#: relative inflation of every delta value, covering floating-point error of the closed forms
REL_MARGIN = 1e-10
#: number of standard deviations kept on each side of Gaussian losses (tail < 1e-23)
GAUSS_SPAN = 10.0


@attrs.frozen
class Profile:
    """An upper-bound hockey-stick curve and the loss range that carries its finite mass."""

    delta: Callable[[Array], Array]
    loss_lo: float
    loss_hi: float
    exact: bool
    name: str
    #: curve of the swapped pair (Q, P); gives delta(eps) - (1 - e^eps) = e^eps * dual(-eps)
    #: without cancellation for eps < 0
    dual: Callable[[Array], Array] | None = None

    def __call__(self, eps: Array) -> Array:
        d = self.delta(np.asarray(eps, dtype=float))
        return np.minimum(1.0, np.maximum(0.0, d) * (1 + REL_MARGIN))

    def excess(self, eps: Array) -> Array:
        """delta(eps) - (1 - e^eps) >= 0, accurate for eps < 0 when the dual curve is known."""
        eps = np.asarray(eps, dtype=float)
        if self.dual is None:
            return np.maximum(0.0, self(eps) + np.expm1(eps))
        d = np.maximum(0.0, self.dual(-eps)) * (1 + REL_MARGIN)
        return np.asarray(np.exp(eps) * np.minimum(d, 1.0), dtype=float)


def _log_ndtr_diff_delta(a: Array, eps: Array, mu: float) -> Array:
    """Phi(a) - e^eps Phi(a - mu), computed without cancellation."""
    la = special.log_ndtr(a)
    lb = special.log_ndtr(a - mu)
    with np.errstate(over="ignore", invalid="ignore"):
        diff = eps + lb - la
        out = np.exp(la) * -np.expm1(np.minimum(diff, 0.0))
    return np.where(diff >= 0, 0.0, out)


def gaussian_delta(mu: float) -> Callable[[Array], Array]:
    """Exact profile of N(mu, 1) vs N(0, 1) (Balle & Wang 2018, Thm 8); symmetric."""

    def delta(eps: Array) -> Array:
        a = -eps / mu + mu / 2
        return _log_ndtr_diff_delta(a, eps, mu)

    return delta


def gaussian_profile(mu: float) -> Profile:
    lo = mu * mu / 2 - GAUSS_SPAN * mu
    hi = mu * mu / 2 + GAUSS_SPAN * mu
    d = gaussian_delta(mu)
    return Profile(d, min(lo, -hi), hi, True, f"gaussian(mu={mu:.6g})", d)


def laplace_delta(eps0: float) -> Callable[[Array], Array]:
    """Exact profile of Laplace noise with eps0 = sensitivity/scale (symmetric)."""

    def delta(eps: Array) -> Array:
        mid = -np.expm1((np.clip(eps, -eps0, eps0) - eps0) / 2)
        low = -np.expm1(eps)
        return np.where(eps >= eps0, 0.0, np.where(eps <= -eps0, low, mid))

    return delta


def discrete_delta(losses: Array, masses: Array, inf_mass: float) -> Callable[[Array], Array]:
    """Profile of a pair given by P-masses at finite losses plus an atom at +infinity."""

    def delta(eps: Array) -> Array:
        e = eps[..., None]
        with np.errstate(over="ignore"):
            terms = masses * np.maximum(0.0, -np.expm1(e - losses))
        return np.asarray(inf_mass + terms.sum(axis=-1), dtype=float)

    return delta


def approx_dp_profile(eps0: float, delta0: float) -> Profile:
    """Tight pair for a black-box (eps0, delta0)-DP release (Kairouz, Oh, Viswanath 2015)."""
    ex = math.exp(eps0)
    losses = np.array([eps0, -eps0])
    masses = (1 - delta0) * np.array([ex / (1 + ex), 1 / (1 + ex)])
    d = discrete_delta(losses, masses, delta0)
    return Profile(d, -eps0, eps0, True, f"approx_dp({eps0:g},{delta0:g})", d)


def randomized_response_profile(eps0: float, k: int) -> Profile:
    ex = math.exp(eps0)
    z = ex + k - 1
    losses = np.array([eps0, 0.0, -eps0])
    masses = np.array([ex / z, (k - 2) / z, 1 / z])
    d = discrete_delta(losses, masses, 0.0)
    return Profile(d, -eps0, eps0, True, f"rr({eps0:g},{k})", d)


def _poisson_remove_delta(
    base_delta: Callable[[Array], Array], q: float
) -> Callable[[Array], Array]:
    lo = math.log1p(-q) if q < 1 else -math.inf

    def delta(eps: Array) -> Array:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            inner = np.log1p(np.expm1(eps) / q)
            val = q * base_delta(np.where(eps > lo, inner, 0.0))
            below = -np.expm1(np.minimum(eps, lo if math.isfinite(lo) else 0.0))
        return np.where(eps > lo, val, below)

    return delta


def _poisson_add_delta(
    base_reverse: Callable[[Array], Array], q: float
) -> Callable[[Array], Array]:
    def delta(eps: Array) -> Array:
        x = np.exp(eps)
        c = 1 - x * (1 - q)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            alpha_log = np.log(x * q / np.where(c > 0, c, 1.0))
            val = c * base_reverse(np.where(c > 0, alpha_log, 0.0))
        return np.where(c > 0, val, 0.0)

    return delta


def _symmetric_base(base: Profile, q: float) -> bool:
    return base.dual is base.delta and q < 1


def poisson_remove(base: Profile, q: float) -> Profile:
    """(1-q)Q0 + qP0 vs Q0: delta'(eps') = q * delta0(log(1 + (e^eps' - 1)/q))."""
    lo = math.log1p(-q) if q < 1 else base.loss_lo
    hi = math.log1p(q * math.expm1(base.loss_hi)) if base.loss_hi < 700 else base.loss_hi
    dual = _poisson_add_delta(base.delta, q) if _symmetric_base(base, q) else None
    return Profile(
        _poisson_remove_delta(base.delta, q),
        lo,
        hi,
        base.exact,
        f"poisson_remove(q={q:g}, {base.name})",
        dual,
    )


def poisson_add(base_reverse: Profile, q: float) -> Profile:
    """Q0 vs (1-q)Q0 + qP0, from the reverse base curve delta0_rev (Zhu, Dong, Wang 2022)."""
    hi = -math.log1p(-q) if q < 1 else base_reverse.loss_hi
    lo_inner = base_reverse.loss_hi
    lo = -math.log1p(q * math.expm1(lo_inner)) if lo_inner < 700 else -lo_inner
    symmetric = _symmetric_base(base_reverse, q)
    dual = _poisson_remove_delta(base_reverse.delta, q) if symmetric else None
    return Profile(
        _poisson_add_delta(base_reverse.delta, q),
        lo,
        hi,
        base_reverse.exact,
        f"poisson_add(q={q:g}, {base_reverse.name})",
        dual,
    )


def poisson_gaussian_replace_one(a: float, q: float) -> Profile:
    """(1-q)N(0)+qN(a) vs (1-q)N(0)+qN(-a): Poisson sampling under replace-one (symmetric)."""
    a2 = a * a

    def delta(eps: Array) -> Array:
        ex = np.exp(np.minimum(eps, 700.0))
        b = (1 - q) * (1 - ex)
        disc = np.sqrt(b * b + 4 * q * q * np.exp(np.minimum(eps - a2, 700.0)))
        with np.errstate(divide="ignore", invalid="ignore"):
            w_pos = (-b + disc) / (2 * q)
            w_neg = 2 * q * np.exp(np.minimum(eps - a2, 700.0)) / (b + disc)
            w = np.where(b < 0, w_pos, w_neg)
            v = np.log(w)
        x = (v + a2 / 2) / a
        sf = special.ndtr
        p_sf = (1 - q) * sf(-x) + q * sf(-(x - a))
        q_sf = (1 - q) * sf(-x) + q * sf(-(x + a))
        with np.errstate(over="ignore", invalid="ignore"):
            out = (1 - q) * (1 - ex) * sf(-x) + q * (sf(-(x - a)) - ex * sf(-(x + a)))
        out = np.where(np.isfinite(out), out, p_sf - ex * q_sf)
        return np.asarray(np.maximum(out, 0.0), dtype=float)

    hi = 2 * a * (a + GAUSS_SPAN)
    return Profile(delta, -hi, hi, True, f"poisson_replace_one(q={q:g}, gaussian a={a:g})", delta)


def self_dual(profile: Profile, exact: bool) -> Profile:
    """The curve equal to ``profile`` for eps >= 0 and to its dual extension for eps < 0.

    For a symmetric neighbouring relation the true curve is self-dual,
    delta(eps) = 1 - e^eps + e^eps delta(-eps), so an upper bound valid for eps >= 0 extends to
    all eps this way.
    """

    def delta(eps: Array) -> Array:
        pos = profile.delta(np.abs(eps))
        with np.errstate(over="ignore", invalid="ignore"):
            neg = -np.expm1(np.minimum(eps, 0.0)) + np.exp(np.minimum(eps, 0.0)) * pos
        return np.where(eps >= 0, pos, neg)

    hi = max(profile.loss_hi, -profile.loss_lo)
    return Profile(delta, -hi, hi, exact, f"self_dual({profile.name})", delta)


@attrs.frozen
class DirectedProfiles:
    """Upper curves for the two directions, and curves that are valid *lower* bounds."""

    remove: Profile
    add: Profile
    lower_remove: Profile
    lower_add: Profile


def _symmetric(p: Profile) -> DirectedProfiles:
    return DirectedProfiles(p, p, p, p)


def _base_profile(event: Event, factor: float) -> Profile:
    """Unsampled symmetric base mechanism with contribution factor ``factor``."""
    if isinstance(event, GaussianEvent):
        return gaussian_profile(factor / event.noise_multiplier)
    if isinstance(event, LaplaceEvent):
        e0 = factor / event.noise_multiplier
        d = laplace_delta(e0)
        return Profile(d, -e0, e0, True, f"laplace(eps0={e0:g})", d)
    if isinstance(event, PureDPEvent | ExponentialMechanismEvent | ReportNoisyMaxEvent):
        return approx_dp_profile(event.epsilon, 0.0)
    if isinstance(event, ApproxDPEvent):
        return approx_dp_profile(event.epsilon, event.delta)
    if isinstance(event, RandomizedResponseEvent):
        return randomized_response_profile(event.epsilon, event.num_buckets)
    raise UnsupportedEventError(f"no privacy profile for {event.describe()}")


def _noise_factor(adjacency: Adjacency) -> float:
    return adjacency.sensitivity_factor


def tabulated_delta(epsilons: Array, deltas: Array) -> Callable[[Array], Array]:
    """The chord interpolation, in ``x = e^eps``, of a curve tabulated at ``epsilons``.

    A hockey-stick curve is convex and non-increasing in ``x`` with value 1 at ``x = 0``, so
    the chord through upper bounds at neighbouring points bounds it from above in between;
    below the first point the chord from ``(0, 1)`` does, and beyond the last point the last
    value does."""
    xs = np.exp(epsilons)
    ds = np.maximum.accumulate(np.asarray(deltas, dtype=float)[::-1])[::-1]  # non-increasing

    def delta(eps: Array) -> Array:
        x = np.exp(np.minimum(eps, 700.0))
        inside = np.interp(x, xs, ds)
        below = 1.0 - (1.0 - ds[0]) * x / xs[0]
        return np.where(x < xs[0], below, inside)

    return delta


def tabulated_profiles(event: TabulatedProfileEvent, adjacency: Adjacency) -> DirectedProfiles:
    """Upper curves of a tabulated profile (no lower bound: the table is only an upper
    bound); refused under another relation than the one it was tabulated for.

    Below epsilon 0 each direction's curve is read off the other direction's table:
    ``delta(eps) = 1 - e^eps + e^eps * delta_swapped(-eps)`` (the table bounds both
    directions when ``deltas_add`` is None)."""
    if adjacency.relation != event.relation:
        raise UnsupportedEventError(
            f"{event.describe()} was tabulated under {event.relation}, not "
            f"{adjacency.relation}; tabulate it under the relation of the source"
        )
    eps = np.asarray(event.epsilons, dtype=float)
    remove = tabulated_delta(eps, np.asarray(event.deltas, dtype=float))
    add = remove
    if event.deltas_add is not None:
        add = tabulated_delta(eps, np.asarray(event.deltas_add, dtype=float))
    hi = max(float(eps[-1]), 0.0)

    def profile(own: Callable[[Array], Array], swapped: Callable[[Array], Array]) -> Profile:
        def delta(values: Array) -> Array:
            neg = np.minimum(values, 0.0)
            below = -np.expm1(neg) + np.exp(neg) * np.minimum(swapped(-neg), 1.0)
            return np.where(values >= 0, own(np.maximum(values, 0.0)), below)

        name = f"tabulated({event.name or 'plugin'})"
        return Profile(delta, -hi, hi, False, name, swapped)

    up_remove = profile(remove, add)
    up_add = up_remove if add is remove else profile(add, remove)
    return DirectedProfiles(up_remove, up_add, up_remove, up_add)


def leaf_profiles(event: Event, adjacency: Adjacency) -> DirectedProfiles:
    """Directed profiles of a leaf or sampled-leaf event under ``adjacency``'s relation."""
    if isinstance(event, TabulatedProfileEvent):
        return tabulated_profiles(event, adjacency)
    factor = _noise_factor(adjacency)
    if isinstance(event, PoissonSampledEvent):
        q = event.sampling_probability
        inner = event.event
        if adjacency.relation == "add_remove":
            base = _base_profile(inner, 1.0)
            if q == 1.0:
                return _symmetric(base)
            return _symmetric_pair(poisson_remove(base, q), poisson_add(base, q))
        if isinstance(inner, GaussianEvent):
            if q == 1.0:
                return _symmetric(_base_profile(inner, factor))
            return _symmetric(poisson_gaussian_replace_one(1.0 / inner.noise_multiplier, q))
        raise UnsupportedEventError(
            f"Poisson sampling of {inner.kind} under replace-one has no tight analysis here; "
            "use add/remove adjacency or fixed-size sampling without replacement"
        )
    if isinstance(event, SampledWithoutReplacementEvent):
        if adjacency.relation != "replace_one":
            raise UnsupportedEventError(
                "sampling without replacement is analysed under replace-one adjacency only; "
                "declare relation = 'replace_one' (or use Poisson sampling with add/remove)"
            )
        q = event.sampling_probability
        base = _base_profile(event.event, factor)  # substitution pair of the base mechanism
        if q == 1.0:
            return _symmetric(base)
        # Upper: Balle, Barthe, Gaboardi (2018), Thm 10 for eps >= 0, extended to eps < 0 by the
        # symmetry of the substitution relation. Lower: the achievable configuration in which the
        # record swapped out of the batch equals the original record (an add-type pair).
        upper = self_dual(poisson_remove(base, q), exact=False)
        lower = poisson_add(base, q)
        return DirectedProfiles(upper, upper, lower, poisson_remove(base, q))
    return _symmetric(_base_profile(event, factor))


def _symmetric_pair(remove: Profile, add: Profile) -> DirectedProfiles:
    return DirectedProfiles(remove, add, remove, add)
