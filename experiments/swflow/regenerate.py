"""Regenerate the sliced-Wasserstein flows results (paper B) from scratch: every command of
``docs/methods/swflow.md``, in order, each writing its result file into ``DIR``.

Usage::

    python experiments/swflow/regenerate.py --out DIR [--only SECTION ...]
    python experiments/swflow/regenerate.py --list

Sections: ``toy`` (``toy.md``, three readings over 3 seeds, about 15 CPU-minutes),
``digits`` (``digits.md``, three methods at five ε over 3 seeds, about 7 CPU-minutes),
``generator`` (``generator.md``, the generator's and DPSWflow-r's samples measured at eight ε
over 3 seeds, about 3 CPU-minutes) and ``paper_claims`` (``paper_claims.md``, seconds).
Compare ``DIR`` with ``experiments/swflow/results``; every command runs with one thread.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # run as a file: the shared module is beside the folders
    sys.path.insert(0, str(ROOT))

from experiments.sections import run_sections, section_parser  # noqa: E402

HERE = "experiments/swflow"
SECTIONS = ("toy", "digits", "generator", "paper_claims")
#: the arguments each section's script was run with for the stored results
ARGUMENTS = {
    "toy": ["--seeds", "3", "--readings", "absolute,sensitivity,fixed-release"],
    "digits": [],
    "generator": [],
    "paper_claims": [],
}


def commands(section: str, out: Path, args: argparse.Namespace) -> list[list[str]]:
    """The one command (script first) of a section; it writes its result file into ``out``."""
    if section not in ARGUMENTS:
        raise ValueError(f"unknown section {section!r}")
    return [[f"{HERE}/{section}.py", *ARGUMENTS[section], "--out", str(out)]]


def main(argv: Sequence[str] | None = None) -> int:
    return run_sections(argv, section_parser((__doc__ or "").splitlines()[0], SECTIONS), commands)


if __name__ == "__main__":
    sys.exit(main())
