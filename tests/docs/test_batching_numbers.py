"""The MNIST table of docs/batching.md is what the accountant certifies (rounded outwards)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpledger.accountant.select import account
from dpledger.core.adjacency import Adjacency
from dpledger.core.events import (
    Event,
    GaussianEvent,
    PoissonSampledEvent,
    RandomAllocationEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    ShuffledBatchesEvent,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "batching.md"
N, B, SIGMA, EPOCHS, DELTA = 60000, 256, 1.1, 60, 1e-5
STEPS = EPOCHS * (N // B)
ROWS: dict[str, tuple[Event, Adjacency]] = {
    "| Poisson, q = 256/60000 | add/remove |": (
        SelfComposedEvent(PoissonSampledEvent(B / N, GaussianEvent(SIGMA)), STEPS),
        Adjacency(),
    ),
    "| Poisson, q = 256/60000 | replace-one |": (
        SelfComposedEvent(PoissonSampledEvent(B / N, GaussianEvent(SIGMA)), STEPS),
        Adjacency(relation="replace_one"),
    ),
    "| 256 of 60,000 without replacement, each step | replace-one |": (
        SelfComposedEvent(SampledWithoutReplacementEvent(N, B, GaussianEvent(SIGMA)), STEPS),
        Adjacency(relation="replace_one"),
    ),
    "| shuffled epochs of 256-record batches | replace-one |": (
        SelfComposedEvent(ShuffledBatchesEvent(N, B, GaussianEvent(SIGMA)), EPOCHS),
        Adjacency(relation="replace_one"),
    ),
    "| random allocation, each record in 1 of 235 steps | add/remove |": (
        SelfComposedEvent(RandomAllocationEvent(-(-N // B), GaussianEvent(SIGMA)), EPOCHS),
        Adjacency(),
    ),
    "| random allocation, each record in 2 of 470 steps, 30 epochs | add/remove |": (
        SelfComposedEvent(RandomAllocationEvent(470, GaussianEvent(SIGMA), 2), EPOCHS // 2),
        Adjacency(),
    ),
}


def _cells(prefix: str) -> tuple[float, float]:
    line = next(x for x in DOC.read_text().splitlines() if x.startswith(prefix))
    lower, upper = (float(c) for c in line[len(prefix) :].strip(" |").split("|"))
    return lower, upper


@pytest.mark.parametrize("prefix", sorted(ROWS))
def test_the_table_rounds_the_certified_bracket_outwards(prefix: str) -> None:
    event, adjacency = ROWS[prefix]
    bound = account(event, adjacency, delta=DELTA).bound
    lower, upper = _cells(prefix)
    # printed to four significant figures, the lower bound rounded down and the upper one up
    assert bound.epsilon_lower * (1 - 1e-3) <= lower <= bound.epsilon_lower
    assert bound.epsilon <= upper <= bound.epsilon * (1 + 1e-3)
