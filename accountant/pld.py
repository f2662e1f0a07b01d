"""Tight, certified privacy-loss-distribution accountant.

Each leaf event becomes an upper-bound privacy curve per neighbouring direction
(:mod:`dpledger.accountant.profiles`), discretised by connect-the-dots and composed by FFT
(:mod:`dpledger.accountant.pld_engine`). Both directions are composed separately and the worse is
reported. Truncated tails and FFT round-off are charged to delta; pure-DP compositions are capped
by basic composition.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import attrs

from dpledger.accountant.base import (
    Accountant,
    DeltaBound,
    EpsilonBound,
    identical_delta,
    infinite_epsilon,
)
from dpledger.accountant.conversions import merged_gaussian_multiplier
from dpledger.accountant.pld_engine import (
    MAX_FFT_LEN,
    MAX_LOSS,
    ComposedPLD,
    DiscretePLD,
    compose,
    delta_at,
    discretise,
    epsilon_for,
    window,
)
from dpledger.accountant.profiles import DirectedProfiles, Profile, leaf_profiles
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import BoundUnavailable, UnsupportedEventError
from dpledger.core.events import (
    Event,
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    PoissonSampledEvent,
    PureDPEvent,
    RandomizedResponseEvent,
    SampledWithoutReplacementEvent,
    flatten,
)

Window = tuple[float, float, float, float]

#: grid points targeted for the composed window (accuracy/speed trade-off)
TARGET_POINTS = 1 << 18
#: largest number of grid points one component may use
MAX_COMPONENT_POINTS = 1 << 22
#: truncation mass of the composed window (charged to delta)
TAIL_MASS = 1e-18
#: above this many distinct leaf events, parameters are rounded to dominating representatives
MAX_DISTINCT_COMPONENTS = 256
#: relative step of the representative grid (noise rounded down, rates and epsilons rounded up)
REPRESENTATIVE_STEP = 1e-3
#: up to this many distinct components the window gets TARGET_POINTS grid points ...
FULL_RESOLUTION_COMPONENTS = 16
#: ... beyond, the FFT budget is shared, down to this many points
MIN_POINTS = 1 << 15


def _merge_gaussians(merged: dict[Event, int]) -> dict[Event, int]:
    """Unsampled Gaussians compose exactly into one Gaussian: 1/s^2 = sum k_i / s_i^2."""
    gaussians = [(e, k) for e, k in merged.items() if isinstance(e, GaussianEvent)]
    if len(gaussians) <= 1:
        return merged
    out = {e: k for e, k in merged.items() if not isinstance(e, GaussianEvent)}
    sigma = merged_gaussian_multiplier((e.noise_multiplier, k) for e, k in gaussians)
    out[GaussianEvent(sigma)] = out.get(GaussianEvent(sigma), 0) + 1
    return out


def _grid_index(x: float, step: float, *, up: bool) -> int:
    """Index of ``x`` (> 0) on the geometric grid ``(1 + step)^i``, rounding up or down."""
    i = math.log(x) / math.log1p(step)
    return math.ceil(i) if up else math.floor(i)


def _round_up(x: float, step: float = REPRESENTATIVE_STEP) -> float:
    if x <= 0:
        return x
    return float(math.exp(_grid_index(x, step, up=True) * math.log1p(step)))


def _round_down(x: float, step: float = REPRESENTATIVE_STEP) -> float:
    return float(math.exp(_grid_index(x, step, up=False) * math.log1p(step)))


def _representative(event: Event, step: float, *, up: bool) -> Event:
    """An event on a geometric parameter grid of ``step``: at least (``up``) or at most as
    privacy-costly as ``event``. Upper bounds use the first, lower bounds the second."""
    cost_up, cost_down = (_round_up, _round_down) if up else (_round_down, _round_up)
    if isinstance(event, GaussianEvent):
        return GaussianEvent(cost_down(event.noise_multiplier, step))
    if isinstance(event, LaplaceEvent):
        return LaplaceEvent(cost_down(event.noise_multiplier, step))
    if isinstance(event, PureDPEvent):
        return PureDPEvent(cost_up(event.epsilon, step))
    if isinstance(event, PoissonSampledEvent):
        q = min(1.0, cost_up(event.sampling_probability, step))
        return PoissonSampledEvent(q, _representative(event.event, step, up=up))
    return event


def _group(merged: dict[Event, int], step: float, *, up: bool) -> dict[Event, int]:
    out: dict[Event, int] = {}
    for event, k in merged.items():
        rep = _representative(event, step, up=up)
        out[rep] = out.get(rep, 0) + k
    return out


def _grid_key(event: Event, step: float) -> Hashable:
    """The cell of ``event`` on the representative grid (cheap: builds no event)."""
    if isinstance(event, GaussianEvent | LaplaceEvent):
        return (event.kind, _grid_index(event.noise_multiplier, step, up=False))
    if isinstance(event, PureDPEvent):
        return (event.kind, _grid_index(event.epsilon, step, up=True) if event.epsilon else None)
    if isinstance(event, PoissonSampledEvent):
        q = _grid_index(event.sampling_probability, step, up=True)
        return (event.kind, q, _grid_key(event.event, step))
    return event


def _representative_step(merged: dict[Event, int]) -> float:
    """The finest grid step (growing from REPRESENTATIVE_STEP to ~3%) leaving few components."""
    step = REPRESENTATIVE_STEP
    while step < 0.025 and len({_grid_key(e, step) for e in merged}) > MAX_DISTINCT_COMPONENTS:
        step *= 1.5
    return step


def _resolution(target_points: int, components: int) -> int:
    """Grid points for the composed window: full resolution for a few distinct components,
    then a fixed FFT budget shared among them (never below MIN_POINTS).

    Upper bounds (connect-the-dots) are insensitive to the grid; only the lower bound's
    Hoeffding shift grows with the spacing, so many-component pipelines trade lower-bound
    tightness for time.
    """
    if components <= FULL_RESOLUTION_COMPONENTS:
        return target_points
    return max(MIN_POINTS, target_points * FULL_RESOLUTION_COMPONENTS // components)


@attrs.frozen
class _Composed:
    upper: tuple[ComposedPLD, ...]  # one per direction
    lower: tuple[ComposedPLD, ...]
    pure_cap: float  # basic-composition epsilon if all parts are pure, else inf
    h: float


class PLDAccountant(Accountant):
    """Certified two-sided PLD accountant (connect-the-dots upper, shifted-chord lower)."""

    name = "pld"

    def __init__(self, adjacency: Adjacency | None = None, *, target_points: int = TARGET_POINTS):
        super().__init__(adjacency)
        self.target_points = target_points
        self._cache: _Composed | None = None
        self._non_private = False

    def _unsupported_reason(self, event: Event) -> str | None:
        leaves = flatten(event)
        reason = _extent_reason(leaves, self._ledger)
        if reason is not None:
            return reason
        for leaf, _count in leaves:
            if isinstance(leaf, NonPrivateEvent):
                continue
            reason = _parameter_reason(leaf, self.adjacency.sensitivity_factor)
            if reason is not None:
                return f"{leaf.describe()}: {reason}"
            try:
                leaf_profiles(leaf, self.adjacency)
            except UnsupportedEventError as exc:
                return f"{leaf.describe()}: {exc}"
        return None

    def _invalidate(self) -> None:
        self._cache = None

    # -- composition -------------------------------------------------------------------
    def _components(
        self,
    ) -> tuple[list[tuple[DirectedProfiles, int]], list[tuple[DirectedProfiles, int]]]:
        """(components for the upper bound, components for the lower bound).

        They are the same unless more than MAX_DISTINCT_COMPONENTS distinct leaves remain:
        then the upper bound composes dominating representatives (parameters rounded to the
        costly side) and the lower bound dominated ones (rounded to the cheap side), so that
        both stay certified.
        """
        merged: dict[Event, int] = {}
        self._non_private = False
        for event, count in self._ledger:
            for leaf, k in flatten(event):
                if isinstance(leaf, NonPrivateEvent):
                    self._non_private = True
                    continue
                merged[leaf] = merged.get(leaf, 0) + k * count
        merged = _merge_gaussians(merged)
        upper_events = lower_events = merged
        if len(merged) > MAX_DISTINCT_COMPONENTS:
            step = _representative_step(merged)
            upper_events = _group(merged, step, up=True)
            # the lower bound is an informative bracket only: a coarser grid halves its cost
            lower_events = _group(merged, 2 * step, up=False)
        upper = [(leaf_profiles(leaf, self.adjacency), k) for leaf, k in upper_events.items()]
        if lower_events is upper_events:
            return upper, upper
        lower = [(leaf_profiles(leaf, self.adjacency), k) for leaf, k in lower_events.items()]
        return upper, lower

    def _composed(self) -> _Composed | None:
        if self._cache is not None:
            return self._cache
        comps, lower_comps = self._components()
        if not comps:
            return None
        h, windows = self._choose_h(comps)
        while True:
            try:
                self._cache = self._compose_at(comps, h, windows, lower_comps)
                return self._cache
            except BoundUnavailable:
                h *= 2.0
                if h > 1.0:
                    raise

    def _choose_h(
        self, comps: Sequence[tuple[DirectedProfiles, int]]
    ) -> tuple[float, dict[str, Window]]:
        """Grid spacing from Chernoff windows computed on a coarse grid, and those windows."""
        span = max(p.loss_hi - p.loss_lo for d, _ in comps for p in (d.remove, d.add))
        h0 = max(span / 1024.0, 1e-9)
        windows: dict[str, Window] = {}
        for name in ("remove", "add"):
            coarse = [(discretise(getattr(d, name), h0), k) for d, k in comps]
            a, b, lam_b, lam_a = window(coarse, TAIL_MASS)
            total = sum(k for _, k in comps)
            pad = 2 * h0 * total ** 0.5 + 4 * h0
            windows[name] = (a - pad, b + pad, lam_b, lam_a)
        width = max(w[1] - w[0] for w in windows.values())
        h = width / _resolution(self.target_points, len(comps))
        # never ask the FFT for more than half its maximum length
        return max(h, span / MAX_COMPONENT_POINTS, 2.0 * width / MAX_FFT_LEN, 1e-9), windows

    def _compose_at(
        self,
        comps: Sequence[tuple[DirectedProfiles, int]],
        h: float,
        windows: dict[str, Window],
        lower_comps: Sequence[tuple[DirectedProfiles, int]] | None = None,
    ) -> _Composed:
        uppers: list[ComposedPLD] = []
        lowers: list[ComposedPLD] = []
        cache: dict[int, DiscretePLD] = {}

        def disc(p: Profile) -> DiscretePLD:
            key = id(p)
            if key not in cache:
                cache[key] = discretise(p, h)
            return cache[key]

        low_comps = comps if lower_comps is None else lower_comps
        directions = [("remove", "lower_remove"), ("add", "lower_add")]
        symmetric = all(d.remove is d.add for d, _ in comps) and all(
            d.lower_remove is d.lower_add for d, _ in low_comps
        )
        lower_exact = all(d.lower_remove.exact and d.lower_add.exact for d, _ in low_comps)
        for up_name, low_name in directions[: 1 if symmetric else 2]:
            up = compose(
                [(disc(getattr(d, up_name)), k) for d, k in comps], TAIL_MASS, windows[up_name]
            )
            uppers.append(up)
            same = low_comps is comps and all(
                getattr(d, low_name) is getattr(d, up_name) for d, _ in comps
            )
            if same:
                lowers.append(up)
            else:
                lowers.append(
                    compose(
                        [(disc(getattr(d, low_name)), k) for d, k in low_comps],
                        TAIL_MASS,
                        windows[up_name],
                    )
                )
        cap = 0.0
        for d, k in comps:
            for p in (d.remove, d.add):
                if not (math.isfinite(p.loss_hi) and float(p(_arr(p.loss_hi))[0]) == 0.0):
                    cap = math.inf
            if math.isfinite(cap):
                cap += k * max(d.remove.loss_hi, d.add.loss_hi)
        # losses beyond +-MAX_LOSS are lumped (safe for the upper bound only): no lower bound then
        lumped = any(
            getattr(d, name).loss_hi > MAX_LOSS or getattr(d, name).loss_lo < -MAX_LOSS
            for d, _ in low_comps
            for name in ("lower_remove", "lower_add")
        )
        keep_lower = lower_exact and not lumped
        return _Composed(tuple(uppers), tuple(lowers) if keep_lower else (), cap, h)

    # -- queries -----------------------------------------------------------------------
    def _epsilon(self, delta: float) -> EpsilonBound:
        state = self._composed()
        if self._non_private:
            return infinite_epsilon(delta, self.name)
        if state is None:
            return EpsilonBound(0.0, 0.0, delta, self.name)
        upper = max(epsilon_for(c, delta, upper=True) for c in state.upper)
        lower = max(epsilon_for(c, delta, upper=False) for c in state.lower) if state.lower else 0.0
        upper = min(upper, _next_up(state.pure_cap))
        lower = min(lower, upper)
        return EpsilonBound(upper, lower, delta, self.name, {"grid_spacing": state.h})

    def _delta(self, epsilon: float) -> DeltaBound:
        state = self._composed()
        if self._non_private:
            return DeltaBound(1.0, 1.0, epsilon, self.name)
        if state is None:
            return identical_delta(epsilon, self.name)
        upper = max(delta_at(c, epsilon, upper=True) for c in state.upper)
        lower = max(delta_at(c, epsilon, upper=False) for c in state.lower) if state.lower else 0.0
        if epsilon >= state.pure_cap:
            upper = 0.0
            lower = 0.0
        return DeltaBound(upper, min(lower, upper), epsilon, self.name, {"grid_spacing": state.h})


#: noise multipliers (per sensitivity) outside this range put the privacy loss beyond the loss
#: grid (+-MAX_LOSS) or below its resolution; the closed-form and RDP backends cover them
MIN_NOISE = 1e-4
MAX_NOISE = 1e6
#: pure epsilons above this exceed the loss grid (e^eps overflows near 709.8)
MAX_PURE_EPSILON = 500.0
#: at most this many randomized-response buckets (beyond, the masses lose all precision)
MAX_BUCKETS = 2**53
#: at most this many compositions in total (the Chernoff window and FFT powers lose precision)
MAX_COMPOSITIONS = 10**12
#: at most this many components after rounding to representatives (each costs one FFT)
MAX_COMPONENTS = 256


def _parameter_reason(leaf: Event, factor: float) -> str | None:
    """Why a leaf's parameters lie outside the range the PLD grid represents; None if inside."""
    inner = leaf.event if isinstance(leaf, PoissonSampledEvent | SampledWithoutReplacementEvent) \
        else leaf
    nodes = [inner] if not inner.children() else [e for e, _ in flatten(inner)]
    for node in nodes:
        if isinstance(node, GaussianEvent | LaplaceEvent):
            sigma = node.noise_multiplier / factor
            if not MIN_NOISE <= sigma <= MAX_NOISE:
                return (
                    f"noise multiplier {node.noise_multiplier:g} outside "
                    f"[{MIN_NOISE:g}, {MAX_NOISE:g}] (times the sensitivity factor): the privacy "
                    "loss leaves the PLD grid; the closed-form and RDP backends cover it"
                )
        epsilon = getattr(node, "epsilon", None)
        if isinstance(epsilon, float) and epsilon > MAX_PURE_EPSILON:
            return (
                f"epsilon {epsilon:g} above {MAX_PURE_EPSILON:g} leaves the PLD grid; the "
                "closed-form backend covers it"
            )
        if isinstance(node, RandomizedResponseEvent) and node.num_buckets > MAX_BUCKETS:
            return f"more than {MAX_BUCKETS} buckets; the closed-form backend covers it"
    return None


