"""Reading certified (epsilon, delta) off a composed PLD.

Upper bounds read the composed masses with wrapped and truncated mass charged to delta. Lower
bounds: the same chord shifted down by one grid step lies below the true curve of an exact
profile, so composing shifted chords (= the upper composition shifted by ``count * h``, read with
its Hoeffding shift) gives a dominated pair; mass below the window is subtracted from them. A
composition of dominated pairs also adds a lower bound of its mass at +infinity
(:func:`infinity_lower`).
"""

from __future__ import annotations

import collections
import functools
import math
import weakref

import numpy as np
from scipy import (
    special,
)

from dpledger.accountant.pld_discrete import (
    Array,
    U,
)
from dpledger.accountant.pld_fft import (
    ComposedPLD,
)

__all__ = [
    "BELOW_RANGE_MASS",
    "DISCOUNT_SPAN",
    "LOWER_FLOOR",
    "SUM_SLACK",
    "delta_at",
    "epsilon_for",
    "excess_mass",
    "floored_lower",
    "infinity_lower",
    "lower_eta",
    "lower_shift",
    "rounding_bias",
    "wrap_above",
]


def wrap_above(pld: ComposedPLD, x: float) -> float:
    """Bound on the untilted mass wrapped from above the window onto losses > ``x``.

    A loss L >= top lands at L - mW (W the window width) with weight e^{tilt (L - landing)};
    landing above x needs L > x + W, so with y = max(x + W, top) the total is at most
    e^{-tilt x} E[e^{tilt S}; S >= y] <= e^{K(tilt + theta) - tilt x - theta y}. The bound is
    not capped at one: untilted by up to e^{tilt W}, the wrapped mass can exceed one. Untilted,
    every wrapped loss keeps its mass, so the total is also at most P(S >= top), the mass above
    the window charged to upper bounds (the thetas, chosen for thresholds near the window's
    middle, can leave the Chernoff bound at one for thresholds near its top).
    """
    if pld.parts:
        return math.fsum(wrap_above(part, x) for part in pld.parts) * (1 + 8 * U)
    w = pld.width
    top = (pld.offset + pld.upper.size) * pld.h
    y = max(x + w, top - 8 * U * abs(top))
    best = min(k - pld.tilt * x - th * y for th, k in pld.wrap_thetas)
    exponent = best + 1e-9 * (1.0 + abs(best))
    bound = math.inf if exponent > 700.0 else math.exp(exponent)
    if pld.tilt == 0.0:
        return min(bound, pld.upper_tail)
    return bound


def _below_wrap(pld: ComposedPLD) -> float:
    """Mass wrapped from below the window onto its top, untilted (a bound)."""
    if pld.parts:
        return math.fsum(_below_wrap(part) for part in pld.parts) * (1 + 8 * U)
    return pld.lower_tail * math.exp(-pld.tilt * pld.width)


def _suffix(arr: Array) -> Array:
    """s_i = sum_{k > i} arr_k."""
    return np.concatenate([np.cumsum(arr[::-1])[::-1][1:], [0.0]])


@functools.lru_cache(maxsize=4)
def _factors(size: int, h: float) -> tuple[Array, Array]:
    """(e^{-jh}, e^{jh}) for j < size, read-only (the compositions of one pass share them)."""
    j = np.arange(size)
    down, up = np.exp(-j * h), np.exp(j * h)
    down.flags.writeable = False
    up.flags.writeable = False
    return down, up


