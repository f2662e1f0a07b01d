"""Equal epsilon-type leaves composed exactly, as one PLD component per block.

Pure DP, randomized response and approximate DP have privacy losses on the lattice
``eps * {-1, 0, 1}`` (plus an atom at +infinity of mass ``delta`` for approximate DP), so ``m``
equal leaves compose exactly into a pair with losses ``j * eps``, ``|j| <= m``: the P-masses are
the coefficients of ``(a x + b + c / x)^m``, times ``(1 - delta)^m``, and the rest of the P-mass
is at +infinity. The PLD backend then discretises each block once instead of every leaf: the
grid's rounding (most harmful to the lower bound, whose shift grows with the number of
discretised compositions) is paid per block, not per leaf. Used where many distinct leaves were
rounded to representatives (:mod:`~dpledger.accountant.pld_components`).

Soundness (``proofs_checks/epsilon_cells/proof.md``): the upper curve is that of the exact
composition with every atom's loss rounded up and its mass inflated by a bound on the
floating-point error, the tail atoms moved to a larger loss; the lower curve is that of the
exact composition with tail atoms merged (a post-processing), losses rounded down and masses
deflated. The curve ``sum_j p_j (1 - e^{eps - l_j})_+ + p_inf`` grows with every ``p_j`` and
every ``l_j``.
"""

from __future__ import annotations

import math

import attrs
import numpy as np

from dpledger.accountant.leaves import leaf_profiles
from dpledger.accountant.pld_dominated import InfinitySplit
from dpledger.accountant.profiles_base import Array, DirectedProfiles, Profile
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    ApproxDPEvent,
    Event,
    PureDPEvent,
    RandomizedResponseEvent,
)

__all__ = [
    "BLOCK",
    "CELL_TAIL",
    "MAX_BLOCK_LOSS",
    "MAX_CELL_EPSILON",
    "NEAR_GAP",
    "block_masses",
    "cell_components",
    "cell_profiles",
]

#: the most equal leaves composed exactly into one component (larger cells: several blocks)
BLOCK = 128
#: atoms of a block below this P-mass are moved (upper) or merged (lower) into the kept range
CELL_TAIL = 1e-40
#: leaves above this epsilon keep their own curves (e^eps must not overflow)
MAX_CELL_EPSILON = 300.0
#: a block's losses span at most twice this (its leaves at most this / eps): the loss grid's
#: coarse spacing follows the widest component
MAX_BLOCK_LOSS = 10.0
#: unit roundoff of IEEE double
_U = 2.0**-53
#: atoms less than this above a point were summed term by term (the curves are now evaluated
#: without cancellation at every point: the name stays for code that reads it)
NEAR_GAP = 0.01

_CELL_KINDS = PureDPEvent | RandomizedResponseEvent | ApproxDPEvent


def _leaf_masses(event: Event) -> tuple[float, np.ndarray, float] | None:
    """(eps, P-masses at losses eps, 0, -eps of the finite part normalised to 1, delta) of a
    leaf composed exactly here; None for any other leaf."""
    if not isinstance(event, _CELL_KINDS):
        return None
    eps = float(event.epsilon)
    if not (0.0 < eps <= MAX_CELL_EPSILON):
        return None
    k = event.num_buckets if isinstance(event, RandomizedResponseEvent) else 2
    ex = math.exp(eps)
    z = ex + (k - 1)
    masses = np.array([ex / z, (k - 2) / z, 1.0 / z])
    delta = float(event.delta) if isinstance(event, ApproxDPEvent) else 0.0
    return eps, masses, delta


