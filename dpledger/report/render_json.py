"""Deterministic JSON: sorted keys, lists in report order, ``schema_version``, no NaN."""

from __future__ import annotations

import json

from dpledger.report.model import PrivacyReport


def render_json(report: PrivacyReport) -> str:
    """Two equal reports give byte-identical text (so ``diff`` and snapshots work)."""
    return (
        json.dumps(report.to_dict(), sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False)
        + "\n"
    )
