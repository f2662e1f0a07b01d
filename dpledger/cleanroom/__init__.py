"""The clean room: certified numbers computed where no third-party code runs.

See ``ARCHITECTURE.md`` ("The clean room") and the trust model in
``docs/writing-a-plugin.md``. The Python API runs in the caller's process (the caller's own
trust); :func:`certify_pipeline` certifies a pipeline file through the clean room instead.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from dpledger.core.errors import DPLedgerError

__all__ = ["certify_pipeline"]


def certify_pipeline(
    path: str | Path,
    *,
    delta: float | None = None,
    epsilon: float | None = None,
    backends: list[str] | None = None,
    plugins_allow: str | None = None,
    plugins_block: str | None = None,
) -> dict[str, Any]:
    """``dpledger account PATH --json``, computed in the clean room: the certified bound of a
    pipeline file (and ``rests_on``, the third-party declarations it rests on, when any).

    Raises :class:`~dpledger.core.errors.DPLedgerError` with the command's one-line message
    (on standard error) when the file is refused.
    """
    from dpledger.cleanroom.launch import run_in_clean_room

    with tempfile.TemporaryDirectory(prefix="dpledger-certify-") as tmp:
        result = Path(tmp) / "account.json"
        options = {
            "file": str(path),
            "delta": None if delta is None else repr(float(delta)),
            "epsilon": None if epsilon is None else repr(float(epsilon)),
            "json": True,
            "backends": backends,
            "per_release": False,
            "crosscheck": False,
            "plugins_allow": plugins_allow,
            "plugins_block": plugins_block,
            "result_file": str(result),
        }
        code = run_in_clean_room("account", options, allow=plugins_allow, block=plugins_block)
        if code != 0 or not result.exists():
            raise DPLedgerError(
                f"{path}: the clean room refused to certify it (exit code {code}; its reason is "
                "on standard error)"
            )
        answer: dict[str, Any] = json.loads(result.read_text(encoding="utf-8"))
        return answer
