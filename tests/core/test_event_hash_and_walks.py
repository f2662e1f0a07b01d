"""Kept hashes of the core events, and the bulk paths over wide compositions of leaves: the
tree search behind :func:`canonical`, the flattening of a composition of leaves."""

from __future__ import annotations

import copy
import os
import pickle
import subprocess
import sys
from typing import ClassVar

import attrs
import pytest

from dpledger.core.event_trees import CORE_LEAVES, any_node, canonical, flatten
from dpledger.core.events import (
    ApproxDPEvent,
    ComposedEvent,
    Event,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    NoOpEvent,
    PartitionSelectionEvent,
    PoissonSampledEvent,
    RandomAllocationEvent,
    RandomizedResponseEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    TabulatedProfileEvent,
)


def _tree() -> Event:
    return ComposedEvent(
        [
            PoissonSampledEvent(0.01, GaussianEvent(1.1)),
            SelfComposedEvent(LaplaceEvent(2.0), 3),
            RandomizedResponseEvent(0.5, 3),
            SampledWithoutReplacementEvent(100, 10, GaussianEvent(2.0)),
        ]
    )


@attrs.frozen
class _Wrapped(Event):
    """A plugin-style event with a sub-event (plain attrs class, its hash not kept)."""

    kind: ClassVar[str] = "test_wrapped_hash"
    inner: Event
    weight: float = 1.0

    def children(self) -> tuple[Event, ...]:
        return (self.inner,)


@attrs.frozen
class _Noisier(GaussianEvent):
    """A subclass of a core event class, declared as a plugin would."""

    extra: int = 0


# -- kept hashes --------------------------------------------------------------------------


def test_hash_is_kept_and_agrees_with_equality() -> None:
    a, b = _tree(), _tree()
    assert a is not b and a == b and hash(a) == hash(b) == hash(a)
    assert {a: 1}[b] == 1
    assert PoissonSampledEvent(0.01, GaussianEvent(1.1)) != PoissonSampledEvent(
        0.01, GaussianEvent(1.2)
    )
    assert len({GaussianEvent(1.0), GaussianEvent(1.0), GaussianEvent(2.0)}) == 2


def test_copies_and_evolved_events_hash_as_fresh_ones() -> None:
    event = _tree()
    hash(event)
    for other in (copy.copy(event), copy.deepcopy(event), pickle.loads(pickle.dumps(event))):
        assert other == event and hash(other) == hash(_tree())
    leaf = GaussianEvent(1.0)
    hash(leaf)
    moved = attrs.evolve(leaf, noise_multiplier=3.0)
    assert moved == GaussianEvent(3.0) and hash(moved) == hash(GaussianEvent(3.0))


_CHILD = """
import pickle, sys
from dpledger.core.events import *
sys.path.insert(0, {here!r})
from test_event_hash_and_walks import _tree
old = pickle.loads(sys.stdin.buffer.read())
fresh = _tree()
print(old == fresh, hash(old) == hash(fresh), {{fresh: 1}}.get(old),
      all(hash(x) == hash(y) for x, y in zip(old.walk(), fresh.walk())))
"""


def test_a_pickled_event_hashes_as_a_fresh_one_in_another_process() -> None:
    # string hashes (attrs seeds every class hash with one) differ between the processes
    event = _tree()
    assert all(isinstance(hash(e), int) for e in event.walk())  # every hash kept
    code = _CHILD.format(here=os.path.dirname(__file__))
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    if os.environ.get("PYTHONHASHSEED") == "12345":
        env["PYTHONHASHSEED"] = "54321"
    res = subprocess.run(
        [sys.executable, "-c", code],
        input=pickle.dumps(event),
        capture_output=True,
        env=env,
        check=False,
    )
    assert res.returncode == 0, res.stderr.decode()
    assert res.stdout.decode().split() == ["True", "True", "1", "True"]


def test_plugin_subclasses_hash_and_compare_by_their_fields() -> None:
    a, b = _Wrapped(GaussianEvent(1.0), 2.0), _Wrapped(GaussianEvent(1.0), 2.0)
    assert a == b and hash(a) == hash(b) and a != _Wrapped(GaussianEvent(1.0), 3.0)
    assert pickle.loads(pickle.dumps(a)) == a and hash(pickle.loads(pickle.dumps(a))) == hash(b)
    n = _Noisier(1.0, 2)
    assert n == _Noisier(1.0, 2) and hash(n) == hash(_Noisier(1.0, 2)) and n != _Noisier(1.0, 3)
    assert n != GaussianEvent(1.0)
    assert hash(copy.copy(n)) == hash(n) and hash(attrs.evolve(n, extra=5)) == hash(
        _Noisier(1.0, 5)
    )


# -- any_node ------------------------------------------------------------------------------


