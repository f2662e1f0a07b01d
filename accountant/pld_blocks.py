"""Many distinct Laplace leaves composed in blocks on fine grids of their own.

A Laplace leaf of a large scale has losses within ``+-1 / scale``, often only a few spacings of
the composed loss grid: discretised on that grid leaf by leaf, each pays up to a spacing, and
the lower bound most of all. Here the leaves (distinct scales, no rounding to representatives)
are composed a block at a time on a grid of spacing ``h_f = eps_min / FINE_POINTS`` (the
block's smallest leaf epsilon): the upper pairs (connect-the-dots, which dominate the leaves)
and the dominated pairs (which the leaves dominate) are convolved exactly up to floating-point
error of non-negative sums, and each block becomes one component whose curves are those of the
composed pairs; the PLD backend then discretises a block once, not every leaf.

Soundness (``proofs_checks/pld_blocks/proof.md``): the upper curve is that of the composed
dominating pairs with masses raised by a bound on their relative error and losses raised to the
next double; the lower curve is that of the composed dominated pairs with masses lowered and
losses lowered (its excess below zero with losses raised), a convex curve below the block's
own, as the dominated-pair construction needs.
"""

from __future__ import annotations

import math

import attrs
import numpy as np

from dpledger.accountant.leaves import leaf_profiles
from dpledger.accountant.nonnegative_convolution import nonnegative_convolve
from dpledger.accountant.pld_components import _unbounded_loss
from dpledger.accountant.pld_discrete import DiscretePLD, discretise
from dpledger.accountant.pld_dominated import discretise_lower
from dpledger.accountant.profiles_base import Array, DirectedProfiles, Profile
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import Event, LaplaceEvent

__all__ = [
    "BLOCK_LEAVES",
    "BLOCK_SPREAD",
    "CELL_ROUNDINGS",
    "EVALUATION_ERROR",
    "FINE_POINTS",
    "FINE_POINTS_UPPER",
    "MAX_BLOCKS",
    "MAX_BLOCK_EPSILON",
    "MAX_CELL_BLOCKS",
    "MIN_BLOCKED",
    "ROUNDING",
    "block_components",
    "block_profiles",
    "compose_masses",
    "is_cell_block",
]

#: leaves (counted with their multiplicity) composed into one block
BLOCK_LEAVES = 32
#: relative step of the scales' grid: each leaf's pairs are those of the smallest (upper) and
#: largest (lower) scale of its cell, which it dominates, resp. is dominated by
ROUNDING = 1e-3
#: coarser relative steps of the scales' grid, tried in turn where ROUNDING leaves more than
#: MAX_BLOCKS blocks: a cell's leaves then share one pair on each side, so its blocks of
#: BLOCK_LEAVES copies are one component, and a block never spans two cells (its rest is one
#: more); a leaf's epsilon moves by at most the step, up for the upper side, down for the lower
CELL_ROUNDINGS = (2e-3, 4e-3, 6e-3, 8e-3, 1.2e-2, 1.6e-2, 2.4e-2, 3.2e-2)
#: blocks by cell are at most this many where a step of CELL_ROUNDINGS allows: each is taken
#: from the representatives' budgets (:func:`is_cell_block`, ``pld.BLOCK_BUDGET_SHARE``), so
#: fewer, coarser cells leave the other leaves finer representatives (1e5 heterogeneous
#: leaves, one block per component: 2.4 % cells, 59 blocks, bracket 8.9 %; 1.2 % cells, 115
#: blocks, 9.7 %)
MAX_CELL_BLOCKS = 64
#: grid points of the lower side's fine grid per leaf epsilon (the block's smallest): the
#: dominated pairs lose about a fraction of a spacing per leaf, so the lower bound follows it
FINE_POINTS = 192
#: grid points of the upper side's fine grid per leaf epsilon: connect-the-dots pairs are
#: tight at any spacing (their curves meet the leaf's at the grid points), so a coarser grid
#: barely moves the upper bound and costs a sixteenth of the lower side's convolutions
FINE_POINTS_UPPER = 48
#: a block's costliest leaf is at most this many times its cheapest (its fine grid
#: follows the cheapest, so its atoms grow with the spread)
BLOCK_SPREAD = 2.0
#: leaves of a larger epsilon (sensitivity over scale for Laplace) keep their own curves
MAX_BLOCK_EPSILON = 0.05
#: a kind with more blocks than this keeps its leaves as they are (each block is one more
#: component for the composition's FFTs)
MAX_BLOCKS = 128
#: at least this many Laplace leaves (with multiplicity) before they are composed in blocks
MIN_BLOCKED = 64
#: a composed mass below this is too close to underflow for the relative error bound
_SMALLEST = 1e-250
#: unit roundoff of IEEE double, and of the platform's long double
_U = 2.0**-53
_ULD = float(np.finfo(np.longdouble).eps) / 2
#: products of points and atoms per chunk of a curve evaluation
_CHUNK = 1 << 22
#: the suffix of a block by cell's curves' names
_CELL_NAME = " by cell"
#: most relative error of a block's curve values (far below the profiles' REL_MARGIN, which
#: the dominated-pair construction takes as the curve's exactness)
EVALUATION_ERROR = 3e-11


