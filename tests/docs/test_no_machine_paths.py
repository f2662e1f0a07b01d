"""No file of the repository names a path of the machine it was made on (stored runs included:
a result file records its settings, never where it read or wrote)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).parents[2]
SUFFIXES = {".py", ".md", ".json", ".toml", ".txt", ".cfg", ".yaml", ".yml", ".sh", ".ini"}
SKIP = {
    ".git",
    ".venv",
    "build",
    "dist",
    "__pycache__",
    ".hypothesis",
    ".mypy_cache",
    ".ruff_cache",
}
#: absolute paths under the usual roots of a machine's temporary, work and home folders
MACHINE_PATH = re.compile(r"(?<![\w.~-])/(?:tmp|work|home|root|Users|private/var)/\w")


def _files() -> list[Path]:
    """The tracked files (all files outside build and tool folders without git)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=60
        ).stdout.split("\n")
        candidates = [ROOT / name for name in listed if name]
    except (OSError, subprocess.SubprocessError):
        candidates = [
            p
            for p in ROOT.rglob("*")
            if not any(
                part in SKIP or part.endswith(".egg-info") for part in p.relative_to(ROOT).parts
            )
        ]
    return [
        p
        for p in candidates
        if p.suffix in SUFFIXES and p.is_file() and p.resolve() != Path(__file__).resolve()
    ]


def test_no_file_names_a_machine_path() -> None:
    found = []
    for path in _files():
        text = path.read_text(errors="replace")
        found += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in MACHINE_PATH.finditer(text)]
    assert found == []


def test_the_pattern_catches_a_stored_run_directory() -> None:
    assert MACHINE_PATH.search('{"model_root": "/tmp/run/sweep_models"}')
    assert MACHINE_PATH.search("see /home/alice/data.csv")
    assert not MACHINE_PATH.search("experiments/path/sweep_models and a/tmp/b")
