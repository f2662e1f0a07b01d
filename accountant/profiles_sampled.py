"""Profiles of Poisson-subsampled mechanisms: the remove and add directions of a sampled base
curve, and the Poisson-subsampled Gaussian under replace-one.
"""

from __future__ import annotations

import math
from collections.abc import (
    Callable,
)

import attrs
import numpy as np
from scipy import (
    special,
)

from dpledger.accountant.profiles_base import (
    _U,
    ACCURATE_LOSS,
    GAUSS_SPAN,
    Array,
    DirectedProfiles,
    InfinitySplit,
    Profile,
    gauss_span,
    symmetric_profiles,
)

__all__ = [
    "INNER_ROUNDING",
    "REPLACE_ONE_ROUNDING",
    "REPLACE_ONE_SHARED_A",
    "REPLACE_ONE_TURN",
    "SUBNORMAL_GUARD",
    "InfinityAtom",
    "poisson_add",
    "poisson_gaussian_replace_one",
    "poisson_remove",
    "replace_one_profiles",
]


#: relative error bound (in units of U) of the sampled curves' inner losses, times a margin
INNER_ROUNDING = 8.0


def _poisson_remove_delta(
    base_delta: Callable[[Array], Array], q: float, side: float = 1.0
) -> Callable[[Array], Array]:
    """The remove curve; its base is read at the inner loss moved by its rounding bound, down
    for an upper curve (``side`` = 1: the base is non-increasing) and up for a lower one
    (``side`` = -1), so that near a kink of the base the rounding errs on the safe side."""
    lo = math.log1p(-q) if q < 1 else -math.inf
    log_q = abs(math.log(q))
    # (e^eps - 1)/q stays below e^700 up to `turn`; beyond, the same value is
    # log(1 + (e^eps - 1)/q) = eps - log q + log1p(-(1 - q) e^{-eps}), without overflow
    turn = max(1.0, ACCURATE_LOSS + math.log(q))

    def delta(eps: Array) -> Array:
        # the branches no point takes are skipped (each point's value is the same)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            # log1p(expm1(min(eps, turn)) / q), in place (the same operations)
            inner = np.asarray(np.minimum(eps, turn), dtype=np.float64)
            np.expm1(inner, out=inner)
            inner /= q
            np.log1p(inner, out=inner)
            above = eps > turn
            if np.any(above):
                far = np.maximum(eps, turn)
                big = far - math.log(q) + np.log1p(-(1 - q) * np.exp(-far))
                inner = np.where(above, big, inner)
            # inner - side * (INNER_ROUNDING u (|inner| + log_q + 1)), in place
            shift = np.asarray(np.abs(inner), dtype=np.float64)
            shift += log_q
            shift += 1.0
            shift *= INNER_ROUNDING * _U
            shift *= side
            finite = np.isfinite(inner)
            moved = np.subtract(inner, shift, out=shift)
            inner = moved if np.all(finite) else np.where(finite, moved, inner)
            keep = eps > lo
            if np.ndim(eps) > 0 and np.all(keep):
                return np.asarray(q * base_delta(inner), dtype=np.float64)
            val = q * base_delta(np.where(keep, inner, 0.0))
            below = -np.expm1(np.minimum(eps, lo if math.isfinite(lo) else 0.0))
        return np.where(keep, val, below)

    return delta


