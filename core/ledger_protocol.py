"""What a method's ``run`` may call on its ledger: the :class:`Ledger` protocol.

A method's ``run(params, data, ledger, rng)`` gets a ledger through which every bit of noise and
every sample is drawn. The kernel names it by this protocol only; dpledger's runtime ledger
(:class:`dpledger.runtime.ledger.PrivacyLedger`) implements it, and so does the proxy a
third-party method gets in its own process (where ``rng``, ``units``, ``private_log`` and
``sample_certified`` are refused: they would leave dpledger's process). The signatures are
those of the runtime ledger; see its methods for what each step books.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from dpledger.core.adjacency import Adjacency
from dpledger.core.declaration import Declaration
from dpledger.core.events import Event

__all__ = ["Epoch", "Ledger", "SampleScope", "UnitKeys"]


class SampleScope(Protocol):
    """A drawn sample (or one batch of an epoch): its ``indices`` into the data; enter it
    (``with sample:``) around the steps that run on it."""

    @property
    def indices(self) -> NDArray[np.int64]: ...

    @property
    def step(self) -> str: ...

    def __len__(self) -> int: ...

    def __enter__(self) -> SampleScope: ...

    def __exit__(self, *exc: object) -> None: ...


class Epoch(Protocol):
    """One epoch of shuffled batches or of random allocation: iterate over its batches."""

    @property
    def step(self) -> str: ...

    @property
    def source_size(self) -> int: ...

    def __iter__(self) -> Iterator[SampleScope]: ...

    def __len__(self) -> int: ...


class UnitKeys(Protocol):
    """The unit keys the runner read from the data (how many rows of each part carry one)."""

    @property
    def num_parts(self) -> int: ...

    def rows_in(self, part: int | None = None) -> int: ...


class Ledger(Protocol):
    """The ledger a method's ``run`` draws all noise and sampling through."""

    @property
    def adjacency(self) -> Adjacency: ...

    @property
    def declaration(self) -> Declaration: ...

    @property
    def declared(self) -> Event: ...

    @property
    def secure(self) -> bool: ...

    @property
    def rng(self) -> np.random.Generator: ...

    @property
    def units(self) -> UnitKeys | None: ...

    @property
    def private_log(self) -> list[dict[str, Any]]: ...

    def clip_rows_l2(self, x: Any, bound: float, *, step: str = "clip") -> NDArray[np.float64]: ...

    def bound_units(
        self,
        max_contributions: Any,
        *old: Any,
        rows: Any = None,
        part: int | None = None,
        step: str = "bound_units",
    ) -> NDArray[np.int64]: ...

    def clipped_sum_gaussian(
        self,
        contributions: Any,
        clip_norm: float,
        noise_multiplier: float,
        *,
        step: str,
        per_unit: bool = False,
        rows: Any = None,
        part: int | None = None,
        unit_keys: Any = None,
    ) -> Any: ...

    def clipped_sum_laplace(
        self,
        contributions: Any,
        clip_norm: float,
        noise_multiplier: float,
        *,
        step: str,
        per_unit: bool = False,
        rows: Any = None,
        part: int | None = None,
        unit_keys: Any = None,
    ) -> Any: ...

    def gaussian(
        self, values: Any, sensitivity: float, noise_multiplier: float, *, step: str
    ) -> Any: ...

    def laplace(
        self, values: Any, sensitivity: float, noise_multiplier: float, *, step: str
    ) -> Any: ...

    def charge(self, event: Event, *, step: str, reason: str = "") -> None: ...

    def sample_certified(
        self,
        sampler: Callable[[np.random.Generator], Any],
        event: Event,
        *,
        step: str,
        note: str = "",
    ) -> Any: ...

    def exponential_mechanism(
        self, scores: Any, sensitivity: float, epsilon: float, *, step: str, monotonic: bool = False
    ) -> int: ...

    def report_noisy_max(
        self, scores: Any, sensitivity: float, epsilon: float, *, step: str, monotonic: bool = False
    ) -> int: ...

    def noisy_top_k(
        self,
        scores: Any,
        sensitivity: float,
        epsilon: float,
        k: int,
        *,
        step: str,
        monotonic: bool = False,
    ) -> NDArray[np.int64]: ...

    def poisson_sample(self, n: int, q: float, *, step: str) -> SampleScope: ...

    def sample_without_replacement(self, n: int, m: int, *, step: str) -> SampleScope: ...

    def shuffle_batches(self, n: int, batch_size: int, *, step: str) -> Epoch: ...

    def allocate(self, n: int, t: int, k: int = 1, *, step: str) -> Epoch: ...

    def executed_event(self) -> Event: ...

    def verify(self) -> None: ...

    def matches_exactly(self) -> bool: ...

    def public_executed_event(self) -> Event: ...

    def public_matches_exactly(self) -> bool: ...

    def to_dict(self) -> dict[str, Any]: ...
