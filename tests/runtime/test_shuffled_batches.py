"""ShuffledBatchesEvent: validation, round trips, and the ledger's shuffled epochs."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpledger.core.adjacency import ROW_ADD_REMOVE, ROW_REPLACE_ONE
from dpledger.core.errors import InvalidParameterError, LedgerViolationError, LiftingError
from dpledger.core.events import (
    ComposedEvent,
    GaussianEvent,
    LaplaceEvent,
    PoissonSampledEvent,
    SelfComposedEvent,
    ShuffledBatchesEvent,
    event_from_dict,
    flatten,
)
from dpledger.core.lifting import lift_event
from dpledger.runtime.coverage import canonical_multiset
from dpledger.runtime.ledger import PrivacyLedger

EPOCH = ShuffledBatchesEvent(100, 10, GaussianEvent(1.0))


# -- the event ----------------------------------------------------------------------------------
def test_parameters_and_batches():
    assert EPOCH.num_batches == 10
    assert ShuffledBatchesEvent(101, 10, GaussianEvent(1.0)).num_batches == 11
    assert ShuffledBatchesEvent(7, 7, GaussianEvent(1.0)).num_batches == 1
    assert EPOCH.children() == (GaussianEvent(1.0),)
    assert flatten(SelfComposedEvent(EPOCH, 3)) == [(EPOCH, 3)]


def test_round_trip_through_the_parser():
    event = SelfComposedEvent(
        ShuffledBatchesEvent(1000, 32, ComposedEvent([GaussianEvent(1.5), LaplaceEvent(2.0)])),
        5,
    )
    data = json.loads(json.dumps(event.to_dict()))
    assert data["event"]["kind"] == "shuffled_batches"
    assert event_from_dict(data) == event
    # JSON Schema reads 32.0 as an integer
    data["event"]["batch_size"] = 32.0
    assert event_from_dict(data) == event


def test_describe():
    text = EPOCH.describe()
    assert (
        text == "shuffled_batches(source_size=100, batch_size=10, gaussian(noise_multiplier=1.0))"
    )


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"source_size": 0, "batch_size": 1}, "source_size"),
        ({"source_size": True, "batch_size": 1}, "source_size"),
        ({"source_size": "100", "batch_size": 1}, "source_size"),
        ({"source_size": 100.0, "batch_size": 1}, "source_size"),
        ({"source_size": 100, "batch_size": 0}, "batch_size"),
        ({"source_size": 100, "batch_size": False}, "batch_size"),
        ({"source_size": 100, "batch_size": 2.5}, "batch_size"),
        ({"source_size": 100, "batch_size": 101}, "batch_size"),
    ],
)
def test_strict_validation(kwargs, field):
    with pytest.raises(InvalidParameterError) as info:
        ShuffledBatchesEvent(event=GaussianEvent(1.0), **kwargs)
    assert info.value.field == field


def test_parser_names_the_field():
    bad = {"kind": "shuffled_batches", "source_size": 10, "batch_size": "2", "event": {}}
    with pytest.raises(InvalidParameterError) as info:
        event_from_dict({**bad, "event": {"kind": "gaussian", "noise_multiplier": 1.0}})
    assert info.value.field == "shuffled_batches.batch_size"
    with pytest.raises(InvalidParameterError) as info:
        event_from_dict({**bad, "batch_size": 2})
    assert info.value.field == "shuffled_batches.event.kind"
    with pytest.raises(InvalidParameterError):
        ShuffledBatchesEvent(10, 2, "gaussian")  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(
    n=st.one_of(st.integers(-5, 10**6), st.booleans(), st.floats(allow_nan=True), st.text()),
    b=st.one_of(st.integers(-5, 10**6), st.booleans(), st.floats(allow_nan=True), st.text()),
)
def test_validation_property(n, b):
    """Accepted exactly when both are plain ints with 1 <= b <= n; otherwise a named error."""
    valid = type(n) is int and type(b) is int and n >= 1 and b >= 1 and b <= n
    if valid:
        event = ShuffledBatchesEvent(n, b, GaussianEvent(1.0))
        assert event_from_dict(event.to_dict()) == event
        assert event.num_batches * b >= n > (event.num_batches - 1) * b
    else:
        with pytest.raises(InvalidParameterError) as info:
            ShuffledBatchesEvent(n, b, GaussianEvent(1.0))
        assert info.value.field in ("source_size", "batch_size")


def test_no_user_level_lift():
    with pytest.raises(LiftingError, match="shuffled_batches samples rows"):
        lift_event(EPOCH, 2)


# -- the ledger ---------------------------------------------------------------------------------
def _run_epochs(ledger, x, epochs, n=100, b=10, noise=1.0):
    for e in range(epochs):
        for batch in ledger.shuffle_batches(n, b, step=f"epoch{e}"):
            with batch:
                ledger.clipped_sum_gaussian(x[batch.indices], 1.0, noise, step="grad")


def test_epochs_partition_the_records_and_are_booked_as_declared():
    x = np.random.default_rng(0).normal(size=(100, 3))
    ledger = PrivacyLedger(SelfComposedEvent(EPOCH, 3), ROW_REPLACE_ONE, rng=1)
    epoch = ledger.shuffle_batches(100, 10, step="epoch")
    seen = np.concatenate([b.indices for b in epoch])
    assert sorted(seen.tolist()) == list(range(100))
    assert len(epoch) == 10 and all(len(b) == 10 for b in epoch)
    for batch in epoch:
        with batch:
            ledger.clipped_sum_gaussian(x[batch.indices], 1.0, 1.0, step="grad")
    _run_epochs(ledger, x, 2)
    ledger.verify()
    assert ledger.matches_exactly()
    assert canonical_multiset(ledger.executed_event()) == canonical_multiset(
        SelfComposedEvent(EPOCH, 3)
    )


def test_a_skipped_batch_and_a_remainder_are_covered():
    x = np.zeros((105, 2))
    declared = ShuffledBatchesEvent(105, 10, GaussianEvent(1.0))
    ledger = PrivacyLedger(declared, ROW_REPLACE_ONE, rng=0)
    epoch = ledger.shuffle_batches(105, 10, step="epoch")
    assert [len(b) for b in epoch] == [10] * 10 + [5]
    for batch in list(epoch)[:-1]:  # the remainder batch is dropped
        with batch:
            ledger.clipped_sum_gaussian(x[batch.indices], 1.0, 1.0, step="grad")
    ledger.verify()


def test_more_epochs_than_declared_are_refused_before_noise():
    x = np.zeros((100, 2))
    ledger = PrivacyLedger(SelfComposedEvent(EPOCH, 2), ROW_REPLACE_ONE, rng=0)
    _run_epochs(ledger, x, 2)
    state = ledger.rng.bit_generator.state
    with pytest.raises(LedgerViolationError, match=r"'grad' \(batch 0 of epoch 'epoch2'\)"):
        for batch in ledger.shuffle_batches(100, 10, step="epoch2"):
            with batch:
                state = ledger.rng.bit_generator.state
                ledger.clipped_sum_gaussian(x[batch.indices], 1.0, 1.0, step="grad")
    assert ledger.rng.bit_generator.state == state  # no noise was drawn


def test_a_batch_running_more_than_declared_is_refused():
    x = np.zeros((100, 2))
    ledger = PrivacyLedger(EPOCH, ROW_REPLACE_ONE, rng=0)
    epoch = ledger.shuffle_batches(100, 10, step="epoch")
    first, second = list(epoch)[:2]
    with first:
        ledger.clipped_sum_gaussian(x[first.indices], 1.0, 1.0, step="grad")
    with second, pytest.raises(LedgerViolationError, match="batch 1 of epoch 'epoch'"):
        ledger.clipped_sum_gaussian(x[second.indices], 1.0, 1.0, step="grad")
        ledger.clipped_sum_gaussian(x[second.indices], 1.0, 1.0, step="grad")


def test_other_sizes_are_not_covered():
    ledger = PrivacyLedger(EPOCH, ROW_REPLACE_ONE, rng=0)
    batch = next(iter(ledger.shuffle_batches(100, 20, step="epoch")))
    with batch, pytest.raises(LedgerViolationError, match="batches of 20"):
        ledger.gaussian(0.0, 1.0, 1.0, step="grad")


def test_poisson_declared_but_shuffled_run_is_refused_naming_the_step():
    declared = SelfComposedEvent(PoissonSampledEvent(0.1, GaussianEvent(1.0)), 10)
    ledger = PrivacyLedger(declared, ROW_REPLACE_ONE, rng=0)
    batch = next(iter(ledger.shuffle_batches(100, 10, step="epoch0")))
    with batch, pytest.raises(LedgerViolationError) as info:
        ledger.gaussian(0.0, 1.0, 1.0, step="grad")
    text = str(info.value)
    assert "'grad' (batch 0 of epoch 'epoch0')" in text
    assert "batches by shuffling, but the declaration states Poisson sampling" in text


def test_shuffle_declared_but_poisson_run_is_refused():
    ledger = PrivacyLedger(SelfComposedEvent(EPOCH, 10), ROW_REPLACE_ONE, rng=0)
    with (
        ledger.poisson_sample(100, 0.1, step="poisson"),
        pytest.raises(LedgerViolationError, match="the declaration states shuffled batches"),
    ):
        ledger.gaussian(0.0, 1.0, 1.0, step="grad")


def test_add_remove_ledger_refuses_shuffling():
    ledger = PrivacyLedger(GaussianEvent(1.0), ROW_ADD_REMOVE, rng=0)
    with pytest.raises(LedgerViolationError, match="replace-one adjacency only"):
        ledger.shuffle_batches(100, 10, step="epoch")


def test_an_unsampled_declaration_covers_one_epoch():
    """An epoch costs one batch's release: a declared plain Gaussian covers it."""
    x = np.zeros((100, 2))
    ledger = PrivacyLedger(GaussianEvent(1.0), ROW_REPLACE_ONE, rng=0)
    _run_epochs(ledger, x, 1)
    ledger.verify()