#: a composition in progress: (offset, P-masses, relative error so far, mass at +infinity)
_State = tuple[int, Array, float, float]


def _empty() -> _State:
    """The composition of no pairs."""
    return 0, np.array([1.0]), 0.0, 0.0


def compose_masses(parts: list[DiscretePLD], *, up: bool) -> tuple[int, Array, float, float] | None:
    """(offset, P-masses, mass at +infinity, relative error bound) of the composition of
    discrete pairs on one grid: the finite masses convolved as a balanced tree, pairwise from
    the left (:func:`_convolved`; the largest convolutions last, as blocked matrix products;
    operands that are one object once per level: k copies in about log2(k) convolutions),
    the masses at +infinity by the union bound. A mass below _SMALLEST is dropped for a lower
    bound; for an upper bound the result is then None (the bound would not be relative)."""
    if not parts:
        return _finished(_empty(), 0)
    states: dict[int, _State] = {}
    level: list[_State] = []
    for part in parts:
        found = states.get(id(part))
        if found is None:
            found = _checked(part.offset, part.masses.copy(), 0.0, part.inf_mass, up=up)
            if found is None:
                return None
            states[id(part)] = found
        level.append(found)
    while len(level) > 1:
        # keyed by the operands' ids: both stay referenced by ``level`` while the key is used
        made: dict[tuple[int, int], _State] = {}
        joined: list[_State] = []
        for a, b in zip(level[0::2], level[1::2], strict=False):
            key = (id(a), id(b))
            product = made.get(key)
            if product is None:
                product = _convolved(a, b, up=up)
                if product is None:
                    return None
                made[key] = product
            joined.append(product)
        if len(level) % 2:
            joined.append(level[-1])
        level = joined
    return _finished(level[0], len(parts))


def _convolved(a: _State, b: _State, *, up: bool) -> _State | None:
    """One node of :func:`compose_masses`: non-negative inputs within relative ``e_a``, ``e_b``
    give a convolution within ``(1 + e_a)(1 + e_b) - 1``, and rounding adds its bound. An upper
    composition is given up where a product of positive masses may fall below _SMALLEST (an
    output whose every product underflowed would read 0)."""
    offset_a, masses_a, error_a, inf_a = a
    offset_b, masses_b, error_b, inf_b = b
    if up and not _least_positive(masses_a) * _least_positive(masses_b) >= _SMALLEST:
        return None
    masses, rounding = nonnegative_convolve(masses_a, masses_b)
    error = (1 + error_a) * (1 + error_b) * (1 + rounding) - 1
    return _checked(offset_a + offset_b, masses, error, inf_a + inf_b, up=up)


def _least_positive(masses: Array) -> float:
    """The least positive mass (1 where there is none: no product to underflow)."""
    positive = masses[masses > 0]
    return float(positive.min()) if positive.size else 1.0


def _checked(
    offset: int, masses: Array, error: float, inf_mass: float, *, up: bool
) -> _State | None:
    """A state whose masses near underflow (below _SMALLEST) are dropped (lower bounds), or
    None when it has any (upper bounds)."""
    small = (masses > 0) & (masses < _SMALLEST)
    if small.any():
        if up:
            return None
        masses[small] = 0.0
    return offset, masses, error, inf_mass


def _finished(state: _State, count: int) -> tuple[int, Array, float, float]:
    """:func:`compose_masses`'s answer from its state after ``count`` parts."""
    offset, masses, error, inf_mass = state
    # second-order terms, subnormal products inside kept sums (absolute, far below a relative
    # 1e-60 of a kept mass) and the error of the bound itself
    return offset, masses, min(inf_mass * (1 + 4 * _U * count), 1.0), error * 1.01 + 4 * _U


