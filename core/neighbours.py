"""Neighbouring datasets a method is audited on: the pair and the rule that builds it.

A method's :class:`~dpledger.core.specs.MethodSpec` may name its own rule
(``neighbours=rule``); ``rule(params, data, adjacency)`` returns a :class:`NeighbourPair`:
``data`` (or a dataset built from it) and a dataset that differs from it in one canary unit
under ``adjacency.relation``. Reusable rules (a canary record, a query answer of stated
sensitivity, a score vector, ...) are in :mod:`dpledger.runtime.neighbour_rules`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from dpledger.core.adjacency import Adjacency

__all__ = ["NeighbourPair", "NeighbourRule"]


@attrs.frozen
class NeighbourPair:
    """``d`` and ``d_prime`` differ in one canary unit under ``relation``."""

    d: Any
    d_prime: Any
    relation: str
    description: str


#: ``rule(params, data, adjacency) -> NeighbourPair``
NeighbourRule = Callable[[Any, Any, Adjacency], NeighbourPair]
