"""Checks of the accountant's fast paths against their slow counterparts: the one-pass support
check of many leaves against the leaf-by-leaf check, the support check remembered per event
against a fresh one, and values kept per curve object against other (even equal) curves."""

from __future__ import annotations

import contextlib
import gc
import math
import weakref
from collections.abc import Callable, Hashable
from typing import Any

import attrs
import numpy as np
import pytest

from dpledger.accountant import pld as pld_module
from dpledger.accountant.base import Accountant
from dpledger.accountant.closed_form import ClosedFormAccountant
from dpledger.accountant.leaves import leaf_profiles
from dpledger.accountant.pld import PLDAccountant
from dpledger.accountant.pld_leaf_check import shapes_in_range
from dpledger.accountant.pld_prepared import ByCurve
from dpledger.accountant.pld_support import (
    MAX_BUCKETS,
    MAX_NOISE,
    MAX_PURE_EPSILON,
    MIN_NOISE,
    _parameter_reason,
)
from dpledger.accountant.profiles import gaussian_profile, poisson_remove
from dpledger.accountant.profiles_base import Profile
from dpledger.accountant.rdp import RDPAccountant
from dpledger.accountant.representatives import split
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import DPLedgerError, InvalidParameterError, UnsupportedEventError
from dpledger.core.events import (
    ApproxDPEvent,
    ComposedEvent,
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
    SelfComposedEvent,
    ShuffledBatchesEvent,
    canonical,
)

Leaves = list[tuple[Event, int]]

#: the kinds the one-pass check handles, plain or Poisson-sampled (by exact type)
FLAT = (GaussianEvent, LaplaceEvent, PureDPEvent, ApproxDPEvent, RandomizedResponseEvent)
#: sensitivity factors of the adjacencies (1, 2) and others that make the division inexact
FACTORS = (1.0, 2.0, 0.5, 3.0, 0.1, 7.0)


@attrs.frozen
class _SubGaussian(GaussianEvent):
    """A subclass of a handled kind (a plugin's refinement): not handled by its type."""


def _around(x: float) -> list[float]:
    return [math.nextafter(x, -math.inf), x, math.nextafter(x, math.inf)]


def _noises(factor: float) -> list[float]:
    """Noise multipliers at and just beyond each end of the range, for ``factor``."""
    out = [1e-300, 1.0, 1e300, 5e-5, 2e4]
    for edge in (MIN_NOISE, MAX_NOISE):
        out += _around(edge) + _around(edge * factor)
    return [x for x in out if 0 < x < math.inf]


EPSILONS = [0.0, 5e-324, 1.0, 700.0, 1e300, *_around(MAX_PURE_EPSILON)]
BUCKETS = [2, 3, MAX_BUCKETS - 1, MAX_BUCKETS, MAX_BUCKETS + 1, 2**64]
RATES = [1e-6, 0.01, 0.5, 1.0]


def _others() -> list[Event]:
    """Leaves of kinds the one-pass check does not handle (it must fall back)."""
    g = GaussianEvent(1.0)
    return [
        ExponentialMechanismEvent(1.0),
        ReportNoisyMaxEvent(1.0),
        SampledWithoutReplacementEvent(100, 10, g),
        ShuffledBatchesEvent(100, 10, g),
        RandomAllocationEvent(10, g),
        PoissonSampledEvent(0.5, ComposedEvent([g, LaplaceEvent(2.0)])),
        PoissonSampledEvent(0.5, NonPrivateEvent()),
        PoissonSampledEvent(0.5, ExponentialMechanismEvent(1.0)),
        PoissonSampledEvent(0.5, PoissonSampledEvent(0.5, g)),
        _SubGaussian(1.0),
        PoissonSampledEvent(0.5, _SubGaussian(1.0)),
    ]


def _flat_leaf(rng: np.random.Generator, factor: float) -> Event:
    """A plain leaf of a handled kind, its parameters at a range edge or random."""
    pick = int(rng.integers(5))
    edge = bool(rng.random() < 0.7)
    noise = rng.choice(_noises(factor)) if edge else 10 ** rng.uniform(-6, 6)
    eps = rng.choice(EPSILONS) if edge else rng.uniform(0, 600)
    if pick == 0:
        return GaussianEvent(noise)
    if pick == 1:
        return LaplaceEvent(noise)
    if pick == 2:
        return PureDPEvent(eps)
    if pick == 3:
        return ApproxDPEvent(eps, float(rng.choice([0.0, 1e-10, 0.5])))
    buckets = int(rng.choice(BUCKETS)) if edge else int(rng.integers(2, 10))
    return RandomizedResponseEvent(max(eps, 5e-324), buckets)


