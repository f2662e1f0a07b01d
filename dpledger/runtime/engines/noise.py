"""Noise that does not depend on the engine: one counter-based stream per released cell.

A release of per-key aggregates is booked on the ledger first (``sample_certified``: checked
against the declaration, then logged); only then is its noise drawn. The ledger's generator
gives the release a 128-bit key (so one seed gives one key per step, and ``--secure``, whose
ledger generator is keyed from the operating system, gives an unguessable one), and each cell's
noise is the first draw of numpy's ``Philox`` with that key and a counter that is a stable hash
of the step and the cell's key. A cell's noise therefore depends on the seed, the step and its
key only: not on the engine, the order in which keys arrive, or a retried task.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dpledger.core.events import Event, GaussianEvent, LaplaceEvent
from dpledger.core.ledger_protocol import Ledger

__all__ = ["cell_noise", "noisy_release", "release_event"]


def release_event(mechanism: str, noise_multiplier: float) -> Event:
    """The event of one release: noise ``noise_multiplier`` times its sensitivity."""
    if mechanism == "gaussian":
        return GaussianEvent(noise_multiplier)
    return LaplaceEvent(noise_multiplier)


def _counters(step: str, names: Sequence[str]) -> NDArray[np.uint64]:
    """Each cell's Philox counter (a row of four words): a 192-bit hash of the step and the
    cell's name, and a zero word."""
    digests = b"".join(
        hashlib.blake2b(f"{step}\x00{name}".encode(), digest_size=24).digest() + bytes(8)
        for name in names
    )
    return np.frombuffer(digests, dtype="<u8").astype(np.uint64).reshape(len(names), 4)


def _counter(step: str, name: str) -> NDArray[np.uint64]:
    out: NDArray[np.uint64] = _counters(step, [name])[0]
    return out


def cell_noise(
    key: NDArray[np.uint64], step: str, names: Sequence[str], mechanism: str
) -> NDArray[np.float64]:
    """Standard noise of each named cell: unit normal (``gaussian``), unit-scale Laplace
    (``laplace``) or uniform on [0, 1) (``uniform``). Each cell's draw is the first of a
    ``Philox`` generator with the release's key and the cell's counter: one generator is
    reset to that state for each cell (the state a new ``Philox(key, counter)`` starts in:
    empty buffer, no spare word), which draws the same numbers as a new generator would."""
    bits = np.random.Philox(key=key)
    gen = np.random.Generator(bits)
    draw: Callable[[], float] = (
        gen.standard_normal
        if mechanism == "gaussian"
        else gen.laplace
        if mechanism == "laplace"
        else gen.random
    )
    fresh = bits.state
    out = np.empty(len(names), dtype=np.float64)
    for i, counter in enumerate(_counters(step, names)):
        fresh["state"]["counter"] = counter
        bits.state = fresh
        out[i] = draw()
    return out


def noisy_release(
    ledger: Ledger,
    values: Sequence[float],
    names: Sequence[str],
    *,
    step: str,
    sensitivity: float,
    noise_multiplier: float,
    mechanism: str,
    note: str,
    event: Event | None = None,
) -> NDArray[np.float64]:
    """``values`` plus noise of scale ``noise_multiplier * sensitivity``, booked first as
    ``event`` (default: one release of that noise multiplier)."""
    scale = noise_multiplier * sensitivity
    exact = np.asarray(values, dtype=np.float64)

    def draw(rng: np.random.Generator) -> Any:
        key = rng.integers(0, 2**64, size=2, dtype=np.uint64)
        return exact + scale * cell_noise(key, step, names, mechanism)

    event = event or release_event(mechanism, noise_multiplier)
    noisy: NDArray[np.float64] = np.asarray(
        ledger.sample_certified(draw, event, step=step, note=note), dtype=np.float64
    )
    return noisy
