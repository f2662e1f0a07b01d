"""Exponential-mechanism releases composed in blocks, for PLD upper bounds.

The PLD backend composes each exponential-mechanism (``eps0``-bounded-range) release through
the one-release worst case, a pair whose curve is the supremum over the class; composing it
``k`` times lets every release pick its worst pair on its own, 7-19 % above the optimal
adaptive composition. Here the ``k`` releases of a leaf enter the upper bound as blocks: all
``k`` as one block where its table can be made (``k`` at most 1000), else ``k // m`` blocks of
``m`` and the rest as one block (or single releases); a block's curve is the programme's
certified upper curve of its releases chosen adaptively (:func:`~dpledger.accountant.
br_adaptive.adaptive_br_curves`), read as a tabulated profile on its lattice (the chord in
``e^eps`` of a convex curve's upper values lies above it). Every such leaf is blocked, most
releases first, within a work budget for the tables.

Why it is an upper bound (``proofs_checks/br_blocks/proof.md``): a block is an interactive
mechanism answering its releases' queries, and its table bounds the view of every adversary
interacting with it; interactive mechanisms queried in any interleaving compose as their
non-interactive f-DP pairs do (Vadhan & Zhang, concurrent composition of f-DP, STOC 2023), so
the ledger is dominated by the product of the blocks' pairs and the other releases' pairs.
Lower bounds keep the leaves' own curves.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from dpledger.accountant.br_adaptive import MAX_EPS0, adaptive_br_curves, lattice_points
from dpledger.accountant.conversions import rdp_to_epsilon
from dpledger.accountant.rdp_orders import bounded_range_rdp, default_orders
from dpledger.core.event_curves import MAX_PROFILE_POINTS
from dpledger.core.events import Event, ExponentialMechanismEvent, TabulatedProfileEvent

__all__ = [
    "BLOCK_SIZES",
    "BLOCK_WORK",
    "MAX_BLOCK_POINTS",
    "MAX_TABLE_EPSILON",
    "MIN_BLOCK_POINTS",
    "TOP_DELTA",
    "block_points",
    "block_size",
    "block_table",
    "block_work",
    "range_blocks",
]

#: block sizes tried, largest first, after the whole leaf as one block where it fits
BLOCK_SIZES = (1000, 500, 250, 100, 50, 25, 10, 5, 2)
#: a block's lattice has at least this many points per eps0 (the bracket narrows like 1/N^2)
MIN_BLOCK_POINTS = 60
#: and at most this many: finer lattices narrow a block's table by less than its share of the
#: composition's discretisation, at four times the work per halving of the step
MAX_BLOCK_POINTS = 128
#: the same for the blocks of cells (many distinct leaves: many tables, each coarser)
CELL_BLOCK_POINTS = 64
#: the programme work (releases x lattice points^2 x span in eps0) spent on block tables of
#: one upper bound; leaves beyond it (fewest releases last) stay single releases
BLOCK_WORK = 4e8
#: more distinct exponential-mechanism leaves than this are merged into cells first: each
#: cell's releases taken at its largest epsilon, at most CELL_RATIO times its smallest
MAX_RANGE_LEAVES = 8
CELL_RATIO = 1.02
#: a block's table ends below this epsilon (tables are read up to 700: beyond, a block's last
#: value would stay at every epsilon)
MAX_TABLE_EPSILON = 600.0
#: a block's table reaches where the Rényi bound of the block is this small: beyond, its last
#: value is charged at +infinity in every block
TOP_DELTA = 1e-30


def block_points(eps0: float, m: int, most: int = MAX_BLOCK_POINTS) -> int | None:
    """N, the lattice points per eps0 of a block of ``m`` releases (None: no block: beyond the
    programme's range, a table reaching past MAX_TABLE_EPSILON, or fewer than
    MIN_BLOCK_POINTS within the work budget)."""
    if not 0.0 < eps0 <= MAX_EPS0 or m < 2:
        return None
    top = _top(eps0, m)
    if top > MAX_TABLE_EPSILON:
        return None
    n = lattice_points(eps0, m, top)
    if n is None or n < MIN_BLOCK_POINTS:
        return None
    return min(n, most)


def block_size(eps0: float, count: int, most: int = MAX_BLOCK_POINTS) -> int | None:
    """The largest block for ``count`` releases: all of them when a block of ``count`` can be
    made (at most 1000), else the largest of BLOCK_SIZES below ``count`` that can (None:
    none)."""
    sizes = ((count,) if count <= BLOCK_SIZES[0] else ()) + tuple(
        m for m in BLOCK_SIZES if m < count
    )
    for m in sizes:
        if block_points(eps0, m, most) is not None:
            return m
    return None


def block_work(eps0: float, m: int, most: int = MAX_BLOCK_POINTS) -> float:
    """The programme's work for a block of ``m`` releases (about m N^2 x_top / eps0)."""
    n = block_points(eps0, m, most)
    assert n is not None
    return float(m) * n * n * max(_top(eps0, m) / eps0, 1.0)


