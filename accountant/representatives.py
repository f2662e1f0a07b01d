"""Many distinct leaves as few representatives: each leaf kind with a monotone privacy cost in its
parameters is sorted into cells of a geometric grid, and each cell is composed as one leaf, its
count the cell's total, at the costliest corner of its members (upper bounds) or the cheapest
(lower bounds).

Why both bounds stay certified (``proofs_checks/representatives/proof.md``): within a cell every
member's pair is dominated by (is a post-processing of) the upper representative's pair, and
dominates the lower representative's pair; composition preserves dominance, so the composed
upper representatives dominate the composed leaves and the composed lower representatives are
dominated by them. The orders used, per kind (cost grows with the listed direction):

- Gaussian, Laplace: the noise multiplier, rounded down for the upper;
- pure DP, report-noisy-max, exponential mechanism (bounded range), randomized response (the
  same number of buckets): epsilon, rounded up;
- approximate DP: epsilon and delta, both rounded up;
- Poisson sampling: the rate, rounded up, and the sampled event's parameters;
- sampling without replacement: the rate ``b / n``, compared exactly, at the member's own
  ``(n, b)``, and the sampled event's parameters.

Other kinds (tabulated, shuffled, allocated) are their own representatives.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from fractions import Fraction
from typing import cast

import numpy as np

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
)

__all__ = ["REPRESENTATIVE_STEP", "STEP_GROWTH", "Steps", "Table", "build", "is_rounded", "split"]

#: relative step of the finest representative grid: a parameter moves by less than 0.1 %
REPRESENTATIVE_STEP = 1e-3
#: each coarser grid is this many times the previous one's step
STEP_GROWTH = 1.25

#: a rate without replacement: (b / n exactly, n, b); ordered by the rate first
Rate = tuple[Fraction, int, int]
Value = float | Rate
#: (shape, values, cost grows with each value): the shape is the kind and its discrete fields
Split = tuple[Hashable, tuple[Value, ...], tuple[bool, ...]]

#: a step for every shape and parameter: one step for all, or per shape one per parameter
Steps = float | dict[Hashable, np.ndarray]

_EPSILON_KINDS = PureDPEvent | ExponentialMechanismEvent | ReportNoisyMaxEvent
_NOISE_TYPES: frozenset[type] = frozenset({GaussianEvent, LaplaceEvent})
_EPSILON_TYPES: frozenset[type] = frozenset(
    {PureDPEvent, ExponentialMechanismEvent, ReportNoisyMaxEvent}
)
#: the largest power j with REPRESENTATIVE_STEP * STEP_GROWTH^j below 1e300
_MAX_POWER = math.floor(math.log(1e300 / REPRESENTATIVE_STEP) / math.log(STEP_GROWTH))


def split(event: Event) -> Split | None:
    """The event as a shape and its ordered parameters; None for a kind that is not rounded."""
    kind = type(event)
    if kind is PoissonSampledEvent:  # the commonest sampled kinds, at once
        noise = event.event  # type: ignore[attr-defined]
        if type(noise) is GaussianEvent or type(noise) is LaplaceEvent:
            q = event.sampling_probability  # type: ignore[attr-defined]
            return (event.kind, (noise.kind,)), (q, noise.noise_multiplier), (True, False)
    if kind in _NOISE_TYPES:  # the common kinds by their exact type (a ledger has many)
        return (event.kind,), (cast(GaussianEvent, event).noise_multiplier,), (False,)
    if kind in _EPSILON_TYPES:
        return (event.kind,), (cast(PureDPEvent, event).epsilon,), (True,)
    if kind is RandomizedResponseEvent:
        rr = cast(RandomizedResponseEvent, event)
        return (rr.kind, rr.num_buckets), (rr.epsilon,), (True,)
    if isinstance(event, GaussianEvent | LaplaceEvent):
        return (event.kind,), (event.noise_multiplier,), (False,)
    if isinstance(event, _EPSILON_KINDS):
        return (event.kind,), (event.epsilon,), (True,)
    if isinstance(event, RandomizedResponseEvent):
        return (event.kind, event.num_buckets), (event.epsilon,), (True,)
    if isinstance(event, ApproxDPEvent):
        return (event.kind,), (event.epsilon, event.delta), (True, True)
    if isinstance(event, PoissonSampledEvent | SampledWithoutReplacementEvent):
        inner = split(event.event)
        if inner is None:
            return None
        shape, values, costly = inner
        rate: Value = event.sampling_probability
        if isinstance(event, SampledWithoutReplacementEvent):
            n, b = event.source_size, event.sample_size
            rate = (Fraction(b, n), n, b)
        return (event.kind, shape), (rate, *values), (True, *costly)
    return None


#: kinds rounded to representatives by their type alone, plain or Poisson-sampled
_PLAIN_ROUNDED = frozenset(
    {
        GaussianEvent,
        LaplaceEvent,
        PureDPEvent,
        ApproxDPEvent,
        RandomizedResponseEvent,
        ExponentialMechanismEvent,
        ReportNoisyMaxEvent,
    }
)


def is_rounded(event: Event) -> bool:
    """Whether :func:`split` of ``event`` is not None (by type for the common kinds)."""
    kind = type(event)
    inner = type(cast(PoissonSampledEvent, event).event) if kind is PoissonSampledEvent else kind
    return inner in _PLAIN_ROUNDED or split(event) is not None


def build(shape: Hashable, values: tuple[Value, ...]) -> Event:
    """The event of ``shape`` at ``values`` (the inverse of :func:`split`)."""
    assert isinstance(shape, tuple)
    kind = shape[0]
    if kind in ("poisson_sampled", "sampled_without_replacement"):
        inner = build(shape[1], values[1:])
        rate = values[0]
        if isinstance(rate, tuple):
            return SampledWithoutReplacementEvent(rate[1], rate[2], inner)
        return PoissonSampledEvent(rate, inner)
    first = values[0]
    assert isinstance(first, float)
    if kind == "randomized_response":
        return RandomizedResponseEvent(first, shape[1])
    if kind == "approx_dp":
        second = values[1]
        assert isinstance(second, float)
        return ApproxDPEvent(first, second)
    classes: dict[str, Callable[[float], Event]] = {
        c.kind: c
        for c in (
            GaussianEvent,
            LaplaceEvent,
            PureDPEvent,
            ExponentialMechanismEvent,
            ReportNoisyMaxEvent,
        )
    }
    return classes[kind](first)


def _magnitude(value: Value) -> float:
    return float(value[0]) if isinstance(value, tuple) else value


class Table:
    """The roundable leaves of a ledger grouped by shape, with the logarithms of their
    parameters; the unrounded kinds kept as they are (``fixed``)."""

    def __init__(self, merged: dict[Event, int]) -> None:
        self.fixed: dict[Event, int] = {}
        rows: dict[Hashable, list[tuple[tuple[Value, ...], tuple[bool, ...], int]]] = {}
        for event, count in merged.items():
            found = split(event)
            if found is None:
                self.fixed[event] = count
                continue
            shape, values, costly = found
            rows.setdefault(shape, []).append((values, costly, count))
        self.rows = rows
        self.logs: dict[Hashable, np.ndarray] = {}
        #: the members' parameters as magnitudes (a rate's b / n rounded), per shape
        self.magnitudes: dict[Hashable, np.ndarray] = {}
        with np.errstate(divide="ignore"):
            for shape, members in rows.items():
                if all(isinstance(v, float) for v in members[0][0]):  # (kinds follow the shape)
                    mags = np.array([m[0] for m in members], dtype=float)
                else:
                    mags = np.array([[_magnitude(v) for v in m[0]] for m in members], dtype=float)
                self.magnitudes[shape] = mags
                self.logs[shape] = np.log(mags)  # -inf for a zero parameter: a cell of its own

    def cells(self, shape: Hashable, step: Steps) -> np.ndarray:
        """Each member's cell index per parameter on the grid ``(1 + step)^i`` (``step`` one
        for all parameters, or taken per shape and parameter from a mapping)."""
        logs = self.logs[shape]
        width = np.log1p(step[shape]) if isinstance(step, dict) else math.log1p(step)
        with np.errstate(invalid="ignore"):
            index = np.floor(logs / width)
        return np.where(np.isfinite(index), index, np.iinfo(np.int32).min).astype(np.int64)

    def cell_keys(self, shape: Hashable, step: Steps) -> np.ndarray:
        """Each member's cell as a mixed 64-bit key (a rare collision only miscounts in
        :meth:`count`; :meth:`grouped` tells cells apart by their full index)."""
        index = self.cells(shape, step)
        key = np.zeros(len(index), dtype=np.uint64)
        with np.errstate(over="ignore"):
            for column in index.T:
                key = key * np.uint64(0x9E3779B97F4A7C15) + column.astype(np.uint64)
        return key

    def count(self, step: Steps) -> int:
        """How many components remain at ``step``."""
        total = len(self.fixed)
        for shape in self.rows:
            total += len(np.unique(self.cell_keys(shape, step)))
        return total

    def step(self, limit: int) -> float:
        """The finest step of the grid REPRESENTATIVE_STEP * STEP_GROWTH^j leaving at most
        ``limit`` components, or the first beyond which no coarser grid leaves fewer (every
        cell index 0 or -1)."""
        if self.count(REPRESENTATIVE_STEP) <= limit:
            return REPRESENTATIVE_STEP
        finite = [np.abs(x[np.isfinite(x)]) for x in self.logs.values()]
        widest = max((float(np.max(x, initial=0.0)) for x in finite), default=0.0)
        first, last = 0, 1
        while last < _MAX_POWER and math.log1p(REPRESENTATIVE_STEP * STEP_GROWTH**last) <= widest:
            last += 1  # (the power stops at steps near 1e300: logs of subnormals reach 745)
        # the count falls as the step grows: bisect for the first power that fits
        while last - first > 1:
            middle = (first + last) // 2
            if self.count(REPRESENTATIVE_STEP * STEP_GROWTH**middle) <= limit:
                last = middle
            else:
                first = middle
        return REPRESENTATIVE_STEP * STEP_GROWTH**last

    @staticmethod
    def step_at_most(largest: float) -> float:
        """The coarsest step of the grid REPRESENTATIVE_STEP * STEP_GROWTH^j at most ``largest``
        (REPRESENTATIVE_STEP when ``largest`` is below it)."""
        j = max(0, math.floor(math.log(largest / REPRESENTATIVE_STEP) / math.log(STEP_GROWTH)))
        while j > 0 and REPRESENTATIVE_STEP * STEP_GROWTH**j > largest:
            j -= 1
        return REPRESENTATIVE_STEP * STEP_GROWTH**j

    def grouped(self, step: Steps, *, up: bool) -> dict[Event, int]:
        """The leaves grouped in cells of ``step``: each cell one event at its members'
        costliest parameters (``up``) or cheapest, counted as all its members."""
        out = dict(self.fixed)
        for shape, members in self.rows.items():
            cells = self.cells(shape, step)
            for extreme, total in _fold(cells, members, self.magnitudes[shape], up=up):
                rep = build(shape, tuple(extreme))
                out[rep] = out.get(rep, 0) + total
        return out


def _fold(
    index: np.ndarray,
    members: list[tuple[tuple[Value, ...], tuple[bool, ...], int]],
    magnitudes: np.ndarray,
    *,
    up: bool,
) -> list[tuple[list[Value], int]]:
    """Per cell, in the order of the cells' first members: its members' extreme parameters on
    the wanted side and their total count (``magnitudes``: the members' parameters, rows as
    ``index``). A shape's members share their kinds of values and their sides (:func:`split`):
    floats are folded in arrays (their magnitudes are themselves), rates one by one."""
    if not members:
        return []
    floats = all(isinstance(v, float) for v in members[0][0])
    counts = [m[2] for m in members]
    if not floats or sum(counts) >= 1 << 62:
        return _fold_exact(index, members, up=up)
    key = _row_keys(index)
    if key is None:
        return _fold_exact(index, members, up=up)
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.intp)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    cell = rank[np.reshape(inverse, -1)]  # each member's cell, numbered by first member
    values = np.reshape(magnitudes, (len(members), -1))
    extreme = np.empty((first.size, values.shape[1]))
    for i, grows in enumerate(members[0][1]):
        # the costly side is the larger value where cost grows with it (max and min of
        # floats are exact: the member's own value)
        larger = grows == up
        column = np.full(first.size, -np.inf if larger else np.inf)
        (np.maximum if larger else np.minimum).at(column, cell, values[:, i])
        extreme[:, i] = column
    totals = np.zeros(first.size, dtype=np.int64)
    np.add.at(totals, cell, np.array(counts, dtype=np.int64))
    return [(list(row), int(t)) for row, t in zip(extreme.tolist(), totals.tolist(), strict=True)]


def _row_keys(index: np.ndarray) -> np.ndarray | None:
    """One integer per row of ``index``, equal exactly where the rows are equal (the rows'
    ranks per column, mixed in radix); None when they would not fit in 63 bits."""
    index = np.reshape(index, (index.shape[0], -1))
    key = np.zeros(index.shape[0], dtype=np.int64)
    size = 1
    for column in index.T:
        values, rank = np.unique(column, return_inverse=True)
        size *= values.size
        if size >= 1 << 62:
            return None
        key = key * values.size + np.reshape(rank, -1)
    return key


def _fold_exact(
    index: np.ndarray,
    members: list[tuple[tuple[Value, ...], tuple[bool, ...], int]],
    *,
    up: bool,
) -> list[tuple[list[Value], int]]:
    """:func:`_fold` member by member, with exact comparisons (rates) and counts of any size."""
    cells: dict[bytes, tuple[list[Value], int]] = {}
    for row, (values, costly, count) in zip(index, members, strict=True):
        key = row.tobytes()
        found = cells.get(key)
        if found is None:
            cells[key] = (list(values), count)
            continue
        extreme, total = found
        for i, (value, grows) in enumerate(zip(values, costly, strict=True)):
            # the costly side is the larger value where cost grows with it
            if _beyond(value, extreme[i], larger=grows == up):
                extreme[i] = value
        cells[key] = (extreme, total + count)
    return list(cells.values())


def _beyond(value: Value, extreme: Value, *, larger: bool) -> bool:
    """Whether ``value`` lies beyond ``extreme`` on the wanted side (exactly, rates included)."""
    if isinstance(value, tuple) and isinstance(extreme, tuple):
        return value > extreme if larger else value < extreme
    assert isinstance(value, float) and isinstance(extreme, float)
    return value > extreme if larger else value < extreme
