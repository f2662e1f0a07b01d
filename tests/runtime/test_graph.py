"""Composition graph: validation, reduction structure, parallel composition, invariance."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.accountant.alternatives import MAX_ALTERNATIVES
from dpledger.accountant.graph_account import account_graph
from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import GraphError, LiftingError
from dpledger.core.events import (
    ComposedEvent,
    Event,
    GaussianEvent,
    LaplaceEvent,
    NoOpEvent,
    PoissonSampledEvent,
    PureDPEvent,
    SelfComposedEvent,
)
from dpledger.runtime.graph import CompositionGraph

ROW = Adjacency()
STEP = PoissonSampledEvent(0.01, GaussianEvent(1.0))
MEAN = GaussianEvent(7.8)


def paper_a(adjacency: Adjacency, T: int = 10, K: int = 20) -> CompositionGraph:
    g = CompositionGraph()
    g.add_source("obs", adjacency)
    g.add_transform("by_time", "partition", "obs", key="time", cells=T)
    node = "by_time"
    if adjacency.unit == "user":
        g.add_transform("one_per_time", "contribution_bound", "by_time", max_contributions=1)
        node = "one_per_time"
    g.add_release("mean", MEAN, node)
    g.add_release("steps", STEP, [node, "mean"], count=K)
    g.add_postprocess("paths", ["steps"])
    return g


def test_sequential_composition_sorted_by_release_id() -> None:
    g = CompositionGraph()
    g.add_source("s", ROW)
    g.add_release("b", LaplaceEvent(2.0), "s")
    g.add_release("a", GaussianEvent(1.0), "s", count=3)
    red = g.reduce()["s"]
    assert red.alternatives == (
        ComposedEvent((SelfComposedEvent(GaussianEvent(1.0), 3), LaplaceEvent(2.0))),
    )
    assert [r.release_id for r in red.releases] == ["a", "b"]


def test_equal_events_never_merge() -> None:
    g = CompositionGraph()
    g.add_source("s", ROW)
    g.add_release("r1", GaussianEvent(1.0), "s")
    g.add_release("r2", GaussianEvent(1.0), "s")
    assert g.g.number_of_nodes() == 3
    assert g.reduce()["s"].event == ComposedEvent((GaussianEvent(1.0), GaussianEvent(1.0)))


def test_source_without_releases_costs_nothing() -> None:
    g = CompositionGraph()
    g.add_source("s", ROW)
    g.add_release("zero", GaussianEvent(1.0), "s", count=0)
    assert g.reduce()["s"].alternatives == (NoOpEvent(),)


def test_paper_a_event_level_is_one_marginal() -> None:
    red = paper_a(ROW).reduce()["obs"]
    assert red.alternatives == (ComposedEvent((MEAN, SelfComposedEvent(STEP, 20))),)
    assert "parallel" in red.notes[0]


def test_paper_a_user_level_composes_all_marginals() -> None:
    adj = Adjacency(unit="user", unit_key="person", max_contributions=10)
    red = paper_a(adj).reduce()["obs"]
    assert red.alternatives == (
        ComposedEvent((SelfComposedEvent(MEAN, 10), SelfComposedEvent(STEP, 200))),
    )
    assert "sequential" in red.notes[0]
    assert {r.rules for r in red.releases} == {("unchanged_k1",)}


def test_user_partition_by_user_key_is_parallel_other_keys_are_not() -> None:
    adj = Adjacency(unit="user", unit_key="uid", max_contributions=2)
    cases = [("uid", GaussianEvent(2.0)), ("day", SelfComposedEvent(GaussianEvent(2.0), 5))]
    for key, expected in cases:
        g = CompositionGraph()
        g.add_source("s", adj)
        g.add_transform("p", "partition", "s", key=key, cells=5)
        g.add_release("r", GaussianEvent(4.0), "p")
        assert g.reduce()["s"].alternatives == (expected,), key


def test_replace_one_partition_needs_public_key_for_parallelism() -> None:
    cases = [(False, SelfComposedEvent(LaplaceEvent(1.0), 3)), (True, LaplaceEvent(1.0))]
    for public, expected in cases:
        g = CompositionGraph()
        g.add_source("s", Adjacency(relation="replace_one"))
        g.add_transform("p", "partition", "s", key="t", cells=3, public_key=public)
        g.add_release("r", LaplaceEvent(1.0), "p")
        assert g.reduce()["s"].alternatives == (expected,)


def _cells_graph(adj: Adjacency) -> CompositionGraph:
    g = CompositionGraph()
    g.add_source("s", adj)
    g.add_release("global", PureDPEvent(0.5), "s")
    g.add_transform("p", "partition", "s", key="region")
    g.add_transform("north", "cell", "p")
    g.add_transform("south", "cell", "p")
    g.add_transform("east", "cell", "p")
    g.add_release("n1", PureDPEvent(1.0), "north")
    g.add_release("n2", LaplaceEvent(1.0), "north")
    g.add_release("s1", PureDPEvent(2.0), "south")
    g.add_release("e1", PureDPEvent(1.0), "east")  # equal event to n1, still its own release
    g.add_release("p_all", GaussianEvent(3.0), "p")  # a direct child is a cell of its own
    return g


def test_heterogeneous_cells_give_alternatives() -> None:
    red = _cells_graph(ROW).reduce()["s"]
    assert set(red.alternatives) == {
        ComposedEvent((PureDPEvent(1.0), PureDPEvent(0.5))),  # e1, global
        ComposedEvent((PureDPEvent(0.5), PureDPEvent(1.0), LaplaceEvent(1.0))),  # global, n1, n2
        ComposedEvent((PureDPEvent(0.5), GaussianEvent(3.0))),  # global, p_all
        ComposedEvent((PureDPEvent(0.5), PureDPEvent(2.0))),  # global, s1
    }
    # the dominating single event is the union: every release once
    assert len(red.event.events) == 6  # type: ignore[attr-defined]


def test_non_disjoint_cells_compose_sequentially() -> None:
    adj = Adjacency(unit="user", unit_key="uid", max_contributions=1)
    red = _cells_graph(adj).reduce()["s"]
    assert len(red.alternatives) == 1
    assert len(red.alternatives[0].events) == 6  # type: ignore[attr-defined]


def test_dominated_alternatives_are_dropped() -> None:
    g = CompositionGraph()
    g.add_source("s", ROW)
    g.add_transform("p", "partition", "s", key="k")
    g.add_transform("c1", "cell", "p")
    g.add_transform("c2", "cell", "p")
    g.add_release("x", GaussianEvent(1.0), "c1", count=2)
    g.add_transform("inner", "partition", "c2", key="j")
    g.add_release("y", GaussianEvent(1.0), "inner")
    red = g.reduce()["s"]
    assert set(red.alternatives) == {SelfComposedEvent(GaussianEvent(1.0), 2), GaussianEvent(1.0)}
    g2 = CompositionGraph()
    g2.add_source("s", ROW)
    g2.add_transform("p", "partition", "s", key="k", cells=4)
    g2.add_release("x", GaussianEvent(1.0), "p")
    assert g2.reduce()["s"].alternatives == (GaussianEvent(1.0),)


def test_too_many_alternatives_merge_into_a_dominating_event() -> None:
    g = CompositionGraph()
    g.add_source("s", ROW)
    for level in range(3):  # 3 independent partitions of 10 cells: 1000 combinations
        g.add_transform(f"p{level}", "partition", "s", key=f"k{level}")
        for c in range(10):
            g.add_release(f"r{level}_{c}", GaussianEvent(1.0 + c), f"p{level}")
    red = g.reduce()["s"]
    assert len(red.alternatives) <= MAX_ALTERNATIVES
    # merged: every release appears, so the bound dominates every cell combination
    assert len(red.alternatives) == 1
    assert len(red.alternatives[0].events) == 30  # type: ignore[attr-defined]


def test_user_level_lifting_in_graph_and_contribution_bound() -> None:
    adj = Adjacency(unit="user", unit_key="uid", max_contributions=4)
    g = CompositionGraph()
    g.add_source("s", adj)
    g.add_release("sum", GaussianEvent(8.0), "s")
    g.add_transform("cap", "contribution_bound", "s", max_contributions=2)
    g.add_release("capped", LaplaceEvent(8.0), "cap")
    g.add_release("declared", STEP, "s", declared_unit="user", plugin="dpsgd", method="dp_sgd")
    red = g.reduce()["s"]
    by_id = {r.release_id: r for r in red.releases}
    assert by_id["sum"].lifted == GaussianEvent(2.0)
    assert by_id["sum"].rules == ("gaussian_l2_sensitivity_xk",)
    assert by_id["capped"].lifted == LaplaceEvent(4.0)
    assert by_id["capped"].max_contributions == 2
    assert by_id["capped"].path == ("cap",)
    assert by_id["declared"].lifted == STEP
    assert by_id["declared"].rules == ("declared_user_level",)
    assert by_id["declared"].plugin == "dpsgd"


def test_row_sampled_release_under_user_source_is_refused() -> None:
    g = CompositionGraph()
    g.add_source("s", Adjacency(unit="user", unit_key="uid", max_contributions=3))
    g.add_release("train", STEP, "s")
    with pytest.raises(LiftingError, match=r"'train'.*sample users rather than rows"):
        g.reduce()


def _expect(g: CompositionGraph, pattern: str) -> None:
    with pytest.raises(GraphError, match=pattern):
        g.validate()


def test_validation_errors_name_the_node_and_fix() -> None:
    g = CompositionGraph()
    g.add_source("s", ROW)
    g.add_transform("a", "partition", "b", key="x")
    g.add_transform("b", "partition", "a", key="y")
    _expect(g, r"node '[ab]': is on a cycle .* Fix: data must flow one way")

    g = CompositionGraph()
    g.add_source("s", ROW)
    g.add_release("r", GaussianEvent(1.0), "ghost")
    _expect(g, r"node 'ghost': is referenced by an edge .* never defined")

    g = CompositionGraph()
    g.add_source("s1", ROW)
    g.add_source("s2", ROW)
    g.add_release("join", GaussianEvent(1.0), ["s1", "s2"])
    _expect(g, r"node 'join': release is reachable from several data paths .*ambiguous")

    g = CompositionGraph()
    g.add_source("s", ROW)
    g.add_release("r", GaussianEvent(1.0))
    _expect(g, r"node 'r': release has no data input")

    g = CompositionGraph()
    g.add_source("s", ROW)
    g.add_postprocess("pp", ["s"])
    _expect(g, r"node 'pp': post-processing reads private data")

    g = CompositionGraph()
    g.add_source("s", ROW)
    g.add_transform("c", "cell", "s")
    _expect(g, r"node 'c': a cell must read a partition")

    g = CompositionGraph()
    g.add_source("s", ROW)
    g.add_transform("p", "bucketize", "s")
    _expect(g, r"node 'p': unknown transform 'bucketize'")

    g = CompositionGraph()
    g.add_source("s", ROW)
    g.add_release("u", GaussianEvent(1.0), "s", declared_unit="user")
    _expect(g, r"node 'u': is declared at user level but source 's' protects rows")

    g = CompositionGraph()
    g.add_source("s", ROW)
    g.add_release("r", GaussianEvent(1.0), "s", count=-1)
    _expect(g, r"node 'r': count must be an integer >= 0")

    g = CompositionGraph()
    with pytest.raises(GraphError, match="ids must be non-empty strings"):
        g.add_source(3, ROW)  # type: ignore[arg-type]
    g.add_source("s", ROW)
    with pytest.raises(GraphError, match="defined twice"):
        g.add_release("s", GaussianEvent(1.0), "s")


_events = st.sampled_from(
    [GaussianEvent(1.0), GaussianEvent(2.0), LaplaceEvent(1.0), PureDPEvent(0.3), STEP]
)


@settings(max_examples=30, deadline=None)
@given(
    spec=st.lists(
        st.tuples(st.integers(0, 3), _events, st.integers(0, 3)), min_size=1, max_size=12
    ),
    order=st.randoms(use_true_random=False),
)
def test_reduction_is_invariant_to_insertion_order(
    spec: list[tuple[int, Event, int]], order: object
) -> None:
    parents = ["s", "c0", "c1", "bound"]
    releases = [(f"r{i}", parents[where], ev, count) for i, (where, ev, count) in enumerate(spec)]

    def build(rel: list[tuple[str, str, Event, int]]) -> CompositionGraph:
        g = CompositionGraph()
        # release and transform definitions may come in any order; edges are resolved later
        for rid, parent, ev, count in rel:
            g.add_release(rid, ev, parent, count=count)
        g.add_transform("c1", "cell", "p")
        g.add_transform("bound", "contribution_bound", "s", max_contributions=1)
        g.add_source("s", ROW)
        g.add_transform("c0", "cell", "p")
        g.add_transform("p", "partition", "s", key="k")
        return g

    shuffled = list(releases)
    order.shuffle(shuffled)  # type: ignore[attr-defined]
    a = build(releases).reduce()["s"]
    b = build(shuffled).reduce()["s"]
    assert set(a.alternatives) == set(b.alternatives)
    assert a.releases == b.releases


def test_ten_thousand_releases_reduce_quickly() -> None:
    g = CompositionGraph()
    g.add_source("s", ROW)
    g.add_transform("p", "partition", "s", key="t", cells=50)
    for i in range(10_000):
        g.add_release(f"r{i:05d}", GaussianEvent(1.0 + i % 7), "p" if i % 2 else "s")
    start = time.perf_counter()
    red = g.reduce()["s"]
    assert time.perf_counter() - start < 5.0
    assert len(red.alternatives) == 1
    assert len(red.alternatives[0].events) == 10_000  # type: ignore[attr-defined]


def test_account_graph_takes_the_worst_cell_and_composes_sources() -> None:
    from dpledger.accountant.select import account

    g = _cells_graph(ROW)
    red = g.reduce()["s"]
    result = account_graph(g, delta=1e-6)
    per_alt = [account(a, ROW, delta=1e-6).bound for a in red.alternatives]
    assert result.bound.epsilon == max(b.epsilon for b in per_alt)
    assert result.bound.epsilon_lower == max(b.epsilon_lower for b in per_alt)
    everything = account(red.event, ROW, delta=1e-6).bound
    assert result.bound.epsilon < everything.epsilon  # parallel composition helps
    assert result.to_dict()["sources"][0]["alternatives"][0]["epsilon"] > 0

    two = CompositionGraph()
    two.add_source("a", ROW)
    two.add_source("b", ROW)
    two.add_release("ra", PureDPEvent(1.0), "a")
    two.add_release("rb", PureDPEvent(2.0), "b")
    composed = account_graph(two, delta=1e-6)
    assert (
        composed.bound.epsilon
        == account(
            ComposedEvent((PureDPEvent(1.0), PureDPEvent(2.0))), ROW, delta=1e-6
        ).bound.epsilon
    )
    two.disjoint_sources = True
    disjoint = account_graph(two, delta=1e-6)
    assert disjoint.bound.epsilon == account(PureDPEvent(2.0), ROW, delta=1e-6).bound.epsilon
    assert disjoint.bound.epsilon < composed.bound.epsilon


def test_account_graph_delta_query_and_mixed_relations() -> None:
    g = CompositionGraph()
    g.add_source("s", ROW)
    g.add_release("r", PureDPEvent(1.0), "s")
    res = account_graph(g, epsilon=1.0, per_release=True)
    assert res.bound.delta <= 1e-12
    assert "r" in res.release_bounds
    g.add_source("t", Adjacency(relation="replace_one"))
    g.add_release("r2", PureDPEvent(1.0), "t")
    with pytest.raises(GraphError, match="disjoint_sources"):
        account_graph(g, delta=1e-5)
    with pytest.raises(GraphError, match="exactly one of delta or epsilon"):
        account_graph(g)
