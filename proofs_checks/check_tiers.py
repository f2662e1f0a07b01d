"""The rule of the ``verified`` tier (docs/verification.md, section 2), recomputed per record.

A record is ``verified`` only if every condition holds, and a ``contrib`` record names the first
that does not (printed with ``pytest -s``):

1. current: its source hash matches the code (``check_registry.py`` enforces it as well);
2. derivation written: its proof has Preconditions, Pseudocode, Claim and Proof, and names it;
3. reference cited: its proof has a ``## References`` section with a dated citation;
4. checks: its folder has ``check_*.py`` modules (the test run executes them);
5. independent cross-check: ``cross_check`` names ``check_*.py::test_*`` of its folder; that
   test exists, names the code object, and its module imports an independent reference
   (mpmath, scipy's quadrature or distributions, dp_accounting, prv_accountant or itertools
   for enumeration).

The ``slow`` test runs every named cross-check on its own.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dpledger.proofs_checks import registry
from dpledger.proofs_checks.registry import RECORDS, ROOT, ProofRecord

SECTIONS = ("## Preconditions", "## Pseudocode", "## Claim", "## Proof")
#: a module that computes the same quantity without dpledger
INDEPENDENT = re.compile(
    r"^\s*(?:import|from)\s+(?:mpmath|scipy|dp_accounting|prv_accountant|itertools)\b", re.M
)
#: a citation: a list entry (continued on indented lines) with a year
CITATION = re.compile(r"^- (?:[^\n]|\n  )*?\b(?:19|20)\d\d\b", re.M)


def _references(text: str) -> str:
    """The text of the proof's ``## References`` section ('' when it has none)."""
    _, found, rest = text.partition("\n## References")
    return rest.split("\n## ", 1)[0] if found else ""


def _cross_check_gap(record: ProofRecord, folder: Path) -> str | None:
    if record.cross_check is None:
        return "no independent numeric cross-check named (cross_check)"
    module, _, test = record.cross_check.partition("::")
    path = folder / module
    if not (module.startswith("check_") and path.is_file() and test.startswith("test_")):
        return f"cross-check {record.cross_check} is not a check_*.py::test_* of {folder.name}"
    source = path.read_text(encoding="utf-8")
    if not INDEPENDENT.search(source):
        return f"cross-check module {module} imports no independent reference"
    tests = {
        node.name: ast.get_source_segment(source, node) or ""
        for node in ast.parse(source).body
        if isinstance(node, ast.FunctionDef)
    }
    if test not in tests:
        return f"cross-check {record.cross_check} does not exist"
    name = record.target.rsplit(".", 1)[-1]
    if not re.search(rf"\b{re.escape(name)}\b", tests[test]):
        return f"cross-check {record.cross_check} does not call {name}"
    return None


def gaps(record: ProofRecord) -> list[str]:
    """The conditions of the ``verified`` rule that ``record`` does not meet, in order."""
    out = []
    if registry.source_hash(record.target) != record.source_sha256:
        out.append("stale: the source changed since the proof was checked")
    proof = ROOT / record.proof
    text = proof.read_text(encoding="utf-8") if proof.is_file() else ""
    if not all(s in text for s in SECTIONS) or record.target not in text:
        out.append("derivation: the proof lacks a section or does not name the object")
    if not CITATION.search(_references(text)):
        out.append("reference: the proof has no References section with a dated citation")
    if not list(proof.parent.glob("check_*.py")):
        out.append("checks: the proof's folder has no check_*.py")
    cross = _cross_check_gap(record, proof.parent)
    if cross is not None:
        out.append(cross)
    return out


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.target)
def test_a_record_is_verified_exactly_when_the_rule_holds(record: ProofRecord) -> None:
    unmet = gaps(record)
    if record.status == "verified":
        assert not unmet, f"{record.target} is marked verified but: {unmet}"
    elif record.status == "contrib":
        print(f"{record.target}: contrib, first unmet condition: {unmet[0] if unmet else None}")
        assert unmet, f"{record.target} meets every condition: mark it verified"


def test_some_records_are_verified_and_the_rule_can_fail() -> None:
    verified = [r for r in RECORDS if r.status == "verified"]
    assert verified
    stripped = ProofRecord(verified[0].target, "verified", verified[0].proof, "0" * 64)
    assert gaps(stripped)[0].startswith("stale")
    bogus = ProofRecord(
        verified[0].target,
        "verified",
        verified[0].proof,
        verified[0].source_sha256,
        cross_check="check_nothing.py::test_nothing",
    )
    assert gaps(bogus) == [
        f"cross-check check_nothing.py::test_nothing is not a check_*.py::test_* of "
        f"{Path(verified[0].proof).parent.name}"
    ]


@pytest.mark.slow
def test_every_named_cross_check_passes() -> None:
    nodes = sorted(
        {f"{Path(r.proof).parent}/{r.cross_check}" for r in RECORDS if r.cross_check is not None}
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", *nodes],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:]
