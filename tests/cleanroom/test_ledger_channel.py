"""The channel between dpledger's process and a method's worker, in this process (a thread
serves the ledger): the wire carries arrays and tables exactly, large messages cross through
spill files or sealed shared regions, and a ledger proxy gives what the ledger gives, raises its
errors and names what it does not forward.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np
import pytest

from dpledger.cleanroom.ledger_channel import LedgerProxy, LedgerServer
from dpledger.cleanroom.wire import Link, WireError
from dpledger.core.adjacency import Adjacency
from dpledger.core.declaration import Declaration
from dpledger.core.errors import LedgerViolationError, PluginError
from dpledger.core.events import (
    ComposedEvent,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    ReportNoisyMaxEvent,
    SampledWithoutReplacementEvent,
)
from dpledger.runtime.ledger import PrivacyLedger


def _pair() -> tuple[Link, Link]:
    down_r, down_w = os.pipe()
    up_r, up_w = os.pipe()
    return Link(up_r, down_w), Link(down_r, up_w)


def test_the_wire_carries_arrays_and_tables_exactly() -> None:
    parent, child = _pair()
    structured = np.array([(1, 2.5), (3, -1.0)], dtype=[("uid", "<i8"), ("v", "<f4")])
    message = {
        "floats": np.arange(6.0).reshape(2, 3).T,  # not contiguous
        "ints": np.array([[1, 2]], dtype=">i2"),
        "names": np.array(["ab", "c"]),
        "empty": np.zeros((0, 4)),
        "scalar": np.float32(1.5),
        "rows": structured,
        "nested": [{"$a": 0, "x": (1, None, True, "s", float("inf"))}],
    }
    child.send(message)
    got = parent.receive()
    for key in ("floats", "ints", "names", "empty", "rows"):
        np.testing.assert_array_equal(got[key], message[key])
        assert got[key].dtype == message[key].dtype and got[key].flags.writeable
    assert got["scalar"] == 1.5 and isinstance(got["scalar"], float)
    assert got["nested"] == [{"$a": 0, "x": [1, None, True, "s", float("inf")]}]
    with pytest.raises(WireError, match="array of Python objects"):
        child.send({"x": np.array([object()])})
    with pytest.raises(WireError, match="is a set"):
        child.send({"x": {1, 2}})
    os.write(child.outbox, b"\x00" * 7 + b"\x06" + b"\x00\x00\x00\x02{}")
    with pytest.raises(WireError, match="header is not a table with a list of arrays"):
        parent.receive()


def test_large_messages_go_through_spill_files_removed_at_close() -> None:
    from dpledger.cleanroom import wire

    parent, child = _pair()
    rng = np.random.default_rng(0)
    before = set(os.listdir(wire._SPILL_DIR))
    for _ in range(3):  # a request and its answer, each large, three times
        big = rng.standard_normal((2000, 100))  # 1.6 MB > SPILL_ABOVE
        child.send({"grads": big})
        np.testing.assert_array_equal(parent.receive()["grads"], big)
        parent.send({"back": -big})
        np.testing.assert_array_equal(child.receive()["back"], -big)
    assert big.nbytes > wire.SPILL_ABOVE
    assert len(set(os.listdir(wire._SPILL_DIR)) - before) == 2  # one file per side, reused
    # two large messages before any answer: the second takes a new file, both arrive intact
    first, second = rng.standard_normal((1000, 100)), rng.standard_normal((1000, 100))
    child.send({"x": first})
    child.send({"x": second})
    np.testing.assert_array_equal(parent.receive()["x"], first)
    np.testing.assert_array_equal(parent.receive()["x"], second)
    # a spilled frame may only name a file of the channel (never a path elsewhere)
    header = (1 << 63) | 128
    os.write(child.outbox, header.to_bytes(8, "big") + b"../../etc/passwd".ljust(46, b" "))
    with pytest.raises(WireError, match="names no file of the channel"):
        parent.receive()
    parent.close()
    child.close()
    assert set(os.listdir(wire._SPILL_DIR)) == before


def test_large_messages_cross_through_sealed_shared_regions() -> None:
    from dpledger.cleanroom import wire

    regions = wire.shared_regions()
    if regions is None:
        pytest.skip("no sealed shared memory on this system")
    down_r, down_w = os.pipe()
    up_r, up_w = os.pipe()
    parent = Link(up_r, down_w, (regions[1], regions[0]))
    child = Link(down_r, up_w, (os.dup(regions[0]), os.dup(regions[1])))
    before = set(os.listdir(wire._SPILL_DIR))
    rng = np.random.default_rng(1)
    sent, got = [], []
    for _ in range(3):  # no file: each side writes its region, the other copies it
        sent.append(rng.standard_normal((2000, 100)))
        child.send({"grads": sent[-1]})
        got.append(parent.receive()["grads"])
        parent.send({"back": -sent[-1]})
        np.testing.assert_array_equal(child.receive()["back"], -sent[-1])
    for a, b in zip(sent, got, strict=True):  # each read is a copy of its own
        np.testing.assert_array_equal(a, b)
    assert set(os.listdir(wire._SPILL_DIR)) == before
    # two large messages before any answer: the second goes through a file, both arrive
    first, second = rng.standard_normal((1000, 100)), rng.standard_normal((1000, 100))
    child.send({"x": first})
    child.send({"x": second})
    np.testing.assert_array_equal(parent.receive()["x"], first)
    np.testing.assert_array_equal(parent.receive()["x"], second)
    # the regions cannot be resized by either side
    with pytest.raises(PermissionError):
        os.ftruncate(regions[1], 4096)
    parent.close()
    child.close()
    assert set(os.listdir(wire._SPILL_DIR)) == before
    # a side without regions refuses a frame said to be in one
    plain_parent, plain_child = _pair()
    os.write(plain_child.outbox, ((1 << 62) | (1 << 20)).to_bytes(8, "big"))
    with pytest.raises(WireError, match="shared region the channel does not have"):
        plain_parent.receive()
    plain_parent.close()
    plain_child.close()


def test_a_region_that_can_be_resized_is_not_used() -> None:
    from dpledger.cleanroom import wire

    if wire.shared_regions() is None:
        pytest.skip("no sealed shared memory on this system")
    unsealed = [os.memfd_create("x") for _ in range(2)]
    for fd in unsealed:
        os.ftruncate(fd, wire.REGION_SIZE)
    down_r, down_w = os.pipe()
    up_r, up_w = os.pipe()
    parent = Link(up_r, down_w, (unsealed[0], unsealed[1]))
    child = Link(down_r, up_w)
    big = np.arange(100_000.0)
    parent.send({"x": big})  # through a file instead
    np.testing.assert_array_equal(child.receive()["x"], big)
    parent.close()
    child.close()
    for fd in unsealed:
        os.close(fd)


def _serve(link: Link, server: LedgerServer) -> None:
    while True:
        try:
            message = link.receive()
        except EOFError:
            return
        for queued in message.get("queued") or []:
            server.answer(queued)
        answer = server.answer(message)
        if answer is not None:
            link.send(answer)


def _through_proxy(declared: Any, work: Any, adjacency: Adjacency | None = None) -> Any:
    """``work(ledger)`` on a ledger in this process and on a proxy of an identical one served
    by a thread: both results, and the two ledgers' records."""
    adjacency = adjacency or Adjacency()
    direct = PrivacyLedger(Declaration(declared), adjacency, 5)
    served = PrivacyLedger(Declaration(declared), adjacency, 5)
    parent, child = _pair()
    thread = threading.Thread(target=_serve, args=(parent, LedgerServer(served)))
    thread.start()
    try:
        remote = work(LedgerProxy(child, "m"))
    finally:
        child.close()
        thread.join(10)
        parent.close()
    return work(direct), remote, direct.to_dict(), served.to_dict()