def _discounted_suffix(arr: Array, h: float) -> Array:
    """B_i = sum_{k > i} arr_k e^{-(k - i) h}, in blocks short enough that no factor overflows."""
    n = arr.size
    out = np.empty(n)
    block = max(1, int(DISCOUNT_SPAN / h))
    down, up = _factors(min(n, block), h)  # e^{-jh}, e^{jh} (shared by every block)
    carry = 0.0  # B at the last index of the block being processed
    for start in range(((n - 1) // block) * block, -1, -block):
        m = min(n, start + block) - start
        w = arr[start : start + m] * down[:m]
        # S_i = sum_{start <= k < end, k > i} w_k
        suffix = np.concatenate([np.cumsum(w[::-1])[::-1][1:], [0.0]])
        out[start : start + m] = up[:m] * suffix + down[:m][::-1] * carry
        carry = math.exp(-h) * (float(arr[start]) + float(out[start]))
    return out


#: largest loss span of one block of :func:`_discounted_suffix` (e^50 is far from overflow)
DISCOUNT_SPAN = 50.0


def rounding_bias(h: float) -> float:
    """Largest mean upward move of a loss by the connect-the-dots split of a bin of width h.

    A loss ``l = e_lo + u`` moves to ``e_lo + h`` with probability
    ``(1 - e^{-u}) / (1 - e^{-h})`` (this preserves its P- and Q-mass), so its mean move is
    ``h (1 - e^{-u})/(1 - e^{-h}) - u``, at most about ``h^2 / 8``.
    """
    u = np.linspace(0.0, h, 257)
    moves = h * -np.expm1(-u) / -math.expm1(-h) - u
    return float(moves.max()) * (1 + 1e-6) + 1e-300


#: probability that any component's loss lies below its discretised range (Gaussian tails at
#: 10 standard deviations are below 1e-23; bounded supports have none; losses lumped below
#: -MAX_LOSS have P-mass at most e^-MAX_LOSS ~ 2.6e-261)
BELOW_RANGE_MASS = 1e-22


def lower_shift(pld: ComposedPLD, eta: float) -> float:
    """Shift s such that S >= S_chord - s except with probability ``eta`` (Hoeffding); 0 for
    a composition of dominated pairs, whose profile is below the mechanism's as it is."""
    if pld.dominated:
        return 0.0
    k = pld.total_count
    return k * rounding_bias(pld.h) + pld.h * math.sqrt(k * math.log(1.0 / eta) / 2.0)


def _upper_extra(pld: ComposedPLD) -> float:
    return pld.inf_mass + pld.upper_tail + pld.dropped


def excess_mass(pld: ComposedPLD) -> float:
    """Mass charged to lower bounds for connect-the-dots masses in excess of a distribution.

    A chord's P-masses are clamped at zero and rounded, so they may hold a little more than a
    distribution (measured: up to ~1e-7 for one pure 10-DP component at 2^18 points); extra
    mass only raises hockey-stick values, so a chord's lower bounds subtract twice the excess
    of its lower brackets over one (the excess itself, and as much again for rounding on the
    kept masses). A composition of dominated pairs is charged nothing: each component's masses
    are, atom by atom, at most those of a probability law of a pair the mechanism dominates,
    and the brackets' mass beyond that composition is wrapped mass, charged where it lands
    above the threshold read (:func:`wrap_above`); what wraps below it is not read
    (proofs_checks/pld_tilted_fft, "Reading lower bounds"). Under a steep tilt that wrapped
    mass sums far above one (it is untilted by e^{tilt W}) and, charged in full, it cost the
    lower bound of sigma = 0.5, q = 1e-4, 1e6 steps at delta = 1e-20 five per cent.
    """
    if pld.dominated:
        return 0.0
    return max(0.0, float(pld.lower.sum()) - 1.0)


def _lower_extra(pld: ComposedPLD, eta: float) -> float:
    """Mass subtracted from every lower bound (wrap-around from above excepted)."""
    below_wrap = _below_wrap(pld)
    if pld.dominated:
        return below_wrap
    extra = pld.total_count * BELOW_RANGE_MASS + 2.0 * excess_mass(pld) + pld.chord_slack
    return below_wrap + eta + extra


#: relative rounding slack of the suffix sums over n terms (per term)
SUM_SLACK = 8 * U


def infinity_lower(pld: ComposedPLD) -> float:
    """A lower bound of the composed mass at +infinity that a lower reading adds: for a
    composition of dominated pairs, ``inf_mass`` less its upward rounding (``infinite_mass``
    errs up by less than a relative ``U (6 T + 40)`` over ``T <= total_count`` terms); 0 for
    chords, whose mass at +infinity holds the chord's raise and deficit (proofs_checks/
    pld_tilted_fft, "Reading lower bounds")."""
    if not pld.dominated or pld.inf_mass <= 0.0:
        return 0.0
    return floored_lower(pld.inf_mass * (1.0 - 16 * U * (pld.total_count + 8)))


#: lower readings below this are read as 0: near the subnormal range a relative deflation by
#: 1 - 1e-15 rounds back to the same number (and the errors the deflations stand for are
#: relative only for normal numbers), so what is left there is not certified to lie below
LOWER_FLOOR = 1e-290


def floored_lower(value: float) -> float:
    """``value`` read as a lower bound: 0 below LOWER_FLOOR."""
    return value if value >= LOWER_FLOOR else 0.0


def delta_at(pld: ComposedPLD, eps: float, *, upper: bool, eta: float = 1e-12) -> float:
    """Certified delta(eps): upper bound (charges tails) or lower bound.

    The lower bound shifts the chord composition down by :func:`lower_shift`, losing ``eta``
    of probability, and adds the mass at infinity where it is certified (:func:`infinity_lower`:
    the finite masses already carry the factor of no infinite loss, so the two add).
    """
    losses = pld.losses
    if upper:
        masses = pld.upper
        extra = _upper_extra(pld) + (pld.lower_tail if eps < losses[0] else 0.0)
    else:
        masses = pld.lower
        shift = lower_shift(pld, eta)
        losses = losses - shift
        extra = -(_lower_extra(pld, eta) + wrap_above(pld, eps + shift))
    above = losses > eps
    terms = masses[above] * -np.expm1(eps - losses[above])
    finite = float(terms.sum())
    slack = SUM_SLACK * masses.size * float(masses[above].sum())
    if upper:
        return min(1.0, extra + finite + slack)
    # the finite part of the composed law is non-negative whatever its reading
    return floored_lower(min(1.0, infinity_lower(pld) + max(0.0, extra + finite - slack)))


#: the suffix sums of the last two arrays read (a lower bound reads one array up to three
#: times); a deque, not a list: the in-process integrity guard treats dpledger's module-level
#: lists and dicts as code a plugin must not change, and this one changes on every read
_SUMS: collections.deque[tuple[weakref.ref[Array], float, Array, Array]] = collections.deque(
    maxlen=2
)


def _sums(masses: Array, h: float) -> tuple[Array, Array]:
    """(:func:`_suffix`, :func:`_discounted_suffix`) of ``masses``, kept for the last two
    arrays read (by identity: the arrays of a composition are not changed once made)."""
    for ref, spacing, a, b in _SUMS:
        if ref() is masses and spacing == h:
            return a, b
    a = _suffix(masses)
    b = _discounted_suffix(masses, h)
    a.flags.writeable = False
    b.flags.writeable = False
    _SUMS.appendleft((weakref.ref(masses), h, a, b))
    return a, b


def _crossing(
    masses: Array, losses: Array, h: float, extra: float, delta: float, upper: bool
) -> tuple[int, Array, Array]:
    a, b = _sums(masses, h)
    slack = SUM_SLACK * masses.size * a
    on_grid = extra + (a - b) + (slack if upper else -slack)
    ok = np.nonzero(on_grid <= delta)[0]
    return (int(ok[0]) if ok.size else -1), a + (slack if upper else -slack), b


def _solve(losses: Array, i: int, a: Array, b: Array, extra: float, delta: float) -> float:
    """eps in [l_{i-1}, l_i] with extra + a_{i-1} - e^{eps - l_{i-1}} b_{i-1} = delta."""
    num = extra + float(a[i - 1]) - delta
    den = float(b[i - 1])
    if num <= 0 or den <= 0:
        return float(losses[i - 1])
    eps = float(losses[i - 1]) + math.log(num) - math.log(den)
    return min(max(eps, float(losses[i - 1])), float(losses[i]))


def lower_eta(delta: float) -> float:
    """The probability a lower epsilon bound at ``delta`` gives up (:func:`lower_shift`):
    ``delta / 1000``, at least the smallest positive double (it underflows below ~5e-321)."""
    return max(delta * 1e-3, math.ulp(0.0))


def epsilon_for(pld: ComposedPLD, delta: float, *, upper: bool) -> float:
    """Upper: smallest eps >= 0 with delta_upper(eps) <= delta.

    Lower: the crossing point of delta_lower (with ``eta = delta / 1000``), so that every smaller
    eps has true delta >= delta.
    """
    losses = pld.losses
    if upper:
        extra = _upper_extra(pld)
        if extra >= delta:
            return math.inf
        i, a, b = _crossing(pld.upper, losses, pld.h, extra, delta, True)
        if i < 0:
            return math.inf
        eps = _below_window(pld, extra, delta) if i == 0 else _solve(losses, i, a, b, extra, delta)
        eps = eps + 1e-12 * (1.0 + abs(eps))
        return max(0.0, float(np.nextafter(eps, math.inf)))
    eta = lower_eta(delta)
    shift = lower_shift(pld, eta)
    shifted = losses - shift
    base = infinity_lower(pld) - _lower_extra(pld, eta)
    guess = _lower_pass(pld, shifted, base, delta)
    for x0 in (guess - 0.05 * abs(guess) - 10 * pld.h, float(shifted[0])):
        eps = _lower_pass(pld, shifted, base - wrap_above(pld, x0 + shift), delta)
        if eps >= x0 or eps == 0.0:
            return max(0.0, float(np.nextafter(eps, -math.inf)))
    return 0.0


def _lower_pass(pld: ComposedPLD, shifted: Array, extra: float, delta: float) -> float:
    i, a, b = _crossing(pld.lower, shifted, pld.h, extra, delta, False)
    if i < 0:
        return float(shifted[-1])
    if i == 0:
        return 0.0
    eps = _solve(shifted, i, a, b, extra, delta)
    return max(float(shifted[i - 1]), eps - 1e-9 * (1.0 + abs(eps)))


def _below_window(pld: ComposedPLD, extra: float, delta: float) -> float:
    """Smallest eps <= l_0 with extra + P(S < l_0) + sum_l m_l (1 - e^{eps - l}) <= delta."""
    losses = pld.losses
    num = extra + pld.lower_tail + float(pld.upper.sum()) * (1 + SUM_SLACK * pld.upper.size)
    num -= delta
    if pld.lower_tail >= 0.5 * delta:
        return float(losses[0])
    if num <= 0:
        return 0.0
    pos = pld.upper > 0
    lse = float(special.logsumexp(np.log(pld.upper[pos]) - losses[pos]))
    eps = math.log(num) - lse
    return min(float(losses[0]), eps)