def _leaf(rng: np.random.Generator, factor: float, others: list[Event]) -> Event:
    u = rng.random()
    if u < 0.08:
        return NonPrivateEvent()
    if u < 0.15:
        return others[int(rng.integers(len(others)))]
    inner = _flat_leaf(rng, factor)
    return PoissonSampledEvent(float(rng.choice(RATES)), inner) if rng.random() < 0.4 else inner


def _reference(leaves: Leaves, factor: float) -> list[Event] | None:
    """The leaf-by-leaf rule: None unless every leaf is non-private, or of a handled kind with
    no parameter reason; else the first leaf of each shape of ``split``."""
    firsts: dict[Hashable, Event] = {}
    for leaf, _ in leaves:
        if isinstance(leaf, NonPrivateEvent):
            continue
        inner = leaf.event if type(leaf) is PoissonSampledEvent else leaf
        if type(inner) not in FLAT or _parameter_reason(leaf, factor) is not None:
            return None
        found = split(leaf)
        firsts.setdefault(leaf if found is None else found[0], leaf)
    return list(firsts.values())


def _same(got: list[Event] | None, want: list[Event] | None) -> bool:
    if got is None or want is None:
        return got is want
    return len(got) == len(want) and all(a is b for a, b in zip(got, want, strict=True))


def test_one_pass_check_is_the_leaf_by_leaf_check() -> None:
    rng = np.random.default_rng(20261130)
    others = _others()
    accepted = refused = 0
    for trial in range(1500):
        factor = FACTORS[trial % len(FACTORS)]
        size = int(rng.integers(0, 9))
        leaves = [(_leaf(rng, factor, others), int(rng.integers(1, 5))) for _ in range(size)]
        want = _reference(leaves, factor)
        got = shapes_in_range(leaves, factor)
        assert _same(got, want), (factor, leaves, got, want)
        accepted, refused = accepted + (want is not None), refused + (want is None)
    assert accepted > 200 and refused > 200  # both outcomes are exercised


@pytest.mark.parametrize("factor", FACTORS)
def test_every_edge_alone_and_among_many(factor: float) -> None:
    """Each edge value alone, then beside 100 leaves in range (the one at fault is last)."""
    plain: list[Event] = [GaussianEvent(x) for x in _noises(factor)]
    plain += [LaplaceEvent(x) for x in _noises(factor)]
    plain += [PureDPEvent(e) for e in EPSILONS] + [ApproxDPEvent(e, 0.1) for e in EPSILONS]
    plain += [RandomizedResponseEvent(max(e, 5e-324), k) for e in EPSILONS for k in BUCKETS]
    edges = plain + [PoissonSampledEvent(q, e) for e in plain for q in (1e-3, 1.0)]
    edges += [*_others(), NonPrivateEvent()]
    bulk: Leaves = [(GaussianEvent(1.0 + i / 1000), 1) for i in range(100)]
    for leaf in edges:
        for leaves in ([(leaf, 1)], [*bulk, (leaf, 3)]):
            assert _same(shapes_in_range(leaves, factor), _reference(leaves, factor)), leaf


def test_booleans_and_strings_are_not_numbers() -> None:
    """Parameters reach both checks as floats (ints as floats): the events refuse the rest."""
    bads: tuple[Any, ...] = (True, False, "1.0", "nan", None, 2.0)
    for bad in bads[:-1]:
        for make in (GaussianEvent, LaplaceEvent, PureDPEvent, ExponentialMechanismEvent):
            with pytest.raises(InvalidParameterError):
                make(bad)
        with pytest.raises(InvalidParameterError):
            RandomizedResponseEvent(1.0, bad)
        with pytest.raises(InvalidParameterError):
            PoissonSampledEvent(bad, GaussianEvent(1.0))
        with pytest.raises(InvalidParameterError):
            ApproxDPEvent(1.0, bad)
    with pytest.raises(InvalidParameterError):
        RandomizedResponseEvent(1.0, bads[-1])  # a bucket count is an int
    for value in (1, np.float32(0.5), np.int64(3), np.float64(2.0)):
        assert type(GaussianEvent(value).noise_multiplier) is float
        assert type(PureDPEvent(value).epsilon) is float
    with pytest.raises(InvalidParameterError):
        GaussianEvent(math.nan)
    with pytest.raises(InvalidParameterError):
        PureDPEvent(math.inf)


