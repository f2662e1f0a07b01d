"""Empirical privacy auditing: epsilon lower bounds from samples, planted bugs, canonical pairs.

An audit can falsify a privacy claim (``epsilon_lower > claimed``); it never certifies one.
"""

from __future__ import annotations

from dpledger.audit.auditor import (
    AuditResult,
    DeltaAudit,
    Witness,
    audit_event,
    audit_mechanism,
    linear_discriminant,
)
from dpledger.audit.canonical import CanonicalPair, canonical_pair
from dpledger.audit.stats import (
    ceiling,
    cp_lower,
    cp_upper,
    epsilon_lower_bound,
    required_samples,
)

__all__ = [
    "AuditResult",
    "CanonicalPair",
    "DeltaAudit",
    "Witness",
    "audit_event",
    "audit_mechanism",
    "canonical_pair",
    "ceiling",
    "cp_lower",
    "cp_upper",
    "epsilon_lower_bound",
    "linear_discriminant",
    "required_samples",
]