def _trees() -> list[Event]:
    shared = PoissonSampledEvent(0.2, GaussianEvent(1.0))
    deep: Event = shared
    for _ in range(30):  # shared twice at every level: 2^30 paths, 31 distinct nodes
        deep = ComposedEvent([deep, deep])
    table = TabulatedProfileEvent((0.0, 1.0), (0.5, 0.1))
    return [
        GaussianEvent(1.0),
        _tree(),
        deep,
        ComposedEvent([LaplaceEvent(1.0)] * 5 + [PoissonSampledEvent(1.0, GaussianEvent(2.0))]),
        ComposedEvent([GaussianEvent(1.0), _Wrapped(PoissonSampledEvent(1.0, LaplaceEvent(1.0)))]),
        ComposedEvent([RandomAllocationEvent(4, GaussianEvent(1.0), 4), ApproxDPEvent(1, 1e-6)]),
        ComposedEvent([LaplaceEvent(1.0), PartitionSelectionEvent("laplace", 1.0, 1e-6)]),
        ComposedEvent([ExponentialMechanismEvent(1.0), _Wrapped(table)]),
        ComposedEvent([GaussianEvent(1.0), table]),
    ]


#: per kind looked for: whether each of :func:`_trees` holds a node of it
_FOUND: dict[type[Event], list[bool]] = {
    PoissonSampledEvent: [False, True, True, True, True, False, False, False, False],
    PartitionSelectionEvent: [False, False, False, False, False, False, True, False, False],
    TabulatedProfileEvent: [False, False, False, False, False, False, False, True, True],
    _Wrapped: [False, False, False, False, True, False, False, True, False],
}


@pytest.mark.parametrize("kind", list(_FOUND))
def test_any_node_finds_what_a_walk_finds(kind: type[Event]) -> None:
    def test(e: Event) -> bool:
        return isinstance(e, kind)

    found = [any_node(t, test, CORE_LEAVES - {kind}) for t in _trees()]
    assert found == _FOUND[kind]
    assert found == [any(test(e) for e in t.walk()) for t in _trees()]


def test_any_node_never_skips_what_is_not_a_core_leaf() -> None:
    # a plugin subclass of a core leaf class may have sub-events: it is tested and walked
    seen: list[Event] = []

    def test(e: Event) -> bool:
        seen.append(e)
        return False

    event = ComposedEvent([_Noisier(1.0), GaussianEvent(1.0), GaussianEvent(2.0)])
    assert not any_node(event, test, CORE_LEAVES)
    assert [type(e) for e in seen] == [ComposedEvent, _Noisier]


def test_canonical_rewrites_only_where_needed() -> None:
    plain = ComposedEvent([LaplaceEvent(1.0), PoissonSampledEvent(0.5, GaussianEvent(1.0))])
    assert canonical(plain) is plain
    hidden = ComposedEvent(
        [LaplaceEvent(1.0), _Wrapped(PoissonSampledEvent(1, GaussianEvent(2.0)))]
    )
    assert canonical(hidden) == ComposedEvent([LaplaceEvent(1.0), _Wrapped(GaussianEvent(2.0))])
    selection = ComposedEvent([GaussianEvent(1.0), PartitionSelectionEvent("laplace", 1.0, 1e-6)])
    assert canonical(selection) != selection


# -- flattening a composition of leaves ----------------------------------------------------


def test_flatten_merges_repeated_leaf_objects_in_first_order() -> None:
    a, b, c = GaussianEvent(1.0), LaplaceEvent(2.0), PoissonSampledEvent(0.1, GaussianEvent(1.0))
    flat = flatten(ComposedEvent([a, b, a, c, a, b]))
    assert [(id(e), k) for e, k in flat] == [(id(a), 3), (id(b), 2), (id(c), 1)]
    twin = GaussianEvent(1.0)  # equal, another object: its own entry (merged by the backends)
    assert [k for _, k in flatten(ComposedEvent([a, twin]))] == [1, 1]


def test_flatten_of_leaves_drops_what_the_walk_drops() -> None:
    g = GaussianEvent(1.0)
    event = ComposedEvent(
        [g, PoissonSampledEvent(0.0, g), NoOpEvent(), SampledWithoutReplacementEvent(10, 0, g)]
    )
    assert flatten(event) == [(g, 1)]
    nested = ComposedEvent([g, SelfComposedEvent(g, 4), ComposedEvent([g, LaplaceEvent(1.0)])])
    assert [(e, k) for e, k in flatten(nested)] == [(g, 6), (LaplaceEvent(1.0), 1)]


def test_flatten_of_leaves_matches_the_nested_walk() -> None:
    leaves: list[Event] = [
        PoissonSampledEvent(1e-4 * (1 + i % 7), GaussianEvent(1.0 + i % 5)) for i in range(40)
    ]
    leaves += [LaplaceEvent(1.0 + i) for i in range(10)] + leaves[:15] + [_Wrapped(leaves[0])]
    flat = flatten(ComposedEvent(leaves))
    # the same leaves one level down take the general walk
    general = flatten(ComposedEvent([ComposedEvent(leaves)]))
    assert [(id(e), k) for e, k in flat] == [(id(e), k) for e, k in general]
    assert sum(k for _, k in flat) == len(leaves) and len(flat) == 51
