"""Privacy profiles: the :class:`Profile` curve and its two-direction pair
:class:`DirectedProfiles`, with the generic curves built from them (self-dual extension,
curve of a discrete pair, curve of identical laws).

A profile is the hockey-stick curve ``delta(eps) = sup_S P(S) - e^eps Q(S)`` of the pair
``(P, Q) = (M(D), M(D'))``. Each :class:`Profile` returns *upper bounds* (exact closed forms
evaluated stably, inflated by a relative margin for floating-point error) and the finite range
of privacy-loss values outside which the remaining mass is negligible.
"""

from __future__ import annotations

import math
from collections.abc import (
    Callable,
)

import attrs
import numpy as np
from numpy.typing import (
    NDArray,
)
from scipy import (
    special,
)

from dpledger.core.adjacency import (
    Adjacency,
)

__all__ = [
    "ACCURATE_LOSS",
    "GAUSS_SPAN",
    "REL_MARGIN",
    "Array",
    "DirectedProfiles",
    "InfinitySplit",
    "Profile",
    "discrete_delta",
    "gauss_span",
    "identical_profile",
    "noise_factor",
    "self_dual",
    "symmetric_profiles",
]


Array = NDArray[np.float64]


#: relative inflation of every delta value, covering floating-point error of the closed forms
REL_MARGIN = 1e-10


#: number of standard deviations kept on each side of Gaussian losses (tail < 1e-23); a query
#: at a smaller delta widens it (:meth:`Profile.reaching`, :func:`gauss_span`)
GAUSS_SPAN = 10.0


#: the widest span :func:`gauss_span` gives (the normal tail beyond it is below 1e-300)
_MAX_SPAN = 37.1


#: unit roundoff of IEEE double
_U = 2.0**-53


#: largest loss at which a curve is evaluated without overflow unless its profile says more
#: (e^eps overflows near 709.8); curves audited beyond it set ``accurate_hi`` themselves
ACCURATE_LOSS = 700.0


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
    #: the curve is evaluated accurately (no overflow) for every eps up to this loss; above it
    #: the discretisation lumps the remaining mass at +infinity
    accurate_hi: float = ACCURATE_LOSS
    #: the same curve on a wider loss range, for a level of the tail beyond it (None: the range
    #: is the curve's whole support, or cannot be widened); see :meth:`reaching`
    widen: Callable[[float], Profile] | None = attrs.field(default=None, eq=False)

    def __call__(self, eps: Array) -> Array:
        d = self.delta(np.asarray(eps, dtype=float))
        out = np.maximum(0.0, d)
        if np.ndim(out) == 0:
            return np.minimum(1.0, out * (1 + REL_MARGIN))
        out *= 1 + REL_MARGIN  # a fresh array, worked in place (the same operations)
        return np.minimum(1.0, out, out=out)

    def excess(self, eps: Array) -> Array:
        """delta(eps) - (1 - e^eps) >= 0, accurate for eps < 0 when the dual curve is known."""
        eps = np.asarray(eps, dtype=float)
        if self.dual is None:
            return np.maximum(0.0, self(eps) + np.expm1(eps))
        d = np.maximum(0.0, self.dual(-eps)) * (1 + REL_MARGIN)
        return np.asarray(np.exp(eps) * np.minimum(d, 1.0), dtype=float)

    def reaching(self, level: float) -> Profile:
        """The same curve on a loss range wide enough that its value at the top of the range
        is at most ``level`` (the discretisation charges that value at +infinity: the mass
        beyond the range); never narrower than this one's. Itself when its value there is at
        most ``level`` already, or when its range cannot be widened.

        The range decides only where the discretisation stops, not what it certifies: any
        range gives an upper bound (the charge at +infinity) and a lower one (a dominated
        pair's curve is 0 beyond its last point)."""
        top = min(self.loss_hi, self.accurate_hi)
        if self.widen is None or not (level > 0.0 and math.isfinite(top)):
            return self
        if float(self(np.array([top]))[0]) <= level:
            return self
        wide = self.widen(level)
        if wide.loss_hi < self.loss_hi or wide.loss_lo > self.loss_lo:
            return self
        return wide


@attrs.frozen
class InfinitySplit(Profile):
    """The curve ``D + (1 - D) finite(eps)`` of a pair that, with probability ``D``, gives an
    outcome only one law can give (loss +infinity under P, -infinity under Q), and otherwise the
    pair of ``finite``. Its dominated pair
    (:func:`~dpledger.accountant.pld_dominated.discretise_lower`) keeps ``inf_lower`` (at most
    ``D``) at +infinity and ``1 - inf_lower`` times a dominated pair of ``finite``."""

    finite: Profile = attrs.field(kw_only=True)
    inf_lower: float = attrs.field(kw_only=True)


def gauss_span(level: float) -> float:
    """Standard deviations ``z`` (at least GAUSS_SPAN) with normal tail ``Phi(-z) <= level / 2``,
    checked in log space (``log_ndtr``); GAUSS_SPAN for levels at or above its own tail."""
    target = math.log(max(level, 1e-300) / 2.0)
    if float(special.log_ndtr(-GAUSS_SPAN)) <= target:
        return GAUSS_SPAN
    z = min(max(float(-special.ndtri(math.exp(target))), GAUSS_SPAN), _MAX_SPAN)
    # ndtri is accurate to a few ulps; step past any rounding, checked by log_ndtr
    while z < _MAX_SPAN and float(special.log_ndtr(-z)) > target - 1e-9:
        z = math.nextafter(z * (1 + 1e-9), math.inf)
    return min(z, _MAX_SPAN)


def discrete_delta(losses: Array, masses: Array, inf_mass: float) -> Callable[[Array], Array]:
    """Profile of a pair given by P-masses at finite losses plus an atom at +infinity."""

    def delta(eps: Array) -> Array:
        e = eps[..., None]
        with np.errstate(over="ignore"):
            terms = masses * np.maximum(0.0, -np.expm1(e - losses))
        return np.asarray(inf_mass + terms.sum(axis=-1), dtype=float)

    return delta


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
    name = f"self_dual({profile.name})"
    base_widen = profile.widen
    widen = None if base_widen is None else (lambda level: self_dual(base_widen(level), exact))
    return Profile(delta, -hi, hi, exact, name, delta, profile.accurate_hi, widen)


def identical_profile() -> Profile:
    """The curve of a pair of equal laws, max(0, 1 - e^eps): below every privacy curve."""
    d = discrete_delta(np.array([0.0]), np.array([1.0]), 0.0)
    return Profile(d, 0.0, 0.0, True, "identical", d)


@attrs.frozen
class DirectedProfiles:
    """Upper curves for the two directions, and curves that are valid *lower* bounds."""

    remove: Profile
    add: Profile
    lower_remove: Profile
    lower_add: Profile


def symmetric_profiles(p: Profile) -> DirectedProfiles:
    """The same curve for both directions, upper and lower (a symmetric exact mechanism)."""
    return DirectedProfiles(p, p, p, p)


def noise_factor(adjacency: Adjacency) -> float:
    """How many add/remove sensitivities one neighbouring step moves a statistic."""
    return adjacency.sensitivity_factor
