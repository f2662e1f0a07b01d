"""Many exponential-mechanism releases at one epsilon composed in blocks, for PLD upper bounds.

The PLD backend composes each exponential-mechanism (``eps0``-bounded-range) release through
the one-release worst case, a pair whose curve is the supremum over the class; composing it
``k`` times lets every release pick its worst pair on its own, 7-19 % above the optimal
adaptive composition. Here ``k`` releases of one leaf enter the upper bound as ``k // m`` blocks
of ``m`` releases plus ``k % m`` single ones: a block's curve is the programme's certified
upper curve of ``m`` adaptively chosen releases (:func:`~dpledger.accountant.br_adaptive.
adaptive_br_curves`), read as a tabulated profile on its lattice (the chord in ``e^eps`` of a
convex curve's upper values lies above it).

Why it is an upper bound (``proofs_checks/br_blocks/proof.md``): cut the ledger's run, in
the order it happened, after every ``m``-th release of the leaf; each piece is an adaptive
composition of ``m`` such releases and of other releases, each of those dominated by its own
pair whatever came before. Letting the other releases of a piece happen first can only help
the adversary (an expectation of a supremum is at least the supremum of the expectation), and
then the piece's curve is that of their pairs composed with the block's, so the piece is
dominated by the product of those pairs; dominating pairs compose adaptively. Only one leaf is
blocked (pieces cut by two leaves would overlap). Lower bounds keep the leaf's own curves.
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
    "MAX_TABLE_EPSILON",
    "MIN_BLOCK_POINTS",
    "TOP_DELTA",
    "block_size",
    "block_table",
    "range_blocks",
]

#: block sizes tried, largest first (at most half the releases: two blocks or more)
BLOCK_SIZES = (1000, 500, 250, 100, 50, 25, 10, 5, 2)
#: a block's lattice has at least this many points per eps0 (the bracket narrows like 1/N^2)
MIN_BLOCK_POINTS = 60
#: a block's table ends below this epsilon (tables are read up to 700: beyond, a block's last
#: value would stay at every epsilon)
MAX_TABLE_EPSILON = 600.0
#: a block's table reaches where the Rényi bound of the block is this small: beyond, its last
#: value is charged at +infinity in every block
TOP_DELTA = 1e-30


def block_size(eps0: float, count: int) -> int | None:
    """The largest of BLOCK_SIZES, at most ``count / 2``, whose table ends below
    MAX_TABLE_EPSILON and whose programme has at least MIN_BLOCK_POINTS lattice points per
    eps0 within its work budget (None: none)."""
    if not 0.0 < eps0 <= MAX_EPS0:
        return None
    for m in BLOCK_SIZES:
        if 2 * m > count or _top(eps0, m) > MAX_TABLE_EPSILON:
            continue
        n = lattice_points(eps0, m, _top(eps0, m))
        if n is not None and n >= MIN_BLOCK_POINTS:
            return m
    return None


def _top(eps0: float, m: int) -> float:
    """Where the Rényi bound of ``m`` releases reaches TOP_DELTA (at most m * eps0)."""
    orders = default_orders()
    rdp = bounded_range_rdp(orders, eps0) * m * (1 + 2.0**-50)
    return min(rdp_to_epsilon(orders, rdp, TOP_DELTA)[0], m * eps0)


@functools.lru_cache(maxsize=16)
def block_table(eps0: float, m: int, relation: str = "add_remove") -> TabulatedProfileEvent:
    """The certified upper curve of ``m`` adaptively chosen ``eps0``-bounded-range releases
    on the programme's lattice, as a table for both directions (the class is closed under
    swapping the datasets); at most MAX_PROFILE_POINTS of its points, every point kept where
    they fit, else evenly thinned with the last kept (a chord through fewer points of a convex
    curve's upper values still lies above it)."""
    x_top = _top(eps0, m)
    n = lattice_points(eps0, m, x_top)
    assert n is not None
    _, up, h = adaptive_br_curves(eps0, m, x_top, n, lower=False)
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


def range_blocks(events: dict[Event, int], relation: str) -> dict[Event, int]:
    """The upper bound's leaves with the unsampled exponential-mechanism leaf of the most
    releases (at least four) as blocks and single releases, their table stated under
    ``relation`` (the release's epsilon holds under the ledger's relation, and so does the
    programme's curve); ``events`` itself when none is."""
    leaves = [(e, k) for e, k in events.items() if type(e) is ExponentialMechanismEvent]
    if not leaves:
        return events
    leaf, count = max(leaves, key=lambda item: (item[1], item[0].epsilon))
    m = block_size(leaf.epsilon, count)
    if m is None:
        return events
    blocks, rest = divmod(count, m)
    out = {e: k for e, k in events.items() if e != leaf}
    table = block_table(leaf.epsilon, m, relation)
    out[table] = out.get(table, 0) + blocks
    if rest:
        out[leaf] = rest
    return out
