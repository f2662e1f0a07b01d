"""Proof records: which code object each proof covers, at which version, and how trusted it is.

A :class:`ProofRecord` ties a proof document to a code object by the SHA-256 of the object's
source (``inspect.getsource``). When the source changes, ``proofs_checks/check_registry.py``
fails until someone re-reads the proof against the new code and refreshes the hash:

    python -m dpledger.proofs_checks.registry --update dpledger.core.events.GaussianEvent
    python -m dpledger.proofs_checks.registry --add TARGET --proof proofs_checks/<folder>/proof.md
    python -m dpledger.proofs_checks.registry --check

Tiers: ``vetted`` (reviewed by a second person), ``verified`` (docs/verification.md's rule
holds, recomputed by check_tiers.py), ``contrib`` (a condition of it unmet), ``unverified``.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from dpledger.core.errors import InvalidParameterError
from dpledger.proofs_checks.proof_record import STATUSES, ProofRecord
from dpledger.proofs_checks.records import PENDING, RECORDS

__all__ = [
    "NO_CODE_OBJECT",
    "PAPER_CLAIMS",
    "PENDING",
    "RECORDS",
    "REGISTRY_FILE",
    "ROOT",
    "STATUSES",
    "ProofRecord",
    "records_for",
    "resolve",
    "source_hash",
    "stale_message",
    "stale_records",
    "tier_of",
]

#: the repository root (proof paths are relative to it)
ROOT = Path(__file__).resolve().parent.parent
#: the file the maintenance commands edit (the records)
REGISTRY_FILE = Path(__file__).resolve().with_name("records.py")


def resolve(target: str) -> Any:
    """Import the object named by a dotted path (module prefix, then attributes)."""
    parts = target.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for name in parts[cut:]:
                obj = getattr(obj, name)
        except AttributeError:
            break
        return obj
    raise InvalidParameterError("target", f"cannot import {target!r}", "give module.attribute")


def source_hash(target: str) -> str:
    """SHA-256 of ``inspect.getsource`` of the target."""
    return hashlib.sha256(inspect.getsource(resolve(target)).encode("utf-8")).hexdigest()


def stale_message(target: str) -> str:
    return (
        f"source of {target} changed since its proof was vetted; re-vet and update the hash "
        f"(python -m dpledger.proofs_checks.registry --update {target})"
    )


def stale_records(records: Iterable[ProofRecord]) -> list[str]:
    """One message per record whose target's current source hash differs from the record."""
    return [stale_message(r.target) for r in records if source_hash(r.target) != r.source_sha256]


# -- the records ---------------------------------------------------------------------------
# Add a record with: python -m dpledger.proofs_checks.registry --add TARGET --proof PATH
#: proof folders about a paper's formula or proposition rather than a dpledger code object, and
#: why no record pins them (their checks call plugin functions read-only where these exist)
PAPER_CLAIMS: dict[str, str] = {
    "gdp_clt": "a paper's asymptotic formula (trajectories paper, Lemma 3.1); no dpledger "
    "accountant implements it, and none may",
    "private_mean": "a paper's proposition (trajectories paper, Prop. 4.1); its calibration is "
    "the record dpledger.accountant.calibrate.calibrate_noise_multiplier",
    "time_subsampling_gap": "a utility lemma (trajectories paper, Prop. 4.2); no privacy code",
    "sliced_wasserstein_sensitivity": "a paper's lemma (sliced-Wasserstein paper, Lemma 1); the "
    "flow plugin's bounds (dpledger.plugins.swflow.sensitivity) are still changing and are "
    "checked read-only",
    "sliced_wasserstein_privacy": "a paper's theorem (sliced-Wasserstein paper, Theorem 3), "
    "recomputed from the paper's formulas",
    "shk_stability": "a paper's theorem (SHK paper, Theorem 1) checked against the SHK plugin's "
    "solver, whose source is still changing",
    "shk_pure_dp": "a paper's theorem (SHK paper, Theorem 3) checked against the SHK plugin's "
    "bounds, whose source is still changing",
    "published_claims": "recomputes the four papers' published epsilons; the script lives in "
    "experiments/published_claims",
}

#: proof folders with no record of their own (kept for callers of the former name)
NO_CODE_OBJECT: tuple[str, ...] = tuple(PAPER_CLAIMS)


def records_for(target: str, records: Sequence[ProofRecord] = RECORDS) -> list[ProofRecord]:
    return [r for r in records if r.target == target]


def tier_of(target: str, records: Sequence[ProofRecord] = RECORDS) -> str:
    """Trust tier of a code object: its record's status, or 'unverified' if none or stale."""
    found = records_for(target, records)
    if not found:
        return "unverified"
    try:
        current = source_hash(target)
    except (InvalidParameterError, OSError, TypeError):
        return "unverified"
    fresh = [r.status for r in found if r.source_sha256 == current]
    if not fresh:
        return "unverified"
    return min(fresh, key=STATUSES.index)


# -- maintenance CLI (dpledger.proofs_checks.registry_cli) -----------------------------------
#: the maintenance functions, loaded when first used
_CLI = frozenset({"add_record", "main", "update_hash"})


def __getattr__(name: str) -> Any:
    """:func:`add_record`, :func:`update_hash` and :func:`main`, from the maintenance module."""
    if name in _CLI:
        return getattr(importlib.import_module("dpledger.proofs_checks.registry_cli"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":
    raise SystemExit(importlib.import_module("dpledger.proofs_checks.registry_cli").main())
