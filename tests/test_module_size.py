"""No module of the package, of its tests or of its experiments is longer than :data:`LIMIT`
lines, except the few listed in :data:`ALLOWED`, which may only shrink: split a long module
along its jobs into smaller modules instead of raising the limit."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("core", "accountant", "dpledger", "plugins", "proofs_checks", "examples")
#: the tests and the paper reproductions, held to the same limit
SCRIPT_FOLDERS = ("tests", "experiments")
LIMIT = 600
#: modules allowed over the limit (path -> reason); remove an entry once the module is split
ALLOWED: dict[str, str] = {}


def sizes() -> dict[str, int]:
    """Path -> lines, for every module of the package's source folders (their ``tests`` folders
    excluded), of the tests and of the experiments."""
    out: dict[str, int] = {}
    for folder in (*FOLDERS, *SCRIPT_FOLDERS):
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT)
            hidden = any(p.startswith(".") for p in rel.parts)
            if hidden or (folder in FOLDERS and "tests" in rel.parts):
                continue
            out[rel.as_posix()] = len(path.read_text().splitlines())
    return out


def test_no_module_is_longer_than_the_limit() -> None:
    long = {k: n for k, n in sizes().items() if n > LIMIT and k not in ALLOWED}
    assert not long, f"modules over {LIMIT} lines (split them along their jobs):\n" + "\n".join(
        f"  {k}: {n} lines" for k, n in sorted(long.items(), key=lambda kv: -kv[1])
    )


def test_allowed_modules_are_still_long() -> None:
    found = sizes()
    stale = sorted(k for k in ALLOWED if found.get(k, 0) <= LIMIT)
    assert not stale, f"within the limit or gone now: remove from ALLOWED: {stale}"


def test_every_allowed_module_says_why() -> None:
    assert all(reason.strip() for reason in ALLOWED.values())


def test_the_scan_reaches_the_tests_and_the_experiments() -> None:
    found = sizes()
    assert "tests/test_module_size.py" in found
    assert "experiments/path/table2.py" in found