def block_masses(masses: np.ndarray, m: int) -> tuple[np.ndarray, float]:
    """(P-masses at losses ``j * eps`` for j = -m..m, a bound on their relative error): the
    coefficients of ``(a x + b + c / x)^m`` for ``masses = (a, b, c)``, by squaring.

    Every product and sum is of non-negative numbers: each convolution adds a relative error of
    at most (terms + 1) units of roundoff; the inputs carry a few units each."""
    base = masses[::-1].astype(float)  # index i <-> loss (i - 1) eps
    out = np.array([1.0])
    error = 8.0 * m * _U
    power = m
    while power:
        if power & 1:
            error += (min(out.size, base.size) + 1) * _U
            out = np.convolve(out, base)
        power >>= 1
        if power:
            error += (base.size + 1) * _U
            base = np.convolve(base, base)
    # the error of a product of two approximations: the sum of theirs, to first order
    return out, 2.0 * error + 1e-15


def _kept(p: np.ndarray) -> tuple[int, int]:
    """First and last index whose P-mass is at least CELL_TAIL (the whole array when none)."""
    big = np.flatnonzero(p >= CELL_TAIL)
    if big.size == 0:
        return 0, p.size - 1
    return int(big[0]), int(big[-1])


def _curve(losses: Array, masses: Array, inf_mass: float, *, up: bool) -> Profile:
    """The curve ``inf_mass + sum p_j (1 - e^{eps - l_j})_+`` of atoms sorted by loss."""
    keep = masses > 0
    losses, masses = losses[keep], masses[keep]
    evaluate = _Evaluator(losses, masses, inf_mass, up=up)
    lo = float(losses[0]) if losses.size else 0.0
    hi = float(losses[-1]) if losses.size else 0.0
    name = f"epsilon_block({losses.size} atoms, {'upper' if up else 'lower'})"
    return Profile(evaluate, lo, hi, True, name, evaluate)


class _Evaluator:
    """The curve of atoms sorted by loss, in O(points) after O(atoms): at a point ``eps`` with
    ``l_k`` the first loss above it, ``delta(eps) = (1 - e^{eps - l_k}) S_k + e^{eps - l_k} W_k``
    with ``S_k = sum_{j >= k} p_j`` and ``W_k = delta(l_k) = sum_{j > k} p_j (1 - e^{l_k - l_j})``,
    by the recursion ``W_k = (1 - e^{l_k - l_{k+1}}) S_{k+1} + e^{l_k - l_{k+1}} W_{k+1}``: every
    term is non-negative, so no difference cancels, and the relative error, bounded per point
    (:meth:`_error`), is charged to the safe side (``up``)."""

    def __init__(self, losses: Array, masses: Array, inf_mass: float, *, up: bool) -> None:
        self.losses, self.masses, self.inf_mass, self.up = losses, masses, inf_mass, up
        n = losses.size
        self.suffix = np.append(np.cumsum(masses[::-1])[::-1], 0.0)
        gaps = (losses[:-1] - losses[1:]).tolist()  # l_k - l_{k+1} <= 0
        # the recursion in Python floats (the same IEEE operations as on array entries,
        # without a NumPy scalar per step); n is at most 2 BLOCK + 3
        s = self.suffix.tolist()
        w = [0.0] * (n + 1)
        for k in range(n - 2, -1, -1):
            w[k] = -math.expm1(gaps[k]) * s[k + 1] + math.exp(gaps[k]) * w[k + 1]
        self.w = np.array(w)
        span = float(losses[-1] - losses[0]) if n else 0.0
        # relative error of S_k and W_k (and of the final sums), rounded generously
        self.base_error = 2.0 * (abs(span) + 8.0 * n + 16.0) * _U

    def __call__(self, eps: Array) -> Array:
        flat = np.asarray(eps, dtype=float).ravel()
        return self._values(flat).reshape(np.shape(eps))

    def _values(self, eps: Array) -> Array:
        loss = self.losses
        n = loss.size
        if n == 0:
            return np.full(eps.size, self.inf_mass)
        k = np.searchsorted(loss, eps, side="right")  # first atom above eps
        at = np.minimum(k, n - 1)
        x = np.minimum(eps - loss[at], 0.0)  # < 0 where an atom is above eps
        total = -np.expm1(x) * self.suffix[k] + np.exp(x) * self.w[k]
        total = np.where(k < n, total, 0.0)
        # exp of a rounded argument errs by |x| units more
        error = self.base_error + 2.0 * np.abs(x) * _U
        sign = 1.0 if self.up else -1.0
        return self.add_directed(
            self.inf_mass, np.maximum(total * (1 + sign * error), 0.0), self.up
        )

    @staticmethod
    def add_directed(a: float, b: Array, up: bool) -> Array:
        """``a + b`` (``a >= 0``, ``b >= 0``, finite) rounded up (``up``) or down: the nearest
        sum, moved one unit to the safe side where its exact error (Knuth's two-sum) lies on
        the other side."""
        s = np.asarray(a + b, dtype=float)
        if a == 0.0:
            return s  # exact
        bv = s - a
        av = s - bv
        np.subtract(a, av, out=av)
        np.subtract(b, bv, out=bv)
        av += bv  # exactly (a + b) - s
        # the next double above (below) a non-negative double: its bits plus (minus) one
        bits = s.view(np.int64)
        if up:
            np.add(bits, 1, out=bits, where=av > 0.0)
        else:
            np.subtract(bits, 1, out=bits, where=av < 0.0)
        return s