def _poisson_add_delta(
    base_reverse: Callable[[Array], Array], q: float, side: float = 1.0
) -> Callable[[Array], Array]:
    """The add curve c * delta0_rev(alpha), c = 1 - e^eps (1 - q) = -expm1(eps + log(1 - q)),
    alpha = eps + log q - log c, without cancellation; both are moved by their rounding bounds
    (c up and alpha down for an upper curve, ``side`` = 1; the other way for a lower one)."""
    log_keep = math.log1p(-q) if q < 1 else -math.inf
    log_q = math.log(q)

    def delta(eps: Array) -> Array:
        # where c > 0 at every point, the masks are skipped (each point's value is the same)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            # in place, the same operations as out of place
            charge = side * INNER_ROUNDING * _U
            s = np.asarray(eps + log_keep, dtype=np.float64)
            if math.isfinite(log_keep):
                moved = np.asarray(np.abs(eps), dtype=np.float64)
                moved += abs(log_keep)
                moved *= charge
                s -= moved
            c = np.negative(np.expm1(s, out=s), out=s)
            live = c > 0
            whole = np.ndim(eps) > 0 and bool(np.all(live))
            log_c = np.asarray(np.log(c if whole else np.where(live, c, 1.0)), dtype=np.float64)
            alpha = np.asarray(eps + log_q, dtype=np.float64)
            alpha -= log_c
            moved = np.asarray(np.abs(eps), dtype=np.float64)
            moved += abs(log_q)
            moved += np.abs(log_c)
            moved *= charge
            alpha -= moved
            if whole:
                return np.asarray(c * base_reverse(alpha), dtype=np.float64)
            val = c * base_reverse(np.where(live, alpha, 0.0))
        return np.where(live, val, 0.0)

    return delta


def _symmetric_base(base: Profile, q: float) -> bool:
    return base.dual is base.delta and q < 1


def _zero_top(delta: Callable[[Array], Array], hi: float, base_top_is_zero: bool) -> float:
    """The top loss raised, by at most ~1e-6 of itself, until the curve is 0 there, when the
    base is pure (its curve is 0 at its own top): the safe-side rounding of an upper curve can
    leave it positive at the rounded top, and pure composition needs the 0."""
    if not base_top_is_zero:
        return hi
    # hi, then hi + step for the 30 steps 2^-50 |hi| doubled each time, in one evaluation (the
    # curves are elementwise): the first of them where the curve is 0
    steps = (max(abs(hi), 1e-300) * 2.0**-50) * 2.0 ** np.arange(30, dtype=np.float64)
    tried = np.concatenate([[hi], hi + steps])
    zero = np.flatnonzero(np.asarray(delta(tried)) == 0.0)
    return float(tried[zero[0]]) if zero.size else hi


def _pure_top(base: Profile) -> bool:
    return math.isfinite(base.loss_hi) and float(base(np.array([base.loss_hi]))[0]) == 0.0


def _widened(
    base: Profile, make: Callable[[Profile], Profile], scale: float
) -> Callable[[float], Profile] | None:
    """The widening of a curve made by ``make`` from ``base``: ``make`` of the base widened
    for the level times ``scale`` (None when the base cannot be widened)."""
    base_widen = base.widen
    if base_widen is None:
        return None
    return lambda level: make(base_widen(min(level * scale, 1.0)))


@attrs.frozen
class InfinityAtom(Profile):
    """The curve ``m + rest(eps)`` of a pair whose law P alone gives, with probability ``m``,
    an outcome Q never gives (loss +infinity), while every outcome Q gives P may give too:
    ``rest`` is the curve of the other outcomes, a sub-pair of P-mass ``1 - m`` and Q-mass 1
    (unlike :class:`~dpledger.accountant.profiles_base.InfinitySplit`, Q has no mass at
    -infinity). ``mass`` brackets ``m``: its dominated pair
    (:func:`~dpledger.accountant.pld_dominated.discretise_lower`) keeps ``mass[0]`` at
    +infinity and a dominated sub-pair of ``rest`` of P-mass at most ``1 - m``."""

    rest: Profile = attrs.field(kw_only=True)
    mass: tuple[float, float] = attrs.field(kw_only=True)


def poisson_remove(base: Profile, q: float, side: float = 1.0) -> Profile:
    """(1-q)Q0 + qP0 vs Q0: delta'(eps') = q * delta0(log(1 + (e^eps' - 1)/q)); an upper curve
    (``side`` = 1) or a lower one (``side`` = -1), differing only in how rounding is charged.
    A lower curve of a base that names its mass ``D`` at +infinity names its own, ``q D``
    (:func:`_remove_atom`)."""
    plain = _poisson_remove(base, q, side)
    if side < 0 and isinstance(base, InfinitySplit) and 0.0 < base.inf_lower < 1.0 and q < 1:
        return _remove_atom(plain, base, q, side)
    return plain


