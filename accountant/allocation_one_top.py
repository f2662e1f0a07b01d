"""Random allocation's likelihood-ratio lower bound with one output above the top edge resolved.

:func:`~dpledger.accountant.allocation_ratio.allocation_ratio_pair` post-processes every output
to its cell and lumps "some output above ``big``" into one outcome. When an epoch has many steps
and little noise, one large output is what makes the loss large (a lognormal's heavy tail), and
``big`` is held low by the window of the sum: the lumped outcome loses it. Here the outputs
above ``big`` are cut into cells of their own (each ``WIDTH_REL`` of its left end wide) up to
where ``t P(L > x)`` is below ``ONE_TOP_TAIL``, and the outcomes are

- "no output above ``big``, lattice sum ``u``": those of ``allocation_ratio_pair``;
- "exactly one output above ``big``, in top cell ``c``, the other ``t - 1`` in kept cells with
  lattice value ``u`` (``h`` times the lattice index)": Q-mass ``t q_c Q_{t-1}(u)`` (the
  ``t`` positions are disjoint events), likelihood ratio ``(sum_rest E_Q[L | cell] +
  E_Q[L | c]) / t``, within ``[((1 - rho) u + v_c^-) / t, ((1 + rho) u + v_c^+) / t]``
  (``v_c`` the top cell's conditional mean, bracketed); merged into bins of ``ONE_TOP_BIN``
  in the logarithm of the lower end (merging outcomes is post-processing), each bin's ratio
  bracketed by one bin on either side and the largest relative spread of a member;
- everything else (two or more outputs above ``big``, outputs in dropped cells) is dropped:
  the hockey-stick sum over fewer outcomes is smaller.

Every Q-mass is a lower bound, used as the exact mass of a sub-pair whose P-masses are the
ratio bounds times it, as in ``allocation_ratio_pair`` (proofs_checks/allocation_ratio).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numpy.typing import NDArray
from scipy import special

from dpledger.accountant.allocation_ratio import (
    WIDTH_REL,
    _cells,
    _grid,
    _matched_edges,
    _one_output,
    _windowed_sum,
    allocation_ratio_pair,
)
from dpledger.accountant.discrete_pair import DiscretePair

__all__ = [
    "MIN_CELLS",
    "MIN_TOP_MASS",
    "MIN_TOP_STEPS",
    "ONE_TOP_BIN",
    "ONE_TOP_TAIL",
    "allocation_one_top_pair",
    "one_top_matters",
]

Array = NDArray[np.float64]

_U = 2.0**-53
#: the top cells stop where some output exceeds their right end with at most this probability
ONE_TOP_TAIL = 1e-24
#: width of the bins, in the logarithm of the ratio, into which one-top outcomes are merged
ONE_TOP_BIN = 5e-5
#: sum masses below this fraction of the largest are left out of the one-top outcomes
REST_FLOOR = 1e-30
#: the one-top outcomes are made where some output lies above the top edge with at least this
#: probability (the window of the sum held the edge low) and the epoch has at least this many
#: steps (with fewer, the max-of-outputs statistic resolves the large outputs)
MIN_TOP_MASS = 1e-9
MIN_TOP_STEPS = 100
#: top cells handled at once (memory: this many times the rest law's support)
CHUNK = 32


def _top_cells(mu: float, z_top: float, t: int) -> tuple[Array, Array, Array]:
    """(Q-mass lower bounds, conditional-mean lower and upper bounds) of the top cells: from
    ``z_top`` up, each ``WIDTH_REL`` of its left end wide in L, to where ``t P(Z > z)`` is
    below ONE_TOP_TAIL."""
    step = math.log1p(WIDTH_REL) / mu  # L = exp(mu z - mu^2 / 2): a ratio is a z step
    z_end = float(-special.ndtri(ONE_TOP_TAIL / t))
    count = max(1, math.ceil((z_end - z_top) / step))
    z: Array = np.asarray(z_top + step * np.arange(count + 1), dtype=float)
    mass, err_mass, moment, err_moment = _cells(mu, z)
    q_lo = mass - err_mass
    with np.errstate(divide="ignore", invalid="ignore"):
        v_lo = (moment - err_moment) / (mass + err_mass) * (1 - 4 * _U)
        v_hi = (moment + err_moment) / q_lo * (1 + 4 * _U)
    keep = (q_lo > 0) & (v_lo > 0) & np.isfinite(v_hi)
    return q_lo[keep] * (1 - 4 * _U), v_lo[keep], v_hi[keep]


def _binned_one_top(
    rest: Array, offset: int, h: float, rho: float, t: int, tops: tuple[Array, Array, Array]
) -> tuple[Array, Array, Array]:
    """(Q-mass, ratio lower bound, ratio upper bound) of the merged one-top outcomes."""
    q_top, v_lo, v_hi = tops
    j = np.nonzero(rest >= REST_FLOOR * float(rest.max()))[0]
    u, q_rest = (j + offset) * h, rest[j]
    spread = max((1 + rho) / (1 - rho), float(np.max(v_hi / v_lo))) * (1 + 8 * _U)
    # every bin index lies between those of the least and the largest lower ends
    least = ((1 - rho) * float(u.min()) + float(v_lo.min())) / t * (1 - 4 * _U)
    most = ((1 - rho) * float(u.max()) + float(v_lo.max())) / t
    first = math.floor(math.log(least) / ONE_TOP_BIN) - 1
    totals = np.zeros(math.floor(math.log(most) / ONE_TOP_BIN) + 2 - first)
    for start in range(0, q_top.size, CHUNK):
        sl = slice(start, start + CHUNK)
        ratio_lo = ((1 - rho) * u[None, :] + v_lo[sl, None]) / t * (1 - 4 * _U)
        bins = np.floor(np.log(ratio_lo) / ONE_TOP_BIN).astype(np.int64).ravel() - first
        mass = (t * q_top[sl, None] * q_rest[None, :] * (1 - 4 * _U)).ravel()
        totals += np.bincount(bins, weights=mass, minlength=totals.size)
    keys = np.nonzero(totals)[0]
    # the sums of nonnegative products: relative rounding at most (terms + 2) u of each bin
    terms = float(q_top.size * u.size)
    q = totals[keys] * (1 - (terms + 2) * _U)
    ratio_lo = np.exp((keys + first - 1) * ONE_TOP_BIN) * (1 - 4 * _U)  # a bin below: rounding
    ratio_hi = np.exp((keys + first + 2) * ONE_TOP_BIN) * spread * (1 + 4 * _U)
    return np.maximum(q, 0.0), ratio_lo, ratio_hi


def _top_edge(mu: float, t: int) -> tuple[float, float, float, int]:
    """(lattice step h, top edge big, z of the last matched cell edge, number of cells)."""
    h, big = _grid(mu, t)
    z, index = _matched_edges(mu, h, big)
    return h, big, float(z[-1]), int(index.size)


#: fewer matched cells than this (a lattice step near the spread of one output) leave the sum
#: too coarse for the one-top outcomes to add anything
MIN_CELLS = 16


@functools.lru_cache(maxsize=16)
def one_top_matters(mu: float, t: int) -> bool:
    """Whether :func:`allocation_one_top_pair` is made for ``t`` steps of noise ``1 / mu``
    (MIN_TOP_MASS, MIN_TOP_STEPS, MIN_CELLS; never where the cells end at -infinity: a
    lattice step so coarse that no cell was matched)."""
    if t < MIN_TOP_STEPS:
        return False
    _, _, z_top, cells = _top_edge(mu, t)
    if not math.isfinite(z_top) or cells < MIN_CELLS:
        return False
    return t * float(special.ndtr(-z_top)) >= MIN_TOP_MASS


@functools.lru_cache(maxsize=16)
def allocation_one_top_pair(mu: float, t: int) -> DiscretePair:
    """The pair of the module docstring as a :class:`DiscretePair` bracketing a sub-pair (the
    no-top outcomes of ``allocation_ratio_pair``, then the merged one-top outcomes)."""
    h, big, z_top, _ = _top_edge(mu, t)
    law, rho, _ = _one_output(mu, h, big)
    tops = _top_cells(mu, z_top, t)
    base = allocation_ratio_pair(mu, t)
    no_top = slice(0, base.p_lower.size - 1)  # its last outcome is "some output on top"
    parts = [(base.p_lower[no_top], base.p_upper[no_top], base.q_lower[no_top])]
    if t >= 2 and tops[0].size:
        offset, rest, _ = _windowed_sum(law, t - 1, big, h)
        if rest.size and float(rest.max()) > 0:
            q, r_lo, r_hi = _binned_one_top(rest, offset, h, rho, t, tops)
            parts.append((r_lo * q * (1 - 4 * _U), r_hi * q * (1 + 4 * _U), q))
    p_lo = np.concatenate([p[0] for p in parts])
    p_hi = np.concatenate([p[1] for p in parts])
    q_all = np.concatenate([p[2] for p in parts])
    return DiscretePair(p_lo, p_hi, q_all, q_all)