def _upper(eps: float, p: np.ndarray, error: float, scale: float, inf_mass: float) -> Profile:
    """The block's upper curve: losses rounded up, masses inflated, tails moved up (the low
    tail to the first kept atom, the high tail to the top atom)."""
    m = (p.size - 1) // 2
    lo, hi = _kept(p)
    mass = p * (scale * (1 + error))
    kept = np.array(mass[lo : hi + 1])
    kept[0] += float(np.sum(mass[:lo]))
    losses = np.nextafter((np.arange(lo, hi + 1) - m) * eps, math.inf)
    if hi < p.size - 1:
        # the top loss stays the block's largest (the pure cap reads it), its mass at least the
        # smallest positive double (a mass that underflowed is not lost)
        top = max(float(np.sum(mass[hi + 1 :])), 5e-324)
        losses = np.append(losses, np.nextafter(m * eps, math.inf))
        kept = np.append(kept, top)
    return _curve(losses, kept, inf_mass * (1 + error), up=True)


def _merged(eps: float, p: np.ndarray, m: int, part: slice) -> tuple[float, float]:
    """(P-mass, a loss at most that of) the atoms in ``part`` merged into one outcome."""
    j = np.arange(p.size)[part] - m
    w = p[part]
    if w.size == 0 or float(np.sum(w)) == 0.0:
        return 0.0, 0.0
    # log(sum p / sum p e^{-l}) computed relative to the largest term of each sum
    lp = float(np.log(np.sum(w)))
    lq_terms = np.log(np.maximum(w, np.finfo(float).tiny)) - j * eps
    top = float(np.max(lq_terms))
    lq = top + float(np.log(np.sum(np.exp(lq_terms - top))))
    loss = lp - lq
    return float(np.sum(w)), loss - 64 * _U * (abs(lp) + abs(lq) + abs(loss) + 1)


def _lower(eps: float, p: np.ndarray, error: float, scale: float, inf_mass: float) -> Profile:
    """The block's lower curve: tails merged into one outcome each, losses rounded down,
    masses deflated. With a mass at +infinity, the curve also names its parts
    (:class:`~dpledger.accountant.pld_dominated.InfinitySplit`): that mass, deflated, and the
    lower curve of the finite part's own pair (the same atoms without the factor ``scale``)."""
    whole = _curve(*_lower_atoms(eps, p, scale * (1 - error)), inf_mass * (1 - error), up=False)
    if inf_mass <= 0.0:
        return whole
    finite = _curve(*_lower_atoms(eps, p, 1 - error), 0.0, up=False)
    return InfinitySplit(
        whole.delta,
        whole.loss_lo,
        whole.loss_hi,
        whole.exact,
        whole.name,
        whole.dual,
        whole.accurate_hi,
        finite=finite,
        inf_lower=inf_mass * (1 - error),
    )