def _extent_reason(
    leaves: list[tuple[Event, int]], ledger: Sequence[tuple[Event, int]]
) -> str | None:
    """Why the whole composition (this event and the ledger) is too large to compose."""
    everything = list(leaves) + [(e, k * m) for ev, m in ledger for e, k in flatten(ev)]
    total = sum(k for _, k in everything)
    if total > MAX_COMPOSITIONS:
        return (
            f"{_count_text(total)} compositions (more than {MAX_COMPOSITIONS:.0e}): beyond the PLD "
            "grid's precision; the closed-form and RDP backends cover them"
        )
    distinct = {e for e, _ in everything if not isinstance(e, GaussianEvent | NonPrivateEvent)}
    if len(distinct) > MAX_DISTINCT_COMPONENTS:
        coarsest = {_grid_key(e, 0.0256) for e in distinct}
        if len(coarsest) > MAX_COMPONENTS:
            return (
                f"{len(coarsest)} distinct components remain after rounding to representatives "
                f"(more than {MAX_COMPONENTS}); each costs one FFT. Group identical releases "
                "with a count, or use the RDP backend"
            )
    return None


def _arr(x: float):  # type: ignore[no-untyped-def]
    import numpy as np

    return np.array([x])


def _next_up(x: float) -> float:
    return x if not math.isfinite(x) else math.nextafter(x * (1 + 1e-12), math.inf)


__all__ = ["MAX_FFT_LEN", "PLDAccountant"]


def _count_text(n: int) -> str:
    """A composition count for a message (an integer of any size)."""
    return f"{n:.3g}" if n.bit_length() <= 1000 else f"an integer of {len(str(n))} digits"
