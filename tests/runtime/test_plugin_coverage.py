"""The ledger asks a plugin event class whether a declared step covers an executed one."""

from __future__ import annotations

from typing import ClassVar

import attrs
import numpy as np
import pytest

from dpledger.core.errors import LedgerViolationError
from dpledger.core.events import Event
from dpledger.runtime.coverage import dominates
from dpledger.runtime.ledger import PrivacyLedger


@attrs.frozen
class NoisyThing(Event):
    """A plugin mechanism where more noise never costs more (proved by its author)."""

    kind: ClassVar[str] = "test_noisy_thing"
    noise: float = 1.0

    def covers(self, executed: Event) -> bool:
        return isinstance(executed, NoisyThing) and executed.noise >= self.noise


@attrs.frozen
class Plain(Event):
    kind: ClassVar[str] = "test_plain_thing"
    value: float = 1.0


@attrs.frozen
class Broken(Event):
    kind: ClassVar[str] = "test_broken_cover"
    value: float = 1.0

    def covers(self, executed: Event) -> bool:
        raise RuntimeError("bug")


def test_a_plugin_rule_decides_coverage() -> None:
    assert dominates(NoisyThing(1.0), NoisyThing(2.0))
    assert not dominates(NoisyThing(2.0), NoisyThing(1.0))


def test_without_a_rule_only_the_same_step_is_covered() -> None:
    assert dominates(Plain(1.0), Plain(1.0))
    assert not dominates(Plain(1.0), Plain(2.0))


def test_a_failing_rule_covers_nothing() -> None:
    assert not dominates(Broken(1.0), Broken(1.0))


def test_the_ledger_uses_the_rule() -> None:
    ledger = PrivacyLedger(NoisyThing(1.0), rng=np.random.default_rng(0))
    ledger.charge(NoisyThing(3.0), step="quieter")
    ledger.verify()
    strict = PrivacyLedger(NoisyThing(2.0), rng=np.random.default_rng(0))
    with pytest.raises(LedgerViolationError, match="not covered"):
        strict.charge(NoisyThing(1.0), step="louder")