def _lower_atoms(eps: float, p: np.ndarray, shrink: float) -> tuple[Array, Array]:
    """(losses, masses) of the lower curve's atoms, sorted by loss: the kept atoms at losses
    rounded down with masses times ``shrink``, each tail merged into one outcome."""
    m = (p.size - 1) // 2
    lo, hi = _kept(p)
    losses = [np.nextafter((np.arange(lo, hi + 1) - m) * eps, -math.inf)]
    masses = [p[lo : hi + 1] * shrink]
    below = _merged(eps, p, m, slice(0, lo))
    above = _merged(eps, p, m, slice(hi + 1, p.size))
    if below[0] > 0:
        losses.insert(0, np.array([below[1]]))
        masses.insert(0, np.array([below[0] * shrink]))
    if above[0] > 0:
        losses.append(np.array([above[1]]))
        masses.append(np.array([above[0] * shrink]))
    arr_l, arr_p = np.concatenate(losses), np.concatenate(masses)
    if np.any(arr_l[1:] < arr_l[:-1]):
        order = np.argsort(arr_l, kind="stable")
        return arr_l[order], arr_p[order]
    return arr_l, arr_p


def cell_profiles(event: Event, m: int) -> DirectedProfiles | None:
    """Curves of ``m`` copies of ``event`` composed exactly (the same both directions: the
    pairs are symmetric); None when ``event`` is not composed here."""
    found = _leaf_masses(event)
    if found is None:
        return None
    eps, masses, delta = found
    p, error = block_masses(masses, m)
    if delta > 0:
        log_keep = m * math.log1p(-delta)
        scale, inf_mass = math.exp(log_keep), -math.expm1(log_keep)
        error += 8 * m * _U
    else:
        scale, inf_mass = 1.0, 0.0
    upper = _upper(eps, p, error, scale, inf_mass)
    lower = _lower(eps, p, error, scale, inf_mass)
    return DirectedProfiles(upper, upper, lower, lower)


def _components(
    events: dict[Event, int], adjacency: Adjacency
) -> list[tuple[DirectedProfiles, int]]:
    """Each leaf's curves with its count; equal epsilon-type leaves as blocks of at most
    ``b = min(BLOCK, MAX_BLOCK_LOSS / eps)`` composed exactly (a cell of ``m = n b + r``
    leaves: n blocks of b and one of r)."""
    out: list[tuple[DirectedProfiles, int]] = []
    for leaf, count in events.items():
        found = _leaf_masses(leaf)
        room = MAX_BLOCK_LOSS / found[0] if found else 0.0  # inf for a subnormal epsilon
        block = BLOCK if room >= BLOCK else math.floor(room)
        if count > 1 and block > 1:
            full, rest = divmod(count, block)
            for size, times in ((block, full), (rest, 1)):
                cell = cell_profiles(leaf, size) if times and size else None
                if cell is not None:
                    out.append((cell, times))
            continue
        out.append((_single(leaf, adjacency), count))
    return out


def _single(leaf: Event, adjacency: Adjacency) -> DirectedProfiles:
    """A leaf's own curves; an approximate-DP leaf's lower curves those of its block of one,
    which name their mass at +infinity (:class:`~dpledger.accountant.pld_dominated.
    InfinitySplit`), so that lower bounds keep it."""
    profiles = leaf_profiles(leaf, adjacency)
    if not (isinstance(leaf, ApproxDPEvent) and leaf.delta > 0):
        return profiles
    cell = cell_profiles(leaf, 1)
    if cell is None:
        return profiles
    return attrs.evolve(profiles, lower_remove=cell.lower_remove, lower_add=cell.lower_add)


def cell_components(
    upper: dict[Event, int], lower: dict[Event, int], adjacency: Adjacency
) -> tuple[list[tuple[DirectedProfiles, int]], list[tuple[DirectedProfiles, int]]]:
    """(upper components, lower components) of the rounded leaves, equal epsilon-type leaves
    composed exactly in blocks."""
    up = _components(upper, adjacency)
    if lower is upper:
        return up, up
    return up, _components(lower, adjacency)