class _Atoms:
    """The curve ``inf_mass + sum_j p_j (1 - e^{eps - l_j})_+`` of atoms sorted by loss, scaled
    by ``1 +- error`` (``up``: raised) where ``error`` bounds the relative error of its
    evaluation (at most EVALUATION_ERROR).

    Atoms less than ``gap`` above a point are summed term by term; the others as
    ``S_f - e^{eps - l_0} T_f`` from suffix sums ``S_f = sum_{j >= f} p_j`` and
    ``T_f = sum_{j >= f} p_j e^{l_0 - l_j}`` (summed in blocks of about sqrt(n): each within a
    relative ``count u``), a difference of at least ``S_f (1 - e^{-gap})``, whose relative error
    is that of its parts over ``1 - e^{-gap}``; ``gap`` is the narrowest that keeps this within
    EVALUATION_ERROR."""

    def __init__(self, losses: Array, masses: Array, inf_mass: float, *, up: bool) -> None:
        keep = masses > 0
        self.losses, self.masses, self.inf_mass = losses[keep], masses[keep], inf_mass
        n = self.losses.size
        base = float(self.losses[0]) if n else 0.0
        span = float(self.losses[-1] - base) if n else 0.0
        # the suffix sums in extended precision (where the platform has it)
        wide = self.masses.astype(np.longdouble)
        self.suffix, s_count = _suffix(wide)
        self.tilted, t_count = _suffix(wide * np.exp(base - self.losses.astype(np.longdouble)))
        self.base = base
        # the parts' relative errors: the suffix sums, the exponentials (their arguments
        # rounded: a relative unit of magnitudes at most span + |eps - base|), the product
        self.parts = (s_count + t_count + 2 * span + 16) * _ULD
        ratio = EVALUATION_ERROR / (4 * self.parts * (1 + span))
        self.gap = math.inf if ratio <= 1.0 else -math.log1p(-1.0 / ratio)
        self.sign = 1.0 if up else -1.0

    def __call__(self, eps: Array) -> Array:
        flat = np.asarray(eps, dtype=float).ravel()
        out = np.empty(flat.size)
        error = np.empty(flat.size)
        loss = self.losses
        first = np.searchsorted(loss, flat, side="right")  # first atom above eps
        far = np.searchsorted(loss, flat + self.gap, side="left")
        width = int(np.max(far - first, initial=0))
        step = max(1, _CHUNK // max(1, width))
        for start in range(0, flat.size, step):
            part = slice(start, start + step)
            out[part], error[part] = self._values(flat[part], first[part], far[part])
        total = np.maximum(out, 0.0) * (1 + self.sign * error)
        return np.asarray(self.inf_mass + total, dtype=float).reshape(np.shape(eps))

    def _values(self, eps: Array, first: np.ndarray, far: np.ndarray) -> tuple[Array, Array]:
        """(values, their relative error bounds) at points ``eps``."""
        loss, p, n = self.losses, self.masses, self.losses.size
        width = int(np.max(far - first, initial=0))
        near = np.zeros(eps.size)
        if width:
            j = first[:, None] + np.arange(width)
            jj = np.minimum(j, n - 1)
            with np.errstate(over="ignore"):
                terms = p[jj] * np.maximum(-np.expm1(eps[:, None] - loss[jj]), 0.0)
            near = np.sum(np.where(j < far[:, None], terms, 0.0), axis=1)
        at = np.minimum(far, max(n - 1, 0))
        with np.errstate(over="ignore", invalid="ignore"):
            scale = np.exp(eps.astype(np.longdouble) - self.base)
            wide = np.where(far < n, self.suffix[at] - scale * self.tilted[at], 0.0)
        tail = np.maximum(np.asarray(wide, dtype=float), 0.0)
        # each part's error relative to itself, hence to their sum; the tail's rounding to a
        # double adds a unit
        far_error = self.parts * (1 + np.abs(eps - self.base)) / -math.expm1(-self.gap) + 2 * _U
        near_error = (width + 8) * _U
        return near + tail, np.full(eps.size, max(far_error.max(initial=0.0), near_error))


def _suffix(values: np.ndarray) -> tuple[np.ndarray, float]:
    """(s_f = sum_{j >= f} values_j for f = 0..n, an error count), in the type of ``values``:
    in blocks of about sqrt(n), so each s_f is a sum of at most ``count`` rounded additions of
    non-negative terms (its relative error at most ``count`` units of that type)."""
    n = values.size
    block = max(1, math.isqrt(n))
    pad = (-n) % block
    rows = np.concatenate([values, np.zeros(pad, dtype=values.dtype)]).reshape(-1, block)
    within = np.cumsum(rows[:, ::-1], axis=1)[:, ::-1]
    after = np.concatenate([np.cumsum(within[::-1, 0])[::-1][1:], np.zeros(1, values.dtype)])
    out = np.append((within + after[:, None]).reshape(-1)[:n], np.zeros(1, values.dtype))
    return out, float(2 * block + rows.shape[0] + 4)


def _upper_profile(offset: int, masses: Array, inf_mass: float, error: float, h: float) -> Profile:
    """The curve of the composed dominating pairs, masses raised by ``error``, losses raised
    to the next double (the curve grows with every mass and every loss)."""
    losses = np.nextafter((offset + np.arange(masses.size)) * h, math.inf)
    curve = _Atoms(losses, masses * (1 + error) * (1 + 2 * _U), inf_mass * (1 + 4 * _U), up=True)
    lo, hi = _range(losses, masses)
    name = f"laplace_block({masses.size} atoms, upper)"
    return Profile(curve, lo, hi, True, name)


def _lower_profile(offset: int, masses: Array, error: float, h: float) -> Profile:
    """The curve of the composed dominated pairs, masses lowered by ``error``: losses lowered
    to the previous double for the curve, raised to the next for its excess below zero (read
    through the dual: the curve of the atoms at ``-l_j`` with Q-masses ``p_j e^{-l_j}``), each
    of them below the block's own (both fall with a lowered mass, the curve with a lowered loss
    and the excess with a raised one)."""
    exact = (offset + np.arange(masses.size)) * h
    low = masses * (1 - error) * (1 - 2 * _U)
    losses = np.nextafter(exact, -math.inf)
    curve = _Atoms(losses, low, 0.0, up=False)
    raised = np.nextafter(exact, math.inf)
    q = low * np.exp(-raised) * (1 - 4 * _U)
    dual = _Atoms(-raised[::-1], q[::-1], 0.0, up=False)
    lo, hi = _range(losses, masses)
    name = f"laplace_block({masses.size} atoms, lower)"
    return Profile(curve, lo, hi, True, name, dual)


def _range(losses: Array, masses: Array) -> tuple[float, float]:
    """The first and last loss carrying mass."""
    nonzero = np.flatnonzero(masses > 0)
    if nonzero.size == 0:
        return 0.0, 0.0
    return float(losses[nonzero[0]]), float(losses[nonzero[-1]])


class _Parts:
    """The fine-grid pairs of Laplace leaves, made once per (scale, spacing): connect-the-dots
    pairs (dominating) and dominated pairs (None where one cannot be certified)."""

    def __init__(self, adjacency: Adjacency) -> None:
        self.adjacency = adjacency
        self.upper: dict[tuple[Event, float], DiscretePLD] = {}
        self.lower: dict[tuple[Event, float], DiscretePLD | None] = {}
        #: per side, the compositions of copies of one leaf's pair, by count
        self.copies: dict[
            tuple[Event, int, bool, int],
            tuple[DiscretePLD, tuple[int, Array, float, float] | None],
        ] = {}

    def curves(self, leaf: Event) -> DirectedProfiles:
        return leaf_profiles(leaf, self.adjacency)

    def up(self, leaf: Event, h: float) -> DiscretePLD:
        found = self.upper.get((leaf, h))
        if found is None:
            found = self.upper[(leaf, h)] = discretise(self.curves(leaf).remove, h)
        return found

    def down(self, leaf: Event, h: float) -> DiscretePLD | None:
        if (leaf, h) not in self.lower:
            self.lower[(leaf, h)] = discretise_lower(self.curves(leaf).lower_remove, h)
        return self.lower[(leaf, h)]

    def composed(
        self, leaves: list[Event], pairs: list[DiscretePLD], *, up: bool
    ) -> tuple[int, Array, float, float] | None:
        """:func:`compose_masses` of ``pairs`` (those of ``leaves``); the compositions of
        copies of one leaf are kept by count (a cell's full blocks are one composition), for
        the last leaf of each side."""
        first = leaves[0] if leaves else None
        if first is None or any(x is not first for x in leaves) or len(set(map(id, pairs))) > 1:
            return compose_masses(pairs, up=up)
        key = (first, id(pairs[0]), up, len(pairs))
        kept = self.copies.get(key)
        # the pair is kept beside its compositions: an id can match no other object
        if kept is None or kept[0] is not pairs[0]:
            # the compositions of the last leaf of each side only: a cell's blocks come one
            # after the other
            self.copies = {k: v for k, v in self.copies.items() if k[2] != up or k[:3] == key[:3]}
            kept = self.copies[key] = (pairs[0], compose_masses(pairs, up=up))
        return kept[1]


def _spacing(leaves: list[Event], parts: _Parts, points: int) -> float | None:
    """A side's fine spacing: a power of two at most its smallest leaf epsilon over ``points``
    (blocks of similar leaves share it, and their parts); None when a leaf's curves are not
    symmetric or its losses not finite."""
    eps = math.inf
    for leaf in leaves:
        d = parts.curves(leaf)
        if not (d.remove is d.add and d.lower_remove is d.lower_add):
            return None
        eps = min(eps, max(abs(d.remove.loss_lo), abs(d.remove.loss_hi)))
    if not (0 < eps < math.inf):
        return None
    return 2.0 ** math.floor(math.log2(eps / points))


def block_profiles(
    upper: list[Event], lower: list[Event], adjacency: Adjacency, parts: _Parts | None = None
) -> DirectedProfiles | None:
    """The curves of one block: the composition of the ``upper`` leaves' pairs on their fine
    grid (upper curve, spacing FINE_POINTS_UPPER per epsilon) and of the ``lower`` leaves'
    dominated pairs (lower curve, FINE_POINTS per epsilon; each side on a grid of its own);
    None when a part cannot be certified (the leaves then stay as they are)."""
    parts = parts or _Parts(adjacency)
    h_up = _spacing([*upper, *lower], parts, FINE_POINTS_UPPER)
    h = _spacing([*upper, *lower], parts, FINE_POINTS)
    if h is None or h_up is None:
        return None
    lowers = [parts.down(leaf, h) for leaf in lower]
    if any(p is None for p in lowers):
        return None
    up = parts.composed(upper, [parts.up(leaf, h_up) for leaf in upper], up=True)
    down = parts.composed(lower, [p for p in lowers if p is not None], up=False)
    if up is None or down is None:
        return None
    upper_curve = _upper_profile(up[0], up[1], up[2], up[3], h_up)
    lower_curve = _lower_profile(down[0], down[1], down[3], h)
    return DirectedProfiles(upper_curve, upper_curve, lower_curve, lower_curve)


def _cost(event: Event) -> tuple[str, float] | None:
    """(kind, a parameter the leaf's cost grows with) of a leaf composed in blocks: Laplace,
    the inverse of its noise; None for any other leaf (equal epsilon-type leaves are composed
    exactly elsewhere, :mod:`~dpledger.accountant.epsilon_cells`)."""
    if isinstance(event, LaplaceEvent):
        return "laplace", 1.0 / event.noise_multiplier
    return None


def _rounded(costs: np.ndarray, rounding: float = ROUNDING) -> tuple[np.ndarray, np.ndarray]:
    """Per leaf, the index of (the costliest, the cheapest) member of its cell on the grid
    ``(1 + rounding)^i`` of costs (sorted ascending): each leaf's pair is dominated by the
    costliest member's and dominates the cheapest's (the representatives' order)."""
    cells = np.floor(np.log(costs) / math.log1p(rounding))
    starts = np.flatnonzero(np.r_[True, np.diff(cells) != 0])
    ends = np.r_[starts[1:], costs.size] - 1
    cell = np.cumsum(np.r_[True, np.diff(cells) != 0]) - 1
    return ends[cell], starts[cell]


#: the leaves of one kind sorted by cost (ascending), and their costs
_Kind = tuple[list[tuple[Event, int]], np.ndarray]
_Block = tuple[tuple[Event, ...], tuple[Event, ...], int]


def _sorted_kind(events: dict[Event, int]) -> _Kind:
    """(the items of ``events`` sorted by cost, stably; their costs)."""
    listed = list(events.items())
    costs = [_order(leaf) for leaf, _ in listed]
    # equal costs of distinct leaves (noises that are adjacent doubles have one reciprocal)
    # are ordered by the noise itself, so a run still ends at its costliest leaf
    ties = [-leaf.noise_multiplier if isinstance(leaf, LaplaceEvent) else 0.0 for leaf, _ in listed]
    order = sorted(range(len(listed)), key=lambda i: (costs[i], ties[i]))
    return [listed[i] for i in order], np.array([costs[i] for i in order], dtype=float)


def _blocks(
    events: dict[Event, int],
    rounding: float = ROUNDING,
    *,
    by_cell: bool = False,
    kind: _Kind | None = None,
    limit: int | None = None,
) -> list[_Block]:
    """The leaves of one kind, sorted by cost, as blocks of BLOCK_LEAVES copies (a leaf of a
    large count as equal blocks of its own; a block closed early where the costs spread past
    BLOCK_SPREAD, and with ``by_cell`` where the cell of ``rounding`` changes): per block its
    leaves rounded to the costly side (upper), to the cheap side (lower), and how many times
    it occurs. ``kind``: :func:`_sorted_kind` of ``events`` when already made; ``limit``: the
    walk stops once there are more blocks than this (the answer then only says so)."""
    items, costs = kind if kind is not None else _sorted_kind(events)
    costly, cheap = _rounded(costs, rounding)
    if by_cell and bool(np.all(costs[costly] <= BLOCK_SPREAD * costs[cheap])):
        return _cell_blocks(items, costly, cheap)
    return _walk(items, costs, costly, cheap, by_cell=by_cell, limit=limit)


def _walk(
    items: list[tuple[Event, int]],
    costs: np.ndarray,
    costly: np.ndarray,
    cheap: np.ndarray,
    *,
    by_cell: bool,
    limit: int | None = None,
) -> list[_Block]:
    """:func:`_blocks` leaf by leaf (``costly``, ``cheap``: per leaf, the index of its
    rounded leaf on each side)."""
    out: dict[tuple[tuple[Event, ...], tuple[Event, ...]], int] = {}
    up: list[Event] = []
    down: list[Event] = []
    at: list[int] = []  # the index of each of ``down``
    for (_, count), a, b in zip(items, costly.tolist(), cheap.tolist(), strict=True):
        high, low = items[a][0], items[b][0]
        full, rest = divmod(count, BLOCK_LEAVES)
        if up and (costs[a] > BLOCK_SPREAD * costs[at[0]] or (by_cell and high is not up[-1])):
            # a block's grid follows its smallest epsilon: no block spans epsilons far apart
            key = (tuple(up), tuple(down))
            out[key] = out.get(key, 0) + 1
            up, down, at = [], [], []
        if full:
            key = ((high,) * BLOCK_LEAVES, (low,) * BLOCK_LEAVES)
            out[key] = out.get(key, 0) + full
        up.extend([high] * rest)
        down.extend([low] * rest)
        at.extend([b] * rest)
        while len(up) >= BLOCK_LEAVES:
            key = (tuple(up[:BLOCK_LEAVES]), tuple(down[:BLOCK_LEAVES]))
            out[key] = out.get(key, 0) + 1
            up, down, at = up[BLOCK_LEAVES:], down[BLOCK_LEAVES:], at[BLOCK_LEAVES:]
        if limit is not None and len(out) > limit:
            break
    if up:
        key = (tuple(up), tuple(down))
        out[key] = out.get(key, 0) + 1
    return [(a, b, times) for (a, b), times in out.items()]


def _cell_blocks(
    items: list[tuple[Event, int]], costly: np.ndarray, cheap: np.ndarray
) -> list[_Block]:
    """:func:`_walk` by cell where no cell spreads past BLOCK_SPREAD, a cell at a time: its
    leaves all round to one pair per side, so its blocks are its full blocks of BLOCK_LEAVES
    copies and its rest (the walk's blocks, in its order)."""
    counts = [count for _, count in items]
    out: list[_Block] = []
    for start in np.flatnonzero(np.r_[True, np.diff(cheap) != 0]).tolist():
        end = int(costly[start])
        high, low = items[end][0], items[start][0]
        full, rest = divmod(sum(counts[start : end + 1]), BLOCK_LEAVES)
        if full:
            out.append(((high,) * BLOCK_LEAVES, (low,) * BLOCK_LEAVES, full))
        if rest:
            out.append(((high,) * rest, (low,) * rest, 1))
    return out


def _grouped(events: dict[Event, int]) -> list[_Block]:
    """The blocks of :func:`_blocks` at ROUNDING, or where those are more than MAX_BLOCKS, by
    cell at the first of CELL_ROUNDINGS that leaves at most MAX_CELL_BLOCKS (and MAX_BLOCKS;
    the last one tried when none does)."""
    return _grouping(events)[0]


def _grouping(events: dict[Event, int]) -> tuple[list[_Block], bool]:
    """(:func:`_grouped`'s blocks, whether they are blocks by cell)."""
    kind = _sorted_kind(events)
    found = _blocks(events, kind=kind, limit=MAX_BLOCKS)
    if len(found) <= MAX_BLOCKS:
        return found, False
    for rounding in CELL_ROUNDINGS:
        found = _blocks(events, rounding, by_cell=True, kind=kind)
        if len(found) <= min(MAX_CELL_BLOCKS, MAX_BLOCKS):
            break
    return found, bool(CELL_ROUNDINGS)


def is_cell_block(profiles: DirectedProfiles) -> bool:
    """Whether ``profiles`` are the curves of a block by cell (:func:`block_components`)."""
    return profiles.remove.name.endswith(_CELL_NAME)


def _by_cell(profiles: DirectedProfiles) -> DirectedProfiles:
    """``profiles`` with their curves' names marked as a block by cell's."""
    upper = attrs.evolve(profiles.remove, name=profiles.remove.name + _CELL_NAME)
    lower = attrs.evolve(profiles.lower_remove, name=profiles.lower_remove.name + _CELL_NAME)
    return DirectedProfiles(upper, upper, lower, lower)


def _order(event: Event) -> float:
    found = _cost(event)
    assert found is not None
    return found[1]


def block_components(
    merged: dict[Event, int], adjacency: Adjacency
) -> tuple[dict[Event, int], list[tuple[DirectedProfiles, int]]]:
    """(the leaves left as they are, the blocks' components): beside a leaf of unbounded loss
    (a Gaussian inside: the composed loss grid is then coarse against small epsilons), per
    kind of :func:`_cost`, its leaves, when there are at least MIN_BLOCKED of them with
    epsilons within MAX_BLOCK_EPSILON in at most MAX_BLOCKS blocks, composed in blocks
    (:func:`block_profiles`); a kind with a block that cannot be certified keeps its leaves
    as they are."""
    if not any(_unbounded_loss(leaf) for leaf in merged):
        return merged, []
    kinds: dict[str, dict[Event, int]] = {}
    for leaf, count in merged.items():
        cost = _cost(leaf)
        if cost is not None and 0.0 < cost[1] <= MAX_BLOCK_EPSILON:
            kinds.setdefault(cost[0], {})[leaf] = count
    rest = dict(merged)
    comps: list[tuple[DirectedProfiles, int]] = []
    parts = _Parts(adjacency)
    for events in kinds.values():
        if sum(events.values()) < MIN_BLOCKED:
            continue
        found_blocks, by_cell = _grouping(events)
        if len(found_blocks) > MAX_BLOCKS:
            continue
        made = _made(found_blocks, adjacency, parts)
        if made is not None:
            comps.extend([(_by_cell(d), k) for d, k in made] if by_cell else made)
            for leaf in events:
                del rest[leaf]
    return rest, comps


def _made(
    found: list[_Block], adjacency: Adjacency, parts: _Parts
) -> list[tuple[DirectedProfiles, int]] | None:
    """The components of blocks ``found`` (in their order), or None when one cannot be
    certified. Blocks of copies of one pair are made one after the other (by ascending length),
    so that a cell's compositions stay kept while its blocks are made
    (:meth:`_Parts.composed`)."""
    first: dict[Event, int] = {}
    for i, (upper, _, _) in enumerate(found):
        first.setdefault(upper[0], i)
    order = sorted(range(len(found)), key=lambda i: (first[found[i][0][0]], len(found[i][0])))
    made: dict[int, tuple[DirectedProfiles, int]] = {}
    for i in order:
        upper, lower, times = found[i]
        profiles = block_profiles(list(upper), list(lower), adjacency, parts)
        if profiles is None:
            return None
        made[i] = (profiles, times)
    return [made[i] for i in range(len(found))]