def _remove_atom(plain: Profile, base: InfinitySplit, q: float, side: float) -> InfinityAtom:
    """The remove curve of a base ``D + (1 - D) f0`` as ``m + rest``: the base's P-only
    outcome, taken with probability q, is the sampled pair's (``m = q D``); its Q-only outcome
    has P-mass ``(1 - q) D`` after sampling, so Q keeps no outcome of its own. With
    ``lo = log(1 - q)``, ``rest = (1 - D) q f0(log(1 + (e^eps - 1)/q))`` above ``lo`` (the
    sampled finite pair's curve times ``1 - D``) and ``1 - m - e^eps`` at or below it."""
    d0 = base.inf_lower
    m = q * d0
    mass = (m * (1 - 2 * _U), m * (1 + 2 * _U))
    finite = _poisson_remove_delta(base.finite.delta, q, side)
    lo = plain.loss_lo
    keep = 1.0 - d0

    def rest(eps: Array) -> Array:
        with np.errstate(invalid="ignore", over="ignore"):
            above = keep * np.asarray(finite(eps))
            below = np.maximum(-np.expm1(np.minimum(eps, 0.0)) - m, 0.0)
        return np.asarray(np.where(eps > lo, above, below), dtype=np.float64)

    name = f"{plain.name}, rest"
    part = Profile(rest, plain.loss_lo, plain.loss_hi, plain.exact, name, None, plain.accurate_hi)
    return InfinityAtom(
        plain.delta,
        plain.loss_lo,
        plain.loss_hi,
        plain.exact,
        plain.name,
        plain.dual,
        plain.accurate_hi,
        plain.widen,
        rest=part,
        mass=mass,
    )


def _poisson_remove(base: Profile, q: float, side: float) -> Profile:
    """:func:`poisson_remove`'s curve, without naming a mass at +infinity."""
    lo = math.log1p(-q) if q < 1 else base.loss_lo
    top = base.loss_hi
    # log(1 + q (e^top - 1)) = top + log(q + (1 - q) e^{-top}), without overflow
    hi = (
        math.log1p(q * math.expm1(top))
        if top < 700
        else top + math.log(q + (1 - q) * math.exp(-top))
    )
    curve = _poisson_remove_delta(base.delta, q, side)
    if side > 0:
        hi = _zero_top(curve, hi, _pure_top(base))
    dual = _poisson_add_delta(base.delta, q, side) if _symmetric_base(base, q) else None
    # the curve at eps reads the base at a loss >= eps: accurate while that loss is
    accurate = base.accurate_hi + math.log(q) if math.isfinite(base.accurate_hi) else math.inf
    name = f"poisson_remove(q={q:g}, {base.name})"
    # at its top the curve is q times the base's at its own top
    widen = _widened(base, lambda wide: poisson_remove(wide, q, side), 1.0 / q)
    return Profile(curve, lo, hi, base.exact, name, dual, accurate, widen)


def poisson_add(base_reverse: Profile, q: float, side: float = 1.0) -> Profile:
    """Q0 vs (1-q)Q0 + qP0, from the reverse base curve delta0_rev (Zhu, Dong, Wang 2022); an
    upper curve (``side`` = 1) or a lower one (``side`` = -1)."""
    # the curve is 0 once the base is read beyond its top loss T: at eps >= -log(1 - q + q e^-T)
    # (-log(1 - q) for an unbounded base)
    top = base_reverse.loss_hi
    hi = -math.log1p(q * math.expm1(-top)) if q < 1 else top
    lo_inner = base_reverse.loss_hi
    lo = -math.log1p(q * math.expm1(lo_inner)) if lo_inner < 700 else -lo_inner
    curve = _poisson_add_delta(base_reverse.delta, q, side)
    if side > 0:
        hi = _zero_top(curve, hi, q < 1 or _pure_top(base_reverse))
    symmetric = _symmetric_base(base_reverse, q)
    dual = _poisson_remove_delta(base_reverse.delta, q, side) if symmetric else None
    # below its top loss -log(1 - q) the curve reads the base at log(e^eps q / c); at q = 1 that
    # is e^eps itself
    accurate = base_reverse.accurate_hi if q < 1 else min(base_reverse.accurate_hi, ACCURATE_LOSS)
    name = f"poisson_add(q={q:g}, {base_reverse.name})"
    # at its top the curve is c <= 1 times the reverse base's at its own top
    widen = _widened(base_reverse, lambda wide: poisson_add(wide, q, side), 1.0)
    return Profile(curve, lo, hi, base_reverse.exact, name, dual, accurate, widen)


