"""The seal of a run directory: digests of the record and of every output file it lists.

``dpledger run`` writes ``seal`` into ``ledger.json``: the SHA-256 of the record's canonical
JSON (without the seal) and of each output file. ``dpledger verify`` recomputes both, so a
record or an output edited after the run is named. A seal has no key: whoever edits a record
and recomputes its seal is not caught by the seal, only by the clean room's recomputation of
every certified number and of the coverage of the executed steps.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

SEAL_KEY = "seal"


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def record_digest(record: Mapping[str, Any]) -> str:
    """SHA-256 of the record's canonical JSON, its seal left out."""
    body = {k: v for k, v in record.items() if k != SEAL_KEY}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return _digest(text.encode("utf-8"))


def output_files(record: Mapping[str, Any]) -> dict[str, str]:
    """The output files the record lists (name -> file name in the run directory)."""
    outputs = record.get("outputs")
    files = outputs.get("files") if isinstance(outputs, Mapping) else None
    return {str(k): str(v) for k, v in files.items()} if isinstance(files, Mapping) else {}


def seal(record: Mapping[str, Any], run_dir: Path) -> dict[str, Any]:
    """The seal of ``record`` and the output files it lists in ``run_dir``."""
    files = {
        name: _digest((run_dir / name).read_bytes())
        for name in sorted(set(output_files(record).values()))
    }
    return {"record_sha256": record_digest(record), "files_sha256": files}


def sealed(record: Mapping[str, Any], run_dir: Path) -> dict[str, Any]:
    """``record`` with its seal."""
    return {**record, SEAL_KEY: seal(record, run_dir)}


def seal_problems(record: Mapping[str, Any], run_dir: Path) -> list[str]:
    """What differs from the record's seal (empty when nothing does)."""
    stored = record.get(SEAL_KEY)
    if not isinstance(stored, Mapping):
        return ["ledger.json has no seal (it was not written by `dpledger run`, or was edited)"]
    problems = []
    if stored.get("record_sha256") != record_digest(record):
        problems.append("ledger.json was edited after the run wrote it (its digest differs)")
    stored_files = stored.get("files_sha256")
    stored_files = stored_files if isinstance(stored_files, Mapping) else {}
    for name in sorted(set(output_files(record).values()) | set(stored_files)):
        path = run_dir / name
        if not path.is_file():
            problems.append(f"output {name} is missing")
        elif stored_files.get(name) != _digest(path.read_bytes()):
            problems.append(f"output {name} was changed after the run wrote it")
    return problems
