from __future__ import annotations

import itertools

import pytest

from dpledger.accountant.calibrate import grid_neighbours
from dpledger.core.events import ComposedEvent, ExponentialMechanismEvent, GaussianEvent
from dpledger.plugins.path.aim import (
    AIMParams,
    budget,
    calibrated_sigma0,
    candidates,
    declare,
    workload,
)
from dpledger.plugins.path.data import hmm_dataset
from dpledger.plugins.path.flatten import FlatSpec
from dpledger.runtime.coverage import canonical_multiset, multiset_covered


def _round(b, j):  # type: ignore[no-untyped-def]
    return [GaussianEvent(b.sigmas[j]), ExponentialMechanismEvent(b.epsilons[j])]


def test_budget_levels_and_counts() -> None:
    p = AIMParams(epsilon=1.0, delta=1e-6, rounds=20, max_anneal=2, noise_multiplier=3.0)
    b = budget(p, 3.0)
    assert b.counts == (20 - 5, 5 - 1, 1)
    assert b.sigmas == (3.0, 1.5, 0.75)
    # a level-j round costs 4**j level-0 rounds in zCDP
    costs = [1 / (2 * s**2) + e**2 / 8 for s, e in zip(b.sigmas, b.epsilons, strict=True)]
    assert costs[1] == pytest.approx(4 * costs[0]) and costs[2] == pytest.approx(16 * costs[0])
    assert pytest.approx(p.alpha * costs[0]) == 1 / (2 * 3.0**2)


def test_declared_dominates_every_budget_bounded_run() -> None:
    p = AIMParams(epsilon=1.0, delta=1e-6, rounds=20, max_anneal=2, noise_multiplier=3.0)
    b = budget(p, 3.0)
    declared = canonical_multiset(b.event())
    init = [GaussianEvent(b.sigma_init)]
    n_ok = 0
    for seq in itertools.product(range(3), repeat=5):
        for extra in range(0, 17):
            levels = list(seq) + [0] * extra
            run = init + [e for j in levels for e in _round(b, j)]
            cost = sum(4**j for j in levels)
            covered = multiset_covered(canonical_multiset(ComposedEvent(run)), declared)
            assert covered == (cost <= p.rounds) or cost > p.rounds
            if cost <= p.rounds:
                assert covered
                n_ok += 1
    assert n_ok > 100
    # one unit over the budget is not covered
    over = init + [e for _ in range(21) for e in _round(b, 0)]
    assert not multiset_covered(canonical_multiset(ComposedEvent(over)), declared)


def test_declare_given_sigma_and_workload() -> None:
    p = AIMParams(epsilon=1.0, delta=1e-6, rounds=8, max_anneal=1, noise_multiplier=2.0)
    assert declare(p, None) == budget(p, 2.0).event()
    tables, _ = hmm_dataset(3, seed=0)
    spec = FlatSpec(tables.schema, length=3)
    w = workload(spec, 1)
    # 6 columns, L=3: 15 same-time pairs x 3 + 36 cross pairs x 2 adjacent steps
    assert len(w) == 45 + 72
    c = candidates(w)
    assert len(c) == len(w) + 18
    # AIM weights: a 1-way is in 11 pairs; a pair meets itself (2) and 10 + 10 other pairs (1)
    assert c[("Glomozole@0",)] == 5 + 6 and c[("Glomozole@0", "Crirodex@0")] == 2 + 10 + 10


@pytest.mark.slow
def test_calibrated_declaration_meets_target() -> None:
    from dpledger.accountant.select import account

    p = AIMParams(epsilon=2.0, delta=1e-6, rounds=10, max_anneal=1)
    bound = account(declare(p, None), delta=1e-6).bound
    assert 1.9 < bound.epsilon <= 2.0


def test_calibrated_sigma0_is_the_least_certified_grid_point() -> None:
    from dpledger.accountant.select import account

    p = AIMParams(epsilon=2.0, delta=1e-6, rounds=4, max_anneal=1)
    sigma0 = calibrated_sigma0(p)
    below, top = grid_neighbours(sigma0)
    assert top == sigma0  # on the grid
    assert account(budget(p, sigma0).event(), delta=1e-6).bound.epsilon <= 2.0
    assert account(budget(p, below).event(), delta=1e-6).bound.epsilon > 2.0


@pytest.mark.slow
def test_run_verified_against_declaration() -> None:
    from dpledger.plugins.path.aim import run_aim
    from dpledger.runtime.ledger import PrivacyLedger

    tables, _ = hmm_dataset(150, seed=0)
    p = AIMParams(
        epsilon=5.0,
        delta=1e-5,
        length=2,
        bins=3,
        rounds=3,
        max_anneal=1,
        iters=30,
        noise_multiplier=1.0,
        eval_factor=3,
    )
    led = PrivacyLedger(declare(p, None), rng=0)
    syn, info = run_aim(tables, p, led)
    led.verify()
    assert info["units_spent"] <= p.rounds and len(syn) > 0


def test_replace_one_declares_selections_at_twice_epsilon_and_runs_covered() -> None:
    from dpledger.core.adjacency import Adjacency
    from dpledger.plugins.path.baselines_plugin import AIM_SPEC
    from dpledger.runtime.runner import run_verified

    p = AIMParams(epsilon=1.0, delta=1e-6, rounds=4, max_anneal=1, noise_multiplier=3.0, length=2)
    b = budget(p, 3.0)
    replace = Adjacency(relation="replace_one")
    ems = [e for e in declare(p, replace).walk() if isinstance(e, ExponentialMechanismEvent)]
    assert sorted(e.epsilon for e in ems) == pytest.approx(sorted(2 * e for e in b.epsilons))
    tables, _ = hmm_dataset(12, seed=0)
    result = run_verified(
        AIM_SPEC,
        AIM_SPEC.make_params(
            {
                "epsilon": 1.0,
                "delta": 1e-6,
                "rounds": 4,
                "max_anneal": 1,
                "noise_multiplier": 3.0,
                "length": 2,
                "iters": 20,
            }
        ),
        tables,
        adjacency=replace,
        seed=0,
    )
    booked = [
        e.epsilon
        for e in result.ledger.executed_event().walk()
        if isinstance(e, ExponentialMechanismEvent)
    ]
    assert booked and all(any(x == pytest.approx(2 * e) for e in b.epsilons) for x in booked)
