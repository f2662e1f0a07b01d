"""Deterministic JSON: sorted keys, lists in report order, ``schema_version``, no NaN.

Numbers stay exact; text follows the printing rule of :mod:`.numbers` (a parameter of more
than six significant digits inside a description is shown with six, marked ``≈``), except
``account``, which is ``dpledger account --json``'s output verbatim. Events are also given as
event tables (``event_data``, ``lifted_event_data`` of each release).
"""

from __future__ import annotations

import json
from typing import Any

from dpledger.report.model import PrivacyReport
from dpledger.report.numbers import tidy_text

#: top-level keys whose text is kept verbatim
VERBATIM = frozenset({"account"})


def tidy_strings(value: Any) -> Any:
    """``value`` with :func:`tidy_text` applied to every string in it."""
    if isinstance(value, str):
        return tidy_text(value)
    if isinstance(value, dict):
        return {k: tidy_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [tidy_strings(v) for v in value]
    return value


def render_json(report: PrivacyReport) -> str:
    """Two equal reports give byte-identical text (so ``diff`` and snapshots work)."""
    data = {k: v if k in VERBATIM else tidy_strings(v) for k, v in report.to_dict().items()}
    return json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
