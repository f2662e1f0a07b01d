"""Coverage: does a declared event dominate what a run executed?

Both events are flattened (:func:`dpledger.core.events.flatten`) into multisets of leaf (or
sampled) events, and every executed step must be matched to its own declared step that
*dominates* it: the same kind, a noise multiplier at least as large, an epsilon at most as
large, a sampling rate at most as large (a sampled step is matched inside declared sampled
steps recursively). The matching is a maximum flow, so the order of steps does not matter.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING

import attrs
import numpy as np
from numpy.typing import NDArray

from dpledger.core.events import (
    EVENT_KINDS,
    ApproxDPEvent,
    Event,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    PoissonSampledEvent,
    PureDPEvent,
    RandomAllocationEvent,
    RandomizedResponseEvent,
    ReportNoisyMaxEvent,
    SampledWithoutReplacementEvent,
    ShuffledBatchesEvent,
    TabulatedProfileEvent,
    flatten,
)

if TYPE_CHECKING:
    pass

FloatArray = NDArray[np.float64]


# ---------------------------------------------------------------------------------------------
# Canonical multisets and dominance
# ---------------------------------------------------------------------------------------------
@attrs.frozen
class _Sampled:
    """Canonical form of a sampled step: the scheme and the multiset of what runs inside."""

    scheme: str  # "poisson" | "wor" | "shuffle" | "allocation"
    rate: float
    source_size: int
    sample_size: int
    inner: tuple[tuple[Hashable, int], ...]


Multiset = tuple[tuple[Hashable, int], ...]


def canonical_step(event: Event) -> Hashable:
    if isinstance(event, PoissonSampledEvent):
        inner = canonical_multiset(event.event)
        return _Sampled("poisson", event.sampling_probability, 0, 0, inner)
    if isinstance(event, SampledWithoutReplacementEvent):
        return _Sampled(
            "wor",
            event.sampling_probability,
            event.source_size,
            event.sample_size,
            canonical_multiset(event.event),
        )
    if isinstance(event, ShuffledBatchesEvent):
        return _Sampled(
            "shuffle",
            event.batch_size / event.source_size,
            event.source_size,
            event.batch_size,
            canonical_multiset(event.event),
        )
    if isinstance(event, RandomAllocationEvent):  # source_size: steps; sample_size: per record
        return _Sampled(
            "allocation",
            event.sampling_probability,
            event.num_steps,
            event.num_selected,
            canonical_multiset(event.event),
        )
    hashable: Hashable = event
    return hashable


def canonical_multiset(event: Event) -> Multiset:
    """``flatten(event)`` as a sorted multiset of canonical (hashable) steps."""
    counts: Counter[Hashable] = Counter()
    for leaf, count in flatten(event):
        counts[canonical_step(leaf)] += count
    return tuple(sorted(counts.items(), key=lambda kv: repr(kv[0])))


_EPSILON_KINDS = (PureDPEvent, ExponentialMechanismEvent, ReportNoisyMaxEvent)


def dominates(declared: Hashable, executed: Hashable) -> bool:
    """Whether one declared step covers one executed step (both canonical)."""
    if isinstance(declared, NonPrivateEvent):
        return True
    if isinstance(executed, _Sampled):
        if isinstance(declared, _Sampled):
            if declared.scheme != executed.scheme:
                return False
            if executed.scheme == "poisson":
                ok = executed.rate <= declared.rate
            elif executed.scheme in ("shuffle", "allocation"):
                # shuffle: the partition is fixed by both sizes; allocation: the same number of
                # steps and of steps per record
                ok = (
                    executed.source_size == declared.source_size
                    and executed.sample_size == declared.sample_size
                )
            else:
                ok = (
                    executed.source_size == declared.source_size
                    and executed.sample_size <= declared.sample_size
                )
            return ok and multiset_covered(executed.inner, declared.inner)
        # subsampling (rate <= 1) never costs more than running the inner step on everything,
        # and a shuffled epoch costs its batch's step once (each record is in one batch)
        # (a record allocated to k > 1 steps runs the step k times: not covered by one)
        return (
            len(executed.inner) == 1
            and executed.inner[0][1] == 1
            and not (executed.scheme == "allocation" and executed.sample_size > 1)
            and dominates(declared, executed.inner[0][0])
        )
    if isinstance(declared, _Sampled) or type(declared) is not type(executed):
        return False
    if isinstance(executed, GaussianEvent | LaplaceEvent):
        assert isinstance(declared, GaussianEvent | LaplaceEvent)
        return bool(executed.noise_multiplier >= declared.noise_multiplier)
    if isinstance(executed, _EPSILON_KINDS):
        assert isinstance(declared, _EPSILON_KINDS)
        return bool(executed.epsilon <= declared.epsilon)
    if isinstance(executed, ApproxDPEvent):
        assert isinstance(declared, ApproxDPEvent)
        return bool(executed.epsilon <= declared.epsilon and executed.delta <= declared.delta)
    if isinstance(executed, RandomizedResponseEvent):
        assert isinstance(declared, RandomizedResponseEvent)
        return bool(
            executed.num_buckets == declared.num_buckets and executed.epsilon <= declared.epsilon
        )
    if isinstance(executed, TabulatedProfileEvent):
        assert isinstance(declared, TabulatedProfileEvent)
        return _table_covers(declared, executed)
    if isinstance(declared, Event) and EVENT_KINDS.core.get(declared.kind) is not type(declared):
        return _plugin_covers(declared, executed)
    return bool(executed == declared)


def _table_covers(declared: TabulatedProfileEvent, executed: TabulatedProfileEvent) -> bool:
    """The same grid and relation, and no executed delta above the declared one."""
    if (declared.epsilons, declared.relation) != (executed.epsilons, executed.relation):
        return False
    pairs = [(declared.deltas, executed.deltas)]
    pairs.append((declared.deltas_add or declared.deltas, executed.deltas_add or executed.deltas))
    return all(e <= d for ds, es in pairs for d, e in zip(ds, es, strict=True))


def _plugin_covers(declared: Event, executed: Hashable) -> bool:
    """A plugin event class's own rule (:meth:`Event.covers`); a rule that fails covers
    nothing."""
    try:
        return isinstance(executed, Event) and declared.covers(executed) is True
    except Exception:  # a plugin's failure must never widen a declaration
        return False


def _max_flow(supply: Sequence[int], capacity: Sequence[int], edges: list[list[int]]) -> int:
    """Maximum flow of a bipartite transport problem (Edmonds-Karp on a tiny graph)."""
    n_e, n_d = len(supply), len(capacity)
    src, sink = n_e + n_d, n_e + n_d + 1
    size = n_e + n_d + 2
    cap = [[0] * size for _ in range(size)]
    for i, s in enumerate(supply):
        cap[src][i] = s
        for j in edges[i]:
            cap[i][n_e + j] = s
    for j, c in enumerate(capacity):
        cap[n_e + j][sink] = c
    flow = 0
    while True:
        parent = [-1] * size
        parent[src] = src
        queue = [src]
        for u in queue:
            for v in range(size):
                if parent[v] < 0 and cap[u][v] > 0:
                    parent[v] = u
                    queue.append(v)
        if parent[sink] < 0:
            return flow
        bottleneck, v = math.inf, sink
        while v != src:
            bottleneck = min(bottleneck, cap[parent[v]][v])
            v = parent[v]
        b = int(bottleneck)
        v = sink
        while v != src:
            cap[parent[v]][v] -= b
            cap[v][parent[v]] += b
            v = parent[v]
        flow += b


def multiset_covered(executed: Multiset, declared: Multiset) -> bool:
    """Every executed step is matched to its own dominating declared step."""
    total = sum(c for _, c in executed)
    if total == 0:
        return True
    edges = [[j for j, (d, _) in enumerate(declared) if dominates(d, e)] for e, _ in executed]
    return _max_flow([c for _, c in executed], [c for _, c in declared], edges) == total


def describe_step(step: Hashable) -> str:
    if isinstance(step, _Sampled):
        inner = ", ".join(f"{describe_step(e)} x{c}" for e, c in step.inner)
        if step.scheme == "poisson":
            return f"poisson_sampled(q={step.rate!r}, {inner})"
        if step.scheme == "shuffle":
            return f"shuffled_batches({step.sample_size} of {step.source_size} per batch, {inner})"
        if step.scheme == "allocation":
            return (
                f"random_allocation({step.sample_size} of {step.source_size} steps per record, "
                f"{inner})"
            )
        return f"sampled_without_replacement({step.sample_size}/{step.source_size}, {inner})"
    assert isinstance(step, Event)
    return str(step.describe())


def _scheme_mismatch(step: _Sampled, schemes: set[str]) -> str | None:
    """The refusal when the run samples by another scheme than every declared one states."""
    if step.scheme == "shuffle" and "poisson" in schemes:
        return (
            "the run batches by shuffling, but the declaration states Poisson sampling; "
            "shuffled fixed-size batches are not Poisson samples: declare "
            "ShuffledBatchesEvent(n, batch_size, ...) per epoch"
        )
    if step.scheme == "poisson" and "shuffle" in schemes:
        return (
            "the run draws Poisson samples, but the declaration states shuffled batches: "
            "declare PoissonSampledEvent, or batch with ledger.shuffle_batches"
        )
    if step.scheme == "allocation" and schemes:
        return (
            "the run allocates each record to random steps (balls-in-bins), but the "
            f"declaration states {' and '.join(sorted(schemes))} sampling; declare "
            "RandomAllocationEvent(num_steps, ...) per epoch"
        )
    if "allocation" in schemes:
        return (
            f"the run draws {step.scheme} samples, but the declaration states random "
            "allocation: declare the sampling that runs, or batch with ledger.allocate"
        )
    return None


def _explain_sampled(step: _Sampled, declared: Multiset) -> str:
    """Why a sampled step is not covered: another sampling scheme, rate, sizes or inner steps."""
    same = [d for d, _ in declared if isinstance(d, _Sampled) and d.scheme == step.scheme]
    schemes = {d.scheme for d, _ in declared if isinstance(d, _Sampled)}
    mismatch = _scheme_mismatch(step, schemes) if not same else None
    if mismatch is not None:
        return mismatch
    if not same:
        return f"no {step.scheme} sampled step is declared"
    if step.scheme == "poisson" and all(step.rate > d.rate for d in same):
        return f"sampling rate {step.rate!r} exceeds the declared {max(d.rate for d in same)!r}"
    if step.scheme == "shuffle" and not any(
        d.source_size == step.source_size and d.sample_size == step.sample_size for d in same
    ):
        return (
            f"the epoch shuffles {step.source_size} records into batches of "
            f"{step.sample_size}, which no declared shuffled epoch states"
        )
    if step.scheme == "allocation" and not any(
        d.source_size == step.source_size and d.sample_size == step.sample_size for d in same
    ):
        return (
            f"the epoch allocates each record to {step.sample_size} of {step.source_size} "
            "steps, which no declared random allocation states"
        )
    if step.scheme == "wor" and not any(
        d.source_size == step.source_size and step.sample_size <= d.sample_size for d in same
    ):
        return "the sample is larger than declared (or drawn from a different source size)"
    d0 = same[0]
    for inner, _ in step.inner:
        if not multiset_covered(((inner, 1),), d0.inner):
            return "inside the sample: " + explain_uncovered(inner, step.inner, d0.inner)
    return "inside the sample: more steps than declared"


def explain_uncovered(step: Hashable, executed: Multiset, declared: Multiset) -> str:
    """Why ``step`` (part of ``executed``) is not covered by ``declared``."""
    covering = [(d, c) for d, c in declared if dominates(d, step)]
    if covering:
        used = sum(c for e, c in executed if any(dominates(d, e) for d, _ in covering))
        return (
            f"more steps than declared: {used} executed steps need the declared "
            f"{', '.join(describe_step(d) for d, _ in covering)}, which allows only "
            f"{sum(c for _, c in covering)}"
        )
    if isinstance(step, _Sampled):
        return _explain_sampled(step, declared)
    same_kind = [d for d, _ in declared if type(d) is type(step)]
    if not same_kind:
        return f"no {getattr(step, 'kind', type(step).__name__)} step is declared"
    if isinstance(step, GaussianEvent | LaplaceEvent):
        best = max(d.noise_multiplier for d in same_kind)  # type: ignore[attr-defined]
        return f"noise multiplier {step.noise_multiplier!r} is smaller than the declared {best!r}"
    if hasattr(step, "epsilon"):
        best = min(d.epsilon for d in same_kind)  # type: ignore[attr-defined]
        return f"epsilon {step.epsilon!r} exceeds the declared {best!r}"
    return "its parameters differ from every declared step of this kind"
