"""Chernoff tilts and windows of compositions of discretised PLDs.

The log-MGFs of the components (blocked sums, memoised per PLD) give Chernoff bounds on the
composed loss: they choose the exponential tilt of a composition and the window ``[a, b]`` that
holds all but a given tail mass.
"""

from __future__ import annotations

import math
from collections.abc import (
    Sequence,
)

import numpy as np
from numpy.typing import NDArray

from dpledger.accountant.pld_discrete import (
    Array,
    DiscretePLD,
)
from dpledger.accountant.threads import one_blas_thread

__all__ = [
    "MGF_BATCH_BLOCK",
    "MGF_BATCH_MIN",
    "MGF_BLOCK_SPAN",
    "MGF_FLOOR",
    "MGF_MEMO_SIZE",
    "MGF_MIN_BLOCK",
    "MGF_SPLIT_WORK",
    "THETAS",
    "chernoff_epsilon",
    "chernoff_level",
    "log_mgf_bound_total",
    "log_mgf_total",
    "tilt_for_delta",
    "tilt_for_epsilon",
    "tilted_window",
]


def _log_mgf(pld: DiscretePLD, lam: Array) -> Array:
    """log sum_j p_j exp(lam * l_j) for every lam (finite part only).

    The grid is uniform, so with ``j = a B + b`` the sum factors into a matrix product of
    ``p_{aB+b} / max_b p`` and ``e^{lam h b}`` (both at most 1 after scaling, ``|lam| h B`` at
    most MGF_BLOCK_SPAN so that no kept term underflows), followed by a log-sum-exp over the
    blocks: ``n + B T`` exponentials instead of ``n T``. Each value is a sum of positive terms
    with relative error below ``(B + 16) u``."""
    lam = np.asarray(lam, dtype=np.float64)
    key = lam.tobytes()
    known = pld.mgf_memo.get(key)
    if known is None:
        known = _log_mgf_split(pld, lam)
        if len(pld.mgf_memo) < MGF_MEMO_SIZE:
            pld.mgf_memo[key] = known
    return known.copy()


#: most tilt vectors whose log-MGF one discretised PLD keeps
MGF_MEMO_SIZE = 64


def _log_mgf_split(pld: DiscretePLD, lam: Array) -> Array:
    """:func:`_log_mgf`, computed: the exponents that allow blocks of at least MGF_MIN_BLOCK
    points summed in blocks (:func:`_log_mgf_rows`) even when others do not (those term by
    term, :func:`_log_mgf_direct`), and blocks from MGF_SPLIT_WORK terms on: the same error
    bound per value, at a fraction of the exponentials."""
    masses = pld.masses
    if not (masses > 0).any():
        return np.full(lam.shape, -np.inf)
    n = masses.size
    widest = math.isqrt(n) + 1
    reach = np.abs(lam) * pld.h
    gentle = reach * MGF_MIN_BLOCK <= MGF_BLOCK_SPAN
    if widest < MGF_MIN_BLOCK or n * lam.size < MGF_SPLIT_WORK or not gentle.any():
        return _log_mgf_direct(pld, lam)
    if gentle.all():
        return _log_mgf_rows(pld, lam, _block(widest, float(np.max(reach))))
    out = np.empty(lam.shape, dtype=np.float64)
    out[~gentle] = _log_mgf_direct(pld, lam[~gentle])
    out[gentle] = _log_mgf_rows(pld, lam[gentle], _block(widest, float(np.max(reach[gentle]))))
    return out


def _block(widest: int, reach: float) -> int:
    """Block length: at most ``widest``, and ``|lam| h B`` at most MGF_BLOCK_SPAN."""
    return max(1, min(widest, int(MGF_BLOCK_SPAN / reach) if reach > 0 else widest))


def _log_mgf_rows(pld: DiscretePLD, lam: Array, block: int) -> Array:
    """:func:`_log_mgf` in blocks of ``block`` points (``|lam| h block`` at most
    MGF_BLOCK_SPAN for every ``lam``)."""
    masses = pld.masses
    n = masses.size
    pad = (-n) % block
    rows = np.concatenate([masses, np.zeros(pad)]).reshape(-1, block)
    top = rows.max(axis=1)
    live = top > 0
    rows, top = rows[live], top[live]
    starts = (np.nonzero(live)[0] * block + pld.offset) * pld.h  # loss of each row's first point
    steps = np.arange(block) * pld.h
    shift = np.maximum(0.0, lam * steps[-1])  # max over b of lam h b
    grow = np.exp(steps[:, None] * lam[None, :] - shift[None, :])  # (B, T), at most 1
    with one_blas_thread():
        sums = (rows / top[:, None]) @ grow  # (A, T), positive
    with np.errstate(divide="ignore"):
        logs = np.log(sums + MGF_FLOOR) + np.log(top)[:, None] + shift[None, :]
    logs = logs + starts[:, None] * lam[None, :]
    peak = logs.max(axis=0)
    return np.asarray(peak + np.log(np.exp(logs - peak[None, :]).sum(axis=0)), dtype=np.float64)


