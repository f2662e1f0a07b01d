"""Fixtures of the audit tests: a runtime ledger whose Gaussian noise is planted too small."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from dpledger.audit import canaries, whitebox_runs
from dpledger.runtime.runner import prepare_run


class LessNoise:
    """A generator whose Gaussian draws have ``factor`` times the asked standard deviation."""

    def __init__(self, rng: np.random.Generator, factor: float) -> None:
        self._rng, self._factor = rng, factor

    def normal(self, loc: float, scale: float, size: Any = None) -> Any:
        return self._rng.normal(loc, scale * self._factor, size)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rng, name)


@pytest.fixture
def planted_noise(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """In canary audits (one run or many), the runtime ledger draws its Gaussian noise at the
    factor the test appends to the list (a planted bug the ledger's bookkeeping cannot see)."""
    factor: list[float] = []

    def buggy(*args: Any, **kwargs: Any) -> Any:
        data, ledger, run_rng = prepare_run(*args, **kwargs)
        ledger.rng = LessNoise(ledger.rng, factor[0])
        return data, ledger, run_rng

    monkeypatch.setattr(canaries, "prepare_run", buggy)
    monkeypatch.setattr(whitebox_runs, "prepare_run", buggy)
    yield factor
