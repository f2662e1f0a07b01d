"""Neighbouring datasets for whole-method audits: the method's own rule, else a canary record.

A method states how its neighbours are built: ``MethodSpec(neighbours=rule)``, with
``rule(params, data, adjacency) -> NeighbourPair``. A method that states none gets the generic
per-record canary rule (:func:`~dpledger.runtime.neighbour_rules.per_record`). The audit knows
no method by name: the pair and the rule type live in :mod:`dpledger.core.neighbours`, the
reusable rules in :mod:`dpledger.runtime.neighbour_rules`; both are re-exported here for old
imports.

:func:`register_neighbour_rule` (a rule by method name, which takes precedence over the spec's)
is deprecated. A method the audit cannot build neighbours for gets an
:class:`InvalidParameterError`.
"""

from __future__ import annotations

import warnings
from typing import Any

from dpledger.core.adjacency import Adjacency
from dpledger.core.errors import InvalidParameterError, PluginError
from dpledger.core.neighbours import NeighbourPair, NeighbourRule
from dpledger.core.specs import MethodSpec
from dpledger.runtime.neighbour_rules import (
    CANARY_SCALE,
    LABEL_NAMES,
    MAX_LABELS,
    REPLACE_INDEX,
    ball_marginals,
    circle_antipode,
    nn_records,
    per_record,
    query_answer,
    score_vector,
    unit_rows,
    user_tables,
)

#: the old name of :func:`~dpledger.runtime.neighbour_rules.score_vector`
scores = score_vector

__all__ = [
    "CANARY_SCALE",
    "LABEL_NAMES",
    "MAX_LABELS",
    "REPLACE_INDEX",
    "NeighbourPair",
    "NeighbourRule",
    "ball_marginals",
    "build_neighbours",
    "circle_antipode",
    "nn_records",
    "per_record",
    "query_answer",
    "register_neighbour_rule",
    "rule_for",
    "score_vector",
    "scores",
    "unit_rows",
    "unregister_neighbour_rule",
    "user_tables",
]

_RULES: dict[str, NeighbourRule] = {}


def register_neighbour_rule(method: str, rule: NeighbourRule) -> None:
    """Deprecated: give the method's spec its rule (``MethodSpec(neighbours=rule)``).

    Uses ``rule`` to build the neighbours of ``method`` (replaces an earlier rule, and takes
    precedence over the rule of the method's spec)."""
    warnings.warn(
        "register_neighbour_rule is deprecated: give the method its rule in its MethodSpec "
        "(neighbours=rule)",
        DeprecationWarning,
        stacklevel=2,
    )
    if not callable(rule):
        raise InvalidParameterError("rule", "must be callable", "pass rule(params, data, adj)")
    _RULES[method] = rule


def unregister_neighbour_rule(method: str) -> None:
    """Drop a rule registered with :func:`register_neighbour_rule`."""
    _RULES.pop(method, None)


def rule_for(method: MethodSpec | str) -> NeighbourRule:
    """The rule of ``method``: a registered one (deprecated), else its spec's, else
    :func:`per_record`."""
    name = method if isinstance(method, str) else method.name
    registered = _RULES.get(name)
    if registered is not None:
        return registered
    own = None if isinstance(method, str) else method.neighbours
    return own if own is not None else per_record


def build_neighbours(
    method: MethodSpec | str, params: Any, data: Any, adjacency: Adjacency
) -> NeighbourPair:
    """Neighbouring datasets of ``data`` for ``method`` under ``adjacency.relation``, built by
    :func:`rule_for` ``(method)``."""
    name = method if isinstance(method, str) else method.name
    if data is None:
        raise InvalidParameterError(
            "data",
            f"is missing: auditing {name!r} needs the data its neighbours are built from",
            "set data = 'file' in the config (or pass --data)",
        )
    pair = rule_for(method)(params, data, adjacency)
    if not isinstance(pair, NeighbourPair):
        raise PluginError(
            f"method {name!r}: its neighbour rule returned {type(pair).__name__}, not a "
            "NeighbourPair(d, d_prime, relation, description)"
        )
    return pair