def test_public_log_holds_no_realised_sizes():
    x = np.zeros((103, 2))
    ledger = PrivacyLedger(
        SelfComposedEvent(ShuffledBatchesEvent(103, 10, GaussianEvent(1.0)), 2),
        ROW_REPLACE_ONE,
        rng=0,
    )
    _run_epochs(ledger, x, 2, n=103)
    for entry in ledger.to_dict()["steps"]:
        assert not {"batch_sizes", "rows", "size", "kept"} & set(entry)
    assert {"step": "epoch0", "shuffle_batches": [10, 103]} in ledger.log
    private = ledger.private_dict()["steps"]
    assert {"step": "epoch0", "batch_sizes": [10] * 10 + [3]} in private


def test_batches_are_entered_once_and_at_top_level():
    ledger = PrivacyLedger(SelfComposedEvent(EPOCH, 2), ROW_REPLACE_ONE, rng=0)
    batch = next(iter(ledger.shuffle_batches(100, 10, step="epoch")))
    with batch:
        pass
    with pytest.raises(Exception, match="entered only once"):
        batch.__enter__()
    other = next(iter(ledger.shuffle_batches(100, 10, step="epoch1")))
    with ledger.poisson_sample(100, 0.1, step="p"), pytest.raises(Exception, match="top level"):
        other.__enter__()


def test_the_permutation_comes_from_the_ledger_rng():
    a = PrivacyLedger(EPOCH, ROW_REPLACE_ONE, rng=7).shuffle_batches(100, 10, step="e")
    b = PrivacyLedger(EPOCH, ROW_REPLACE_ONE, rng=7).shuffle_batches(100, 10, step="e")
    assert all(np.array_equal(x.indices, y.indices) for x, y in zip(a, b, strict=True))
