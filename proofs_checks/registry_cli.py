"""The maintenance commands of the proof registry (:mod:`dpledger.proofs_checks.registry`):
refresh a record's hash, add a record, list stale records. Run as
``python -m dpledger.proofs_checks.registry --update TARGET`` (or ``--add``, ``--check``)."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from dpledger.core.errors import InvalidParameterError
from dpledger.proofs_checks.registry import (
    RECORDS,
    REGISTRY_FILE,
    ROOT,
    STATUSES,
    source_hash,
    stale_records,
)

__all__ = ["RECORD_FILES", "add_record", "main", "update_hash"]

_RECORD_RE = (
    r'(target="{target}",\s*status="[a-z]+",\s*proof="[^"]*",\s*source_sha256=")'
    r'([0-9a-f]*)(")'
)


#: the files that hold records: the registry's, then the exponential mechanism's
RECORD_FILES = (
    REGISTRY_FILE,
    REGISTRY_FILE.with_name("records_exp_mech.py"),
    REGISTRY_FILE.with_name("records_pld.py"),
    REGISTRY_FILE.with_name("records_cells.py"),
    REGISTRY_FILE.with_name("records_blocks.py"),
    REGISTRY_FILE.with_name("records_kernel.py"),
)


def update_hash(target: str, path: Path | None = None) -> str:
    """Rewrite the record of ``target`` in ``path`` (default: the record file that holds it)
    with the current source hash."""
    if path is None:
        held = [f for f in RECORD_FILES if f'target="{target}",' in f.read_text(encoding="utf-8")]
        path = held[0] if held else REGISTRY_FILE
    text = path.read_text(encoding="utf-8")
    pattern = re.compile(_RECORD_RE.format(target=re.escape(target)))
    if not pattern.search(text):
        raise InvalidParameterError("target", f"{target!r} has no record", "add it with --add")
    new_hash = source_hash(target)
    path.write_text(pattern.sub(lambda m: m.group(1) + new_hash + m.group(3), text), "utf-8")
    return new_hash


def add_record(target: str, proof: str, status: str = "contrib", path: Path = REGISTRY_FILE) -> str:
    """Append a record for ``target`` (current source hash) to :data:`RECORDS` in this file."""
    if status not in STATUSES:
        raise InvalidParameterError("status", f"unknown {status!r}", f"use {STATUSES}")
    if not (ROOT / proof).is_file():
        raise InvalidParameterError("proof", f"{proof} does not exist", "write the proof first")
    text = path.read_text(encoding="utf-8")
    if f'target="{target}",' in text:
        raise InvalidParameterError("target", f"{target} already has a record", "use --update")
    new_hash = source_hash(target)
    entry = (
        f'    ProofRecord(\n        target="{target}",\n        status="{status}",\n'
        f'        proof="{proof}",\n        source_sha256="{new_hash}",\n    ),\n'
    )
    marker = ")\n\n#: proofs whose code objects"
    if marker not in text:
        raise InvalidParameterError("registry", "cannot find the end of RECORDS", "edit by hand")
    path.write_text(text.replace(marker, entry + marker, 1), encoding="utf-8")
    return new_hash


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dpledger.proofs_checks.registry")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--update", nargs="+", metavar="TARGET", help="refresh vetted hashes")
    group.add_argument("--add", metavar="TARGET", help="add a record with the current hash")
    group.add_argument("--check", action="store_true", help="list stale records")
    parser.add_argument("--proof", help="proof path for --add (proofs_checks/<folder>/proof.md)")
    parser.add_argument("--status", default="contrib", choices=STATUSES)
    args = parser.parse_args(argv)
    try:
        if args.check:
            stale = stale_records(RECORDS)
            print("\n".join(stale) if stale else f"all {len(RECORDS)} records are current")
            return 1 if stale else 0
        if args.add:
            if not args.proof:
                parser.error("--add needs --proof")
            print(f"{args.add}: {add_record(args.add, args.proof, args.status)}")
            return 0
        for target in args.update:
            print(f"{target}: {update_hash(target)}")
        return 0
    except InvalidParameterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