def _outcome(acc: Accountant, event: Event) -> tuple[str, str | None]:
    try:
        return "reason", acc._unsupported_reason(event)
    except Exception as exc:  # both paths must fail alike
        return "raised", type(exc).__name__


@pytest.mark.parametrize("relation", ["add_remove", "replace_one"])
def test_the_pld_support_check_is_the_same_without_the_fast_path(
    relation: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole support check (extent, one pass, curves per shape) with and without it."""
    rng = np.random.default_rng(7 if relation == "add_remove" else 8)
    adjacency = Adjacency(relation=relation)
    # shuffled batches build their curve when checked (seconds): the fast path never sees them
    others = [e for e in _others() if not isinstance(e, ShuffledBatchesEvent)]
    events = []
    for _ in range(150):
        size = int(rng.integers(1, 7))
        leaves = [_leaf(rng, adjacency.sensitivity_factor, others) for _ in range(size)]
        events.append(
            ComposedEvent([SelfComposedEvent(e, int(rng.integers(1, 4))) for e in leaves])
        )
    fast = [_outcome(PLDAccountant(adjacency), e) for e in events]
    monkeypatch.setattr(pld_module, "shapes_in_range", lambda leaves, factor: None)
    slow = [_outcome(PLDAccountant(adjacency), e) for e in events]
    assert fast == slow
    assert sum(o == ("reason", None) for o in slow) > 10
    assert sum(o[0] == "reason" and o[1] is not None for o in slow) > 10


@pytest.mark.parametrize("relation", ["add_remove", "replace_one"])
def test_curves_are_had_or_not_by_shape(relation: str) -> None:
    """The shared precondition of both paths, spot-checked: among leaves in range, whether
    ``leaf_profiles`` gives curves depends on the leaf's shape alone."""
    rng = np.random.default_rng(3)
    adjacency = Adjacency(relation=relation)
    found: dict[Hashable, set[str]] = {}
    for _ in range(600):
        leaf = _flat_leaf(rng, adjacency.sensitivity_factor)
        if rng.random() < 0.5:
            leaf = PoissonSampledEvent(float(rng.choice(RATES)), leaf)
        if _parameter_reason(leaf, adjacency.sensitivity_factor) is not None:
            continue
        try:
            leaf_profiles(leaf, adjacency)
            outcome = "curves"
        except UnsupportedEventError:
            outcome = "unsupported"
        shape = split(leaf)
        assert shape is not None
        found.setdefault(shape[0], set()).add(outcome)
    assert len(found) > 10 and all(len(v) == 1 for v in found.values()), found


class _Counting(PLDAccountant):
    """A PLD accountant that counts its uncached support checks."""

    def __init__(self, adjacency: Adjacency | None = None) -> None:
        super().__init__(adjacency)
        self.walks = 0

    def _unsupported_reason(self, event: Event) -> str | None:
        self.walks += 1
        return super()._unsupported_reason(event)


def _fresh(acc: Accountant) -> Accountant:
    """A new accountant of the same backend, adjacency and ledger (no remembered check)."""
    other = type(acc)(acc.adjacency)
    other._ledger = list(acc._ledger)
    return other


def _pool() -> list[Callable[[], Event]]:
    """Builders of events: each call makes a new object equal to the previous ones."""
    return [
        lambda: ComposedEvent([GaussianEvent(1.0), PureDPEvent(0.5)]),
        lambda: ComposedEvent([GaussianEvent(MIN_NOISE), LaplaceEvent(2.0)]),
        lambda: ComposedEvent([GaussianEvent(math.nextafter(MIN_NOISE, 0))]),
        lambda: PoissonSampledEvent(0.01, LaplaceEvent(1.0)),
        lambda: PoissonSampledEvent(0.01, GaussianEvent(1.0)),
        lambda: SelfComposedEvent(GaussianEvent(1.0), 6 * 10**11),  # two exceed the limit
        lambda: ComposedEvent([ApproxDPEvent(1.0, 1e-6), NonPrivateEvent()]),
        lambda: RandomizedResponseEvent(1.0, MAX_BUCKETS + 1),
        lambda: ExponentialMechanismEvent(1.0),
    ]


@pytest.mark.parametrize("backend", [_Counting, RDPAccountant, ClosedFormAccountant])
def test_a_remembered_check_is_a_fresh_check(backend: Callable[[Adjacency], Accountant]) -> None:
    """Random checks, composes (as the selector does: the checked object itself) and adjacency
    changes: every remembered reason is the reason a fresh accountant of the same state gives,
    for the object checked last, another one, and equal new ones."""
    rng = np.random.default_rng(11)
    builders = _pool()
    acc = backend(Adjacency())
    made: list[Event] = [canonical(b()) for b in builders]
    last, hits = made[0], 0
    for _ in range(600):
        i = int(rng.integers(len(builders)))
        u = rng.random()
        event = last if u < 0.5 else made[i] if u < 0.8 else canonical(builders[i]())
        op = rng.random()
        if op < 0.6:
            walks = getattr(acc, "walks", 0)
            got = acc._checked_reason(event)
            hits += getattr(acc, "walks", 1) == walks
            assert got == _fresh(acc)._unsupported_reason(event), (event, acc.ledger)
            assert got == acc._unsupported_reason(event)
            last = event
        elif op < 0.85:
            with contextlib.suppress(DPLedgerError):  # refused: nothing added
                acc._compose_canonical(event, 1)
        else:  # an equal or a different adjacency, as a new object
            acc.adjacency = Adjacency(relation=str(rng.choice(["add_remove", "replace_one"])))
        if len(acc._ledger) > 6:
            acc = backend(Adjacency(relation=str(rng.choice(["add_remove", "replace_one"]))))
    assert backend is not _Counting or hits > 50  # the remembered reasons were read back


def test_a_remembered_check_follows_the_ledger() -> None:
    """The same event object, checked before and after the ledger grows past the limit."""
    acc = _Counting()
    event = SelfComposedEvent(GaussianEvent(1.0), 6 * 10**11)
    assert acc._checked_reason(event) is None
    acc._compose_canonical(event, 1)
    reason = acc._checked_reason(event)
    assert reason is not None and reason == _fresh(acc)._unsupported_reason(event)
    equal = SelfComposedEvent(GaussianEvent(1.0), 6 * 10**11)
    assert acc._checked_reason(equal) == reason


def _curves() -> list[Profile]:
    base = gaussian_profile(1.0)
    return [base, attrs.evolve(base), poisson_remove(base, 0.01), gaussian_profile(1.0)]


class _ByIdOnly(ByCurve[Any]):
    """A wrong memory, by the id alone: the checks below must catch it."""

    def find(self, profile: Profile) -> Any:
        item = self._items.get(id(profile))
        return None if item is None else item[1]


def _never_another(memo: ByCurve[Any]) -> bool:
    """Whether ``memo`` returns values only for the very curve they were kept for."""
    kept = gaussian_profile(1.0)
    memo.keep(kept, "kept")
    equal = attrs.evolve(kept)
    ok = equal == kept and memo.find(equal) is None and memo.find(kept) == "kept"
    memo.keep_first(equal, "equal")
    memo.keep_first(kept, "again")
    ok = ok and memo.find(equal) == "equal" and memo.find(kept) == "kept"
    # an entry left by a freed curve whose id a new curve reuses
    new = gaussian_profile(2.0)
    memo._items[id(new)] = (kept, "stale")
    return ok and memo.find(new) is None


def test_values_are_found_for_their_curve_only() -> None:
    memo: ByCurve[str] = ByCurve()
    curves = _curves()
    for i, c in enumerate(curves):
        memo.keep(c, str(i))
    for i, c in enumerate(curves):
        assert memo.find(c) == str(i)
    assert len(memo) == len(curves)
    assert _never_another(ByCurve())
    assert not _never_another(_ByIdOnly())  # the check tells a memory by id alone apart


def test_a_kept_curve_outlives_its_callers_so_its_id_is_not_reused() -> None:
    memo: ByCurve[int] = ByCurve()
    kept = poisson_remove(gaussian_profile(1.0), 0.5)
    alive = weakref.ref(kept)
    memo.keep(kept, 1)
    key = id(kept)
    del kept
    gc.collect()
    assert alive() is not None  # held beside its value
    for i in range(1000):
        new = poisson_remove(gaussian_profile(1.0), 0.5)
        assert id(new) != key and memo.find(new) is None, i
        del new
