"""Private partition selection on the driver: which keys an aggregation releases.

The engine returns, per key, the number of units that contribute after the L0 bound (each unit
holds at most ``max_partitions`` keys). The selection is booked on the ledger as a
:class:`~dpledger.core.events.PartitionSelectionEvent` before any noise is drawn; then each key
held by ``n`` units is released when ``n + noise >= threshold`` (Laplace or Gaussian
thresholding), or with the truncated geometric rule's probability ``pi(n)`` (a uniform draw
below it). The noise and the threshold come from the accountant's
:func:`~dpledger.accountant.partition_selection.partition_selection_threshold`, the one source
of what the certified bound assumes; each key's draw is keyed by the seed, the step and the
key (:mod:`~dpledger.runtime.engines.noise`), so every engine selects the same keys.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from dpledger.accountant.partition_selection import (
    partition_selection_threshold,
    selection_release_probability,
)
from dpledger.core.errors import InvalidParameterError
from dpledger.core.events import PartitionSelectionEvent
from dpledger.core.ledger_protocol import Ledger
from dpledger.runtime.engines.noise import cell_noise

__all__ = ["SELECTION_STEP", "Selection", "select_keys"]

SELECTION_STEP = "aggregate.select"
MECHANISMS = ("laplace", "gaussian", "truncated_geometric")


def _number(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidParameterError(
            f"partition_selection.{field}", f"must be a number, got {value!r}", "pass e.g. 1.0"
        )
    return float(value)


@attrs.frozen
class Selection:
    """A private partition selection's public parameters: its rule and its budget."""

    mechanism: str
    epsilon: float
    delta: float

    @classmethod
    def from_table(cls, table: Any) -> Selection:
        if not isinstance(table, Mapping):
            raise InvalidParameterError(
                "partition_selection",
                f"must be a table, got {table!r}",
                'write partition_selection = {mechanism = "laplace", epsilon = 1.0, delta = 1e-6}',
            )
        unknown = sorted(set(table) - {"mechanism", "epsilon", "delta"})
        if unknown or table.get("mechanism") not in MECHANISMS:
            raise InvalidParameterError(
                f"partition_selection.{unknown[0] if unknown else 'mechanism'}",
                f"must name one of {list(MECHANISMS)} with epsilon and delta",
                'write {mechanism = "laplace", epsilon = 1.0, delta = 1e-6}',
            )
        return cls(
            str(table["mechanism"]),
            _number(table.get("epsilon"), "epsilon"),
            _number(table.get("delta"), "delta"),
        )

    def event(self, max_partitions: int) -> PartitionSelectionEvent:
        return PartitionSelectionEvent(self.mechanism, self.epsilon, self.delta, max_partitions)

    def describe(self, max_partitions: int) -> dict[str, Any]:
        scale, threshold = partition_selection_threshold(
            self.mechanism, self.epsilon, self.delta, max_partitions
        )
        return {
            "kind": "private selection",
            "mechanism": self.mechanism,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "max_partitions_per_unit": max_partitions,
            "noise_scale": scale,
            "threshold": threshold,
        }


def _released(selection: Selection, k: int, units: Sequence[int], draws: np.ndarray) -> list[bool]:
    scale, threshold = partition_selection_threshold(
        selection.mechanism, selection.epsilon, selection.delta, k
    )
    if selection.mechanism == "truncated_geometric":
        probs = [
            selection_release_probability(
                selection.mechanism, selection.epsilon, selection.delta, k, int(n)
            )
            for n in units
        ]
        return [bool(u < p) for u, p in zip(draws, probs, strict=True)]
    return [bool(n + scale * z >= threshold) for n, z in zip(units, draws, strict=True)]


def select_keys(
    ledger: Ledger, selection: Selection, k: int, keys: Sequence[str], units: Sequence[int]
) -> list[str]:
    """The keys released (booked first); ``units[i]`` is the units holding ``keys[i]``."""
    kind = {"gaussian": "gaussian", "laplace": "laplace"}.get(selection.mechanism, "uniform")
    names = [key for key, n in zip(keys, units, strict=True) if n > 0]
    counts = [n for n in units if n > 0]

    def draw(rng: np.random.Generator) -> list[bool]:
        key = rng.integers(0, 2**64, size=2, dtype=np.uint64)
        return _released(selection, k, counts, cell_noise(key, SELECTION_STEP, names, kind))

    note = (
        f"private partition selection ({selection.mechanism}) of the keys held by the units "
        f"after the L0 bound (at most {k} keys per unit)"
    )
    kept = ledger.sample_certified(draw, selection.event(k), step=SELECTION_STEP, note=note)
    return [name for name, keep in zip(names, kept, strict=True) if keep]