#: losses above which the replace-one Poisson curve is evaluated in log space
REPLACE_ONE_TURN = 200.0


#: tails below this are near the subnormal range: the replace-one curve uses log space there
SUBNORMAL_GUARD = 1e-290


#: per-term rounding of the replace-one curve's tails, in units of U (1 + |log T|): measured
#: 1.6 (4e-9 relative at a = 1e-3, T ~ 1e-270, the terms 3.7e4 times the curve), times a margin
REPLACE_ONE_ROUNDING = 8.0


#: from this a = 1/sigma up, that rounding stays far below REL_MARGIN of the curve (measured:
#: 0.12 REL_MARGIN at a = 0.4, 0.014 at a = 1), so one curve serves as upper and lower bound
REPLACE_ONE_SHARED_A = 0.4


def replace_one_profiles(a: float, q: float) -> DirectedProfiles:
    """Both directions of Poisson sampling under replace-one (the pair is symmetric): one curve
    for a >= REPLACE_ONE_SHARED_A, else an upper curve that adds its rounding bound and a lower
    one that subtracts it (for small a the curve is a difference of nearly equal tails)."""
    if a >= REPLACE_ONE_SHARED_A:
        return symmetric_profiles(poisson_gaussian_replace_one(a, q))
    upper = poisson_gaussian_replace_one(a, q, 1.0)
    lower = poisson_gaussian_replace_one(a, q, -1.0)
    return DirectedProfiles(upper, upper, lower, lower)


def poisson_gaussian_replace_one(
    a: float, q: float, charge: float = 0.0, span: float = GAUSS_SPAN
) -> Profile:
    """(1-q)N(0)+qN(a) vs (1-q)N(0)+qN(-a): Poisson sampling under replace-one (symmetric).

    ``charge`` = 1 adds the bound on the rounding of the tails' difference (an upper curve),
    -1 subtracts it (a lower one), 0 leaves it to the profile's relative margin. The loss
    range holds the outputs within ``a + span`` of 0 (:func:`_replace_one_profile`)."""
    a2 = a * a

    def delta(eps: Array) -> Array:
        ex = np.exp(np.minimum(eps, 700.0))
        gap = -np.expm1(np.minimum(eps, 700.0))  # 1 - e^eps, without cancellation near 0
        b = (1 - q) * gap
        with np.errstate(over="ignore"):  # only beyond REPLACE_ONE_TURN, replaced below
            disc = np.sqrt(b * b + 4 * q * q * np.exp(np.minimum(eps - a2, 700.0)))
        with np.errstate(divide="ignore", invalid="ignore"):
            w_pos = (-b + disc) / (2 * q)
            w_neg = 2 * q * np.exp(np.minimum(eps - a2, 700.0)) / (b + disc)
            w = np.where(b < 0, w_pos, w_neg)
            v = np.log(w)
        # where w under- or overflows (|eps| or a large), the same root in log space
        lost = ~np.isfinite(v)
        if np.any(lost):
            v = np.where(lost, _replace_one_log_root(a, q, np.where(lost, eps, 0.0)), v)
        x = (v + a2 / 2) / a
        sf = special.ndtr
        p_sf = (1 - q) * sf(-x) + q * sf(-(x - a))
        q_sf = (1 - q) * sf(-x) + q * sf(-(x + a))
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            out = (1 - q) * gap * sf(-x) + q * (sf(-(x - a)) - ex * sf(-(x + a)))
            if charge:
                terms = np.abs((1 - q) * gap * sf(-x)) + q * sf(-(x - a)) + q * ex * sf(-(x + a))
                rounding = REPLACE_ONE_ROUNDING * _U * (1.0 + np.abs(np.log(terms))) * terms
                out = out + charge * np.where(np.isfinite(rounding), rounding, 0.0)
        out = np.where(np.isfinite(out), out, p_sf - ex * q_sf)
        # b * b overflows once e^eps passes ~1e154, and e^eps times a subnormal Q-tail loses its
        # digits: there, log space
        far = (eps > REPLACE_ONE_TURN) | (q_sf < SUBNORMAL_GUARD)
        if np.any(far):
            out = np.where(far, _replace_one_far(a, q, np.where(far, eps, REPLACE_ONE_TURN)), out)
        return np.asarray(np.maximum(out, 0.0), dtype=float)

    return _replace_one_profile(delta, a, q, charge, span)


