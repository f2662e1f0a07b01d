"""Event level vs user level through the core composition graph, against declare_marginals."""

from __future__ import annotations

import pytest

from dpledger.accountant.graph_account import account_graph
from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.plugins.trajectories.declare import TrajectoryParams, WarmStart, declare_marginals
from dpledger.runtime.graph import CompositionGraph

T, N = 5, 400
P = TrajectoryParams(K=10, tau=1.0, rho=0.05, warm_start=WarmStart("mean", noise_multiplier=4.0))
USER = Adjacency(unit="user", unit_key="id", contribution="time_points", max_contributions=T)


def _graph(adjacency: Adjacency) -> CompositionGraph:
    per = declare_marginals(P, Adjacency(), N, T).per_marginal[0]
    g = CompositionGraph()
    g.add_source("observations", adjacency)
    g.add_transform("by_time", "partition", "observations", key="time", cells=T, public_key=True)
    if adjacency.unit == "user":  # one point per user per time (contribution = time_points)
        g.add_transform("one_point", "contribution_bound", "by_time", max_contributions=1)
        g.add_release("marginal_run", per, "one_point")
    else:
        g.add_release("marginal_run", per, "by_time")
    return g


def test_event_level_graph_is_parallel_and_matches_declaration() -> None:
    dec = declare_marginals(P, Adjacency(), N, T)
    assert dec.parallel
    graph_eps = account_graph(_graph(Adjacency()), delta=1e-5).bound.epsilon
    direct = account(dec.event, dec.account_adjacency, delta=1e-5).bound.epsilon
    assert graph_eps == pytest.approx(direct, rel=1e-9)


def test_user_level_graph_is_sequential_and_matches_declaration() -> None:
    dec = declare_marginals(P, USER, N, T)
    assert not dec.parallel
    graph_eps = account_graph(_graph(USER), delta=1e-5).bound.epsilon
    direct = account(dec.event, dec.account_adjacency, delta=1e-5).bound.epsilon
    one = account(
        declare_marginals(P, Adjacency(), N, T).event, Adjacency(), delta=1e-5
    ).bound.epsilon
    # a user in every marginal: T-fold composition, the same through both routes
    assert graph_eps == pytest.approx(direct, rel=1e-3)
    assert direct > 1.5 * one
