"""The claims of ``dpledger audit METHOD``, recomputed in the clean room.

A method audit compares an empirical lower bound with the accountant's certified epsilon of the
method's declaration (its *claim*). The audit runs the method many times in an ordinary
process; before its verdict is printed, the clean room makes the declaration again for each
audited relation (builtin by dpledger's own code, third-party through a worker), states it per
privacy unit, accounts it at each audited delta, and refuses (exit code 2) when a claim the
audit used differs from the certified value.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from typing import Any

from dpledger.cleanroom.account_room import resolver_for
from dpledger.cleanroom.room import write_needs
from dpledger.cleanroom.verify_room import RELATIVE_SLACK


def _certified(resolver: Any, method: str, params: Any, adjacency: Any) -> Any:
    """``delta -> epsilon`` of the method's declaration per unit, or None while a worker's
    declaration is still needed."""
    from dpledger.accountant import select
    from dpledger.core.declaration import stated_for_unit, unit_adjacency

    event, _, unit = resolver(method, params, adjacency)
    if resolver.needs:
        return None
    per_unit, _ = stated_for_unit(event, unit, adjacency, release=method)
    unit_adj = unit_adjacency(adjacency)
    return lambda delta: float(select.account(per_unit, unit_adj, delta=delta).bound.epsilon)


def _problems(request: Mapping[str, Any], resolver: Any) -> list[str] | None:
    from dpledger.core.adjacency import Adjacency

    options = request["options"]
    problems: list[str] = []
    for relation in options["relations"]:
        adjacency = Adjacency(**{**options["adjacency"], "relation": relation["relation"]})
        claim = _certified(resolver, options["method"], options["params"], adjacency)
        if claim is None:
            continue
        for delta, claimed in relation["claims"]:
            fresh = claim(float(delta))
            if not math.isclose(float(claimed), fresh, rel_tol=RELATIVE_SLACK):
                problems.append(
                    f"relation {relation['relation']}, delta {delta:g}: the audit used the claim "
                    f"{claimed!r}, the clean room certifies {fresh!r}"
                )
    return None if resolver.needs else problems


def serve(request: Mapping[str, Any]) -> int:
    """Check every claim; print nothing when they all hold."""
    resolver = resolver_for(request)
    problems = _problems(request, resolver)
    if problems is None:
        return write_needs(request, resolver.needs)
    for problem in problems:
        sys.stderr.write(f"dpledger audit: refused: {problem}\n")
    return 2 if problems else 0