def _replace_one_profile(
    delta: Callable[[Array], Array], a: float, q: float, charge: float, span: float
) -> Profile:
    """The replace-one curve ``delta`` on the losses of the outputs within ``a + span`` of 0
    (all but ``Phi(-span)`` of either law on each side), widened for a tail level by
    :func:`gauss_span`."""
    # for |x| <= a + span the loss is at most log(1 + e^t), t = log(q / (1 - q)) + a^2 / 2 +
    # span a, and at least minus that
    t = math.log(q) - math.log1p(-q) + a * a / 2 + span * a
    hi = (t if t > 0 else 0.0) + math.log1p(math.exp(-abs(t)))
    name = f"poisson_replace_one(q={q:g}, gaussian a={a:g}{', charged' if charge else ''})"
    if span != GAUSS_SPAN:
        name = f"{name[:-1]}, z={span:.4g})"

    def widen(level: float) -> Profile:
        return poisson_gaussian_replace_one(a, q, charge, max(span, gauss_span(level)))

    return Profile(delta, -hi, hi, True, name, delta, math.inf, widen)


def _replace_one_log_root(a: float, q: float, eps: Array) -> Array:
    """log w of the boundary w = phi(x - a) / phi(x) where the replace-one loss equals eps.

    w solves q w^2 + b w - q e^{eps - a^2} = 0 with b = (1 - q)(1 - e^eps); its positive root
    is (|b| + r) / (2q) for b < 0 and 2q e^{eps - a^2} / (b + r) for b >= 0, r = sqrt(b^2 +
    4 q^2 e^{eps - a^2}); every term is taken in log space."""
    with np.errstate(divide="ignore"):
        # log |e^eps - 1|, without overflow
        log_gap = np.where(
            eps > 0, eps + np.log(-np.expm1(-np.abs(eps))), np.log(-np.expm1(-np.abs(eps)))
        )
    log_b = math.log1p(-q) + log_gap
    log_c = math.log(4 * q * q) + eps - a * a
    log_r = 0.5 * np.logaddexp(2 * log_b, log_c)
    pos = np.logaddexp(log_b, log_r) - math.log(2 * q)
    neg = math.log(2 * q) + eps - a * a - np.logaddexp(log_b, log_r)
    return np.asarray(np.where(eps > 0, pos, neg), dtype=float)


def _replace_one_far(a: float, q: float, eps: Array) -> Array:
    """The replace-one Poisson curve at large eps in log space (e^eps overflows).

    With x the boundary (:func:`_replace_one_log_root`),
    delta = P(x' > x) - e^eps Q(x' > x) = e^{log_p} (1 - e^{t2 - log_p}) with
    log_p = log((1 - q) S(x) + q S(x - a)), t2 = eps + log((1 - q) S(x) + q S(x + a)), S the
    normal tail.
    """
    x = (_replace_one_log_root(a, q, eps) + a * a / 2) / a
    log_tail = special.log_ndtr
    t2 = eps + np.logaddexp(math.log1p(-q) + log_tail(-x), math.log(q) + log_tail(-x - a))
    log_p = np.logaddexp(math.log1p(-q) + log_tail(-x), math.log(q) + log_tail(a - x))
    out = np.exp(log_p) * -np.expm1(np.minimum(t2 - log_p, 0.0))
    return np.asarray(out, dtype=float)
