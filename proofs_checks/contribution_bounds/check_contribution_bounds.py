"""Numeric checks of the per-key sensitivities and of the per-key accounting."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import GaussianEvent, LaplaceEvent
from dpledger.core.partition_events import partitioned_noise_event
from dpledger.core.partition_selection import contribution_sensitivity


@pytest.mark.parametrize(("l0", "linf", "clip"), [(1, 1, 1.0), (2, 3, 0.5), (3, 2, 2.0)])
def test_the_worst_user_attains_both_sensitivities(l0: int, linf: int, clip: float) -> None:
    keys = l0 + 1  # one key the user may not touch
    worst_l2 = worst_l1 = 0.0
    values = (-clip, 0.0, clip)
    # every user within the bounds: a choice of at most l0 keys, linf values in each
    for chosen in itertools.combinations(range(keys), l0):
        for rows in itertools.product(values, repeat=linf * l0):
            move = np.zeros(keys)
            for i, key in enumerate(chosen):
                move[key] = sum(rows[i * linf : (i + 1) * linf])
            worst_l2 = max(worst_l2, float(np.linalg.norm(move)))
            worst_l1 = max(worst_l1, float(np.abs(move).sum()))
    l2 = contribution_sensitivity(l0, linf, clip, "l2")
    l1 = contribution_sensitivity(l0, linf, clip, "l1")
    assert worst_l2 <= l2 and worst_l2 == pytest.approx(l2, rel=1e-12)
    assert worst_l1 <= l1 and worst_l1 == pytest.approx(l1, rel=1e-12)


def test_the_per_key_accounting_is_the_joint_gaussian_and_beats_the_l1_laplace() -> None:
    adjacency = Adjacency()
    per_key = partitioned_noise_event("gaussian", 12.0, 4, 2, 1.5)
    joint = GaussianEvent(12.0 / contribution_sensitivity(4, 2, 1.5, "l2"))
    a = account(per_key, adjacency, delta=1e-6).bound.epsilon
    b = account(joint, adjacency, delta=1e-6).bound.epsilon
    assert a == pytest.approx(b, rel=1e-4)
    laplace = partitioned_noise_event("laplace", 30.0, 5, 2, 1.0)
    l1 = 30.0 / contribution_sensitivity(5, 2, 1.0, "l1")  # pure epsilon 1/3 of the L1 bound
    per_key_eps = account(laplace, adjacency, delta=1e-6).bound.epsilon
    whole = account(LaplaceEvent(l1), adjacency, delta=1e-6).bound.epsilon
    assert whole <= 1 / 3 * (1 + 1e-12) and whole == pytest.approx(1 / 3, rel=1e-4)
    assert per_key_eps < whole
    assert per_key_eps > whole / math.sqrt(5)