def _top(eps0: float, m: int) -> float:
    """Where the Rényi bound of ``m`` releases reaches TOP_DELTA (at most m * eps0)."""
    orders = default_orders()
    rdp = bounded_range_rdp(orders, eps0) * m * (1 + 2.0**-50)
    return min(rdp_to_epsilon(orders, rdp, TOP_DELTA)[0], m * eps0)


@functools.lru_cache(maxsize=256)
def block_table(
    eps0: float, m: int, relation: str = "add_remove", most: int = MAX_BLOCK_POINTS
) -> TabulatedProfileEvent:
    """The certified upper curve of ``m`` adaptively chosen ``eps0``-bounded-range releases
    on the programme's lattice (``block_points`` per eps0), as a table for both directions
    (the class is closed under swapping the datasets); at most MAX_PROFILE_POINTS of its
    points, every point kept where they fit, else evenly thinned with the last kept (a chord
    through fewer points of a convex curve's upper values still lies above it)."""
    n = block_points(eps0, m, most)
    assert n is not None
    _, up, h = adaptive_br_curves(eps0, m, _top(eps0, m), n, lower=False)
    index = np.arange(up.size)
    if up.size > MAX_PROFILE_POINTS:
        stride = math.ceil((up.size - 1) / (MAX_PROFILE_POINTS - 1))
        index = np.unique(np.concatenate([index[::stride], [up.size - 1]]))
    eps = index * h
    return TabulatedProfileEvent(
        tuple(float(v) for v in eps),
        tuple(float(v) for v in np.minimum(up[index], 1.0)),
        relation=relation,
        name=f"exponential_mechanism block({eps0:g} x {m})",
    )


def _blocks(eps0: float, count: int, most: int) -> list[tuple[int, int]]:
    """(block size, copies) for ``count`` releases: blocks of ``block_size`` and the rest as
    one block where one can be made, or as single releases (size 1); [] when no block."""
    m = block_size(eps0, count, most)
    if m is None:
        return []
    copies, rest = divmod(count, m)
    plan = [(m, copies)]
    if rest:
        plan.append((rest, 1) if block_points(eps0, rest, most) is not None else (1, rest))
    return plan


def range_blocks(events: dict[Event, int], relation: str) -> dict[Event, int]:
    """The upper bound's leaves with each unsampled exponential-mechanism leaf of two or more
    releases as blocks (most releases first, while their tables' work fits in BLOCK_WORK, made
    or not, so that the bound does not depend on what the process made before), their tables
    stated under ``relation`` (the release's epsilon holds under the ledger's relation, and so
    does the programme's curve); ``events`` itself when none is. A cell left unblocked keeps
    its members."""
    cells = _range_cells(events)
    most = MAX_BLOCK_POINTS if not cells else CELL_BLOCK_POINTS
    out = {e: k for e, k in events.items() if not (cells and type(e) is ExponentialMechanismEvent)}
    out.update({leaf: sum(members.values()) for leaf, members in cells.items()})
    leaves = sorted(
        ((e, k) for e, k in out.items() if type(e) is ExponentialMechanismEvent and k >= 2),
        key=lambda item: (item[1], item[0].epsilon),
        reverse=True,
    )
    work = 0.0
    blocked: set[Event] = set()
    for leaf, count in leaves:
        plan = [(m, c) for m, c in _blocks(leaf.epsilon, count, most) if m > 1]
        new = sum(block_work(leaf.epsilon, m, most) for m, _ in plan)
        if not plan or work + new > BLOCK_WORK:
            continue
        work += new
        blocked.add(leaf)
        del out[leaf]
        singles = count - sum(m * c for m, c in plan)
        for m, copies in plan:
            table = block_table(leaf.epsilon, m, relation, most)
            out[table] = out.get(table, 0) + copies
        if singles:
            out[leaf] = singles
    if not blocked:
        return events  # itself: the backend then knows its upper and lower leaves are one
    for leaf, members in cells.items():
        if leaf not in blocked:  # its members as they were
            del out[leaf]
            for member, k in members.items():
                out[member] = out.get(member, 0) + k
    return out


def _range_cells(events: dict[Event, int]) -> dict[ExponentialMechanismEvent, dict[Event, int]]:
    """When ``events`` has more than MAX_RANGE_LEAVES distinct exponential-mechanism leaves,
    their cells (from the smallest epsilon: a cell holds the leaves up to CELL_RATIO times its
    first), each as one leaf at its largest epsilon, with its members (an ``eps``-bounded-range
    release is one at every larger epsilon); else none."""
    leaves = sorted(
        (
            (e, k)
            for e, k in events.items()
            if isinstance(e, ExponentialMechanismEvent) and type(e) is ExponentialMechanismEvent
        ),
        key=lambda item: item[0].epsilon,
    )
    if len(leaves) <= MAX_RANGE_LEAVES:
        return {}
    cells: dict[ExponentialMechanismEvent, dict[Event, int]] = {}
    start = 0
    while start < len(leaves):
        end = start + 1
        while end < len(leaves) and leaves[end][0].epsilon <= leaves[start][0].epsilon * CELL_RATIO:
            end += 1
        cells[leaves[end - 1][0]] = dict(leaves[start:end])
        start = end
    return cells
