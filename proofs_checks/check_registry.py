"""Every proof record matches the current source of its target (stale proofs fail here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpledger.core.errors import InvalidParameterError
from dpledger.proofs_checks import registry
from dpledger.proofs_checks.registry import (
    NO_CODE_OBJECT,
    PAPER_CLAIMS,
    PENDING,
    RECORDS,
    ROOT,
    ProofRecord,
)

SECTIONS = ("## Preconditions", "## Pseudocode", "## Claim", "## Proof")


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.target)
def test_record_source_is_unchanged(record: ProofRecord) -> None:
    if registry.source_hash(record.target) != record.source_sha256:
        pytest.fail(registry.stale_message(record.target))


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.target)
def test_record_points_to_a_complete_proof(record: ProofRecord) -> None:
    proof = ROOT / record.proof
    assert proof.is_file(), f"{record.target}: missing proof {record.proof}"
    text = proof.read_text(encoding="utf-8")
    for section in SECTIONS:
        assert section in text, f"{record.proof} lacks a '{section}' section"
    assert record.target in text, f"{record.proof} does not name {record.target}"
    assert list(proof.parent.glob("check_*.py")), f"{proof.parent.name} has no numeric checks"


def test_every_proof_folder_is_registered_or_pending() -> None:
    folders = {p.parent.name for p in Path(registry.__file__).parent.glob("*/proof.md")}
    covered = {Path(r.proof).parent.name for r in RECORDS} | {f for f, _, _ in PENDING}
    covered |= set(NO_CODE_OBJECT)
    assert folders <= covered, f"proofs without a record or pending entry: {folders - covered}"
    assert folders >= covered, f"records pointing to missing folders: {covered - folders}"


def test_tiers() -> None:
    assert registry.tier_of("dpledger.core.events.GaussianEvent") == "verified"
    assert registry.tier_of("dpledger.core.events.NonPrivateEvent") == "unverified"
    stale = ProofRecord("dpledger.core.events.GaussianEvent", "vetted", "x", "0" * 64)
    assert registry.tier_of("dpledger.core.events.GaussianEvent", [stale]) == "unverified"
    current = registry.source_hash("dpledger.core.events.GaussianEvent")
    fresh = ProofRecord("dpledger.core.events.GaussianEvent", "vetted", "x", current)
    assert registry.tier_of("dpledger.core.events.GaussianEvent", [stale, fresh]) == "vetted"
    with pytest.raises(InvalidParameterError):
        ProofRecord("x.y", "approved", "x", "")


def test_a_changed_source_is_reported(tmp_path: Path) -> None:
    stale = ProofRecord("dpledger.core.events.LaplaceEvent", "contrib", "x", "f" * 64)
    assert registry.stale_records([stale]) == [
        "source of dpledger.core.events.LaplaceEvent changed since its proof was vetted; re-vet "
        "and update the hash (python -m dpledger.proofs_checks.registry --update "
        "dpledger.core.events.LaplaceEvent)"
    ]


def test_update_and_add_rewrite_a_registry_file(tmp_path: Path) -> None:
    copy = tmp_path / "records.py"
    text = registry.REGISTRY_FILE.read_text(encoding="utf-8")
    target = "dpledger.accountant.conversions.laplace_delta_bracket"
    good = registry.source_hash(target)
    copy.write_text(text.replace(good, "0" * 64), encoding="utf-8")
    assert registry.update_hash(target, copy) == good
    assert copy.read_text(encoding="utf-8") == text
    registry.add_record(
        "dpledger.core.events.NoOpEvent", "proofs_checks/composition/proof.md", path=copy
    )
    added = copy.read_text(encoding="utf-8")
    assert 'target="dpledger.core.events.NoOpEvent",' in added
    assert registry.source_hash("dpledger.core.events.NoOpEvent") in added
    with pytest.raises(InvalidParameterError, match="already has a record"):
        registry.add_record(target, "proofs_checks/laplace/proof.md", path=copy)
    with pytest.raises(InvalidParameterError, match="no record"):
        registry.update_hash("dpledger.core.events.PureDPEvent", copy)


def test_resolve_rejects_unknown_targets() -> None:
    with pytest.raises(InvalidParameterError):
        registry.resolve("dpledger.core.events.NoSuchEvent")


def test_editing_a_recorded_function_makes_its_record_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Change a function's source on disk: the staleness check names exactly that function."""
    import importlib
    import sys

    module = tmp_path / "vetted_module_for_registry_check.py"
    module.write_text("def mechanism(x):\n    return x + 1\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    name = "vetted_module_for_registry_check"
    target = f"{name}.mechanism"
    record = ProofRecord(target, "vetted", "x", registry.source_hash(target))
    assert registry.stale_records([record]) == []
    assert registry.tier_of(target, [record]) == "vetted"
    module.write_text("def mechanism(x):\n    return x + 2\n", encoding="utf-8")
    importlib.invalidate_caches()
    importlib.reload(sys.modules[name])
    try:
        assert registry.stale_records([record]) == [registry.stale_message(target)]
        assert target in registry.stale_records([record])[0]
        assert registry.tier_of(target, [record]) == "unverified"
    finally:
        sys.modules.pop(name, None)


def test_nothing_is_pending_without_a_reason() -> None:
    for folder, target, reason in PENDING:
        assert reason.strip(), f"{folder}: pending {target} needs a reason"
    for folder, reason in PAPER_CLAIMS.items():
        assert reason.strip(), f"{folder} needs a reason"
        assert not any(Path(r.proof).parent.name == folder for r in RECORDS), folder