def _primitives(ledger: Any) -> list[Any]:
    scores = np.array([0.1, 3.0, 2.0, -1.0])
    out = [ledger.exponential_mechanism(scores, 1.0, 1.0, step="em")]
    out.append(ledger.report_noisy_max(scores, 1.0, 1.0, step="rnm"))
    with ledger.sample_without_replacement(10, 4, step="wor") as sample:
        out.append(sample.indices)
        out.append(ledger.laplace(np.ones(len(sample)), 1.0, 1.0, step="lap"))
    rows = ledger.clip_rows_l2(np.arange(12.0).reshape(4, 3), 1.0, step="clip")
    out.append(rows)
    out.append(ledger.clipped_sum_laplace(rows, 1.0, 2.0, step="sum"))
    out.append(ledger.matches_exactly())
    return out


def test_the_proxy_gives_what_the_ledger_gives() -> None:
    declared = ComposedEvent(
        [
            ExponentialMechanismEvent(1.0),
            ReportNoisyMaxEvent(1.0),
            SampledWithoutReplacementEvent(10, 4, LaplaceEvent(1.0)),
            LaplaceEvent(2.0),
        ]
    )
    direct, remote, direct_record, served_record = _through_proxy(declared, _primitives)
    assert len(direct) == len(remote) == 7
    for a, b in zip(direct, remote, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert direct_record == served_record and direct[-1] is True


def test_the_proxy_raises_the_ledgers_errors_and_names_what_is_not_forwarded() -> None:
    def cheat(ledger: Any) -> Any:
        with pytest.raises(LedgerViolationError, match=r"noise multiplier 1\.0 is smaller"):
            ledger.gaussian(np.ones(3), 1.0, 1.0, step="cheap")
        with pytest.raises(PluginError, match=r"ledger\.sample_certified.*generator"):
            ledger.sample_certified(lambda rng: 1, GaussianEvent(2.0), step="s")
        epoch = ledger.shuffle_batches(6, 4, step="epoch")
        return [len(epoch), [b.indices.tolist() for b in epoch], ledger.adjacency]

    adjacency = Adjacency(relation="replace_one")
    direct, remote, *_ = _through_proxy(
        ComposedEvent([GaussianEvent(2.0)]), _cheat_safely(cheat), adjacency
    )
    assert remote == direct and remote[0] == 2 and remote[2] == adjacency


def _cheat_safely(work: Any) -> Any:
    """``work`` on a real ledger skips what only a proxy refuses."""

    def run(ledger: Any) -> Any:
        if isinstance(ledger, PrivacyLedger):
            epoch = ledger.shuffle_batches(6, 4, step="epoch")
            return [len(epoch), [b.indices.tolist() for b in epoch], ledger.adjacency]
        return work(ledger)

    return run
