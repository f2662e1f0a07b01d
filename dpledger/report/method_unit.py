"""The unit a run's method bounds itself, stated where the report names the unit of privacy.

A method that enforces its own unit (``MethodSpec.protects``: the aggregation bounds every row
of one value of its unit column to L0 partitions and L∞ rows in each) runs under a row-level
configuration, and its declared events are stated for that unit. The report of such a run
names the unit and the adjacency the run protected, as ``dpledger run`` printed them: in the
formal statement, the unit of privacy, the adjacency and the data access row. The accounting
itself (``account``: the recorded row-level graph) is unchanged.
"""

from __future__ import annotations

from typing import Any

import attrs

from dpledger.core.errors import DPLedgerError
from dpledger.report import prose
from dpledger.report.build import BuiltReport
from dpledger.runtime.run_record import RunRecord

__all__ = ["method_unit", "with_method_unit"]


def method_unit(record: RunRecord, host: Any) -> str | None:
    """The unit ``record``'s method states it bounds itself, from its parameters (None when it
    states none, or without the plugin host)."""
    if host is None or record.method not in host.methods():
        return None
    try:
        unit = host.protected_unit(record.method, record.params, record.adjacency)
    except DPLedgerError:
        return None
    return None if unit is None else str(unit)


def with_method_unit(built: BuiltReport, protects: str, source: str = "data") -> BuiltReport:
    """``built`` with the unit ``protects`` stated wherever the report names its unit."""
    report = built.report
    # "add/remove of one unit: every row of ..." names the relation, then the unit
    unit = protects.split(": ", 1)[1] if ": " in protects else protects
    accesses = tuple(
        attrs.evolve(a, adjacency=protects, unit="user") if a.source == source else a
        for a in report.data_accesses
    )
    changed = attrs.evolve(
        report,
        adjacency=protects,
        unit_of_privacy=f"one unit of source {source!r}, as the method bounds it: {unit}",
        statement=prose.statement(report.bound, protects, built.delta is not None),
        data_accesses=accesses,
    )
    return attrs.evolve(built, report=changed)
