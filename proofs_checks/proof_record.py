"""A proof record: which code object a proof covers, at which version, and how trusted it is
(the model of :mod:`dpledger.proofs_checks.registry`)."""

from __future__ import annotations

from typing import Any

import attrs

from dpledger.core.errors import InvalidParameterError

__all__ = ["STATUSES", "ProofRecord"]

STATUSES: tuple[str, ...] = ("vetted", "verified", "contrib", "unverified")


def _status_validator(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value not in STATUSES:
        raise InvalidParameterError(attribute.name, f"unknown status {value!r}", f"use {STATUSES}")


@attrs.frozen
class ProofRecord:
    """One proven code object (dotted path), its proof document and the vetted source hash."""

    target: str
    status: str = attrs.field(validator=_status_validator)
    proof: str
    source_sha256: str
    #: ``check_*.py::test_*`` of the proof's folder: the independent cross-check (``verified``)
    cross_check: str | None = None
