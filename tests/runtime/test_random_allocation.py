"""RandomAllocationEvent: validation, round trips, and the ledger's allocated epochs."""

from __future__ import annotations

import numpy as np
import pytest

from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError, LedgerViolationError
from dpledger.core.events import (
    GaussianEvent,
    PoissonSampledEvent,
    RandomAllocationEvent,
    SelfComposedEvent,
    event_from_dict,
)
from dpledger.runtime.ledger import PrivacyLedger

EPOCH = RandomAllocationEvent(10, GaussianEvent(1.0))


def test_round_trip_and_defaults() -> None:
    assert EPOCH.num_selected == 1 and EPOCH.sampling_probability == 0.1
    data = EPOCH.to_dict()
    assert data["kind"] == "random_allocation"
    assert event_from_dict(data) == EPOCH
    table = {
        "kind": "random_allocation",
        "num_steps": 10.0,
        "event": {"kind": "gaussian", "noise_multiplier": 1.0},
    }
    assert event_from_dict(table) == EPOCH


@pytest.mark.parametrize(
    "kwargs",
    [
        {"num_steps": 0},
        {"num_steps": 2.5},
        {"num_steps": True},
        {"num_steps": 3, "num_selected": 4},
    ],
)
def test_strict_validation(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidParameterError):
        RandomAllocationEvent(event=GaussianEvent(1.0), **kwargs)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError):
        RandomAllocationEvent(10, "gaussian")  # type: ignore[arg-type]


def test_allocate_books_one_event_per_epoch_and_covers_every_record() -> None:
    ledger = PrivacyLedger(SelfComposedEvent(EPOCH, 2), rng=3)
    for e in range(2):
        epoch = ledger.allocate(103, 10, step=f"epoch{e}")
        seen = np.concatenate([b.indices for b in epoch])
        assert sorted(seen.tolist()) == list(range(103))
        for batch in epoch:
            with batch:
                ledger.gaussian(np.zeros(2), 1.0, 1.0, step="noise")
    ledger.verify()
    assert ledger.matches_exactly()
    assert {"step": "epoch0", "allocate": [1, 10]} in ledger.log


def test_k_of_t_allocates_distinct_steps() -> None:
    declared = RandomAllocationEvent(6, GaussianEvent(1.0), 3)
    ledger = PrivacyLedger(declared, rng=1)
    epoch = ledger.allocate(20, 6, 3, step="epoch")
    counts = np.bincount(np.concatenate([b.indices for b in epoch]), minlength=20)
    assert np.all(counts == 3)


def test_poisson_declared_but_allocated_run_is_refused_naming_the_step() -> None:
    ledger = PrivacyLedger(PoissonSampledEvent(0.1, GaussianEvent(1.0)), rng=0)
    batch = next(iter(ledger.allocate(100, 10, step="epoch0")))
    with pytest.raises(LedgerViolationError) as info, batch:
        ledger.gaussian(np.zeros(2), 1.0, 1.0, step="noise")
    text = str(info.value)
    assert "'noise' (batch 0 of epoch 'epoch0')" in text
    assert "allocates each record to random steps" in text


def test_allocation_declared_but_poisson_run_is_refused() -> None:
    ledger = PrivacyLedger(EPOCH, rng=0)
    with (
        pytest.raises(LedgerViolationError, match="the declaration states random allocation"),
        ledger.poisson_sample(100, 0.1, step="sample"),
    ):
        ledger.gaussian(np.zeros(2), 1.0, 1.0, step="noise")


def test_replace_one_ledger_refuses_allocation() -> None:
    ledger = PrivacyLedger(EPOCH, Adjacency(relation="replace_one"), rng=0)
    with pytest.raises(LedgerViolationError, match="add/remove adjacency only"):
        ledger.allocate(100, 10, step="epoch")


def test_more_steps_per_record_than_declared_are_refused() -> None:
    ledger = PrivacyLedger(EPOCH, rng=0)
    batch = next(iter(ledger.allocate(50, 10, 2, step="epoch")))
    with pytest.raises(LedgerViolationError, match="2 of 10 steps"), batch:
        ledger.gaussian(np.zeros(2), 1.0, 1.0, step="noise")
