"""The seal of a run directory: digests of the record and of every file published beside it.

``dpledger run`` writes ``seal.json`` last: the SHA-256 of ``ledger.json`` and of every other
file of the run directory (the outputs). ``dpledger verify`` recomputes them, so a record or an
output edited after the run is named. The seal is a function of the published files only (a
post-processing of the releases), so ``ledger.json`` itself stays the same for neighbouring
datasets. A seal has no key: whoever edits a record and writes a new seal is not caught by the
seal, only by the clean room's recomputation of every certified number and of the coverage of
the executed steps.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

SEAL_FILE = "seal.json"
RECORD_FILE = "ledger.json"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _published(run_dir: Path) -> list[str]:
    return sorted(p.name for p in run_dir.iterdir() if p.is_file() and p.name != SEAL_FILE)


def seal(run_dir: Path) -> dict[str, Any]:
    """The digests of every file in ``run_dir`` (but the seal)."""
    return {"sha256": {name: _digest(run_dir / name) for name in _published(run_dir)}}


def write_seal(run_dir: Path) -> None:
    """Write ``seal.json`` into ``run_dir`` (after every other file)."""
    text = json.dumps(seal(run_dir), indent=2, sort_keys=True) + "\n"
    (run_dir / SEAL_FILE).write_text(text, encoding="utf-8")


def seal_problems(run_dir: Path) -> list[str]:
    """What differs from the seal (empty when nothing does)."""
    try:
        stored = json.loads((run_dir / SEAL_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return [f"{SEAL_FILE} is missing or unreadable (the run was not written by `dpledger run`)"]
    digests = stored.get("sha256") if isinstance(stored, Mapping) else None
    if not isinstance(digests, Mapping):
        return [f"{SEAL_FILE} holds no digests"]
    problems = []
    for name in sorted(set(digests) | set(_published(run_dir))):
        path = run_dir / name
        if name not in digests:
            problems.append(f"{name} was added after the run wrote its files")
        elif not path.is_file():
            problems.append(f"{name} is missing")
        elif digests[name] != _digest(path):
            what = "the record" if name == RECORD_FILE else "output"
            problems.append(f"{what} {name} was changed after the run wrote it")
    return problems