def _log_mgf_direct(pld: DiscretePLD, lam: Array) -> Array:
    """:func:`_log_mgf` term by term (for steep exponents, where blocks would be short)."""
    pos = np.flatnonzero(pld.masses > 0)
    logp = np.log(pld.masses[pos])
    losses = np.asarray((pld.offset + pos) * pld.h, dtype=np.float64)  # pld.losses[pos]
    out = np.empty(lam.shape, dtype=np.float64)
    rows = max(1, (1 << 21) // max(losses.size, 1))  # bound the temporary to ~16 MB
    # one buffer, worked in place (fresh temporaries of this size cost more in page faults
    # than the exponentials); the same operations, in the same order, as out of place
    buf = np.empty((min(rows, lam.size), losses.size), dtype=np.float64)
    for start in range(0, lam.size, rows):
        part = lam[start : start + rows]
        x = buf[: part.size]
        np.multiply(part[:, None], losses[None, :], out=x)
        np.add(logp[None, :], x, out=x)
        top = x.max(axis=1)
        np.subtract(x, top[:, None], out=x)
        np.exp(x, out=x)
        out[start : start + rows] = top + np.log(x.sum(axis=1))
    return out


#: below this many terms the direct sum is cheaper than the blocks' set-up (measured: blocks of
#: 16 points and more win from about 1e4 terms on)
MGF_SPLIT_WORK = 1 << 14


#: shortest block of :func:`_log_mgf_rows` (steeper exponents are summed term by term)
MGF_MIN_BLOCK = 16


#: largest |lam| h B within one block of :func:`_log_mgf` (e^-500 is far above underflow)
MGF_BLOCK_SPAN = 500.0


#: bound on a block's terms lost to underflow (each below e^-745 after scaling)
MGF_FLOOR = 1e-290


#: tilts tried by the Chernoff searches
THETAS = np.geomspace(1e-3, 1e5, 64)


def log_mgf_total(plds: Sequence[tuple[DiscretePLD, int]], lam: Array) -> Array:
    """log E[e^{lam S}] of the discretised sum (finite part), for every lam. The values not
    memoised yet are summed together (:func:`_log_mgf_many`) where MGF_BATCH_MIN or more
    components on one grid need them."""
    lam = np.asarray(lam, dtype=np.float64)
    key = lam.tobytes()
    fresh: dict[int, Array] = {}
    todo = list({id(p): p for p, _ in plds if key not in p.mgf_memo}.values())
    if len(todo) >= MGF_BATCH_MIN and len({p.h for p in todo}) == 1:
        for pld, values in zip(todo, _log_mgf_many(todo, lam), strict=True):
            fresh[id(pld)] = values
            if len(pld.mgf_memo) < MGF_MEMO_SIZE:
                pld.mgf_memo[key] = values
    out = np.zeros(lam.shape, dtype=np.float64)
    for pld, count in plds:
        found = fresh.get(id(pld))
        out += count * (found if found is not None else _log_mgf(pld, lam))
    return out


#: fewest components whose log-MGFs are summed together by :func:`log_mgf_total`
MGF_BATCH_MIN = 8

#: shortest block of :func:`_log_mgf_many` (one matrix product for all the components makes
#: short blocks worth their set-up; each row saves its length in exponentials)
MGF_BATCH_BLOCK = 4


def _log_mgf_many(plds: Sequence[DiscretePLD], lam: Array) -> Array:
    """:func:`_log_mgf` of several PLDs on one grid at once, shape ``(len(plds), lam.size)``:
    every PLD cut into rows of one block length and all rows summed by one matrix product
    (the exponents that allow blocks of MGF_BATCH_BLOCK points or more, each in the longest
    block it allows), the steeper exponents term by term in one array, then a log-sum-exp
    over each PLD's rows or terms. The same sums as :func:`_log_mgf_split`, in blocks of
    other lengths (relative error below ``(B + 16) u`` for blocks of B points); a PLD with no
    finite mass reads -inf."""
    out = np.full((len(plds), lam.size), -np.inf)
    live = np.array([bool((p.masses > 0).any()) for p in plds])
    if not live.any():
        return out
    stack = _Stack([p for p, alive in zip(plds, live, strict=True) if alive])
    reach = np.abs(lam) * stack.h
    steep = reach * MGF_BATCH_BLOCK > MGF_BLOCK_SPAN
    if steep.sum() < lam.size:
        # classes of powers of two (rows beat terms from one exponent on: measured)
        widest = max(MGF_BATCH_BLOCK, math.isqrt(int(np.median(stack.sizes))))
        with np.errstate(divide="ignore", over="ignore"):
            allowed = np.floor(np.log2(MGF_BLOCK_SPAN / reach))
        blocks = np.minimum(2.0 ** np.minimum(allowed, 62), widest + 1).astype(np.int64)
        for block in np.unique(blocks[~steep]):
            which = ~steep & (blocks == block)
            out[np.ix_(live, which)] = stack.rows(lam[which], int(block))
    if steep.any():
        out[np.ix_(live, steep)] = stack.terms(lam[steep])
    return out


class _Stack:
    """The masses of several PLDs on one grid (each with a positive mass), end to end."""

    def __init__(self, plds: Sequence[DiscretePLD]) -> None:
        self.h = plds[0].h
        self.sizes = np.array([p.masses.size for p in plds])
        self.offsets = np.array([p.offset for p in plds])
        self.masses = np.concatenate([p.masses for p in plds])
        starts = np.concatenate(([0], np.cumsum(self.sizes)[:-1]))
        #: each mass's index within its PLD
        self.within = np.arange(self.masses.size) - np.repeat(starts, self.sizes)

    def rows(self, lam: Array, block: int) -> Array:
        """:func:`_log_mgf_rows` of every PLD, in rows of ``block`` points (``|lam| h block``
        at most MGF_BLOCK_SPAN for every ``lam``)."""
        count = -(-self.sizes // block)  # rows of each PLD
        first_row = np.concatenate(([0], np.cumsum(count)[:-1]))
        buffer = np.zeros(int(count.sum()) * block)
        buffer[np.repeat(first_row * block, self.sizes) + self.within] = self.masses
        rows = buffer.reshape(-1, block)
        owner = np.repeat(np.arange(self.sizes.size), count)
        row_in_pld = np.arange(owner.size) - np.repeat(first_row, count)
        index = np.repeat(self.offsets, count) + block * row_in_pld  # each row's first point
        top = rows.max(axis=1)
        alive = top > 0
        rows, top, owner = rows[alive], top[alive], owner[alive]
        first = np.asarray(index[alive] * self.h, dtype=np.float64)
        steps = np.arange(block) * self.h
        shift = np.maximum(0.0, lam * steps[-1])  # max over b of lam h b
        grow = np.exp(steps[:, None] * lam[None, :] - shift[None, :])  # (B, T), at most 1
        with one_blas_thread():
            sums = (rows / top[:, None]) @ grow  # (rows, T), each in [e^-MGF_BLOCK_SPAN, B]
        # each row's sum scaled by its exponent e = log(top) + shift + first * lam (one
        # logarithm per row, not per row and tilt), summed by owner from the largest e
        scale = np.log(top)[:, None] + shift[None, :] + first[:, None] * lam[None, :]
        return _segment_logsumexp(scale, owner, sums)

    def terms(self, lam: Array) -> Array:
        """:func:`_log_mgf_direct` of every PLD (chunks of about 16 MB)."""
        pos = self.masses > 0
        logp = np.log(self.masses[pos])
        index = np.repeat(self.offsets, self.sizes) + self.within
        losses = np.asarray(index[pos] * self.h, dtype=np.float64)
        owner = np.repeat(np.arange(self.sizes.size), self.sizes)[pos]
        out = np.empty((self.sizes.size, lam.size), dtype=np.float64)
        step = max(1, (1 << 21) // max(losses.size, 1))
        for start in range(0, lam.size, step):
            part = lam[start : start + step]
            terms = part[:, None] * losses[None, :] + logp[None, :]
            out[:, start : start + step] = _segment_logsumexp(terms.T, owner)
        return out


def _segment_logsumexp(logs: Array, owner: NDArray[np.intp], weights: Array | None = None) -> Array:
    """log sum (weights) exp of the rows of ``logs`` by ``owner`` (non-decreasing, every owner
    from 0 on present), one row per owner; positive ``weights`` multiply the terms (in place,
    relative to each owner's largest exponent)."""
    bounds = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    peak = np.maximum.reduceat(logs, bounds, axis=0)
    terms = np.exp(logs - peak[owner])
    if weights is not None:
        terms *= weights
    return np.asarray(peak + np.log(np.add.reduceat(terms, bounds, axis=0)), dtype=np.float64)


def log_mgf_bound_total(plds: Sequence[tuple[DiscretePLD, int]], lam: Array) -> Array:
    """:func:`log_mgf_total` for Chernoff bounds on a composition's own masses, which round
    their exponents up far beyond the sums' error: the same sums (:func:`_log_mgf_split`),
    not memoised (each tilt vector is asked once)."""
    out = np.zeros(lam.shape, dtype=np.float64)
    for pld, count in plds:
        out += count * _log_mgf_split(pld, np.asarray(lam, dtype=np.float64))
    return out


def tilt_for_delta(plds: Sequence[tuple[DiscretePLD, int]], delta: float) -> float:
    """The Chernoff-optimal tilt for the tail level ``delta`` (where epsilon(delta) lies)."""
    values = (log_mgf_total(plds, THETAS) - math.log(delta)) / THETAS
    return float(THETAS[int(np.argmin(values))])


def chernoff_epsilon(plds: Sequence[tuple[DiscretePLD, int]], delta: float) -> float:
    """The Chernoff estimate of epsilon(delta), min over tilts of (K(tilt) - log delta) / tilt
    (an estimate only: it orders the directions to compose)."""
    return float(np.min((log_mgf_total(plds, THETAS) - math.log(delta)) / THETAS))


def tilt_for_epsilon(plds: Sequence[tuple[DiscretePLD, int]], eps: float) -> float:
    """The Chernoff-optimal tilt for the tail above ``eps`` (0 if eps is below the mean)."""
    values = log_mgf_total(plds, THETAS) - THETAS * eps
    i = int(np.argmin(values))
    return float(THETAS[i]) if values[i] < 0 else 0.0


def chernoff_level(plds: Sequence[tuple[DiscretePLD, int]], eps: float) -> float:
    """The Chernoff bound on P(S > eps): the order of delta(eps), for choosing windows."""
    values = log_mgf_total(plds, THETAS) - THETAS * eps
    return max(1e-300, min(1.0, math.exp(float(np.min(values)))))


def tilted_window(
    plds: Sequence[tuple[DiscretePLD, int]],
    tilt: float,
    tail: float,
    untilted_tail: float | None = None,
) -> tuple[float, float]:
    """[a, b] holding all but ``tail`` of the tilted distribution on each side (Chernoff);
    ``b`` is lowered to where the *untilted* tail is below ``untilted_tail`` if that is lower
    (heavy-tailed components otherwise stretch the tilted window far beyond what matters)."""
    lowest = sum(c * float(p.losses[0]) for p, c in plds)
    highest = sum(c * float(p.losses[-1]) for p, c in plds)
    k0 = float(log_mgf_total(plds, np.array([tilt]))[0])
    if not math.isfinite(k0):
        # no finite mass left to tilt (all of it at +infinity): the whole range
        return lowest, highest
    up = log_mgf_total(plds, tilt + THETAS) - k0
    dn = log_mgf_total(plds, tilt - THETAS) - k0
    log_tail = math.log(tail)
    b = float(np.min((up - log_tail) / THETAS))
    if untilted_tail is not None:
        plain = log_mgf_total(plds, THETAS)
        b = min(b, float(np.min((plain - math.log(untilted_tail)) / THETAS)))
    a = float(np.max((log_tail - dn) / THETAS))
    a = lowest if not math.isfinite(a) else max(a, lowest)
    b = highest if not math.isfinite(b) else min(b, highest)
    return a, max(b, a)


def _chernoff_upper(plds: Sequence[tuple[DiscretePLD, int]], thetas: Array, x: float) -> float:
    """P(S >= x) <= min_theta E[e^{theta S}] e^{-theta x} (theta > 0), rounded up."""
    vals = log_mgf_bound_total(plds, thetas) - thetas * x
    best = float(np.min(vals))
    return math.exp(min(0.0, best + 1e-9 * (1.0 + abs(best))))


def _near(theta: float) -> Array:
    return np.asarray(theta * np.array([0.5, 0.8, 1.0, 1.25, 2.0]), dtype=float)
